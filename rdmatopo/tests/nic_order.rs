//! NIC numbering against a published `nvidia-smi topo -m` (issue 21, item 5).
//!
//! nvidia-smi numbers RDMA devices in a case-blind natural order: on a DGX Spark
//! `rocep1s0f0` (PCI domain 0000) is NIC0 and `roceP2p1s0f0` (domain 0002) is NIC2,
//! where a byte-wise sort would put the capital `P` first. `fixtures/dgx-spark` models
//! that machine; its README cites the capture copied here.

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
    let archive = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../fixtures/dgx-spark/root.tar.gz"
    ));
    let out = Command::new(env!("CARGO_BIN_EXE_rdmatopo"))
        .arg("topo")
        .arg("--root")
        .arg(&archive)
        .env_clear()
        .output()
        .expect("run rdmatopo");
    assert!(
        out.status.success(),
        "rdmatopo topo: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
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
