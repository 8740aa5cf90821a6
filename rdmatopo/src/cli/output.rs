//! What a command hands back to be printed, and the text every command's output shares.

use crate::Topology;

/// What a command produced: the answer for stdout, what is said about it for stderr,
/// and an exit code. Stdout holds the answer alone, in the layout of the tool a command
/// mirrors (`nvidia-smi topo -m`, `ibdev2netdev`, `show_gids`), so that parsers written
/// for that tool read it unchanged; which devices are shown and notes go to stderr.
pub struct Output {
    pub text: String,
    pub code: i32,
    /// Stderr, before the answer (the `View:` line of a container's matrix).
    pub header: String,
    /// Stderr, after the answer (notes, devices left out).
    pub notes: String,
}

impl Output {
    pub fn ok(text: String) -> Self {
        Self::with_code(text, 0)
    }

    pub fn with_code(text: String, code: i32) -> Self {
        Self {
            text,
            code,
            header: String::new(),
            notes: String::new(),
        }
    }

    /// A usage error found only once the machine was read (a local rank beyond the
    /// GPUs, more GPUs than the node has): exit 2, as clap's own usage errors.
    pub fn usage_error(message: &str) -> Self {
        Self {
            code: EXIT_USAGE,
            notes: format!("rdmatopo: error: {message}\n"),
            ..Self::ok(String::new())
        }
    }

    pub fn with_header(mut self, header: String) -> Self {
        self.header = header;
        self
    }

    pub fn with_notes(mut self, notes: String) -> Self {
        self.notes = notes;
        self
    }
}

/// The exit codes of every command, shown under each one's `--help` (and in README.md).
pub const EXIT_CODES: &str = "\
Exit codes (the same for every command):
  0  success; a judging command (doctor, k8s audit) found nothing to warn of
  1  doctor, k8s audit: warnings; diff, cluster: something differs
  2  doctor, k8s audit: errors; any command: a usage error (bad arguments, or
     arguments this machine cannot satisfy, such as --local-rank beyond its GPUs)
  3  could not run (no such root, no sysfs in it, unreadable input, kubelet
     unreachable)
  exec ends as CMD does (126: CMD cannot run, 127: not found)";

/// Exit code of a usage error (clap's own, and the ones found after reading the machine).
pub const EXIT_USAGE: i32 = 2;

pub fn json<T: serde::Serialize>(value: &T) -> String {
    let mut s = serde_json::to_string_pretty(value).unwrap_or_default();
    s.push('\n');
    s
}

/// One line saying what a root holds when it has no GPU or RDMA device.
pub fn nothing_found_line(topo: &Topology) -> Option<String> {
    (topo.gpus.is_empty() && topo.rdma_devices.is_empty()).then(|| {
        format!(
            "rdmatopo: no NVIDIA GPU and no RDMA device under {} ({} PCI functions, {} NUMA node{}, {} netdev{})\n",
            topo.root,
            topo.pci.len(),
            topo.numa_nodes.len(),
            if topo.numa_nodes.len() == 1 { "" } else { "s" },
            topo.netdevs.len(),
            if topo.netdevs.len() == 1 { "" } else { "s" },
        )
    })
}
