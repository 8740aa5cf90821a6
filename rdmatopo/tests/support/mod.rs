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

/// `f` of each item, on as many threads as the machine has (no more than the items), in
/// the items' order. A test that runs the command over every fixture is one test, and
/// `cargo test` runs one test binary at a time: alone, it would keep one core busy.
/// A panic in `f` fails the test, as it would on the test's own thread.
#[allow(dead_code)] // not every test binary that includes this module uses it
pub fn par_map<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};
    let threads = std::thread::available_parallelism()
        .map_or(1, usize::from)
        .min(items.len())
        .max(1);
    let next = AtomicUsize::new(0);
    let done: Mutex<Vec<(usize, R)>> = Mutex::new(Vec::with_capacity(items.len()));
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(item) = items.get(i) else { break };
                    let result = f(item);
                    done.lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push((i, result));
                }
            });
        }
    });
    let mut done = done.into_inner().unwrap_or_else(|e| e.into_inner());
    done.sort_by_key(|(i, _)| *i);
    done.into_iter().map(|(_, r)| r).collect()
}
