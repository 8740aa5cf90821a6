//! Golden tests: every command on every fixture, compared with
//! `fixtures/<name>/expected/<case>`. The command reads each fixture's directory form
//! (`support::unpacked`), through the filesystem as on a machine; tests/archives.rs holds
//! the archive to the same answers.
//! `RDMATOPO_BLESS=1 cargo test -p rdmatopo --test integration golden::` rewrites the
//! expected files (review the diff before committing).
//!
//! Add a command by adding a line to `CASES` (tests/support/goldens.rs).
//!
//! `RDMATOPO_GOLDEN_BIN=PATH` checks another build of the command against the same files,
//! on every fixture or on those `RDMATOPO_GOLDEN_FIXTURES=a,b,...` names (scripts/test-all:
//! a sample answered by the static musl program).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;
use std::path::{Path, PathBuf};
use std::process::Command;

use support::goldens::{ALL_CASES, CASES, render};

fn fixtures_dir() -> PathBuf {
    support::fixtures_dir()
}

/// Every fixture directory; each must hold its archive and its goldens.
pub fn fixtures() -> Vec<PathBuf> {
    support::fixture_dirs()
}

/// The command under test: this build's, or the one `RDMATOPO_GOLDEN_BIN` names.
fn program() -> PathBuf {
    std::env::var_os("RDMATOPO_GOLDEN_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_rdmatopo")))
}

fn run_case(fixture: &Path, args: &[&str]) -> String {
    let root = support::unpacked(fixture);
    let args: Vec<String> = args
        .iter()
        .map(|a| a.replace("{root}", &root.display().to_string()))
        .collect();
    let out = Command::new(program())
        .args(&args)
        // Only what a fixture says may decide the output, not the caller's NCCL_* or
        // LOCAL_RANK.
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .output()
        .expect("run rdmatopo");
    let text = render(
        &String::from_utf8_lossy(&out.stdout),
        &String::from_utf8_lossy(&out.stderr),
        out.status.code().unwrap_or(-1),
    );
    // Goldens must not depend on where the repository is checked out.
    text.replace(&root.display().to_string(), "<root>")
}

#[test]
fn goldens() {
    let bless = std::env::var_os("RDMATOPO_BLESS").is_some();
    assert!(
        !(bless && std::env::var_os("RDMATOPO_GOLDEN_BIN").is_some()),
        "RDMATOPO_BLESS writes this build's answers: unset RDMATOPO_GOLDEN_BIN"
    );
    let fixtures = compared();
    assert!(
        !fixtures.is_empty(),
        "no fixtures found under {}",
        fixtures_dir().display()
    );
    // Fixtures side by side: each case is a process, and a fixture's cases one thread's.
    let failures: Vec<String> = support::par_map(&fixtures, |f| check_fixture(f, bless))
        .into_iter()
        .flatten()
        .collect();
    assert!(
        failures.is_empty(),
        "{} golden mismatches:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// The fixtures compared: every one; another build (`RDMATOPO_GOLDEN_BIN`) may be held to
/// a sample, `RDMATOPO_GOLDEN_FIXTURES`, each of which must exist.
fn compared() -> Vec<PathBuf> {
    let Some(names) = std::env::var_os("RDMATOPO_GOLDEN_FIXTURES") else {
        return fixtures();
    };
    assert!(
        std::env::var_os("RDMATOPO_GOLDEN_BIN").is_some(),
        "RDMATOPO_GOLDEN_FIXTURES samples another build's answers: this build answers on every fixture"
    );
    let names = names.to_string_lossy().into_owned();
    let all = fixtures();
    names
        .split(',')
        .map(|name| {
            all.iter()
                .find(|f| f.file_name().is_some_and(|n| n == name))
                .unwrap_or_else(|| panic!("RDMATOPO_GOLDEN_FIXTURES: no fixture {name:?}"))
                .clone()
        })
        .collect()
}

/// Every case of one fixture against its expected files (or, blessing, written to them):
/// what differs.
fn check_fixture(fixture: &Path, bless: bool) -> Vec<String> {
    let mut failures = Vec::new();
    let expected_dir = fixture.join("expected");
    for (default_file, file) in ALL_CASES {
        let (_, args) = CASES
            .iter()
            .find(|(f, _)| f == default_file)
            .expect("an --all case names a case");
        let mut args = args.to_vec();
        args.push("--all");
        let actual = run_case(fixture, &args);
        let path = expected_dir.join(file);
        let default_path = expected_dir.join(default_file);
        if bless {
            if actual == run_case(fixture, &args[..args.len() - 1]) {
                let _ = std::fs::remove_file(&path);
            } else {
                // A new fixture has no expected/ yet.
                std::fs::create_dir_all(&expected_dir).unwrap();
                std::fs::write(&path, &actual).unwrap();
            }
            continue;
        }
        let expected = std::fs::read_to_string(&path)
            .or_else(|_| std::fs::read_to_string(&default_path))
            .unwrap_or_default();
        if expected != actual {
            failures.push(format!(
                "{} (`--all`): differs\n{}",
                path.display(),
                first_difference(&expected, &actual)
            ));
        }
    }
    for (file, args) in CASES {
        let actual = run_case(fixture, args);
        let path = expected_dir.join(file);
        if bless {
            std::fs::create_dir_all(&expected_dir).unwrap();
            std::fs::write(&path, &actual).unwrap();
            continue;
        }
        match std::fs::read_to_string(&path) {
            Ok(expected) if expected == actual => {}
            Ok(expected) => failures.push(format!(
                "{}: differs\n{}",
                path.display(),
                first_difference(&expected, &actual)
            )),
            Err(_) => failures.push(format!(
                "{}: missing (run with RDMATOPO_BLESS=1)",
                path.display()
            )),
        }
    }
    failures
}

/// Every expected file reads back as the answer it holds (support::goldens::parse, which
/// the tests that read answers from these files use), and writes out as it was.
#[test]
fn every_golden_file_reads_back_exactly() {
    let mut read = 0;
    for fixture in fixtures() {
        for file in CASES
            .iter()
            .map(|(f, _)| *f)
            .chain(ALL_CASES.iter().map(|(_, f)| *f))
        {
            let path = fixture.join("expected").join(file);
            let Ok(text) = std::fs::read_to_string(&path) else {
                continue;
            };
            let a = support::goldens::parse(&text)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            assert_eq!(
                render(&a.stdout, &a.stderr, a.exit),
                text,
                "{}",
                path.display()
            );
            read += 1;
        }
    }
    assert!(read > 500, "only {read} golden files read");
}

fn first_difference(expected: &str, actual: &str) -> String {
    for (i, (e, a)) in expected.lines().zip(actual.lines()).enumerate() {
        if e != a {
            return format!("  line {}:\n  expected: {e}\n  actual:   {a}", i + 1);
        }
    }
    format!(
        "  lengths differ: expected {} lines, actual {}",
        expected.lines().count(),
        actual.lines().count()
    )
}
