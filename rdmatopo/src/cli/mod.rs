//! Command-line front end: argument parsing, output, and exit codes. Each command
//! lives in its own module and only formats what the library computes.

mod args;
mod audit;
mod cluster;
mod diff;
mod doctor;
mod exec;
mod files;
mod generate;
mod gids;
mod inventory;
mod k8s;
mod nccl_env;
mod nccl_topo;
mod netdevs;
mod output;
mod qos;
mod snapshot;
mod topo;

use args::RootArgs;
use clap::{CommandFactory, Parser, Subcommand};
use output::EXIT_CODES;
use std::io::Write;
use std::path::PathBuf;

/// Exit code when a command could not run (bad root, unreadable input).
pub(crate) const EXIT_FAILURE: i32 = 3;

/// `rdmatopo --version`: the release, the cargo features it was built with, the C
/// library it is linked with (the static build reads NVML through a helper) and the JSON
/// schema ids it writes (all found by build.rs).
const LONG_VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    "\nfeatures: ",
    env!("RDMATOPO_FEATURES"),
    "\nbuild: ",
    env!("RDMATOPO_BUILD"),
    "\njson schemas: ",
    env!("RDMATOPO_JSON_SCHEMAS"),
);

#[derive(Parser, Debug)]
#[command(
    name = "rdmatopo",
    version,
    long_version = LONG_VERSION,
    about = "GPU / RDMA NIC / PCIe / NUMA topology from sysfs: nvidia-smi-exact affinity, NCCL settings, container diagnostics",
    after_help = EXIT_CODES
)]
struct Cli {
    /// Root holding sys/, proc/ and dev/ for the command that follows (the same as its
    /// own --root, which may also follow it).
    #[arg(long = "root", id = "root_before_command", value_name = "DIR")]
    root: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

// Deferred: only the chosen command's arguments are built (all of them cost a tenth of
// a millisecond at every start).
#[derive(Subcommand, Debug)]
#[command(defer = true)]
enum Command {
    /// The GPU/NIC affinity matrix, in `nvidia-smi topo -m` layout.
    #[command(after_help = EXIT_CODES)]
    Topo(topo::TopoArgs),
    /// Everything discovered: PCI tree, GPUs, RDMA devices, ports, GIDs, netdevs, NUMA.
    #[command(after_help = EXIT_CODES)]
    Inventory(inventory::InventoryArgs),
    /// Why RDMA is slow here: every check with evidence and fix (exit 0 clean, 1 warnings, 2 errors).
    #[command(after_help = EXIT_CODES)]
    Doctor(doctor::DoctorArgs),
    /// Capture the sysfs/procfs files rdmatopo reads (plus NVML/verbs facts) as a .tar.gz usable as --root.
    #[command(after_help = EXIT_CODES)]
    Snapshot(snapshot::SnapshotArgs),
    /// What changed between two views (host and pod): CPUs, NICs, MTUs, GID indices, rails, limits, checks.
    #[command(after_help = EXIT_CODES)]
    Diff(diff::DiffArgs),
    /// NCCL variables and the per-rank plan (GPU, HCAs, GID, CPUs), each with its reasons.
    #[command(after_help = EXIT_CODES)]
    NcclEnv(nccl_env::NcclEnvArgs),
    /// Set this local rank's NCCL variables and CPU affinity, then run CMD.
    #[command(after_help = EXIT_CODES)]
    Exec(exec::ExecArgs),
    /// RoCE/IB GID tables in `show_gids` layout, and the GID NCCL would choose.
    ///
    /// A GID whose netdev is in another network namespace (the upstream kernel lists the
    /// host's GIDs in a pod's table; MLNX_OFED hides them) is not usable from here: its
    /// row keeps the show_gids columns and gets a trailing `[other netns]` field
    /// (`"other_netns": true` in JSON). Rows of this namespace are show_gids's own.
    #[command(after_help = EXIT_CODES)]
    Gids(gids::GidsArgs),
    /// RDMA ports and their netdevs, in `ibdev2netdev` layout.
    #[command(after_help = EXIT_CODES)]
    Netdevs(netdevs::NetdevsArgs),
    /// RoCE QoS per port: traffic class, priority, ECN (DCQCN), lossless priorities, VF settings; NCCL_IB_TC.
    #[command(after_help = EXIT_CODES)]
    Qos(qos::QosArgs),
    /// Write an NCCL topology file (NCCL_TOPO_FILE), or read one with --input.
    #[command(after_help = EXIT_CODES)]
    NcclTopo(nccl_topo::NcclTopoArgs),
    /// Kubernetes configuration from this node: device-plugin pools per rail, NFD labels, a Pod.
    #[command(after_help = EXIT_CODES)]
    K8s(k8s::K8sArgs),
    /// Do the rails of many nodes line up? Compares node reports and prints the odd nodes.
    #[command(after_help = EXIT_CODES)]
    Cluster(cluster::ClusterArgs),
    /// A shell completion script (bash, zsh or fish) on stdout.
    #[command(after_help = EXIT_CODES)]
    Completions(generate::CompletionsArgs),
    /// Man pages: rdmatopo.1 on stdout, or with --dir one page per command into DIR.
    #[command(after_help = EXIT_CODES)]
    Man(generate::ManArgs),
}

impl Cli {
    /// `rdmatopo --root DIR topo` reads as `rdmatopo topo --root DIR` (hwloc's tools and
    /// kubectl take their global options before the command too). The root given before
    /// the command replaces `RDMATOPO_ROOT`, as the command's own `--root` does.
    fn hand_root_to_command(&mut self) -> Result<(), String> {
        let Some(dir) = self.root.take() else {
            return Ok(());
        };
        let own = self
            .command
            .root_args_mut()
            .map_err(|name| format!("`rdmatopo {name}` reads no machine, so it takes no --root"))?;
        let from_env = std::env::var_os("RDMATOPO_ROOT").map(PathBuf::from);
        if own.root.is_some() && own.root != from_env {
            return Err("--root is given both before and after the command: give it once".into());
        }
        own.root = Some(dir);
        Ok(())
    }
}

impl Command {
    /// The root the command reads, or the name of a command that reads no machine.
    fn root_args_mut(&mut self) -> Result<&mut RootArgs, &'static str> {
        match self {
            Command::Topo(a) => Ok(&mut a.root),
            Command::Inventory(a) => Ok(&mut a.root),
            Command::Doctor(a) => Ok(&mut a.root),
            Command::Snapshot(a) => Ok(&mut a.root),
            Command::NcclEnv(a) => Ok(&mut a.root),
            Command::Exec(a) => Ok(&mut a.root),
            Command::Gids(a) => Ok(&mut a.root),
            Command::Netdevs(a) => Ok(&mut a.root),
            Command::Qos(a) => Ok(&mut a.root),
            Command::NcclTopo(a) => Ok(&mut a.root),
            Command::K8s(a) => a.command.root_args_mut(),
            Command::Diff(_) => Err("diff"),
            Command::Cluster(_) => Err("cluster"),
            Command::Completions(_) => Err("completions"),
            Command::Man(_) => Err("man"),
        }
    }
}

/// Run the command line `args` (the program's name first); the exit status.
pub fn run(args: impl IntoIterator<Item = std::ffi::OsString>) -> i32 {
    std::panic::set_hook(Box::new(|info| {
        let msg = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown".into());
        eprintln!("rdmatopo: internal error: {msg} (this is a bug; please report it)");
    }));
    let mut cli = Cli::parse_from(args);
    if let Err(msg) = cli.hand_root_to_command() {
        eprintln!("rdmatopo: {msg}");
        return 2;
    }
    let result = std::panic::catch_unwind(|| match cli.command {
        Command::Topo(a) => topo::run(&a),
        Command::Inventory(a) => inventory::run(&a),
        Command::Doctor(a) => doctor::run(&a),
        Command::Snapshot(a) => snapshot::run(&a),
        Command::Diff(a) => diff::run(&a),
        Command::NcclEnv(a) => nccl_env::run(&a),
        Command::Exec(a) => exec::run(&a),
        Command::Gids(a) => gids::run(&a),
        Command::Netdevs(a) => netdevs::run(&a),
        Command::Qos(a) => qos::run(&a),
        Command::NcclTopo(a) => nccl_topo::run(&a),
        Command::K8s(a) => k8s::run(&a),
        Command::Cluster(a) => cluster::run(&a),
        Command::Completions(a) => generate::completions(&a, Cli::command()),
        Command::Man(a) => generate::man(&a, Cli::command()),
    });
    match result {
        Ok(Ok(out)) => {
            // Stderr may be closed: what it would say is not worth failing over.
            let _ = std::io::stderr().write_all(out.header.as_bytes());
            let mut stdout = std::io::stdout().lock();
            let written = stdout
                .write_all(out.text.as_bytes())
                .and_then(|_| stdout.flush());
            let _ = std::io::stderr().write_all(out.notes.as_bytes());
            match written {
                Ok(()) => out.code,
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => out.code,
                Err(e) => {
                    eprintln!("rdmatopo: cannot write output: {e}");
                    EXIT_FAILURE
                }
            }
        }
        Ok(Err(msg)) => {
            eprintln!("rdmatopo: {msg}");
            EXIT_FAILURE
        }
        Err(_) => 101,
    }
}
