//! Every fixture through `snapshot`: the archive read back (packed, untarred, and
//! scrubbed) gives the same model, and scrubbing changes no doctor conclusion.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;
use rdmatopo::Sysfs;
use rdmatopo::checks::doctor;
use rdmatopo::snapshot::{Capture, Options, load_reader};
use std::path::PathBuf;

fn fixtures() -> Vec<PathBuf> {
    support::fixture_roots()
}

fn json_without_root(t: &rdmatopo::Topology) -> serde_json::Value {
    let mut v = serde_json::to_value(t).unwrap();
    v["root"] = serde_json::Value::Null;
    v
}

#[test]
fn every_fixture_round_trips() {
    let fixtures = fixtures();
    assert!(!fixtures.is_empty(), "no fixtures");
    support::par_map(&fixtures, |f| {
        let fs = support::open(f).recording();
        let topo = rdmatopo::discover_fs(&fs).unwrap();
        let capture = Capture::from_journal(&fs, &topo);
        // The recording kept what discovery read: only partly read or failed files
        // (cpuinfo's first block, unreadable attributes) are tried again.
        let stats = capture.stats();
        assert!(
            stats.capture_reads * 20 < stats.discovery_reads.max(20),
            "{}: the capture read {} of {} files again",
            f.display(),
            stats.capture_reads,
            stats.discovery_reads
        );
        let bytes = capture.to_tar_gz(&Options::default()).unwrap();
        let tree = load_reader(flate2::read::GzDecoder::new(bytes.as_slice()), "t").unwrap();
        let back = rdmatopo::discover_fs(&Sysfs::memory(tree.clone(), "t")).unwrap();
        assert_eq!(
            json_without_root(&back),
            json_without_root(&topo),
            "{}: the snapshot reads back differently",
            f.display()
        );
        // A reader that takes a PCI function's class and ids from its attribute files
        // (an earlier rdmatopo) finds them beside the `uevent` read instead.
        let without_uevents = support::without_pci_uevents(&tree);
        let by_files = rdmatopo::discover_fs(&Sysfs::memory(without_uevents, "t")).unwrap();
        assert_eq!(
            json_without_root(&by_files),
            json_without_root(&topo),
            "{}: the snapshot without its uevent files reads differently",
            f.display()
        );
        // Untarred on disk, it is a root too (checked on one small fixture: unpacking
        // tens of thousands of GID files is slow on a shared machine).
        if f.file_name().is_some_and(|n| n == "workstation-2gpu") {
            untarred_is_a_root(&bytes, &topo);
        }
        // Scrubbed: another machine's identifiers, the same conclusions.
        let mut scrubbed = capture.clone();
        scrubbed.scrub();
        let sb = scrubbed.to_tar_gz(&Options::default()).unwrap();
        let tree = load_reader(flate2::read::GzDecoder::new(sb.as_slice()), "t").unwrap();
        let s = rdmatopo::discover_fs(&Sysfs::memory(tree, "t")).unwrap();
        assert_eq!(s.pci, topo.pci, "{}", f.display());
        assert_eq!(s.numa_nodes, topo.numa_nodes, "{}", f.display());
        assert_eq!(s.rdma_devices.len(), topo.rdma_devices.len());
        for (a, b) in s.rdma_devices.iter().zip(&topo.rdma_devices) {
            for (pa, pb) in a.ports.iter().zip(&b.ports) {
                assert_eq!(pa.gids.len(), pb.gids.len(), "{}: {}", f.display(), a.name);
            }
        }
        let ips =
            |t: &rdmatopo::Topology| t.netdevs.iter().map(|n| n.ipv4.len()).collect::<Vec<_>>();
        assert_eq!(
            ips(&s),
            ips(&topo),
            "{}: addresses lost their subnets",
            f.display()
        );
        let outcomes = |t: &rdmatopo::Topology| {
            doctor::run(t)
                .checks
                .into_iter()
                .map(|c| (c.check, c.outcome))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            outcomes(&s),
            outcomes(&topo),
            "{}: scrubbing changed a conclusion",
            f.display()
        );
        // And nothing identifying is left where it was.
        if let Some(guid) = topo.rdma_devices.iter().find_map(|d| d.node_guid.clone())
            && guid != "0000:0000:0000:0000"
        {
            assert!(
                s.rdma_devices
                    .iter()
                    .all(|d| d.node_guid.as_deref() != Some(guid.as_str()))
            );
        }
        if let Some(u) = topo.gpus.iter().find_map(|g| g.uuid.clone()) {
            assert!(
                s.gpus.iter().all(|g| g.uuid.as_deref() != Some(u.as_str())),
                "{}",
                f.display()
            );
        }
    });
}

fn untarred_is_a_root(bytes: &[u8], topo: &rdmatopo::Topology) {
    let dir = tempfile::tempdir().unwrap();
    tar::Archive::new(flate2::read::GzDecoder::new(bytes))
        .unpack(dir.path())
        .unwrap();
    let on_disk = rdmatopo::discover(Some(&dir.path().join("rdmatopo-snapshot"))).unwrap();
    assert_eq!(json_without_root(&on_disk), json_without_root(topo));
}

/// topo, nccl-env and a container's owned view place only some functions: the GPUs
/// from the listing of the nvidia driver's directory, which the whole read that makes a
/// snapshot does not make. The snapshot keeps it, so each read answers from the
/// archive as from the machine. A snapshot of an earlier rdmatopo kept the directory
/// (a GPU's `driver` link leads there) without its listing: it says nothing of the
/// driver's functions, and is read like a capture without `drivers/` (each function),
/// with the same GPUs and RDMA devices; it once lost a pod's GPUs.
#[test]
fn every_fixture_answers_each_read_from_its_snapshot() {
    use rdmatopo::sources::NVIDIA_DRIVER_DIR;
    use rdmatopo::{Needs, View, discover_view};
    let devices = |t: &rdmatopo::Topology| {
        let names: Vec<&str> = t.rdma_devices.iter().map(|d| d.name.as_str()).collect();
        (serde_json::to_value(&t.gpus).unwrap(), names.join(" "))
    };
    support::par_map(&fixtures(), |f| {
        let fs = support::open(f).recording();
        let whole = rdmatopo::discover_fs(&fs).unwrap();
        let snapshot = Capture::from_journal(&fs, &whole).to_tree();
        let mut earlier = snapshot.clone();
        let listing: Vec<String> = snapshot
            .entries()
            .map(|(p, _)| p.to_string())
            .filter(|p| p.starts_with(&format!("{NVIDIA_DRIVER_DIR}/")))
            .collect();
        for p in &listing {
            earlier.remove(p);
        }
        for (label, needs) in [
            ("doctor", Needs::ALL),
            ("topo", Needs::TOPO),
            ("nccl-env", Needs::NCCL_ENV),
        ] {
            let want = discover_view(&support::open(f), needs, View::Owned).unwrap();
            let got =
                discover_view(&Sysfs::memory(snapshot.clone(), "t"), needs, View::Owned).unwrap();
            assert_eq!(
                json_without_root(&got),
                json_without_root(&want),
                "{}: {label}'s read of the snapshot differs from the machine's",
                f.display()
            );
            let got =
                discover_view(&Sysfs::memory(earlier.clone(), "t"), needs, View::Owned).unwrap();
            assert_eq!(
                devices(&got),
                devices(&want),
                "{}: {label}'s read of an earlier snapshot finds other devices",
                f.display()
            );
        }
    });
}
