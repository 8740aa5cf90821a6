//! Every input the fuzzers ever crashed on, replayed through the very same target
//! bodies (`rdmatopo::fuzzing`) in the normal test suite; and the committed seed
//! corpora, so a seed that stops parsing the way it did is noticed without cargo-fuzz.
//!
//! A crash found by `fuzz/run.sh` is minimized (`cargo fuzz tmin`), copied to
//! `fuzz/regressions/<target>/<what-it-is>`, fixed, and given a named test below that
//! says what went wrong.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz")
}

/// Files directly under `dir/<target>/` for every target directory in `dir`.
fn cases(dir: &Path) -> Vec<(String, PathBuf)> {
    let mut out = Vec::new();
    let Ok(targets) = std::fs::read_dir(dir) else {
        return out;
    };
    for t in targets.flatten() {
        let target = t.file_name().to_string_lossy().into_owned();
        for f in std::fs::read_dir(t.path()).into_iter().flatten().flatten() {
            if f.path().is_file() {
                out.push((target.clone(), f.path()));
            }
        }
    }
    out.sort();
    out
}

fn replay(target: &str, file: &Path) {
    let data = std::fs::read(file).unwrap();
    assert!(
        rdmatopo::fuzzing::run(target, &data),
        "{}: no fuzz target called {target:?}",
        file.display()
    );
}

/// One named regression: `fuzz/regressions/<target>/<name>`.
fn regression(target: &str, name: &str) {
    let file = fuzz_dir().join("regressions").join(target).join(name);
    assert!(file.is_file(), "{} is missing", file.display());
    replay(target, &file);
}

#[test]
fn every_regression_file_replays_cleanly() {
    let all = cases(&fuzz_dir().join("regressions"));
    assert!(!all.is_empty(), "fuzz/regressions/ holds no case");
    for (target, file) in all {
        replay(&target, &file);
    }
}

/// The fuzz crate's targets (fuzz/fuzz_targets/<name>.rs, each a one-line call of
/// `rdmatopo::fuzzing::<name>`) are exactly `rdmatopo::fuzzing::TARGETS`: what this file
/// replays is what `fuzz/run.sh` fuzzes.
#[test]
fn the_fuzz_crate_runs_every_target_body() {
    let dir = fuzz_dir().join("fuzz_targets");
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| {
            e.ok()?
                .file_name()
                .to_str()?
                .strip_suffix(".rs")
                .map(String::from)
        })
        .collect();
    files.sort();
    let mut targets: Vec<String> = rdmatopo::fuzzing::TARGETS
        .iter()
        .map(|(n, _)| n.to_string())
        .collect();
    targets.sort();
    assert_eq!(files, targets, "{}", dir.display());
    let manifest = std::fs::read_to_string(fuzz_dir().join("Cargo.toml")).unwrap();
    for name in &targets {
        let body = std::fs::read_to_string(dir.join(format!("{name}.rs"))).unwrap();
        assert!(
            body.contains(&format!("rdmatopo::fuzzing::{name}(data)")),
            "fuzz_targets/{name}.rs does not call rdmatopo::fuzzing::{name}"
        );
        assert!(
            manifest.contains(&format!("path = \"fuzz_targets/{name}.rs\"")),
            "fuzz/Cargo.toml has no [[bin]] for {name}"
        );
    }
}

#[test]
fn every_seed_replays_cleanly() {
    let all = cases(&fuzz_dir().join("corpus"));
    let targets: std::collections::BTreeSet<&str> = all.iter().map(|(t, _)| t.as_str()).collect();
    for (name, _) in rdmatopo::fuzzing::TARGETS {
        assert!(targets.contains(name), "no seed corpus for target {name}");
    }
    for (target, file) in &all {
        // Only the committed seeds: a local fuzzing run adds thousands of files here.
        if file
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("seed-"))
        {
            replay(target, file);
        }
    }
}

/// `Process::memlock_bytes` is `Option<Option<u64>>`: "no limits file" and "unlimited"
/// both serialized as `null`, so a model with an unlimited memlock limit did not read
/// back from its own JSON. Found by the `discover` target's round-trip check.
#[test]
fn discover_unlimited_memlock_round_trips() {
    regression("discover", "unlimited-memlock");
    // The input picks a file of the base machine by index: check it still reaches the
    // case (if the base machine changes, regenerate the input).
    use arbitrary::{Arbitrary, Unstructured};
    let data = std::fs::read(fuzz_dir().join("regressions/discover/unlimited-memlock")).unwrap();
    let input =
        rdmatopo::fuzzing::TreeInput::arbitrary_take_rest(Unstructured::new(&data)).unwrap();
    let topo = rdmatopo::fuzzing::check_discovery(input.build()).unwrap();
    assert_eq!(
        topo.process.memlock,
        Some(rdmatopo::parse::MemlockLimit::Unlimited)
    );
}

/// A function's `class` of more than 24 bits (`0x11258a63`, from an edited `class` file)
/// was taken whole, and the model's JSON, whose `class` holds 24 bits, did not read back.
/// Found by the `discover` target's round-trip check (a five-minute run); `class` is now
/// parsed as the 24 bits the kernel prints (`parse::parse_pci_class`).
#[test]
fn discover_pci_class_over_24_bits_is_refused() {
    regression("discover", "pci-class-over-24-bits");
}
