//! Every fixture is stored as one archive, `fixtures/<name>/root.tar.gz` (pod and fault
//! variants as overlays on their base). Most Rust tests read the archive; the golden and
//! schema tests read the directory `support::unpacked` writes of it, the C and Python
//! tests the one `fixtures/tools/unpack.py` writes (either serves the other). Both forms
//! must be the same machine: the model (`inventory`) and the doctor's judgement, evidence
//! paths included, agree on every fixture; and the tree written is the one GNU tar
//! unpacks (rdmatopo-py/tests/test_fixture_archives.py holds unpack.py's to the archive).

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

/// Every entry under `dir`, by path: a file's bytes, a link's target, or a directory.
fn on_disk(dir: &Path) -> std::collections::BTreeMap<String, String> {
    let mut entries = std::collections::BTreeMap::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let path = e.unwrap().path();
            let name = path.strip_prefix(dir).unwrap().display().to_string();
            let kind = std::fs::symlink_metadata(&path).unwrap().file_type();
            let what = if kind.is_symlink() {
                format!("-> {}", std::fs::read_link(&path).unwrap().display())
            } else if kind.is_dir() {
                todo.push(path);
                "dir".to_string()
            } else {
                assert!(kind.is_file(), "{}: not a file", path.display());
                String::from_utf8_lossy(&std::fs::read(&path).unwrap()).into_owned()
            };
            entries.insert(name, what);
        }
    }
    entries
}

/// The directory form the Rust tests write (`support::unpacked`) is the one GNU tar
/// makes of the archive, entry for entry.
#[test]
fn the_written_tree_is_the_one_tar_unpacks() {
    let archive = support::root("workstation-2gpu");
    let scratch = tempfile::tempdir().unwrap();
    let written = scratch.path().join("written");
    support::write_tree(&rdmatopo::snapshot::load(&archive).unwrap(), &written);
    let out = Command::new("tar")
        .arg("-xzf")
        .arg(&archive)
        .arg("-C")
        .arg(scratch.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let by_tar = on_disk(&scratch.path().join("root"));
    assert!(by_tar.len() > 1000, "{} entries", by_tar.len());
    assert!(
        by_tar.values().any(|v| v.starts_with("-> ")),
        "no link in the fixture"
    );
    assert_eq!(on_disk(&written), by_tar);
}
