//! What an installed `rdmatopo` carries besides its commands: completion scripts that
//! their shells accept and that complete the real commands, a man page per command that
//! groff renders without a warning, and a `--version` that names the features and the
//! JSON schema ids of this build.
//!
//! zsh, fish and groff are installed by .ci/run; where one is missing here the check
//! that needs it says so on stderr and is skipped.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn rdmatopo(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_rdmatopo"))
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "rdmatopo {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// `program args…`, or None when the program is not installed.
fn try_run(program: &str, args: &[&str]) -> Option<Output> {
    match Command::new(program).args(args).output() {
        Ok(out) => Some(out),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            eprintln!("{program} is not installed: its check is skipped");
            None
        }
        Err(e) => panic!("{program}: {e}"),
    }
}

fn assert_ok(what: &str, out: &Output) {
    assert!(
        out.status.success() && out.stderr.is_empty(),
        "{what}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The command names listed under "Commands:" in `rdmatopo [SUB] --help`.
fn commands_of(path: &[&str]) -> Vec<String> {
    let mut args = path.to_vec();
    args.push("--help");
    let help = rdmatopo(&args);
    let listed = help
        .split("Commands:\n")
        .nth(1)
        .unwrap_or_else(|| panic!("no Commands: in {help}"));
    listed
        .lines()
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_string)
        .collect()
}

fn write_completion(dir: &Path, shell: &str) -> PathBuf {
    let path = dir.join(format!("rdmatopo.{shell}"));
    std::fs::write(&path, rdmatopo(&["completions", shell])).unwrap();
    path
}

#[test]
fn bash_completion_parses_and_completes_commands_and_k8s_subcommands() {
    let dir = tempfile::tempdir().unwrap();
    let script = write_completion(dir.path(), "bash");
    let script = script.to_str().unwrap();
    assert_ok("bash -n", &try_run("bash", &["-n", script]).unwrap());

    let complete = |words: &str| {
        let probe = format!(
            "source '{script}'; COMP_WORDS=({words} ''); COMP_CWORD=${{#COMP_WORDS[@]}}; \
             COMP_CWORD=$((COMP_CWORD-1)); _rdmatopo rdmatopo '' ''; printf '%s\\n' \"${{COMPREPLY[@]}}\""
        );
        let out = try_run("bash", &["-c", &probe]).unwrap();
        assert_ok(&format!("completing `{words}`"), &out);
        String::from_utf8(out.stdout).unwrap()
    };
    let top: BTreeSet<_> = complete("rdmatopo").lines().map(str::to_string).collect();
    for cmd in commands_of(&[]) {
        assert!(
            top.contains(&cmd),
            "bash does not complete `{cmd}`: {top:?}"
        );
    }
    let k8s: BTreeSet<_> = complete("rdmatopo k8s")
        .lines()
        .map(str::to_string)
        .collect();
    for cmd in commands_of(&["k8s"]) {
        assert!(
            k8s.contains(&cmd),
            "bash does not complete `k8s {cmd}`: {k8s:?}"
        );
    }
}

#[test]
fn zsh_completion_parses() {
    let dir = tempfile::tempdir().unwrap();
    let script = write_completion(dir.path(), "zsh");
    let text = std::fs::read_to_string(&script).unwrap();
    assert!(text.starts_with("#compdef rdmatopo"), "{}", &text[..80]);
    for cmd in commands_of(&["k8s"]) {
        assert!(
            text.contains(&format!("'{cmd}:")),
            "zsh script lacks k8s {cmd}"
        );
    }
    if let Some(out) = try_run("zsh", &["-n", script.to_str().unwrap()]) {
        assert_ok("zsh -n", &out);
    }
}

#[test]
fn fish_completion_parses_and_completes_commands() {
    let dir = tempfile::tempdir().unwrap();
    let script = write_completion(dir.path(), "fish");
    let script = script.to_str().unwrap();
    let Some(out) = try_run("fish", &["-n", script]) else {
        return;
    };
    assert_ok("fish -n", &out);
    // `complete -C` prints the candidates fish would offer, a tab before each description.
    let probe = format!("source '{script}'; complete -C 'rdmatopo k8s '");
    let out = try_run("fish", &["--no-config", "-c", &probe]).unwrap();
    assert_ok("fish complete -C", &out);
    let offered: BTreeSet<String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter_map(|l| l.split('\t').next())
        .map(str::to_string)
        .collect();
    for cmd in commands_of(&["k8s"]) {
        assert!(
            offered.contains(&cmd),
            "fish does not complete `k8s {cmd}`: {offered:?}"
        );
    }
}

#[test]
fn one_man_page_per_command_each_rendering_without_warnings() {
    let dir = tempfile::tempdir().unwrap();
    let listed = rdmatopo(&["man", "--dir", dir.path().to_str().unwrap()]);

    let mut expected = BTreeSet::from(["rdmatopo.1".to_string()]);
    for cmd in commands_of(&[]) {
        expected.insert(format!("rdmatopo-{cmd}.1"));
    }
    for cmd in commands_of(&["k8s"]) {
        expected.insert(format!("rdmatopo-k8s-{cmd}.1"));
    }
    let written: BTreeSet<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(written, expected);
    assert_eq!(listed.lines().count(), expected.len(), "{listed}");

    // The page of a command documents its own options.
    let nfd = std::fs::read_to_string(dir.path().join("rdmatopo-k8s-nfd.1")).unwrap();
    assert!(nfd.contains("\\-\\-label\\-prefix"), "{nfd}");
    // `rdmatopo man` alone prints the main page.
    assert_eq!(
        rdmatopo(&["man"]),
        std::fs::read_to_string(dir.path().join("rdmatopo.1")).unwrap()
    );

    for page in &written {
        let path = dir.path().join(page);
        // -k: preconv, as man(1) does; -ww: every warning; -z: no output, only checks.
        let Some(out) = try_run(
            "groff",
            &["-k", "-man", "-Tutf8", "-ww", "-z", path.to_str().unwrap()],
        ) else {
            return;
        };
        assert_ok(&format!("groff {page}"), &out);
    }
}

#[test]
fn man_pages_carry_the_changelog_date_of_this_version() {
    let version = env!("CARGO_PKG_VERSION");
    let changelog = std::fs::read_to_string(repo().join("CHANGELOG.md")).unwrap();
    let heading = format!("## [{version}] - ");
    let date = changelog
        .lines()
        .find_map(|l| l.strip_prefix(&heading))
        .unwrap_or_else(|| panic!("CHANGELOG.md has no `{heading}DATE` heading"));
    let page = rdmatopo(&["man"]);
    let th = page.lines().find(|l| l.starts_with(".TH ")).unwrap();
    // .TH TITLE SECTION DATE SOURCE MANUAL
    assert_eq!(th.split_whitespace().nth(3), Some(date), "{th}");
}

/// Every `"rdmatopo.NAME/N"` string literal in the crate's sources, unit-test files left
/// out: the JSON documents the crate can write.
fn schema_ids_in_sources() -> BTreeSet<String> {
    let literal = regex::Regex::new(r#""(rdmatopo\.[a-z-]+/[0-9]+)""#).unwrap();
    let mut ids = BTreeSet::new();
    let mut dirs = vec![PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_str().unwrap().to_string();
            if path.is_dir() && name != "tests" {
                dirs.push(path);
            } else if name.ends_with(".rs") && name != "tests.rs" {
                let text = std::fs::read_to_string(&path).unwrap();
                ids.extend(literal.captures_iter(&text).map(|c| c[1].to_string()));
            }
        }
    }
    ids
}

fn version_field<'a>(version: &'a str, label: &str) -> BTreeSet<&'a str> {
    let line = version
        .lines()
        .find_map(|l| l.strip_prefix(label))
        .unwrap_or_else(|| panic!("no `{label}` line in\n{version}"));
    line.split(", ").filter(|s| !s.is_empty()).collect()
}

#[test]
fn version_names_the_features_built_in() {
    let version = rdmatopo(&["--version"]);
    assert!(version.starts_with(&format!("rdmatopo {}\n", env!("CARGO_PKG_VERSION"))));
    let features = version_field(&version, "features: ");
    // The binary exists only with `cli`; the others are as this test was built.
    assert!(features.contains("cli"), "{version}");
    for (name, on) in [
        ("nvml", cfg!(feature = "nvml")),
        ("verbs", cfg!(feature = "verbs")),
        ("pci-names", cfg!(feature = "pci-names")),
    ] {
        assert_eq!(features.contains(name), on, "feature {name}: {version}");
    }
    assert!(!features.contains("default"), "{version}");
    // The C library, and with it how NVML is reached.
    let build = if cfg!(target_env = "musl") {
        "static (musl); NVML through rdmatopo-nvml beside it"
    } else {
        "dynamic (glibc)"
    };
    assert!(
        version.contains(&format!("\nbuild: {build}\n")),
        "{version}"
    );
    // -V stays one line.
    assert_eq!(
        rdmatopo(&["-V"]),
        format!("rdmatopo {}\n", env!("CARGO_PKG_VERSION"))
    );
}

#[test]
fn version_lists_every_json_schema_the_sources_write() {
    let version = rdmatopo(&["--version"]);
    let listed: BTreeSet<String> = version_field(&version, "json schemas: ")
        .into_iter()
        .map(str::to_string)
        .collect();
    assert_eq!(listed, schema_ids_in_sources());

    // And every schema the commands actually print on a fixture is among them.
    let root = repo().join("fixtures/h100-dgx/root.tar.gz");
    let root = root.to_str().unwrap();
    let schema_field = regex::Regex::new(r#""schema": "([^"]+)""#).unwrap();
    let mut printed = BTreeSet::new();
    for cmd in [
        "topo",
        "inventory",
        "doctor",
        "nccl-env",
        "gids",
        "netdevs",
        "qos",
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_rdmatopo"))
            .args([cmd, "--root", root, "--format", "json"])
            .output()
            .unwrap();
        let text = String::from_utf8(out.stdout).unwrap();
        let found: Vec<String> = schema_field
            .captures_iter(&text)
            .map(|c| c[1].to_string())
            .collect();
        assert!(!found.is_empty(), "`{cmd} --format json` printed no schema");
        printed.extend(found);
    }
    let unlisted: Vec<_> = printed.difference(&listed).collect();
    assert!(
        unlisted.is_empty(),
        "printed but not in --version: {unlisted:?}"
    );
}
