//! The fixtures, read as the product reads them.
//!
//! Each fixture is one archive, `fixtures/<name>/root.tar.gz` (an overlay on its base for
//! pod and fault variants), and most tests read it directly, as `--root` does (in process
//! through `open` and `discover`: each archive unpacked into memory once). The golden and
//! schema tests run the command on its directory form (`unpacked`, written from the
//! archive by the crate's reader), as it reads a machine's `/sys`; tests/archives.rs
//! holds the two forms to one answer.

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

/// The directory form of fixture `dir` (`<dir>/root`), as a machine's `/sys` is read.
/// The first call writes every fixture's tree from its archive with the crate's own
/// reader (`snapshot::load`), where the archives changed since the last write:
/// `<dir>/.root.stamp` names the archive chain and its SHA-256, in the form
/// `fixtures/tools/unpack.py` writes for the C and Python tests, so either's tree
/// serves the other.
pub fn unpacked(dir: &Path) -> PathBuf {
    static UNPACKED: OnceLock<()> = OnceLock::new();
    UNPACKED.get_or_init(|| {
        par_map(&fixture_dirs(), |d| unpack(d));
    });
    let root = dir.join("root");
    assert!(root.is_dir(), "{}: not unpacked", root.display());
    root
}

/// Write `<dir>/root` from `<dir>/root.tar.gz` unless its stamp says it is current.
fn unpack(dir: &Path) {
    let root = dir.join("root");
    let stamp = dir.join(".root.stamp");
    if root.is_dir() && is_current(&stamp) {
        return;
    }
    let archive = dir.join("root.tar.gz");
    let (tree, chain) = rdmatopo::snapshot::load_with_bases(&archive)
        .unwrap_or_else(|e| panic!("{}: {e}", archive.display()));
    // Written beside its place and renamed into it: a reader never sees half a tree.
    let tmp = dir.join(format!("root.tmp-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    write_tree(&tree, &tmp);
    if root.exists() {
        std::fs::remove_dir_all(&root).unwrap_or_else(|e| panic!("{}: {e}", root.display()));
    }
    std::fs::rename(&tmp, &root).unwrap_or_else(|e| panic!("{}: {e}", root.display()));
    let record = serde_json::json!({
        "chain": chain.iter().map(|p| p.display().to_string()).collect::<Vec<_>>(),
        "sha256": sha256_of(&chain),
    });
    std::fs::write(&stamp, format!("{record}\n"))
        .unwrap_or_else(|e| panic!("{}: {e}", stamp.display()));
}

/// Whether the archives a stamp names still have the SHA-256 it recorded.
fn is_current(stamp: &Path) -> bool {
    let Some(record) = std::fs::read(stamp)
        .ok()
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
    else {
        return false;
    };
    let Some(chain) = record["chain"].as_array() else {
        return false;
    };
    let chain: Option<Vec<PathBuf>> = chain
        .iter()
        .map(|p| p.as_str().map(PathBuf::from))
        .collect();
    chain.is_some_and(|chain| {
        chain.iter().all(|p| p.is_file()) && record["sha256"] == sha256_of(&chain)
    })
}

/// SHA-256 over the bytes of each file in turn, in hex.
fn sha256_of(files: &[PathBuf]) -> String {
    let mut digest = ring::digest::Context::new(&ring::digest::SHA256);
    for f in files {
        digest.update(&std::fs::read(f).unwrap_or_else(|e| panic!("{}: {e}", f.display())));
    }
    digest
        .finish()
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Create `tree` on disk at `to` (a directory that must not exist yet).
pub fn write_tree(tree: &MemTree, to: &Path) {
    use rdmatopo::sysfs::MemEntry;
    for (path, entry) in tree.entries() {
        let at = to.join(path.trim_start_matches('/'));
        let written = match entry {
            MemEntry::Dir => std::fs::create_dir(&at),
            MemEntry::File(bytes) => std::fs::write(&at, bytes),
            MemEntry::Symlink(target) => std::os::unix::fs::symlink(target, &at),
            // An archive of plain files, directories and links is all a fixture holds.
            MemEntry::Other | MemEntry::Unreadable(_) => {
                panic!("{}: {path}: {entry:?} in a fixture", to.display())
            }
        };
        written.unwrap_or_else(|e| panic!("{}: {e}", at.display()));
    }
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
