//! The fixtures' directory form for the integration tests.
//!
//! Each fixture is stored as `fixtures/<name>/root.tar.gz` (an overlay for pod and fault
//! variants). The product reads those directly (tests/archives.rs checks it on every
//! fixture); most tests read the unpacked `fixtures/<name>/root/` instead, which
//! `fixtures/tools/unpack.py` writes once and keeps until an archive changes.

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

/// `fixtures/`, with every fixture's `root/` unpacked from its archive.
#[allow(clippy::panic)] // a test cannot run without its fixtures
pub fn fixtures_dir() -> PathBuf {
    static UNPACKED: OnceLock<PathBuf> = OnceLock::new();
    UNPACKED
        .get_or_init(|| {
            let dir = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures"));
            let script = dir.join("tools/unpack.py");
            let out = Command::new("python3")
                .arg(&script)
                .output()
                .unwrap_or_else(|e| panic!("python3 {}: {e}", script.display()));
            assert!(
                out.status.success(),
                "python3 {} failed:\n{}",
                script.display(),
                String::from_utf8_lossy(&out.stderr)
            );
            dir
        })
        .clone()
}

/// `tree` without any PCI function's `uevent`, as a capture that leaves it out: a
/// reader then takes each function's class and ids from its attribute files.
#[allow(dead_code)] // not every test binary that includes this module uses it
pub fn without_pci_uevents(tree: &rdmatopo::sysfs::MemTree) -> rdmatopo::sysfs::MemTree {
    let mut without = tree.clone();
    let uevents: Vec<String> = tree
        .entries()
        .map(|(p, _)| p.to_string())
        .filter(|p| p.starts_with("/sys/devices/pci") && p.ends_with("/uevent"))
        .collect();
    for p in &uevents {
        without.remove(p);
    }
    without
}
