//! NIC numbering against a published `nvidia-smi topo -m` (issue 21, item 5; issue 49).
//!
//! nvidia-smi numbers RDMA devices in the order they registered (`view::nic_order`),
//! which rdmatopo reads from the verbs facts' device index, live or from a snapshot.
//! Without it names decide, in a case-blind natural order: on a DGX Spark `rocep1s0f0`
//! (PCI domain 0000) is NIC0 and `roceP2p1s0f0` (domain 0002) is NIC2, where a byte-wise
//! sort would put the capital `P` first (and where the devices probed in that order).
//! `fixtures/dgx-spark` models that machine; its README cites the capture copied here.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::process::Command;

/// `nvidia-smi topo -m` on a DGX Spark (driver 580.142), matrix and NIC legend as
/// published in jeffersonjhunt/code-monkeys `spark/cluster/docs/inventory-hutch.md`
/// (commit 13c0b55a7ff182aacc07e013fffed5b222b30c65).
const PUBLIC_MATRIX: &str =
    "\tGPU0\tNIC0\tNIC1\tNIC2\tNIC3\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID
GPU0\t X \tNODE\tNODE\tNODE\tNODE\t0-19\t0\t\tN/A
NIC0\tNODE\t X \tPIX\tNODE\tNODE\t\t\t\t
NIC1\tNODE\tPIX\t X \tNODE\tNODE\t\t\t\t
NIC2\tNODE\tNODE\tNODE\t X \tPIX\t\t\t\t
NIC3\tNODE\tNODE\tNODE\tPIX\t X \t\t\t\t
";

const PUBLIC_LEGEND: [&str; 4] = [
    "NIC0: rocep1s0f0",
    "NIC1: rocep1s0f1",
    "NIC2: roceP2p1s0f0",
    "NIC3: roceP2p1s0f1",
];

fn topo_of_dgx_spark() -> String {
    topo_of(&fixture_archive("dgx-spark")).0
}

#[test]
fn dgx_spark_nic_legend_is_nvidia_smis() {
    let text = topo_of_dgx_spark();
    let legend: Vec<&str> = text
        .lines()
        .skip_while(|l| *l != "NIC Legend:")
        .map(str::trim)
        .filter(|l| l.starts_with("NIC") && l.contains(": "))
        .collect();
    assert_eq!(legend, PUBLIC_LEGEND, "NIC legend of:\n{text}");
}

#[test]
fn dgx_spark_matrix_is_nvidia_smis_byte_for_byte() {
    let text = topo_of_dgx_spark();
    let matrix: String = text
        .lines()
        .take_while(|l| !l.is_empty())
        .map(|l| format!("{l}\n"))
        .collect();
    assert_eq!(matrix, PUBLIC_MATRIX);
}

fn fixture_archive(name: &str) -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures"))
        .join(name)
        .join("root.tar.gz")
}

/// `rdmatopo topo --root ROOT`: (stdout, stderr).
fn topo_of(root: &std::path::Path) -> (String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_rdmatopo"))
        .arg("topo")
        .arg("--root")
        .arg(root)
        .env_clear()
        .output()
        .expect("run rdmatopo");
    assert!(
        out.status.success(),
        "rdmatopo topo: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

/// `rdmatopo snapshot --root ROOT -o OUT`, which must succeed.
fn snapshot(root: &std::path::Path, out: &std::path::Path) {
    let run = Command::new(env!("CARGO_BIN_EXE_rdmatopo"))
        .arg("snapshot")
        .arg("--root")
        .arg(root)
        .arg("-o")
        .arg(out)
        .env_clear()
        .output()
        .expect("run rdmatopo snapshot");
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
}

fn legend_of(text: &str) -> Vec<String> {
    text.lines()
        .skip_while(|l| *l != "NIC Legend:")
        .map(str::trim)
        .filter(|l| l.starts_with("NIC") && l.contains(": "))
        .map(|l| l.split_once(": ").unwrap().1.to_string())
        .collect()
}

const NOTE: &str = "NICs are numbered by name";

/// pub-h100-penny's published legend: the InfiniBand adapters, probed first, before the
/// Ethernet ones, whatever udev renamed them to.
const PENNY_LEGEND: [&str; 13] = [
    "mlx5_ib0",
    "mlx5_ib1",
    "mlx5_ib2",
    "mlx5_ib3",
    "mlx5_ib4",
    "mlx5_ib5",
    "mlx5_ib6",
    "mlx5_ib7",
    "mlx5_eth0",
    "mlx5_eth1",
    "mlx5_eth2",
    "mlx5_eth3",
    "mlx5_eth4",
];

/// A snapshot keeps the registration order it read (the verbs facts' device index), so
/// the capture numbers NICs as the machine did, and says nothing of a fallback.
#[test]
fn a_snapshot_numbers_nics_as_the_machine_did() {
    let dir = tempfile::tempdir().unwrap();
    let snap = dir.path().join("penny.tar.gz");
    snapshot(&fixture_archive("pub-h100-penny"), &snap);
    for root in [fixture_archive("pub-h100-penny"), snap] {
        let (text, err) = topo_of(&root);
        assert_eq!(legend_of(&text), PENNY_LEGEND, "{}", root.display());
        assert!(!err.contains(NOTE), "{err}");
    }
}

/// Without a device index the NICs keep the name order, and stderr (not stdout, which
/// parsers read as nvidia-smi's) says so where the names are more than one series.
#[test]
fn without_the_index_names_decide_and_stderr_says_so() {
    let (text, err) = topo_of(&fixture_archive("azure-ndv5"));
    let legend = legend_of(&text);
    assert_eq!(legend.first().map(String::as_str), Some("mlx5_an0"));
    assert!(!text.contains(NOTE));
    assert_eq!(err.matches(NOTE).count(), 1, "{err}");
    // One series of kernel names: nothing to say.
    let (text, err) = topo_of(&fixture_archive("pub-b200-nccltests333"));
    assert_eq!(legend_of(&text).first().map(String::as_str), Some("mlx5_0"));
    assert!(!err.contains(NOTE), "{err}");
}

/// The root of a snapshot archive unpacked into `dir` (its one top directory).
fn unpack(archive: &std::path::Path, dir: &std::path::Path) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let status = Command::new("tar")
        .arg("xzf")
        .arg(archive)
        .arg("-C")
        .arg(dir)
        .status()
        .expect("run tar");
    assert!(status.success());
    let mut tops: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(tops.len(), 1, "{tops:?}");
    tops.pop().unwrap()
}

/// A capture by a build without libibverbs: the kernel's index comes from its RDMA
/// netlink and is kept in `rdmatopo/device-index.json`, which a snapshot of the capture
/// carries on and topo reads back, numbering NICs as nvidia-smi did.
#[test]
fn the_netlink_device_index_round_trips_through_a_snapshot() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let root = unpack(&fixture_archive("pub-h100-penny"), &dir.join("a"));
    // The index the machine's libibverbs recorded, as netlink gives it, and no verbs.
    let verbs_path = root.join("rdmatopo/verbs.json");
    let verbs: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&verbs_path).unwrap()).unwrap();
    std::fs::remove_file(&verbs_path).unwrap();
    let index = verbs["device_index"].clone();
    assert_eq!(index.as_object().map(|o| o.len()), Some(PENNY_LEGEND.len()));
    let file = serde_json::json!({"schema": "rdmatopo.device-index/1", "device_index": index});
    std::fs::write(root.join("rdmatopo/device-index.json"), file.to_string()).unwrap();

    let (text, err) = topo_of(&root);
    assert_eq!(legend_of(&text), PENNY_LEGEND);
    assert!(!err.contains(NOTE), "{err}");

    let snap = dir.join("snap.tar.gz");
    snapshot(&root, &snap);
    let (text, err) = topo_of(&snap);
    assert_eq!(legend_of(&text), PENNY_LEGEND);
    assert!(!err.contains(NOTE), "{err}");

    // The file the snapshot wrote is the one read back, and fits its schema.
    let again = unpack(&snap, &dir.join("b"));
    assert!(!again.join("rdmatopo/verbs.json").exists());
    let stored: serde_json::Value =
        serde_json::from_slice(&std::fs::read(again.join("rdmatopo/device-index.json")).unwrap())
            .unwrap();
    assert_eq!(stored, file);
    let schema: serde_json::Value =
        serde_json::from_str(rdmatopo::schemas::get("rdmatopo.device-index/1").unwrap()).unwrap();
    assert!(jsonschema::draft202012::is_valid(&schema, &stored));

    // Without it, names decide again and stderr says so.
    std::fs::remove_file(root.join("rdmatopo/device-index.json")).unwrap();
    let (text, err) = topo_of(&root);
    assert_ne!(legend_of(&text), PENNY_LEGEND);
    assert_eq!(err.matches(NOTE).count(), 1, "{err}");
}
