//! Every fixture is stored as one archive, `fixtures/<name>/root.tar.gz` (pod and fault
//! variants as overlays on their base). Most Rust tests read the archive; the golden and
//! schema tests, the C and the Python tests read the directory that
//! `fixtures/tools/unpack.py` makes of it. Both must be the same machine: the model
//! (`inventory`) and the doctor's judgement, evidence paths included, agree on every
//! fixture.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use std::path::Path;
use std::process::Command;

fn run(args: &[&str], root: &Path) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_rdmatopo"))
        .args(args)
        .arg("--root")
        .arg(root)
        .env_remove("RDMATOPO_ROOT")
        .output()
        .unwrap_or_else(|e| panic!("rdmatopo: {e}"));
    assert!(
        out.status.code().is_some_and(|c| c < 3),
        "rdmatopo {args:?} --root {} failed: {}",
        root.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    // The root is named in headers; the rest must be byte-identical.
    String::from_utf8_lossy(&out.stdout).replace(&root.display().to_string(), "<root>")
}

#[test]
fn archive_and_directory_are_the_same_machine() {
    let dir = support::fixtures_dir();
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| {
            let e = e.ok()?;
            e.path()
                .join("root.tar.gz")
                .is_file()
                .then(|| e.file_name().to_string_lossy().into_owned())
        })
        .collect();
    names.sort();
    assert!(names.len() >= 19, "fixture archives missing: {names:?}");
    let overlays = names
        .iter()
        .filter(|n| {
            let bytes = std::fs::read(dir.join(n).join("root.tar.gz")).unwrap();
            let tree =
                rdmatopo::snapshot::load_reader(flate2::read::GzDecoder::new(bytes.as_slice()), n);
            matches!(tree, Err(rdmatopo::snapshot::SnapshotError::NotASnapshot { reason, .. })
                if reason.contains("overlay"))
        })
        .count();
    assert!(overlays >= 10, "only {overlays} fixtures are overlays");
    support::par_map(&names, |name| {
        let archive = dir.join(name).join("root.tar.gz");
        let tree = support::unpacked(&dir.join(name));
        for args in [
            &["inventory", "--format", "json"][..],
            &["doctor", "--format", "json"][..],
        ] {
            assert_eq!(
                run(args, &archive),
                run(args, &tree),
                "{name}: `rdmatopo {}` differs between the archive and its directory form",
                args.join(" ")
            );
        }
    });
}
