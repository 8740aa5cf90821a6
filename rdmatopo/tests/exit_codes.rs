//! One exit-code table for every command (README "Exit codes", and each command's
//! `--help`): 0 success, 1 warnings or differences, 2 errors of a judging command and
//! every usage error (clap's own and the ones found once the machine is read), 3 could
//! not run.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use std::process::{Command, Output};

fn rdmatopo(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rdmatopo"))
        .args(args)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .output()
        .unwrap()
}

fn code(args: &[&str]) -> i32 {
    let out = rdmatopo(args);
    out.status.code().unwrap_or(-1)
}

fn root(name: &str) -> String {
    support::root(name).display().to_string()
}

/// Every command and `k8s` subcommand, read from the help of `rdmatopo` and of `rdmatopo
/// k8s` (so that a new one is covered without being listed here).
fn commands() -> Vec<Vec<String>> {
    let listed = |args: &[&str]| -> Vec<String> {
        let help = String::from_utf8(rdmatopo(args).stdout).unwrap();
        help.lines()
            .skip_while(|l| *l != "Commands:")
            .skip(1)
            .take_while(|l| l.starts_with("  "))
            .filter_map(|l| l.split_whitespace().next().map(str::to_string))
            .filter(|c| c != "help")
            .collect()
    };
    let mut all: Vec<Vec<String>> = listed(&["--help"]).into_iter().map(|c| vec![c]).collect();
    for sub in listed(&["k8s", "--help"]) {
        all.push(vec!["k8s".into(), sub]);
    }
    assert!(all.len() > 15, "{all:?}");
    all
}

#[test]
fn every_commands_help_ends_with_the_exit_code_table() {
    let table = include_str!("../src/cli/output.rs")
        .split("pub const EXIT_CODES: &str = \"\\\n")
        .nth(1)
        .and_then(|s| s.split("\";").next())
        .unwrap()
        .to_string();
    assert!(table.contains("  3  could not run"));
    let readme = include_str!("../../README.md");
    assert!(
        readme.contains(&table),
        "README.md does not hold the exit-code table of --help"
    );
    let mut cases = commands();
    cases.push(vec![]);
    for c in cases {
        let mut args: Vec<&str> = c.iter().map(String::as_str).collect();
        args.push("--help");
        let out = rdmatopo(&args);
        assert_eq!(out.status.code(), Some(0), "{args:?}");
        let help = String::from_utf8(out.stdout).unwrap();
        assert!(
            help.trim_end().ends_with(table.trim_end()),
            "{args:?} --help does not end with the exit-code table:\n{help}"
        );
    }
}

#[test]
fn a_usage_error_is_2_for_every_command() {
    for c in commands() {
        let mut args: Vec<&str> = c.iter().map(String::as_str).collect();
        if args == ["exec"] {
            // Its first word that is not its own is CMD's (`exec python -u train.py`).
            args.extend(["--local-rank", "first", "--", "true"]);
        } else {
            args.push("--no-such-option");
        }
        assert_eq!(code(&args), 2, "{args:?}");
    }
}

#[test]
fn arguments_this_machine_cannot_satisfy_are_usage_errors() {
    let pod = root("pod-h100-1gpu-1vf");
    for args in [
        vec!["nccl-env", "--root", &pod, "--local-rank", "99"],
        vec!["nccl-env", "--root", &pod, "--local-world-size", "0"],
        vec!["k8s", "pod", "--root", &pod, "--gpus", "0"],
        vec!["k8s", "pod", "--root", &pod, "--gpus", "99"],
        vec![
            "k8s", "pod", "--root", &pod, "--gpus", "1", "--name", "Not_DNS",
        ],
        vec![
            "k8s", "pod", "--root", &pod, "--gpus", "1", "--memory", "lots",
        ],
    ] {
        let out = rdmatopo(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(out.stdout.is_empty(), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("error"), "{args:?}: {err}");
    }
    // A rank the root's own environment names wrongly is not the caller's mistake, and
    // exec runs CMD whatever the plan (its exit status is CMD's).
    assert_eq!(
        code(&["exec", "--root", &pod, "--local-rank", "99", "--", "true"]),
        0
    );
}

#[test]
fn a_root_that_cannot_be_read_is_3_for_every_command_that_reads_one() {
    let missing = std::env::temp_dir().join("rdmatopo-no-such-root");
    let missing = missing.display().to_string();
    for c in commands() {
        let mut args: Vec<&str> = c.iter().map(String::as_str).collect();
        let extra: &[&str] = match args.as_slice() {
            ["snapshot"] => &["-o", "/dev/null"],
            ["exec"] => &["--", "true"],
            ["k8s", "pod"] => &["--gpus", "1"],
            ["k8s", "audit"] => &["--pod-resources-socket", "/nonexistent.sock"],
            ["diff"] | ["cluster"] => {
                args.extend([missing.as_str(), missing.as_str()]);
                assert_eq!(code(&args), 3, "{args:?}");
                continue;
            }
            // `k8s probe` reads a file, not a root.
            ["completions"] | ["man"] | ["k8s"] | ["k8s", "probe"] => continue,
            _ => &[],
        };
        args.extend(["--root", missing.as_str()]);
        args.extend(extra);
        let want = if args[0] == "exec" { 0 } else { 3 };
        assert_eq!(code(&args), want, "{args:?}");
    }
}

#[test]
fn judging_commands_say_0_1_2() {
    let doctor = |f: &str| code(&["doctor", "--root", &root(f)]);
    assert_eq!(doctor("pod-h100-2gpu-2vf"), 0);
    assert_eq!(doctor("h100-dgx"), 1);
    assert_eq!(doctor("pod-h100-limits"), 2);
    let same = root("h100-dgx");
    assert_eq!(code(&["diff", &same, &same]), 0);
    assert_eq!(code(&["diff", &same, &root("pod-sriov")]), 1);
}
