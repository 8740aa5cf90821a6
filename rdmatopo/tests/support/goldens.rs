//! The golden cases: what each command prints on each fixture, kept in
//! `fixtures/<name>/expected/<file>` and held equal to the command's answer by
//! tests/golden.rs. Tests that read an answer (a parser written for the tool it mirrors,
//! a schema, a name) read it here rather than running the command again.

use std::path::Path;

/// (expected file name, arguments after `rdmatopo`; `{root}` is the fixture root).
pub const CASES: &[(&str, &[&str])] = &[
    ("topo.txt", &["topo", "--root", "{root}"]),
    (
        "topo.json",
        &["topo", "--root", "{root}", "--format", "json"],
    ),
    ("topo-owned.txt", &["topo", "--root", "{root}", "--owned"]),
    (
        "topo-owned.json",
        &["topo", "--root", "{root}", "--owned", "--format", "json"],
    ),
    ("topo-all.txt", &["topo", "--root", "{root}", "--all"]),
    ("inventory.txt", &["inventory", "--root", "{root}"]),
    (
        "inventory.json",
        &["inventory", "--root", "{root}", "--format", "json"],
    ),
    ("nccl-env.sh", &["nccl-env", "--root", "{root}"]),
    (
        "nccl-env.json",
        &["nccl-env", "--root", "{root}", "--format", "json"],
    ),
    (
        "exec.txt",
        &[
            "exec",
            "--root",
            "{root}",
            "--local-rank",
            "0",
            "--print",
            "--",
            "true",
        ],
    ),
    ("gids.txt", &["gids", "--root", "{root}"]),
    (
        "gids.json",
        &["gids", "--root", "{root}", "--format", "json"],
    ),
    ("netdevs.txt", &["netdevs", "--root", "{root}"]),
    (
        "netdevs.json",
        &["netdevs", "--root", "{root}", "--format", "json"],
    ),
    ("nccl-topo.xml", &["nccl-topo", "--root", "{root}"]),
    ("qos.txt", &["qos", "--root", "{root}"]),
    ("qos.json", &["qos", "--root", "{root}", "--format", "json"]),
    ("doctor.txt", &["doctor", "--root", "{root}"]),
    (
        "doctor.json",
        &["doctor", "--root", "{root}", "--format", "json"],
    ),
    (
        "k8s-rdma-shared-dev-plugin.yaml",
        &["k8s", "rdma-shared-dev-plugin", "--root", "{root}"],
    ),
    (
        "k8s-sriov-device-plugin.yaml",
        &["k8s", "sriov-device-plugin", "--root", "{root}"],
    ),
    (
        "k8s-sriov-device-plugin-switch.json",
        &[
            "k8s",
            "sriov-device-plugin",
            "--root",
            "{root}",
            "--pool-by",
            "switch",
            "--config-json",
        ],
    ),
    ("k8s-nfd.txt", &["k8s", "nfd", "--root", "{root}"]),
    (
        "k8s-pod.yaml",
        &["k8s", "pod", "--root", "{root}", "--gpus", "2"],
    ),
    (
        "k8s-job-sriov.yaml",
        &[
            "k8s",
            "pod",
            "--root",
            "{root}",
            "--gpus",
            "2",
            "--network",
            "sriov",
            "--kind",
            "job",
        ],
    ),
];

/// Answers that show a container's own devices by default, and with `--all` every
/// device visible: (the default's file, the `--all` file). On a host the two are the
/// same, and the `--all` file is kept only where they differ (a container's fixture):
/// where it is absent, `--all` must print the default's file.
pub const ALL_CASES: &[(&str, &str)] = &[
    ("topo.json", "topo-all.json"),
    ("gids.txt", "gids-all.txt"),
    ("gids.json", "gids-all.json"),
    ("netdevs.txt", "netdevs-all.txt"),
    ("netdevs.json", "netdevs-all.json"),
    ("qos.txt", "qos-all.txt"),
    ("qos.json", "qos-all.json"),
    ("nccl-env.json", "nccl-env-all.json"),
    ("doctor.json", "doctor-all.json"),
    ("nccl-topo.xml", "nccl-topo-all.xml"),
    ("inventory.txt", "inventory-all.txt"),
    ("inventory.json", "inventory-all.json"),
];

/// One answer of the command, as a golden file holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    pub stdout: String,
    pub stderr: String,
    pub exit: i32,
}

/// The expected file of `rdmatopo ARGS --root <fixture>`: the case whose arguments,
/// less `--root {root}`, are `args`; else, with `--all` in `args`, the `--all` file of
/// the case without it (and that case's file, which a host keeps for both). A question
/// no case answers panics: add the case to [`CASES`] or [`ALL_CASES`].
pub fn file_of(args: &[&str]) -> (&'static str, Option<&'static str>) {
    let case_of = |args: &[&str]| {
        CASES.iter().find_map(|(file, case)| {
            let rest = case.iter().filter(|a| **a != "--root" && **a != "{root}");
            rest.eq(args.iter()).then_some(*file)
        })
    };
    if let Some(file) = case_of(args) {
        return (file, None);
    }
    let without_all: Vec<&str> = args.iter().copied().filter(|a| *a != "--all").collect();
    let all_file = (without_all.len() < args.len())
        .then(|| case_of(&without_all))
        .flatten()
        .and_then(|file| {
            ALL_CASES
                .iter()
                .find(|(default, _)| *default == file)
                .map(|(_, all)| (*all, Some(file)))
        });
    all_file.unwrap_or_else(|| panic!("no golden case answers `rdmatopo {}`", args.join(" ")))
}

/// What `rdmatopo ARGS --root <fixture>/root.tar.gz` prints, read from the fixture's
/// golden file (tests/golden.rs holds it equal to the command's answer; the path of the
/// root reads `<root>` there).
pub fn answer(fixture: &Path, args: &[&str]) -> Answer {
    let expected = fixture.join("expected");
    let (file, default) = file_of(args);
    let text = std::fs::read_to_string(expected.join(file))
        .or_else(|e| match default {
            // A host's `--all` answer is its default one, kept once.
            Some(d) => std::fs::read_to_string(expected.join(d)),
            None => Err(e),
        })
        .unwrap_or_else(|e| panic!("{}: {e}", expected.join(file).display()));
    parse(&text).unwrap_or_else(|e| panic!("{}: {e}", expected.join(file).display()))
}

/// A golden file's text: stdout, then `--- stderr` and stderr when there was any, then
/// `--- exit N` (tests/golden.rs writes it so).
pub fn parse(text: &str) -> Result<Answer, String> {
    let body = text.strip_suffix('\n').ok_or("no final newline")?;
    let (rest, exit) = body.rsplit_once("--- exit ").ok_or("no `--- exit` line")?;
    let exit = exit.parse().map_err(|_| format!("exit {exit:?}"))?;
    let (stdout, stderr) = match rest.rfind("--- stderr\n") {
        Some(at) if at == 0 || rest[..at].ends_with('\n') => {
            (&rest[..at], &rest[at + "--- stderr\n".len()..])
        }
        _ => (rest, ""),
    };
    Ok(Answer {
        stdout: stdout.to_string(),
        stderr: stderr.to_string(),
        exit,
    })
}

/// A golden file's text of an answer (the inverse of [`parse`]).
pub fn render(stdout: &str, stderr: &str, exit: i32) -> String {
    let mut text = stdout.to_string();
    if !stderr.is_empty() {
        text.push_str("--- stderr\n");
        text.push_str(stderr);
    }
    text.push_str(&format!("--- exit {exit}\n"));
    text
}
