//! A torchrun launcher helper: the environment and CPU binding of each local rank, as
//! shell lines a launch script runs (`eval`) or a wrapper copies.
//!
//!     cargo run -p rdmatopo --example launch -- --root fixtures/h100-dgx/root.tar.gz
//!     cargo run -p rdmatopo --example launch -- --root fixtures/h100-dgx/root.tar.gz \
//!         --local-rank 3 --nproc-per-node 8 -- python train.py
//!
//! Without `--local-rank` it reads the launcher's variables from this process's
//! environment (`LOCAL_RANK`, `LOCAL_WORLD_SIZE` from torchrun, Open MPI's, Slurm's:
//! `rdmatopo::LOCAL_RANK_VARS`); with none set it prints every rank of the node.
//! `--root` defaults to this machine (`/`).

use rdmatopo::{Discovery, RankChoice, RankPlan, RankRequest, WhenNoRank};
use std::collections::BTreeMap;
use std::process::ExitCode;

struct Args {
    root: Option<String>,
    local_rank: Option<u32>,
    nproc_per_node: Option<u32>,
    command: Vec<String>,
}

fn parse_args() -> Result<Args, String> {
    let usage = "usage: launch [--root ROOT] [--local-rank N] [--nproc-per-node N] [-- CMD...]";
    let mut args = Args {
        root: None,
        local_rank: None,
        nproc_per_node: None,
        command: Vec::new(),
    };
    let mut it = std::env::args().skip(1);
    let number = |v: Option<String>, what: &str| -> Result<u32, String> {
        v.ok_or(usage)?
            .parse()
            .map_err(|_| format!("{what} must be a number; {usage}"))
    };
    while let Some(a) = it.next() {
        match a.as_str() {
            "--root" => args.root = Some(it.next().ok_or(usage)?),
            "--local-rank" => args.local_rank = Some(number(it.next(), "--local-rank")?),
            "--nproc-per-node" => {
                args.nproc_per_node = Some(number(it.next(), "--nproc-per-node")?);
            }
            "--" => args.command = it.by_ref().collect(),
            other => return Err(format!("unknown argument {other:?}; {usage}")),
        }
    }
    Ok(args)
}

/// `'text'` for a POSIX shell.
fn quote(s: &str) -> String {
    if !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./,:=@%+".contains(&b))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// One rank's line: its variables, the node's, and `taskset` on its CPUs; then the
/// command, or the launch script's arguments (`"$@"`).
fn line(
    rank: &RankPlan,
    world: usize,
    node_env: &BTreeMap<String, String>,
    cmd: &[String],
) -> String {
    let mut words = vec![
        "env".to_string(),
        format!("LOCAL_RANK={}", rank.local_rank),
        format!("LOCAL_WORLD_SIZE={world}"),
    ];
    words.extend(node_env.iter().map(|(k, v)| format!("{k}={}", quote(v))));
    if !rank.cpus.is_empty() {
        words.extend(["taskset".into(), "-c".into(), rank.cpus.to_string()]);
    }
    match cmd {
        // No command: the line runs the launch script's own arguments.
        [] => words.push("\"$@\"".to_string()),
        _ => words.extend(cmd.iter().map(|w| quote(w))),
    }
    words.join(" ")
}

fn run() -> Result<(), String> {
    let args = parse_args()?;
    let discovery = match &args.root {
        Some(root) => Discovery::root(root),
        None => Discovery::live(),
    };
    let topo = discovery.run().map_err(|e| e.to_string())?;
    let request = RankRequest {
        local_rank: args.local_rank,
        local_world_size: args.nproc_per_node,
        // This process's environment: the launcher's variables, CUDA_VISIBLE_DEVICES.
        env: std::env::vars().collect(),
    };
    let outcome = topo
        .devices()
        .rank_plan(request, WhenNoRank::PlanTheNode)
        .map_err(|e| e.to_string())?;
    let plan = &outcome.plan;
    let cmd = args.command;
    let world = args.nproc_per_node.map_or(plan.ranks.len(), |n| n as usize);
    let ranks: Vec<&RankPlan> = match &outcome.choice {
        RankChoice::Planned(rank) => vec![rank],
        RankChoice::Unnamed => plan.ranks.iter().collect(),
        RankChoice::NoGpu => {
            return Err(format!("no GPU for this rank: {}", plan.notes.join("; ")));
        }
    };
    for rank in ranks {
        let numa = rank.numa_node.map_or("?".into(), |n| n.to_string());
        println!(
            "# local rank {}: GPU {} (NUMA node {numa}), HCAs {}",
            rank.local_rank,
            rank.gpu,
            if rank.hcas.is_empty() {
                "-".to_string()
            } else {
                rank.hcas.join(",")
            }
        );
        for why in &rank.reasons {
            println!("#   {why}");
        }
        println!("{}", line(rank, world, &plan.env, &cmd));
    }
    for note in &plan.notes {
        println!("# note: {note}");
    }
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("launch: {e}");
            ExitCode::FAILURE
        }
    }
}
