//! `rdmatopo nccl-env`: the NCCL variables and per-rank plan, as `export` lines or JSON.

use super::args::RootArgs;
use super::output::Output;
use crate::view::ViewError;
use crate::view::plan::{Plan, PlanOptions};
use clap::{Args, ValueEnum};
use std::fmt::Write;

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum EnvFormat {
    /// `export` lines a script can `eval`, the reasons as comments.
    Shell,
    /// `rdmatopo.nccl-env/1`.
    Json,
}

#[derive(Args, Debug)]
pub struct NcclEnvArgs {
    #[command(flatten)]
    pub root: RootArgs,
    /// Plan only this local rank (default: LOCAL_RANK and the like from the root's
    /// environment, else every rank).
    #[arg(long, value_name = "N")]
    pub local_rank: Option<u32>,
    /// Number of ranks on this node (default: LOCAL_WORLD_SIZE and the like, else one
    /// per visible GPU).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub local_world_size: Option<u32>,
    #[arg(long, value_enum, default_value = "shell")]
    pub format: EnvFormat,
    /// Read every visible device in full, even inside a container (the default there
    /// reads only the devices it owns, when that is certain; the answers are the same).
    #[arg(long)]
    pub all: bool,
}

pub fn run(args: &NcclEnvArgs) -> Result<Output, String> {
    let topo = args.root.discover_owned(crate::Needs::NCCL_ENV, args.all)?;
    let plan = match Plan::compute(
        &topo,
        &PlanOptions {
            local_rank: args.local_rank,
            local_world_size: args.local_world_size,
            ..Default::default()
        },
    ) {
        Ok(plan) => plan,
        Err(ViewError::Argument(msg)) => return Ok(Output::usage_error(&msg)),
        Err(e) => return Err(e.to_string()),
    };
    let text = match args.format {
        EnvFormat::Json => plan.to_json(),
        EnvFormat::Shell => shell(&plan, &topo.root),
    };
    Ok(Output::ok(text))
}

/// Quote for a POSIX shell: single quotes, with `'` written as `'\''`.
pub fn shell_quote(v: &str) -> String {
    format!("'{}'", v.replace('\'', r"'\''"))
}

/// One comment line: no newline can end the comment early.
fn comment(out: &mut String, prefix: &str, text: &str) {
    let _ = writeln!(out, "# {prefix}{}", text.replace(['\n', '\r'], " "));
}

fn shell(plan: &Plan, root: &str) -> String {
    let mut out = String::new();
    comment(&mut out, "rdmatopo nccl-env for ", root);
    if plan.env.is_empty() {
        out.push_str("# nothing to export\n");
    }
    for (k, v) in &plan.env {
        if let Some(why) = plan.env_reasons.get(k) {
            comment(&mut out, &format!("{k}: "), why);
        }
        let _ = writeln!(out, "export {k}={}", shell_quote(v));
    }
    for r in &plan.ranks {
        out.push_str("#\n");
        let numa = r.numa_node.map_or("?".to_string(), |n| n.to_string());
        let hcas = if r.hcas.is_empty() {
            "-".to_string()
        } else {
            r.hcas.join(",")
        };
        comment(
            &mut out,
            "",
            &format!(
                "local rank {}: GPU {} (NUMA {numa})  HCAs {hcas}  CPUs {}",
                r.local_rank, r.gpu, r.cpus
            ),
        );
        for why in &r.reasons {
            comment(&mut out, "  ", why);
        }
    }
    if !plan.excluded.is_empty() {
        out.push_str("#\n");
        // Devices left out for the same reason share a line.
        let mut by_reason: Vec<(&str, Vec<&str>)> = Vec::new();
        for e in &plan.excluded {
            match by_reason.iter_mut().find(|(r, _)| *r == e.reason) {
                Some((_, devs)) => devs.push(&e.device),
                None => by_reason.push((&e.reason, vec![&e.device])),
            }
        }
        for (reason, devs) in by_reason {
            comment(&mut out, &format!("excluded {}: ", devs.join(", ")), reason);
        }
    }
    if !plan.notes.is_empty() {
        out.push_str("#\n");
        for n in &plan.notes {
            comment(&mut out, "note: ", n);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_survives_eval() {
        assert_eq!(shell_quote("=mlx5_0:1"), "'=mlx5_0:1'");
        assert_eq!(shell_quote("a'b"), r"'a'\''b'");
        let mut s = String::new();
        comment(&mut s, "x: ", "two\nlines");
        assert_eq!(s, "# x: two lines\n");
    }
}
