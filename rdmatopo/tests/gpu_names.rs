//! One name per GPU across commands (issue 21, item 4): on every pod fixture, topo,
//! doctor, nccl-env and inventory (text and JSON) call each GPU the same, the name
//! `view::GpuNames` gives it; in a pod whose devices are certain that is the pod's own
//! numbering (its nvidia-smi's), with the host index only beside it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;
use regex::Regex;
use std::collections::BTreeSet;
use std::path::Path;
use std::sync::LazyLock;

/// The commands that name GPUs, each a golden case.
const COMMANDS: &[&[&str]] = &[
    &["topo"],
    &["topo", "--format", "json"],
    &["doctor"],
    &["doctor", "--format", "json"],
    &["nccl-env"],
    &["nccl-env", "--format", "json"],
    &["inventory"],
];

/// What a user reads of `rdmatopo ARGS` on `fixture`: the answer (stdout) and what is said
/// of it (stderr: the View line that names a container's GPUs), as the fixture's golden
/// file holds them (tests/golden.rs keeps it equal to the command's answer). Doctor's
/// findings may wrap a label over two lines.
fn run(fixture: &Path, args: &[&str]) -> String {
    let answer = support::goldens::answer(fixture, args);
    format!("{}\n{}", answer.stdout, answer.stderr)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// The forms the commands name a GPU in, each capturing the name and the PCI address.
static FORMS: LazyLock<Vec<Regex>> = LazyLock::new(|| {
    let pci = r"([0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7])";
    [
        // doctor's and the plan's labels: `GPU0 (host GPU5, 0000:c3:00.0)`
        format!(r"\b((?:host )?GPU\d+) \((?:host GPU\d+, )?{pci}\)"),
        // topo's header: `GPU0 = host GPU5 at 0000:c3:00.0`
        format!(r"\b((?:host )?GPU\d+) = (?:host GPU\d+ at )?{pci}"),
        // topo's JSON devices
        format!(r#""name": "(GPU\d+)", "pci": "{pci}""#),
        // inventory's rows: `GPU0 (host GPU5)  0000:c3:00.0`
        format!(r"\b((?:host )?GPU\d+)(?: \(host GPU\d+\))? {pci} "),
    ]
    .iter()
    .map(|f| Regex::new(f).unwrap())
    .collect()
});

/// Every name `text` gives the GPU at `pci`, in each form the commands print
/// (`host GPU1` included: a name, not `GPU1` with a word before it).
fn names_of(text: &str, pci: &str) -> BTreeSet<String> {
    FORMS
        .iter()
        .flat_map(|form| form.captures_iter(text))
        .filter(|c| &c[2] == pci)
        .map(|c| c[1].to_string())
        .collect()
}

#[test]
fn every_command_names_a_pods_gpus_alike() {
    let pods: Vec<_> = support::fixture_dirs()
        .into_iter()
        .filter(|dir| {
            dir.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("pod-"))
        })
        .collect();
    support::par_map(&pods, |dir| {
        let root = dir.join("root.tar.gz");
        let topo = support::discover_in(&root, rdmatopo::View::Owned);
        let names = rdmatopo::view::GpuNames::of(&topo);
        // The numbering is the container's, not the read's: a whole read numbers alike.
        let whole = support::discover_in(&root, rdmatopo::View::All);
        assert_eq!(
            rdmatopo::view::GpuNames::of(&whole),
            names,
            "{}",
            dir.display()
        );
        let outputs: Vec<(String, String)> = COMMANDS
            .iter()
            .map(|args| (args.join(" "), run(dir, args)))
            .collect();
        for gpu in &topo.gpus {
            let pci = gpu.pci.to_string();
            let want = names.name(gpu);
            for (command, text) in &outputs {
                let seen = names_of(text, &pci);
                assert!(
                    seen.iter().all(|n| *n == want),
                    "{}: `{command}` calls {pci} {seen:?}, every answer calls it {want}",
                    dir.display()
                );
            }
            // Each of the pod's GPUs is named by topo and doctor at least.
            if names.container_index(gpu.pci).is_some() {
                for command in ["topo", "doctor --format json"] {
                    let text = &outputs.iter().find(|(c, _)| c == command).unwrap().1;
                    assert!(
                        names_of(text, &pci).contains(&want),
                        "{}: `{command}` does not name {pci} {want}",
                        dir.display()
                    );
                }
            }
        }
    });
    assert!(pods.len() > 5, "only {} pod fixtures found", pods.len());
}

/// The issue's case: the pod was given the host's GPU 5; its nvidia-smi calls it GPU0.
#[test]
fn the_pods_gpu5_is_its_gpu0_with_the_host_index_beside() {
    let pod = support::fixtures_dir().join("pod-h100-1gpu-1vf");
    let topo = run(&pod, &["topo"]);
    let doctor = run(&pod, &["doctor"]);
    assert!(topo.contains("GPU0 = host GPU5 at 0000:c3:00.0"), "{topo}");
    assert!(
        doctor.contains("GPU0 (host GPU5, 0000:c3:00.0) PXB mlx5_22"),
        "{doctor}"
    );
    assert!(!doctor.contains("GPU5 (0000:c3:00.0)"), "{doctor}");
    // `--all` shows every GPU, by the host's numbering, and says what the pod calls its own.
    let all = run(&pod, &["topo", "--all"]);
    assert!(all.contains("(its GPU0 = GPU5)"), "{all}");
}
