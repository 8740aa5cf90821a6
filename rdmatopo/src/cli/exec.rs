//! `rdmatopo exec -- CMD ARGS…`: set this local rank's NCCL environment and CPU
//! affinity, then become CMD (usable as `torchrun --no-python rdmatopo exec -- python
//! train.py`). Variables the user already set are kept unless `--override`; those CMD
//! will run with that leave the RDMA path unused are warned of first. When no
//! plan can be made, CMD still runs, unchanged, after a warning: a launcher wrapper
//! must not be the reason a job does not start.

use super::args::RootArgs;
use super::nccl_env::shell_quote;
use super::output::Output;
use crate::checks::doctor::nccl_variable_findings;
use crate::model::LOCAL_RANK_VARS;
use crate::parse::CpuSet;
use crate::view::scope::{CheckedDevices, Scope};
use crate::view::{Devices, RankChoice, RankOutcome, RankRequest, WhenNoRank};
use clap::Args;
use std::collections::BTreeMap;
use std::os::unix::process::CommandExt;
use std::process::Command;

#[derive(Args, Debug)]
pub struct ExecArgs {
    #[command(flatten)]
    pub root: RootArgs,
    /// This process's local rank (default: LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_RANK,
    /// SLURM_LOCALID, MPI_LOCALRANKID or PMI_LOCAL_RANK).
    #[arg(long, value_name = "N")]
    pub local_rank: Option<u32>,
    /// Replace variables that are already set in the environment.
    #[arg(long = "override")]
    pub override_env: bool,
    /// Say on standard error what was set, kept and bound.
    #[arg(long)]
    pub print: bool,
    /// Read every visible device in full, even inside a container (the default there
    /// reads only the devices it owns, when that is certain; the answers are the same).
    #[arg(long)]
    pub all: bool,
    /// The command and its arguments.
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "CMD"
    )]
    pub command: Vec<String>,
}

fn say(msg: &str) {
    eprintln!("rdmatopo exec: {msg}");
}

pub fn run(args: &ExecArgs) -> Result<Output, String> {
    let live = args
        .root
        .root
        .as_deref()
        .is_none_or(|r| r == std::path::Path::new("/"));
    let mut cmd = Command::new(&args.command[0]);
    cmd.args(&args.command[1..]);
    match plan(args, live) {
        Ok((outcome, warnings)) => {
            for w in warnings {
                say(&format!("warning: {w}"));
            }
            apply(args, live, &outcome, &mut cmd);
        }
        Err(why) => say(&format!(
            "no plan ({why}); running {} unchanged",
            args.command[0]
        )),
    }
    if args.print {
        say(&format!("exec {}", args.command.join(" ")));
    }
    let err = cmd.exec();
    eprintln!("rdmatopo exec: cannot run {}: {err}", args.command[0]);
    Ok(Output::with_code(
        String::new(),
        if err.kind() == std::io::ErrorKind::NotFound {
            127
        } else {
            126
        },
    ))
}

/// The rank's plan, and what the NCCL variables CMD will run with undo of it.
fn plan(args: &ExecArgs, live: bool) -> Result<(RankOutcome, Vec<String>), String> {
    let topo = args.root.discover_owned(crate::Needs::NCCL_ENV, args.all)?;
    // Live, the plan reads this process's own environment; a captured root brings its
    // own (as `nccl-env` reads it).
    // This process's environment, the one CMD and its NCCL will run in, whatever the
    // root (Python's plan() and apply() take it too): a captured tree is only the
    // machine planned for.
    if !live && args.print {
        say(&format!(
            "planning this process's LOCAL_RANK, CUDA_VISIBLE_DEVICES and NCCL_* against the machine captured under {}",
            args.root
                .root
                .as_deref()
                .unwrap_or(std::path::Path::new("/"))
                .display()
        ));
    }
    let env: BTreeMap<String, String> = std::env::vars().collect();
    let outcome = Devices::of(&topo)
        .rank_plan(
            RankRequest {
                local_rank: args.local_rank,
                local_world_size: None,
                env,
            },
            WhenNoRank::PlanTheNode,
        )
        .map_err(|e| e.to_string())?;
    let warnings = undone_by_environment(topo, &outcome, args.override_env);
    Ok((outcome, warnings))
}

/// Doctor's findings on the NCCL variables CMD will run with (this environment, with
/// the plan's variables where [`apply`] sets them) that leave the RDMA path unused: a
/// variable the user set and exec keeps (`NCCL_IB_HCA` of another machine), or one the
/// plan does not set (`NCCL_IB_DISABLE=1`). NCCL reads those, not the plan.
fn undone_by_environment(
    mut topo: crate::Topology,
    outcome: &RankOutcome,
    override_env: bool,
) -> Vec<String> {
    let mut env: BTreeMap<String, String> = std::env::vars().collect();
    for (k, v) in &outcome.plan.env {
        if override_env || !env.contains_key(k) {
            env.insert(k.clone(), v.clone());
        }
    }
    topo.process.env = env;
    // The plan made for the rank is the node's: judged against it, not made again.
    let scope = Scope::judging_planned(
        &topo,
        CheckedDevices::this_process(&topo),
        Some(&outcome.plan),
    );
    nccl_variable_findings(&scope)
        .into_iter()
        .map(|f| match f.fix.as_str() {
            "" => f.summary,
            fix => format!("{} (fix: {fix})", f.summary),
        })
        .collect()
}

fn apply(args: &ExecArgs, live: bool, outcome: &RankOutcome, cmd: &mut Command) {
    let plan = &outcome.plan;
    for (k, v) in &plan.env {
        match std::env::var(k) {
            Ok(cur) if !args.override_env => {
                if args.print || cur != *v {
                    let differs = if cur == *v {
                        String::new()
                    } else {
                        format!("; the plan says {}, --override replaces it", shell_quote(v))
                    };
                    say(&format!(
                        "kept {k}={} (already set{differs})",
                        shell_quote(&cur)
                    ));
                }
            }
            _ => {
                cmd.env(k, v);
                if args.print {
                    say(&format!("set {k}={}", shell_quote(v)));
                }
            }
        }
    }
    let RankChoice::Planned(rank) = &outcome.choice else {
        if outcome.choice == RankChoice::Unnamed && plan.ranks.len() > 1 {
            say(&format!(
                "no local rank given ({} unset and no --local-rank): only the node-wide variables are set, no CPU binding",
                LOCAL_RANK_VARS.join(", ")
            ));
        } else {
            for n in &plan.notes {
                say(&format!("note: {n}"));
            }
            say("no GPU for this rank: no CPU binding");
        }
        return;
    };
    if args.print {
        let numa = rank.numa_node.map_or("?".to_string(), |n| n.to_string());
        say(&format!(
            "local rank {}: GPU {} (NUMA node {numa}), HCAs {}",
            rank.local_rank,
            rank.gpu,
            if rank.hcas.is_empty() {
                "-".to_string()
            } else {
                rank.hcas.join(",")
            }
        ));
        for n in &plan.notes {
            say(&format!("note: {n}"));
        }
    }
    if rank.cpus.is_empty() {
        say("no CPUs known for this rank: affinity left as it is");
    } else if !live {
        if args.print {
            say(&format!(
                "CPU affinity {} (not applied: --root is a captured tree, not this machine)",
                rank.cpus
            ));
        }
    } else {
        match set_affinity(&rank.cpus) {
            Ok(()) => {
                if args.print {
                    say(&format!("CPU affinity {}", rank.cpus));
                }
            }
            Err(e) => say(&format!(
                "cannot bind to CPUs {}: {e}; affinity left as it is",
                rank.cpus
            )),
        }
    }
}

/// Bind the calling thread (and so the program it execs) to `cpus`.
///
/// # Errors
/// The OS error of `sched_setaffinity(2)` (EINVAL: none of the CPUs is allowed).
pub fn set_affinity(cpus: &CpuSet) -> std::io::Result<()> {
    let bits = libc::c_ulong::BITS as usize;
    let highest = cpus.iter().last().unwrap_or(0) as usize;
    // At least glibc's cpu_set_t (1024 CPUs); the kernel takes any multiple of a long.
    let words = (highest / bits + 1).max(1024 / bits);
    let mut mask: Vec<libc::c_ulong> = vec![0; words];
    for c in cpus.iter() {
        let c = c as usize;
        mask[c / bits] |= 1 << (c % bits);
    }
    // SAFETY: `mask` is a live, initialised buffer of exactly the size passed; the
    // kernel reads that many bytes as a CPU bitmap and keeps no reference to it.
    let rc = unsafe {
        libc::sched_setaffinity(
            0,
            std::mem::size_of_val(mask.as_slice()),
            mask.as_ptr().cast::<libc::cpu_set_t>(),
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn current_affinity() -> CpuSet {
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        // SAFETY: `set` is a valid cpu_set_t of the size passed.
        let rc =
            unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
        assert_eq!(rc, 0);
        CpuSet::from_cpus(
            (0..libc::CPU_SETSIZE as u32).filter(|c| unsafe { libc::CPU_ISSET(*c as usize, &set) }),
        )
    }

    #[test]
    fn binds_and_reports_errors() {
        // In a thread of its own: affinity is per thread.
        std::thread::spawn(|| {
            let before = current_affinity();
            let first = before.iter().next().unwrap();
            set_affinity(&CpuSet::from_cpus([first])).unwrap();
            assert_eq!(current_affinity(), CpuSet::from_cpus([first]));
            set_affinity(&before).unwrap();
            assert_eq!(current_affinity(), before);
            // A CPU that does not exist anywhere.
            assert!(set_affinity(&CpuSet::from_cpus([4000])).is_err());
        })
        .join()
        .unwrap();
    }
}
