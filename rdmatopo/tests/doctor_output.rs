//! What `doctor` and `diff` put first and leave out: doctor's verdict line, its findings
//! worst first, `--min-severity`, `-q` and colour; diff's changed rows by default, every
//! row with `--all`, values never cut.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use regex::Regex;
use std::path::PathBuf;
use std::process::{Command, Output};

fn fixtures() -> Vec<PathBuf> {
    support::fixture_dirs()
}

fn rdmatopo(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_rdmatopo"));
    c.args(args)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default());
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

fn text(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).unwrap()
}

/// The severity word that opens each finding's block, in order.
fn severities(table: &str) -> Vec<&str> {
    table
        .lines()
        .take_while(|l| *l != "Checks:")
        .filter_map(|l| l.split_whitespace().next())
        .filter(|w| ["ERROR", "WARNING", "INFO", "SKIPPED"].contains(w))
        .collect()
}

#[test]
fn the_verdict_comes_first_and_errors_before_warnings_before_the_rest() {
    let verdict =
        Regex::new(r"^(OK|WARNINGS|ERRORS): (\d+) errors?, (\d+) warnings?, \d+ notes?, \d+ checks? skipped \(exit (\d)\)$")
            .unwrap();
    let rank = |w: &str| {
        ["ERROR", "WARNING", "INFO", "SKIPPED"]
            .iter()
            .position(|x| *x == w)
    };
    let mut seen = [false; 3];
    for f in fixtures() {
        let root = f.join("root.tar.gz").display().to_string();
        let out = rdmatopo(&["doctor", "--root", &root], &[]);
        let code = out.status.code().unwrap();
        if code == 3 {
            continue;
        }
        let t = text(&out);
        let first = t.lines().next().unwrap();
        let c = verdict
            .captures(first)
            .unwrap_or_else(|| panic!("{}: first line {first:?}", f.display()));
        assert_eq!(c[4].parse::<i32>().unwrap(), code, "{}", f.display());
        let word = ["OK", "WARNINGS", "ERRORS"][usize::try_from(code).unwrap()];
        assert_eq!(&c[1], word, "{}", f.display());
        seen[usize::try_from(code).unwrap()] = true;
        let words = severities(&t);
        assert_eq!(
            words.iter().filter(|w| **w == "ERROR").count(),
            c[2].parse::<usize>().unwrap(),
            "{}",
            f.display()
        );
        let ranks: Vec<usize> = words.iter().map(|w| rank(w).unwrap()).collect();
        assert!(
            ranks.windows(2).all(|w| w[0] <= w[1]),
            "{}: findings out of order: {words:?}",
            f.display()
        );
    }
    assert_eq!(seen, [true; 3], "fixtures should end 0, 1 and 2");
}

#[test]
fn min_severity_leaves_out_the_lesser_findings_but_not_their_exit_code() {
    let root = support::fixtures_dir().join("pod-h100-limits/root");
    let root = root.display().to_string();
    let all = rdmatopo(&["doctor", "--root", &root], &[]);
    let all_text = text(&all);
    let all_words = severities(&all_text);
    assert!(all_words.contains(&"INFO") && all_words.contains(&"WARNING"));
    for (level, keep) in [
        ("warning", &["ERROR", "WARNING"][..]),
        ("error", &["ERROR"][..]),
    ] {
        let out = rdmatopo(&["doctor", "--root", &root, "--min-severity", level], &[]);
        assert_eq!(out.status.code(), all.status.code());
        let t = text(&out);
        let words = severities(&t);
        let want: Vec<&str> = all_words
            .iter()
            .copied()
            .filter(|w| keep.contains(w))
            .collect();
        assert_eq!(words, want, "{level}");
        // The verdict still counts what is not shown.
        assert_eq!(t.lines().next(), text(&all).lines().next());
        let json = rdmatopo(
            &[
                "doctor",
                "--root",
                &root,
                "--min-severity",
                level,
                "--format",
                "json",
            ],
            &[],
        );
        let doc: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
        for f in doc["findings"].as_array().unwrap() {
            let sev = f["severity"].as_str().unwrap().to_ascii_uppercase();
            assert!(keep.contains(&sev.as_str()), "{level}: {f}");
        }
    }
}

#[test]
fn quiet_prints_nothing_and_exits_as_doctor() {
    for f in ["pod-h100-2gpu-2vf", "h100-dgx", "pod-h100-limits"] {
        let root = support::root(f);
        let root = root.display().to_string();
        let loud = rdmatopo(&["doctor", "--root", &root], &[]);
        let quiet = rdmatopo(&["doctor", "--root", &root, "-q"], &[]);
        assert_eq!(quiet.status.code(), loud.status.code(), "{f}");
        assert!(quiet.stdout.is_empty() && quiet.stderr.is_empty(), "{f}");
    }
}

#[test]
fn colour_only_where_asked_for_and_never_under_no_color() {
    let root = support::fixtures_dir().join("pod-h100-limits/root");
    let root = root.display().to_string();
    let args = ["doctor", "--root", root.as_str()];
    let esc = |o: &Output| o.stdout.contains(&0x1b);
    // A pipe is not a terminal: plain.
    assert!(!esc(&rdmatopo(&args, &[])));
    // CLICOLOR_FORCE stands in for a terminal (the same choice anstream makes).
    let forced = rdmatopo(&args, &[("CLICOLOR_FORCE", "1")]);
    assert!(esc(&forced));
    assert!(
        text(&forced).starts_with("\x1b["),
        "the verdict is coloured"
    );
    assert!(!esc(&rdmatopo(
        &args,
        &[("CLICOLOR_FORCE", "1"), ("NO_COLOR", "1")]
    )));
    // Colour changes nothing but colour.
    let strip = Regex::new(r"\x1b\[[0-9;]*m").unwrap();
    assert_eq!(
        strip.replace_all(&text(&forced), ""),
        text(&rdmatopo(&args, &[]))
    );
}

#[test]
fn diff_shows_what_changed_and_all_of_each_value() {
    let host = support::fixtures_dir().join("host-h100-sriov/root");
    let pod = support::fixtures_dir().join("pod-sriov/root");
    let (host, pod) = (host.display().to_string(), pod.display().to_string());
    let same = rdmatopo(&["diff", &host, &host], &[]);
    assert_eq!(same.status.code(), Some(0));
    assert!(!text(&same).contains("(same)"), "{}", text(&same));
    let all_same = rdmatopo(&["diff", &host, &host, "--all"], &[]);
    assert!(text(&all_same).matches("(same)").count() > 5);

    let out = rdmatopo(&["diff", &host, &pod], &[]);
    assert_eq!(out.status.code(), Some(1));
    let t = text(&out);
    // Every changed value of the JSON is in the table whole.
    let json = rdmatopo(&["diff", &host, &pod, "--format", "json"], &[]);
    let doc: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let mut changed = 0;
    for f in doc["facts"].as_array().unwrap() {
        if f["changed"] == true {
            changed += 1;
            for side in ["a", "b"] {
                let v = f[side].as_str().unwrap();
                assert!(t.contains(v), "{side} of {} not whole:\n{t}", f["topic"]);
            }
        } else {
            assert!(!t.contains(&format!("  {}  ", f["topic"].as_str().unwrap())));
        }
    }
    assert!(changed > 5);
    // Some are longer than the A column (the list of uverbs nodes): they too are whole.
    assert!(
        doc["facts"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["a"].as_str().unwrap().chars().count() > 60)
    );
    assert!(!t.contains("(same)"));
}
