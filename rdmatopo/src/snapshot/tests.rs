use super::*;
use crate::sysfs::{MemTree, Sysfs};

/// A small root: one PCI NIC with an RDMA device and a netdev behind symlinks, the
/// process view, and a `/dev` with more than discovery reads.
fn tree() -> MemTree {
    let mut t = MemTree::new();
    let f = "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0";
    t.file(&format!("{f}/vendor"), "0x15b3\n")
        .file(&format!("{f}/device"), "0x1021\n")
        .file(&format!("{f}/class"), "0x020000\n")
        .file(&format!("{f}/numa_node"), "0\n")
        .file(&format!("{f}/resource"), "0x0 0x0 0x0\n")
        .file("/sys/devices/pci0000:00/0000:00:01.0/vendor", "0x8086\n")
        .file("/sys/devices/pci0000:00/0000:00:01.0/device", "0x1234\n")
        .file("/sys/devices/pci0000:00/0000:00:01.0/class", "0x060400\n")
        .link("/sys/bus/pci/devices/0000:01:00.0", "../../../devices/pci0000:00/0000:00:01.0/0000:01:00.0")
        .link("/sys/bus/pci/devices/0000:00:01.0", "../../../devices/pci0000:00/0000:00:01.0")
        .link(&format!("{f}/driver"), "../../../../bus/pci/drivers/mlx5_core")
        .link("/sys/class/infiniband/mlx5_0", "../../devices/pci0000:00/0000:00:01.0/0000:01:00.0/infiniband/mlx5_0")
        .link(&format!("{f}/infiniband/mlx5_0/device"), "../../../0000:01:00.0")
        .file(&format!("{f}/infiniband/mlx5_0/node_guid"), "b8ce:f603:00a1:b2c4\n")
        .file(&format!("{f}/infiniband/mlx5_0/ports/1/state"), "4: ACTIVE\n")
        .file(&format!("{f}/infiniband/mlx5_0/ports/1/link_layer"), "Ethernet\n")
        .file(&format!("{f}/infiniband/mlx5_0/ports/1/gids/0"), "fe80:0000:0000:0000:bace:f6ff:fe00:0001\n")
        .file(&format!("{f}/infiniband/mlx5_0/ports/1/gids/1"), "0000:0000:0000:0000:0000:ffff:c0a8:0a15\n")
        .file(&format!("{f}/infiniband/mlx5_0/ports/1/gid_attrs/types/1"), "RoCE v2\n")
        .file(&format!("{f}/infiniband/mlx5_0/ports/1/gid_attrs/ndevs/1"), "ens1\n")
        .link("/sys/class/net/ens1", "../../devices/pci0000:00/0000:00:01.0/0000:01:00.0/net/ens1")
        .file(&format!("{f}/net/ens1/address"), "b8:ce:f6:00:00:01\n")
        .file(&format!("{f}/net/ens1/mtu"), "9000\n")
        .file("/sys/devices/system/node/node0/cpulist", "0-7\n")
        .file("/sys/devices/system/node/has_cpu", "0\n")
        .link("/proc/self", "4242")
        .file("/proc/4242/status", "Cpus_allowed_list:\t0-7\n")
        .file("/proc/4242/environ", "SECRET_TOKEN=hunter2\0NCCL_DEBUG=INFO\0HOSTNAME=node1\0")
        .link("/proc/net", "self/net")
        .file("/proc/4242/net/fib_trie", "Main:\n  +-- 0.0.0.0/0 3 0 5\n     |-- 192.168.10.21\n        /32 host LOCAL\n")
        .file("/proc/4242/net/route", "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\nens1\t000AA8C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n")
        .file("/dev/infiniband/uverbs0", "")
        .file("/dev/infiniband/rdma_cm", "")
        .file("/dev/nvidia0", "")
        .file("/dev/tty0", "")
        .file("/unrelated/big-file", "never read\n");
    t
}

fn capture(t: MemTree) -> (Topology, Capture) {
    let fs = Sysfs::memory(t, "test").recording();
    let topo = crate::discover_fs(&fs).unwrap();
    let c = Capture::from_journal(&fs, &topo);
    (topo, c)
}

fn reload(c: &Capture) -> Topology {
    let bytes = c.to_tar_gz(&Options::default()).unwrap();
    let tar = flate2::read::GzDecoder::new(bytes.as_slice());
    let tree = load_reader(tar, "snap.tar.gz").unwrap();
    crate::discover_fs(&Sysfs::memory(tree, "test")).unwrap()
}

#[test]
fn round_trip_gives_the_same_model() {
    let (topo, c) = capture(tree());
    let back = reload(&c);
    assert_eq!(back.to_json(), topo.to_json());
    assert_eq!(back.rdma_devices[0].ports[0].gids.len(), 2);
    assert_eq!(back.netdevs[0].ipv4, vec!["192.168.10.21/24".to_string()]);
}

#[test]
fn keeps_symlinks_and_only_what_was_read() {
    let (_, c) = capture(tree());
    let e: BTreeMap<&str, &MemEntry> = c.entries().collect();
    assert_eq!(
        e.get("/sys/class/infiniband/mlx5_0"),
        Some(&&MemEntry::Symlink(
            "../../devices/pci0000:00/0000:00:01.0/0000:01:00.0/infiniband/mlx5_0".into()
        ))
    );
    assert_eq!(
        e.get("/proc/self"),
        Some(&&MemEntry::Symlink("4242".into()))
    );
    assert!(matches!(
        e.get("/proc/4242/status"),
        Some(MemEntry::File(_))
    ));
    // Files discovery never read stay out; /dev names stay in (they are data).
    assert!(!e.contains_key("/unrelated/big-file"));
    assert!(!e.contains_key("/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/resource"));
    assert!(e.contains_key("/dev/tty0") && e.contains_key("/dev/nvidia0"));
    // The environment keeps only what discovery kept.
    let MemEntry::File(env) = e["/proc/4242/environ"] else {
        panic!("environ missing")
    };
    let env = String::from_utf8_lossy(env);
    assert!(
        env.contains("NCCL_DEBUG=INFO") && !env.contains("hunter2"),
        "{env}"
    );
    let s = c.stats();
    assert!(s.files > 0 && s.symlinks >= 5 && s.capture_reads <= s.discovery_reads);
}

#[test]
fn scrub_is_consistent_and_keeps_the_structure() {
    let (topo, mut c) = capture(tree());
    c.scrub();
    let back = reload(&c);
    let dev = &back.rdma_devices[0];
    assert_ne!(dev.node_guid, topo.rdma_devices[0].node_guid);
    let nd = &back.netdevs[0];
    assert_ne!(nd.address, topo.netdevs[0].address);
    // The IPv4 address, its GID and its route still agree after scrubbing.
    let gid_ip = dev.ports[0].gids[1].ipv4.clone().unwrap();
    assert_ne!(gid_ip, "192.168.10.21");
    assert_eq!(nd.ipv4, vec![format!("{gid_ip}/24")]);
    // The link-local GID is still the one built from the (new) MAC.
    let mac: Vec<u8> = nd
        .address
        .as_deref()
        .unwrap()
        .split(':')
        .map(|h| u8::from_str_radix(h, 16).unwrap())
        .collect();
    let ll = format!(
        "fe80:0000:0000:0000:{:02x}{:02x}:{:02x}ff:fe{:02x}:{:02x}{:02x}",
        mac[0] ^ 2,
        mac[1],
        mac[2],
        mac[3],
        mac[4],
        mac[5]
    );
    assert_eq!(dev.ports[0].gids[0].gid, ll);
    // Everything else is the same model.
    assert_eq!(back.pci, topo.pci);
    assert_eq!(back.numa_nodes, topo.numa_nodes);
}

#[test]
fn archives_are_deterministic() {
    let (_, a) = capture(tree());
    let (_, b) = capture(tree());
    let o = Options::default();
    assert_eq!(a.to_tar_gz(&o).unwrap(), b.to_tar_gz(&o).unwrap());
}

/// A raw tar with one entry named `name` (bypassing the builder's own checks).
fn raw_tar(name: &str, size: u64, body: &[u8]) -> Vec<u8> {
    let mut h = tar::Header::new_old();
    h.as_old_mut().name[..name.len()].copy_from_slice(name.as_bytes());
    h.set_size(size);
    h.set_mode(0o644);
    h.set_entry_type(tar::EntryType::Regular);
    h.set_cksum();
    let mut out = h.as_bytes().to_vec();
    out.extend_from_slice(body);
    out.resize(out.len().div_ceil(512) * 512 + 1024, 0);
    out
}

#[test]
fn refuses_unsafe_and_oversized_archives() {
    let dotdot = raw_tar("x/../../etc/passwd", 4, b"root");
    assert!(matches!(
        load_reader(dotdot.as_slice(), "a.tar"),
        Err(SnapshotError::UnsafeEntry { .. })
    ));
    let abs = raw_tar("/etc/passwd", 4, b"root");
    assert!(matches!(
        load_reader(abs.as_slice(), "a.tar"),
        Err(SnapshotError::UnsafeEntry { .. })
    ));
    let huge = raw_tar("sys/x", MAX_UNPACKED_BYTES + 1, b"");
    assert!(matches!(
        load_reader(huge.as_slice(), "a.tar"),
        Err(SnapshotError::TooLarge { .. })
    ));
    let no_sys = raw_tar("etc/hosts", 4, b"1234");
    assert!(matches!(
        load_reader(no_sys.as_slice(), "a.tar"),
        Err(SnapshotError::NotASnapshot { .. })
    ));
    assert!(load_reader(&b"not a tar at all"[..], "a.tar").is_err());
    let ok = raw_tar("sys/class/x", 4, b"1234");
    let t = load_reader(ok.as_slice(), "a.tar").unwrap();
    assert!(t.entries().any(|(p, _)| p == "/sys/class/x"));
}

/// A truncated or garbled archive is the archive's fault: "not a snapshot", naming the
/// path, with whatever of its bytes the reader quotes escaped (no control character
/// reaches a terminal).
#[test]
fn truncated_and_garbled_archives_are_not_snapshots() {
    let whole = tar_gz(&[
        ("sys", None),
        ("sys/class", None),
        ("sys/class/x", Some("1")),
    ]);
    let mut garbled = raw_tar("sys/x", 4, b"1234");
    // The checksum field, as an archive of random bytes would have it.
    garbled[148..156].copy_from_slice(b"\x1b[31m\x07\0\0");
    let cases: [(&str, &[u8]); 3] = [
        ("cut.tar.gz", &whole[..whole.len() / 2]),
        ("header.tar.gz", &whole[..4]),
        ("garbled.tar", &garbled),
    ];
    let dir = tempfile::tempdir().unwrap();
    for (name, bytes) in cases {
        let path = dir.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        let e = load(&path).unwrap_err();
        assert!(
            matches!(&e, SnapshotError::NotASnapshot { reason, .. } if reason.contains("truncated")),
            "{name}: {e}"
        );
        let said = e.to_string();
        assert!(said.contains(&path.display().to_string()), "{said}");
        assert!(!said.chars().any(char::is_control), "{name}: {said:?}");
    }
    // The disk's own errors stay what they are.
    let missing = dir.path().join("missing.tar.gz");
    assert!(matches!(load(&missing), Err(SnapshotError::Io { .. })));
}

#[test]
fn archive_names() {
    assert!(is_archive(Path::new("a/node.tar.gz")));
    assert!(is_archive(Path::new("node.TGZ")));
    assert!(is_archive(Path::new("node.tar")));
    assert!(!is_archive(Path::new("fixtures/h100-dgx/root")));
}

/// A `.tar.gz` of `entries` (path, contents; `None` for a directory) under `root/`.
fn tar_gz(entries: &[(&str, Option<&str>)]) -> Vec<u8> {
    let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let mut tar = tar::Builder::new(gz);
    for (path, body) in entries {
        let mut h = tar::Header::new_gnu();
        match body {
            Some(b) => {
                h.set_entry_type(tar::EntryType::Regular);
                h.set_size(b.len() as u64);
                h.set_mode(0o644);
                tar.append_data(&mut h, format!("root/{path}"), b.as_bytes())
                    .unwrap();
            }
            None => {
                h.set_entry_type(tar::EntryType::Directory);
                h.set_mode(0o755);
                h.set_size(0);
                tar.append_data(&mut h, format!("root/{path}/"), std::io::empty())
                    .unwrap();
            }
        }
    }
    tar.into_inner().unwrap().finish().unwrap()
}

fn manifest(base: &str, removed: &[&str]) -> String {
    serde_json::json!({"schema": OVERLAY_SCHEMA, "base": base, "removed": removed}).to_string()
}

fn file_of(t: &MemTree, path: &str) -> Option<String> {
    t.text(path).map(str::to_string)
}

#[test]
fn overlays_apply_on_their_base_chain() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, bytes: Vec<u8>| std::fs::write(dir.path().join(name), bytes).unwrap();
    std::fs::create_dir(dir.path().join("host")).unwrap();
    write(
        "host/root.tar.gz",
        tar_gz(&[
            ("sys/a", Some("1\n")),
            ("sys/b", Some("2\n")),
            ("sys/gone/x", Some("3\n")),
            ("sys/gone/y", Some("4\n")),
            ("dev/infiniband/uverbs0", Some("")),
        ]),
    );
    // A pod on the host: one attribute changed, one directory and one device node gone.
    write(
        "pod.tar.gz",
        tar_gz(&[
            ("sys/b", Some("pod\n")),
            ("proc/self/status", Some("Cpus_allowed_list:\t0-3\n")),
            ("rdmatopo", None),
            (
                "rdmatopo/overlay.json",
                Some(&manifest(
                    "host/root.tar.gz",
                    &["/sys/gone", "/dev/infiniband/uverbs0"],
                )),
            ),
        ]),
    );
    // A fault on the pod: an overlay of an overlay, with nothing but its manifest.
    write(
        "fault.tgz",
        tar_gz(&[(
            "rdmatopo/overlay.json",
            Some(&manifest("pod.tar.gz", &["/sys/a"])),
        )]),
    );
    let pod = load(&dir.path().join("pod.tar.gz")).unwrap();
    assert_eq!(file_of(&pod, "/sys/a").as_deref(), Some("1\n"));
    assert_eq!(file_of(&pod, "/sys/b").as_deref(), Some("pod\n"));
    assert!(file_of(&pod, "/proc/self/status").is_some());
    assert!(!pod.entries().any(|(p, _)| p.starts_with("/sys/gone")));
    assert!(!pod.entries().any(|(p, _)| p == "/dev/infiniband/uverbs0"));
    assert!(pod.entries().any(|(p, _)| p == "/dev/infiniband"));
    assert!(!pod.entries().any(|(p, _)| p.starts_with("/rdmatopo")));
    let fault = load(&dir.path().join("fault.tgz")).unwrap();
    assert_eq!(file_of(&fault, "/sys/a"), None);
    assert_eq!(file_of(&fault, "/sys/b").as_deref(), Some("pod\n"));
    // Without a file to be relative to, an overlay cannot be read.
    let bytes = std::fs::read(dir.path().join("pod.tar.gz")).unwrap();
    let err = load_reader(flate2::read::GzDecoder::new(bytes.as_slice()), "pod").unwrap_err();
    assert!(err.to_string().contains("overlay"), "{err}");
}

#[test]
fn bad_overlays_are_refused_with_the_archive_named() {
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name);
    let overlay = |name: &str, manifest: &str| {
        std::fs::write(
            path(name),
            tar_gz(&[
                ("sys/a", Some("1\n")),
                ("rdmatopo/overlay.json", Some(manifest)),
            ]),
        )
        .unwrap();
    };
    let refused = |name: &str, needle: &str| {
        let err = load(&path(name)).unwrap_err().to_string();
        assert!(err.contains(name), "{name}: {err}");
        assert!(err.contains(needle), "{name}: expected {needle:?} in {err}");
    };
    overlay("loop-a.tar.gz", &manifest("loop-b.tar.gz", &[]));
    overlay("loop-b.tar.gz", &manifest("loop-a.tar.gz", &[]));
    refused("loop-a.tar.gz", "comes back to it");
    overlay("self.tar.gz", &manifest("self.tar.gz", &[]));
    refused("self.tar.gz", "comes back to it");
    for i in 0..=MAX_OVERLAY_DEPTH {
        overlay(
            &format!("deep{i}.tar.gz"),
            &manifest(&format!("deep{}.tar.gz", i + 1), &[]),
        );
    }
    // The archive named is the first one past the limit.
    let err = load(&path("deep0.tar.gz")).unwrap_err().to_string();
    assert!(
        err.contains(&format!("deep{MAX_OVERLAY_DEPTH}.tar.gz")) && err.contains("longer than"),
        "{err}"
    );
    overlay("absolute.tar.gz", &manifest("/etc/base.tar.gz", &[]));
    refused("absolute.tar.gz", "not a relative path");
    overlay("not-archive.tar.gz", &manifest("../sys", &[]));
    refused("not-archive.tar.gz", "not a relative path");
    overlay("missing.tar.gz", &manifest("nowhere.tar.gz", &[]));
    refused("nowhere.tar.gz", "No such file");
    overlay(
        "schema.tar.gz",
        r#"{"schema": "rdmatopo.overlay/9", "base": "x.tar.gz"}"#,
    );
    refused("schema.tar.gz", "rdmatopo.overlay/9");
    overlay("garbage.tar.gz", "{not json");
    refused("garbage.tar.gz", "overlay.json");
    overlay(
        "unknown-field.tar.gz",
        r#"{"schema": "rdmatopo.overlay/1", "base": "x.tar.gz", "rm": []}"#,
    );
    refused("unknown-field.tar.gz", "unknown field");
    std::fs::write(
        path("dir-manifest.tar.gz"),
        tar_gz(&[("sys/a", Some("1\n")), ("rdmatopo/overlay.json", None)]),
    )
    .unwrap();
    refused("dir-manifest.tar.gz", "is not a file");
}
