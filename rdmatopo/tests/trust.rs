//! On disk, where reads are kernel-checked (`openat2`), the directories a link's target
//! names are taken on trust ([`Sysfs::resolve_for_reads`]). An in-memory tree never
//! takes anything on trust. So on any tree, hostile ones included, the two must give
//! the same answers, and the disk must never give a byte from outside its root.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use proptest::prelude::*;
use rdmatopo::sysfs::{MemTree, Sysfs, join};
use std::path::Path;

/// Directories that may exist (under `/sys/devices`), parents first.
const DIRS: [&str; 8] = ["a", "a/a", "a/b", "b", "b/a", "b/b", "c", "c/a"];

/// What one of [`DIRS`] may be instead of a directory: a symlink to one of these
/// (relative to the link's directory, as sysfs writes them, or absolute). `@OUT` is
/// replaced by a directory outside the root holding a secret in `a/` and `b/`.
const LINK_TARGETS: [&str; 12] = [
    "a",
    "b",
    "c",
    "../b",
    "../a/b",
    "../../devices/b",
    "/sys/devices/b",
    "../../../../../..",
    "@OUT",
    "b/..",
    "a/../../..",
    "loop",
];

/// Targets of the bus links below `../../../devices/`.
const BUS_TARGETS: [&str; 10] = [
    "a/a",
    "a/b",
    "b/a",
    "b/b",
    "c/a",
    "a/../b",
    "b/a/../../a/b",
    "c/a/x",
    "a",
    "c/../../devices/a/a",
];

const SECRET: &str = "outside the root";

#[derive(Debug, Clone)]
struct Shape {
    /// Per directory of [`DIRS`]: `None` a directory, `Some(i)` a link to `LINK_TARGETS[i]`.
    dirs: Vec<Option<usize>>,
    /// Per bus link, its target in [`BUS_TARGETS`].
    bus: Vec<usize>,
}

fn shapes() -> impl Strategy<Value = Shape> {
    let dir = prop_oneof![3 => Just(None), 2 => (0..LINK_TARGETS.len()).prop_map(Some)];
    (
        proptest::collection::vec(dir, DIRS.len()),
        proptest::collection::vec(0..BUS_TARGETS.len(), 1..5),
    )
        .prop_map(|(dirs, bus)| Shape { dirs, bus })
}

/// The tree of `shape`, in memory; `out` names the directory outside the root.
fn tree(shape: &Shape, out: &Path) -> MemTree {
    let mut t = MemTree::new();
    t.file("/sys/devices/good/class", "good\n");
    t.link("/sys/bus/pci/devices/good", "../../../devices/good");
    for (i, (dir, kind)) in DIRS.iter().zip(&shape.dirs).enumerate() {
        // Beneath a link there is nothing of its own.
        if DIRS[..i]
            .iter()
            .zip(&shape.dirs)
            .any(|(p, k)| k.is_some() && dir.starts_with(&format!("{p}/")))
        {
            continue;
        }
        let path = &format!("/sys/devices/{dir}");
        match kind {
            None => {
                t.file(&join(path, "class"), &format!("{path}\n"));
                t.link(&join(path, "up"), "..");
            }
            Some(target) => {
                let target = LINK_TARGETS[*target].replace("@OUT", &out.display().to_string());
                t.link(path, &target);
            }
        }
    }
    for (i, target) in shape.bus.iter().enumerate() {
        t.link(
            &format!("/sys/bus/pci/devices/f{i}"),
            &format!("../../../devices/{}", BUS_TARGETS[*target]),
        );
    }
    t
}

fn write_to_disk(tree: &MemTree, root: &Path) {
    use rdmatopo::sysfs::MemEntry;
    for (path, entry) in tree.entries() {
        let host = root.join(path.trim_start_matches('/'));
        match entry {
            MemEntry::Dir => std::fs::create_dir_all(&host).unwrap(),
            MemEntry::File(bytes) => {
                std::fs::create_dir_all(host.parent().unwrap()).unwrap();
                std::fs::write(&host, bytes).unwrap();
            }
            MemEntry::Symlink(target) => {
                std::fs::create_dir_all(host.parent().unwrap()).unwrap();
                std::os::unix::fs::symlink(target, &host).unwrap();
            }
            _ => unreachable!("the trees here hold files, directories and links"),
        }
    }
}

/// What discovery does with each bus link, each answer as text (`Err` as "error"),
/// with and without listing the bus directory first (as discovery does: links it has
/// listed resolve in one pass). Each use gets a fresh [`Sysfs`]: one use that finds a
/// lie makes the root careful from then on, which would hide whether the next use
/// checks for itself.
fn answers(open: impl Fn() -> Sysfs, links: usize) -> Vec<String> {
    type Use = fn(&Sysfs, &str) -> Result<String, rdmatopo::sysfs::SysfsError>;
    // Each use, and its answer where the link does not resolve.
    let uses: [(Use, &str); 5] = [
        (|fs, dir| fs.list(dir).map(|names| names.join(",")), "error"),
        (|fs, dir| fs.read_link(&join(dir, "up")), "error"),
        (
            |fs, dir| Ok(fs.exists(&join(dir, "class")).to_string()),
            "false",
        ),
        (|fs, dir| fs.read(&join(dir, "up/class")), "error"),
        (|fs, dir| fs.read(&join(dir, "class")), "error"),
    ];
    let mut out = Vec::new();
    for i in 0..links {
        let link = format!("/sys/bus/pci/devices/f{i}");
        for ((use_it, unresolved), listed) in uses.into_iter().flat_map(|u| [(u, false), (u, true)])
        {
            let fs = open();
            // A good read first: on disk, reads are now known to be kernel-checked.
            out.push(
                fs.read("/sys/bus/pci/devices/good/class")
                    .unwrap_or_default(),
            );
            if listed {
                out.push(
                    fs.list("/sys/bus/pci/devices")
                        .unwrap_or_default()
                        .join(","),
                );
            }
            // Taken on trust, a path may resolve where a checked walk fails: then every
            // use of it fails too, which is what is compared.
            out.push(match fs.resolve_for_reads(&link) {
                Ok(dir) => use_it(&fs, &dir).unwrap_or_else(|_| "error".into()),
                Err(_) => unresolved.into(),
            });
        }
        let canonical = open().canonicalize(&link);
        out.push(canonical.unwrap_or_else(|_| "error".into()));
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(192))]

    #[test]
    fn trusting_link_targets_changes_no_answer(shape in shapes()) {
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("class"), SECRET).unwrap();
        for dir in ["a", "b"] {
            std::fs::create_dir_all(outside.path().join(dir)).unwrap();
            std::fs::write(outside.path().join(dir).join("class"), SECRET).unwrap();
            let up = outside.path().join(dir).join("up");
            std::os::unix::fs::symlink("../link outside the root", up).unwrap();
        }
        let root = tempfile::tempdir().unwrap();
        let t = tree(&shape, outside.path());
        write_to_disk(&t, root.path());
        let on_disk = answers(|| Sysfs::at(root.path()), shape.bus.len());
        let in_memory = answers(|| Sysfs::memory(t.clone(), "mem"), shape.bus.len());
        prop_assert!(on_disk.iter().all(|a| !a.contains("outside")), "{on_disk:?}");
        prop_assert_eq!(on_disk, in_memory);
    }
}
