//! The fixtures, read as the product reads them.
//!
//! Each fixture is one archive, `fixtures/<name>/root.tar.gz` (an overlay on its base for
//! pod and fault variants), and most tests read it directly, as `--root` does (in process
//! through `open` and `discover`: each archive unpacked into memory once). The golden and
//! schema tests run the command on its directory form (`unpacked`), as it reads a
//! machine's `/sys`; tests/archives.rs holds the two forms to one answer.

// A test cannot run without its fixtures: a missing one panics, naming the path.
#![allow(clippy::panic)]

pub mod goldens;

use rdmatopo::Sysfs;
use rdmatopo::sysfs::MemTree;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

/// `fixtures/`.
pub fn fixtures_dir() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures"))
}

/// Every fixture directory (each folder of `fixtures/` but `tools/`), sorted. A folder
/// without its `root.tar.gz` fails the test rather than being passed over.
pub fn fixture_dirs() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(fixtures_dir())
        .unwrap_or_else(|e| panic!("{}: {e}", fixtures_dir().display()))
        .filter_map(|e| Some(e.ok()?.path()))
        .filter(|p| p.is_dir() && !p.ends_with("tools"))
        .collect();
    dirs.sort();
    assert!(
        !dirs.is_empty(),
        "no fixture under {}",
        fixtures_dir().display()
    );
    for dir in &dirs {
        let archive = dir.join("root.tar.gz");
        assert!(
            archive.is_file(),
            "fixture without its archive: {}",
            archive.display()
        );
    }
    dirs
}

/// Every fixture's archive, sorted by fixture name.
pub fn fixture_roots() -> Vec<PathBuf> {
    fixture_dirs()
        .into_iter()
        .map(|d| d.join("root.tar.gz"))
        .collect()
}

/// The archive of fixture `name`.
pub fn root(name: &str) -> PathBuf {
    let archive = fixtures_dir().join(name).join("root.tar.gz");
    assert!(archive.is_file(), "no fixture {}", archive.display());
    archive
}

/// The directory form of fixture `dir` (`<dir>/root`), as `fixtures/tools/unpack.py`
/// writes it for the C and Python tests; the script runs once per test program and
/// replaces only what its archive no longer matches.
pub fn unpacked(dir: &Path) -> PathBuf {
    static UNPACKED: OnceLock<()> = OnceLock::new();
    UNPACKED.get_or_init(|| {
        let script = fixtures_dir().join("tools/unpack.py");
        let out = std::process::Command::new("python3")
            .arg(&script)
            .output()
            .unwrap_or_else(|e| panic!("python3 {}: {e}", script.display()));
        assert!(
            out.status.success(),
            "python3 {} failed:\n{}",
            script.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    });
    let root = dir.join("root");
    assert!(root.is_dir(), "{}: not unpacked", root.display());
    root
}

/// A reader of the archive `root`, as `rdmatopo::open_root` makes it; each archive is
/// unpacked into memory once per test run.
pub fn open(root: &Path) -> Sysfs {
    static TREES: OnceLock<Mutex<HashMap<PathBuf, MemTree>>> = OnceLock::new();
    let trees = TREES.get_or_init(Mutex::default);
    let cached = trees
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(root)
        .cloned();
    let tree = cached.unwrap_or_else(|| {
        let tree =
            rdmatopo::snapshot::load(root).unwrap_or_else(|e| panic!("{}: {e}", root.display()));
        trees
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(root.to_path_buf(), tree.clone());
        tree
    });
    Sysfs::memory(tree, root.display().to_string())
}

/// What `rdmatopo::discover` reads of the archive `root`, its tree unpacked once per
/// test run ([`open`]).
pub fn discover(root: &Path) -> rdmatopo::Topology {
    discover_in(root, rdmatopo::View::All)
}

/// What `rdmatopo::discover_in` reads of the archive `root` for `view` ([`open`]).
pub fn discover_in(root: &Path, view: rdmatopo::View) -> rdmatopo::Topology {
    rdmatopo::discover_view(&open(root), rdmatopo::Needs::ALL, view)
        .unwrap_or_else(|e| panic!("{}: {e}", root.display()))
}

/// `tree` without any PCI function's `uevent`, as a capture that leaves it out: a
/// reader then takes each function's class and ids from its attribute files.
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
/// the items' order. A test that runs the command over every fixture is one test: on one
/// thread, it would be the run's last test by far.
/// A panic in `f` fails the test, as it would on the test's own thread.
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
