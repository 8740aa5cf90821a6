//! Broken and hostile trees: what real machines (hot-unplug, odd firmware, captures
//! cut short) and attackers (a writable capture handed to a privileged tool) produce.
//!
//! Each case starts from the small realistic machine of `rdmatopo::fuzzing::base_machine`
//! (two host bridges, a PCIe switch with a GPU and a ConnectX-7 PF plus one VF, a
//! second GPU, RoCE GIDs, a bond, a container's process view), written to a temporary
//! directory with std::fs, or kept in memory where a filesystem cannot express the
//! fault (EACCES for root). For every case: discovery returns (no panic, no hang), its
//! work stays bounded, and the fault shows up as a diagnostic naming the path; the CLI
//! prints a message or a clean result, never a backtrace.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use rdmatopo::fuzzing::base_machine;
use rdmatopo::model::{Diagnostic, Severity};
use rdmatopo::sysfs::{MemEntry, MemTree, Sysfs};
use rdmatopo::{Topology, discover_fs};
use std::io::Read;
use std::os::unix::fs::symlink;
use std::path::PathBuf;
use std::process::Command;
use std::sync::mpsc;
use std::time::Duration;

/// Logical paths of the base machine's devices.
const SW: &str = "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0";
const GPU0: &str = "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:00.0/0000:03:00.0";
const PF: &str = "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:01.0/0000:04:00.0";
/// The RDMA device as discovery names it (diagnostics use the class path)...
const IB: &str = "/sys/class/infiniband/mlx5_0";
/// ...and where it really is (in-memory trees must be edited there).
const IB_DEV: &str =
    "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:01.0/0000:04:00.0/infiniband/mlx5_0";

/// Longest any single case may take before it counts as a hang (generous: CI has two
/// shared cores and builds in debug).
const HANG: Duration = Duration::from_secs(120);

/// A base machine on disk, to be damaged.
struct DiskTree {
    dir: tempfile::TempDir,
}

impl DiskTree {
    fn new() -> Self {
        let t = Self {
            dir: tempfile::tempdir().unwrap(),
        };
        t.materialize(&base_machine());
        t
    }

    fn root(&self) -> PathBuf {
        self.dir.path().join("root")
    }

    fn host(&self, logical: &str) -> PathBuf {
        self.root().join(logical.trim_start_matches('/'))
    }

    fn materialize(&self, tree: &MemTree) {
        for (path, entry) in tree.entries() {
            match entry {
                MemEntry::Dir => std::fs::create_dir_all(self.host(path)).unwrap(),
                MemEntry::File(bytes) => self.write(path, bytes),
                MemEntry::Symlink(target) => self.link(path, target),
                MemEntry::Other => self.fifo(path),
                // The fixtures' convention: an attribute that fails with EINVAL is absent.
                MemEntry::Unreadable(_) => {}
            }
        }
    }

    fn parent(&self, logical: &str) -> PathBuf {
        let p = self.host(logical);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        p
    }

    fn write(&self, logical: &str, bytes: &[u8]) {
        let p = self.parent(logical);
        let _ = std::fs::remove_file(&p);
        std::fs::write(p, bytes).unwrap();
    }

    fn link(&self, logical: &str, target: &str) {
        let p = self.parent(logical);
        let _ = std::fs::remove_file(&p);
        symlink(target, p).unwrap();
    }

    fn fifo(&self, logical: &str) {
        let p = self.parent(logical);
        let _ = std::fs::remove_file(&p);
        let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: `c` is a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    }

    fn remove(&self, logical: &str) {
        let p = self.host(logical);
        if p.is_dir() && !p.is_symlink() {
            std::fs::remove_dir_all(p).unwrap();
        } else {
            std::fs::remove_file(p).unwrap();
        }
    }

    fn discover(&self) -> Topology {
        let root = self.root();
        bounded(move || discover_fs(&Sysfs::at(root)).expect("a sysfs tree"))
    }
}

/// Run `f` on another thread; fail instead of hanging.
fn bounded<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(HANG)
        .expect("discovery hung (or panicked: see above)")
}

fn discover_mem(tree: MemTree) -> Topology {
    bounded(move || discover_fs(&Sysfs::memory(tree, "mem")).expect("a sysfs tree"))
}

/// The diagnostic about exactly `path`; fails listing what there is.
fn diag<'a>(topo: &'a Topology, path: &str) -> &'a Diagnostic {
    topo.diagnostics
        .iter()
        .find(|d| d.path.as_deref() == Some(path))
        .unwrap_or_else(|| panic!("no diagnostic for {path}; have {:#?}", topo.diagnostics))
}

fn has_pci(topo: &Topology, addr: &str) -> bool {
    topo.pci_function(addr.parse().unwrap()).is_some()
}

/// `rdmatopo <args>`: exit code, stdout, stderr, and the process's peak RSS in KiB
/// (from `wait4`, so it is this child's own, not the test binary's other children's).
fn cli(args: &[&str]) -> (i32, String, String, i64) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_rdmatopo"))
        .args(args)
        .env_remove("RDMATOPO_ROOT")
        .env("RUST_BACKTRACE", "1")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let drain = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = r.read_to_end(&mut v);
            String::from_utf8_lossy(&v).into_owned()
        })
    };
    let out = drain(Box::new(child.stdout.take().unwrap()));
    let err = drain(Box::new(child.stderr.take().unwrap()));
    let pid = child.id() as libc::pid_t;
    let (status, rss_kib) = bounded(move || {
        let mut status = 0;
        // SAFETY: an all-zero rusage is a valid value; wait4 fills it in.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: `pid` is our child, not yet reaped; both pointers are valid.
        let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        assert_eq!(r, pid, "wait4");
        (status, usage.ru_maxrss)
    });
    drop(child);
    let (out, stderr) = (out.join().unwrap(), err.join().unwrap());
    assert!(
        libc::WIFEXITED(status),
        "{args:?} was killed by a signal: {stderr}"
    );
    let code = libc::WEXITSTATUS(status);
    for bad in [
        "panicked",
        "stack backtrace",
        "RUST_BACKTRACE",
        "internal error",
    ] {
        assert!(!stderr.contains(bad), "{args:?} printed {bad:?}:\n{stderr}");
    }
    assert_ne!(code, 101, "{args:?} panicked");
    (code, out, stderr, rss_kib)
}

fn cli_on(tree: &DiskTree, cmd: &str) -> (i32, String, String) {
    let root = tree.root();
    let (code, out, err, _) = cli(&[cmd, "--root", root.to_str().unwrap(), "--format", "json"]);
    assert_eq!(code, 0, "{cmd} on a damaged tree still runs: {err}");
    assert!(!out.is_empty());
    (code, out, err)
}

#[test]
fn the_undamaged_base_machine_has_no_warnings() {
    let topo = DiskTree::new().discover();
    assert_eq!(
        (topo.gpus.len(), topo.pci.len(), topo.rdma_devices.len()),
        (2, 9, 1)
    );
    let warnings: Vec<_> = topo
        .diagnostics
        .iter()
        .filter(|d| d.severity >= Severity::Warning)
        .collect();
    assert!(warnings.is_empty(), "{warnings:#?}");
}

#[test]
fn symlink_loops_end_with_a_diagnostic() {
    let t = DiskTree::new();
    t.link("/sys/class/infiniband/mlx5_9", "mlx5_9");
    t.link(
        "/sys/bus/pci/devices/0000:09:00.0",
        "../../../devices/loop/a",
    );
    t.link("/sys/devices/loop/a", "b");
    t.link("/sys/devices/loop/b", "a");
    t.link(&format!("{PF}/net/eth0/mtu"), "mtu");
    let topo = t.discover();
    let d = diag(&topo, "/sys/bus/pci/devices/0000:09:00.0");
    assert!(
        d.message.contains("too many levels of symbolic links"),
        "{d:?}"
    );
    assert!(
        topo.diagnostics.iter().any(|d| d
            .path
            .as_deref()
            .is_some_and(|p| p.starts_with("/sys/class/infiniband/mlx5_9"))),
        "{:#?}",
        topo.diagnostics
    );
    assert!(diag(&topo, &format!("{PF}/net/eth0/mtu")).severity >= Severity::Warning);
    assert!(
        topo.rdma_device("mlx5_0").is_some(),
        "the good device is still there"
    );
    cli_on(&t, "inventory");
}

#[test]
fn symlinks_never_leave_the_root() {
    let t = DiskTree::new();
    // A complete GPU outside the root, reachable only by leaving it.
    let outside = t.dir.path().join("outside/0000:66:00.0");
    std::fs::create_dir_all(&outside).unwrap();
    for (f, v) in [
        ("vendor", "0x10de\n"),
        ("device", "0x2330\n"),
        ("class", "0x030200\n"),
    ] {
        std::fs::write(outside.join(f), v).unwrap();
    }
    // Through `..` (one more than the depth), and absolutely (host path).
    t.link(
        "/sys/bus/pci/devices/0000:66:00.0",
        "../../../../outside/0000:66:00.0",
    );
    t.link(
        "/sys/bus/pci/devices/0000:67:00.0",
        outside.to_str().unwrap(),
    );
    t.link("/sys/class/net/evil", "/etc");
    let topo = t.discover();
    assert!(!has_pci(&topo, "0000:66:00.0") && !has_pci(&topo, "0000:67:00.0"));
    // `..` stops at the root: the link names /outside inside it, which is missing.
    let d = diag(&topo, "/outside");
    assert!(d.message.contains("not found"), "{d:?}");
    assert!(
        !topo
            .netdevs
            .iter()
            .any(|n| n.name == "evil" && n.mtu.is_some())
    );
    cli_on(&t, "topo");
}

#[test]
fn a_one_gib_attribute_is_refused_without_being_read() {
    let t = DiskTree::new();
    for path in [format!("{GPU0}/numa_node"), format!("{IB}/ports/1/rate")] {
        let f = std::fs::File::create(t.host(&path)).unwrap();
        f.set_len(1 << 30).unwrap(); // sparse: no disk, no page cache
    }
    let topo = t.discover();
    for path in [format!("{GPU0}/numa_node"), format!("{IB}/ports/1/rate")] {
        let d = diag(&topo, &path);
        assert!(d.message.contains("larger than 65536 bytes"), "{d:?}");
    }
    assert_eq!(topo.gpus.len(), 2, "a bad numa_node loses only that fact");
    let root = t.root();
    let (code, _, _, rss_kib) = cli(&["inventory", "--root", root.to_str().unwrap()]);
    assert_eq!(code, 0);
    assert!(rss_kib < 64 * 1024, "peak RSS {rss_kib} KiB");
}

/// Files read whole with a larger limit (the NVML snapshot, `mountinfo`, `environ`):
/// a 1 GiB one costs at most its limit in memory, then is refused with a diagnostic.
#[test]
fn oversized_whole_files_cost_at_most_their_limit() {
    let t = DiskTree::new();
    for path in [
        "/rdmatopo/nvml.json",
        "/proc/self/mountinfo",
        "/proc/self/environ",
    ] {
        let f = std::fs::File::create(t.host(path)).unwrap();
        f.set_len(1 << 30).unwrap();
    }
    let topo = t.discover();
    assert!(topo.nvml.is_none());
    assert!(
        topo.diagnostics
            .iter()
            .any(|d| d.message.contains("/rdmatopo/nvml.json") && d.message.contains("larger than")),
        "{:#?}",
        topo.diagnostics
    );
    let root = t.root();
    let (code, _, _, rss_kib) = cli(&["inventory", "--root", root.to_str().unwrap()]);
    assert_eq!(code, 0);
    // The largest limit is the NVML snapshot's 64 MiB.
    assert!(rss_kib < 100 * 1024, "peak RSS {rss_kib} KiB");
}

#[test]
fn a_fifo_where_a_file_should_be_does_not_hang() {
    let t = DiskTree::new();
    let fifos = [
        format!("{GPU0}/vendor"),
        format!("{IB}/ports/1/gids/1"),
        "/proc/self/status".to_string(),
        "/rdmatopo/nvml.json".to_string(),
    ];
    for f in &fifos {
        t.fifo(f);
    }
    let topo = t.discover();
    for f in &fifos[..3] {
        assert!(diag(&topo, f).message.contains("not a regular file"), "{f}");
    }
    assert!(!has_pci(&topo, "0000:03:00.0"), "no vendor, no function");
    assert!(
        topo.diagnostics
            .iter()
            .any(|d| d.code == "source-failed" && d.message.contains("/rdmatopo/nvml.json")),
        "{:#?}",
        topo.diagnostics
    );
    cli_on(&t, "topo");
}

#[test]
fn binary_garbage_is_a_parse_diagnostic() {
    let t = DiskTree::new();
    // A fixed pseudo-random byte string, invalid UTF-8 included.
    let garbage: Vec<u8> = (0u32..512)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let files = [
        format!("{PF}/class"),
        format!("{IB}/ports/1/rate"),
        format!("{IB}/ports/1/gids/0"),
        format!("{GPU0}/local_cpulist"),
        "/sys/devices/system/node/node0/cpulist".to_string(),
    ];
    for f in &files {
        t.write(f, &garbage);
    }
    t.write("/proc/self/status", &garbage);
    t.write("/rdmatopo/nvml.json", &garbage);
    let topo = t.discover();
    for f in &files {
        let d = diag(&topo, f);
        assert_eq!(d.code, "unparsable-attribute", "{d:?}");
        assert!(
            d.message.len() < 400,
            "the message quotes a short excerpt: {d:?}"
        );
    }
    assert!(!has_pci(&topo, "0000:04:00.0"));
    assert!(topo.process.cpus_allowed.is_none());
    cli_on(&t, "inventory");
}

/// A `class` wider than the 24 bits the kernel prints: a diagnostic, and a model whose
/// JSON reads back (the JSON's `class` holds 24 bits; found by the `discover` fuzzer).
#[test]
fn a_class_of_more_than_24_bits_is_a_parse_diagnostic() {
    let t = DiskTree::new();
    t.write(&format!("{PF}/class"), b"0x11258a63\n");
    let topo = t.discover();
    assert_eq!(
        diag(&topo, &format!("{PF}/class")).code,
        "unparsable-attribute"
    );
    let json = serde_json::to_string(&topo).unwrap();
    assert_eq!(Topology::from_json(&json).unwrap(), topo);
}

#[test]
fn truncated_and_empty_files() {
    let t = DiskTree::new();
    t.write(&format!("{GPU0}/class"), b"");
    t.write(
        &format!("{IB}/ports/1/gids/1"),
        b"0000:0000:0000:0000:0000:ff",
    );
    t.write(&format!("{IB}/ports/1/rate"), b"400 Gb/s");
    t.write(&format!("{IB}/ports/1/state"), b"");
    t.write(&format!("{SW}/max_link_speed"), b"32.0 GT");
    let topo = t.discover();
    for f in [
        format!("{GPU0}/class"),
        format!("{IB}/ports/1/gids/1"),
        format!("{IB}/ports/1/rate"),
        format!("{IB}/ports/1/state"),
        format!("{SW}/max_link_speed"),
    ] {
        assert_eq!(diag(&topo, &f).code, "unparsable-attribute", "{f}");
    }
    let port = &topo.rdma_device("mlx5_0").unwrap().ports[0];
    assert_eq!(
        port.gids.len(),
        1,
        "the truncated GID is left out, the other kept"
    );
    assert!(port.rate.is_none() && port.state.is_none());
    cli_on(&t, "topo");
}

#[test]
fn numa_node_minus_one_is_unknown_and_999_is_flagged() {
    let t = DiskTree::new();
    t.write(&format!("{GPU0}/numa_node"), b"-1\n");
    t.write(&format!("{PF}/numa_node"), b"999\n");
    let topo = t.discover();
    let gpu = topo.pci_function("0000:03:00.0".parse().unwrap()).unwrap();
    assert_eq!(gpu.numa_node, None, "-1 means unknown");
    assert!(
        !topo
            .diagnostics
            .iter()
            .any(|d| d.path.as_deref() == Some(&format!("{GPU0}/numa_node"))),
        "-1 is normal on single-node firmware: no diagnostic"
    );
    let d = diag(&topo, &format!("{PF}/numa_node"));
    assert!(
        d.severity >= Severity::Warning && d.message.contains("999"),
        "{d:?}"
    );
    cli_on(&t, "topo");
}

#[test]
fn a_device_that_vanishes_after_listing() {
    let t = DiskTree::new();
    // Hot-unplug: the bus still lists the function, its directory is gone...
    t.link(
        "/sys/bus/pci/devices/0000:05:00.0",
        "../../../devices/pci0000:00/0000:00:01.0/0000:05:00.0",
    );
    // ...or half gone: the directory is there, its attributes are not.
    t.remove(&format!("{GPU0}/device"));
    t.remove(&format!("{GPU0}/class"));
    // The RDMA device's port directory disappeared while the class link remains.
    t.remove(&format!("{IB}/ports"));
    let topo = t.discover();
    let d = diag(&topo, "/sys/devices/pci0000:00/0000:00:01.0/0000:05:00.0");
    assert!(d.message.contains("not found"), "{d:?}");
    assert!(!has_pci(&topo, "0000:05:00.0") && !has_pci(&topo, "0000:03:00.0"));
    diag(&topo, &format!("{GPU0}/device"));
    diag(&topo, &format!("{GPU0}/class"));
    assert!(topo.rdma_device("mlx5_0").unwrap().ports.is_empty());
    cli_on(&t, "inventory");
}

#[test]
fn permission_denied_files_are_warnings_naming_them() {
    let mut tree = base_machine();
    let denied = [
        format!("{GPU0}/numa_node"),
        format!("{IB_DEV}/ports/1/gids/1"),
        format!("{IB_DEV}/ports/1/state"),
        "/proc/self/status".to_string(),
        "/sys/devices/system/node/node1/cpulist".to_string(),
    ];
    for p in &denied {
        tree.insert(p, MemEntry::Unreadable(libc::EACCES));
    }
    let named = |p: &str| p.replace(IB_DEV, IB);
    let topo = discover_mem(tree);
    for p in &denied {
        let d = diag(&topo, &named(p));
        assert_eq!(d.severity, Severity::Warning, "{d:?}");
        assert!(d.message.contains("permission denied"), "{d:?}");
    }
    let port = &topo.rdma_device("mlx5_0").unwrap().ports[0];
    assert_eq!(port.gids.len(), 1, "the readable GID is kept");
    assert_eq!(topo.gpus.len(), 2);

    // A directory that cannot be listed: the diagnostic names the directory.
    let mut tree = base_machine();
    tree.insert("/sys/class/infiniband", MemEntry::Unreadable(libc::EACCES));
    let topo = discover_mem(tree);
    assert!(diag(&topo, "/sys/class/infiniband").severity >= Severity::Warning);
    assert!(topo.rdma_devices.is_empty());
}

#[test]
fn thousands_of_vfs() {
    const VFS: u32 = 2048;
    let t = DiskTree::new();
    let parent = "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:01.0";
    t.write(
        &format!("{PF}/sriov_totalvfs"),
        format!("{VFS}\n").as_bytes(),
    );
    t.write(&format!("{PF}/sriov_numvfs"), format!("{VFS}\n").as_bytes());
    t.remove(&format!("{PF}/virtfn0"));
    t.remove(&format!("{parent}/0000:04:00.1"));
    t.remove("/sys/bus/pci/devices/0000:04:00.1");
    for i in 0..VFS {
        // Routing IDs after the PF: 8 functions per device, 32 devices per bus.
        let rid = i + 1;
        let addr = format!(
            "0000:{:02x}:{:02x}.{}",
            4 + rid / 256,
            (rid / 8) % 32,
            rid % 8
        );
        let dir = format!("{parent}/{addr}");
        for (f, v) in [
            ("vendor", "0x15b3\n"),
            ("device", "0x101e\n"),
            ("class", "0x020000\n"),
        ] {
            t.write(&format!("{dir}/{f}"), v.as_bytes());
        }
        t.link(&format!("{dir}/physfn"), "../0000:04:00.0");
        t.link(&format!("{PF}/virtfn{i}"), &format!("../{addr}"));
        t.link(
            &format!("/sys/bus/pci/devices/{addr}"),
            &format!("../../..{}", dir.trim_start_matches("/sys")),
        );
    }
    let root = t.root();
    let (topo, reads) = bounded(move || {
        let fs = Sysfs::at(root);
        let topo = discover_fs(&fs).unwrap();
        (topo, fs.files_read())
    });
    let vfs: Vec<_> = topo.pci.iter().filter(|f| f.is_vf).collect();
    assert_eq!(vfs.len(), VFS as usize);
    let pf = topo.pci_function("0000:04:00.0".parse().unwrap()).unwrap();
    let sriov = pf.sriov.as_ref().unwrap();
    assert_eq!(sriov.vfs.len(), VFS as usize);
    assert_eq!(sriov.vfs[1000].to_string(), "0000:07:1d.1");
    let last = topo.pci_function(sriov.vfs[VFS as usize - 1]).unwrap();
    assert_eq!(last.vf_index, Some(VFS - 1));
    // Linear work: a bounded number of files per function.
    assert!(
        reads < 16 * topo.pci.len(),
        "{reads} reads for {} functions",
        topo.pci.len()
    );
    cli_on(&t, "topo");
}

#[test]
fn a_very_deep_switch_chain() {
    const DEPTH: u32 = 200;
    let t = DiskTree::new();
    // One bus number per level on domain 1, as a real chain of bridges would have.
    let mut dir = "/sys/devices/pci0001:00".to_string();
    for level in 1..=DEPTH {
        let addr = format!("0001:{level:02x}:00.0");
        dir = format!("{dir}/{addr}");
        for (f, v) in [
            ("vendor", "0x1000\n"),
            ("device", "0xc030\n"),
            ("class", "0x060400\n"),
        ] {
            t.write(&format!("{dir}/{f}"), v.as_bytes());
        }
        t.link(
            &format!("/sys/bus/pci/devices/{addr}"),
            &format!("../../..{}", dir.trim_start_matches("/sys")),
        );
    }
    let gpu = format!("{dir}/0001:{:02x}:00.0", DEPTH + 1);
    for (f, v) in [
        ("vendor", "0x10de\n"),
        ("device", "0x2330\n"),
        ("class", "0x030200\n"),
    ] {
        t.write(&format!("{gpu}/{f}"), v.as_bytes());
    }
    t.link(
        &format!("/sys/bus/pci/devices/0001:{:02x}:00.0", DEPTH + 1),
        &format!("../../..{}", gpu.trim_start_matches("/sys")),
    );
    // Held by the nvidia driver, as the base machine's GPUs are (one no driver holds
    // would be no GPU of NVML's).
    let up = "../".repeat(gpu.trim_start_matches("/sys/").split('/').count());
    t.link(
        &format!("{gpu}/driver"),
        &format!("{up}bus/pci/drivers/nvidia"),
    );
    assert!(t.host(&gpu).as_os_str().len() < 4096, "fits PATH_MAX");
    let topo = t.discover();
    assert_eq!(topo.gpus.len(), 3);
    let deep = topo
        .pci_function(format!("0001:{:02x}:00.0", DEPTH + 1).parse().unwrap())
        .unwrap();
    assert_eq!(deep.host_bridge, "pci0001:00");
    assert!(deep.parent.is_some());
    assert!(topo.pci.len() >= DEPTH as usize + 3);
    // Every visible GPU: the base machine's NVML lists only its own two, so inside its
    // container the deep one is another's and the owned view leaves it out.
    let root = t.root();
    let (code, out, err, _) = cli(&["topo", "--all", "--root", root.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("GPU2"), "{out}");
}

#[test]
fn the_cli_refuses_roots_that_are_not_trees() {
    let t = DiskTree::new();
    let base = t.dir.path();
    std::fs::write(base.join("plain-file"), "x").unwrap();
    symlink("loop", base.join("loop")).unwrap();
    std::fs::create_dir(base.join("empty")).unwrap();
    for root in ["plain-file", "loop", "empty", "missing"] {
        let p = base.join(root);
        let (code, out, err, _) = cli(&["topo", "--root", p.to_str().unwrap()]);
        assert_eq!(code, 3, "{root}: {out}{err}");
        assert!(
            err.starts_with("rdmatopo: ") && err.lines().count() == 1,
            "{root}: {err}"
        );
        assert!(out.is_empty());
    }
    // A root that is itself a FIFO: refused at once, not opened.
    let fifo = base.join("fifo");
    let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    let (code, _, err, _) = cli(&["inventory", "--root", fifo.to_str().unwrap()]);
    assert_eq!(code, 3, "{err}");
}

#[test]
fn the_root_may_come_before_the_command() {
    let t = DiskTree::new();
    let root = t.root();
    let root = root.to_str().unwrap();
    for command in [&["topo"][..], &["k8s", "nfd"]] {
        let after = cli(&[command, &["--root", root]].concat());
        let before = cli(&[&["--root", root], command].concat());
        assert_eq!(after.0, 0, "{command:?}: {}", after.2);
        assert_eq!((before.0, &before.1), (after.0, &after.1), "{command:?}");
    }
    // Given before the command, the root replaces RDMATOPO_ROOT as the command's own does.
    let out = Command::new(env!("CARGO_BIN_EXE_rdmatopo"))
        .args(["--root", root, "topo"])
        .env("RDMATOPO_ROOT", t.dir.path().join("missing"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        cli(&["topo", "--root", root]).1
    );
    // Twice, or before a command that reads no machine: a usage error saying so.
    let (code, out, err, _) = cli(&["--root", root, "topo", "--root", root]);
    assert_eq!((code, out.as_str()), (2, ""), "{err}");
    assert!(err.contains("give it once"), "{err}");
    let (code, out, err, _) = cli(&["--root", root, "completions", "bash"]);
    assert_eq!((code, out.as_str()), (2, ""), "{err}");
    assert!(
        err.contains("`rdmatopo completions` reads no machine"),
        "{err}"
    );
}

#[test]
fn topo_takes_the_dash_m_of_nvidia_smi_topo() {
    let t = DiskTree::new();
    let root = t.root();
    let root = root.to_str().unwrap();
    let plain = cli(&["topo", "--root", root]);
    assert_eq!(plain.0, 0, "{}", plain.2);
    for m in ["-m", "--matrix"] {
        let with = cli(&["topo", m, "--root", root]);
        assert_eq!((with.0, &with.1), (plain.0, &plain.1), "topo {m}");
    }
}

#[test]
fn every_hostile_file_at_once_through_the_cli() {
    let t = DiskTree::new();
    t.link("/sys/class/infiniband/mlx5_1", "mlx5_1");
    t.fifo(&format!("{IB}/ports/1/rate"));
    std::fs::File::create(t.host(&format!("{GPU0}/local_cpulist")))
        .unwrap()
        .set_len(1 << 30)
        .unwrap();
    t.write(&format!("{PF}/numa_node"), b"\xff\xfe\x00garbage");
    t.link("/sys/class/net/gone", "../../devices/virtual/net/gone");
    // What the narrow scopes of `gids` and `netdevs` read first.
    t.fifo(&format!("{IB}/ports/1/gids/0"));
    t.write(&format!("{IB}/ports/1/link_layer"), b"\x00\x01bogus");
    for cmd in ["topo", "inventory", "gids", "netdevs"] {
        for format in ["table", "json"] {
            let root = t.root();
            let (code, out, err, _) =
                cli(&[cmd, "--root", root.to_str().unwrap(), "--format", format]);
            assert_eq!(code, 0, "{cmd} {format}: {err}");
            assert!(!out.is_empty());
        }
    }
}

/// A fault-free model must read back from its JSON; the hostile trees must too.
#[test]
fn damaged_models_round_trip_through_json() {
    let mut tree = base_machine();
    tree.insert(
        &format!("{GPU0}/numa_node"),
        MemEntry::Unreadable(libc::EIO),
    );
    tree.insert(&format!("{IB_DEV}/ports/1/gids/0"), MemEntry::Other);
    tree.file(&format!("{PF}/sriov_numvfs"), "lots\n");
    let topo = discover_mem(tree);
    assert!(topo.diagnostics.len() >= 3);
    assert_eq!(Topology::from_json(&topo.to_json()).unwrap(), topo);
}
