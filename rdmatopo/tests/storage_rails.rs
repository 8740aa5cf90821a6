//! Storage and front-end rails left out of `NCCL_IB_HCA` (issue 49, item 4).
//!
//! `fixtures/h100-dgx-ib-storage` is a DGX H100 whose two dual-port storage ConnectX-7
//! run InfiniBand, like the eight compute ConnectX-7: every port is an ACTIVE IB port, so
//! neither the link layer nor the port state sets the storage ports apart, only where they
//! sit. The compute list below is not our output: it is the NVIDIA DGX H100/H200 User
//! Guide's table of the compute ports (§1.2.3 "Network Modules": OSFP ports to
//! ConnectX-7, GPU and default RDMA names; cited in the fixture's README).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::process::Command;

/// The DGX H100 User Guide's compute HCAs, GPU 0 to 7.
const GUIDE_COMPUTE: [&str; 8] = [
    "mlx5_0", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_9", "mlx5_10", "mlx5_11",
];

fn nccl_env(fixture: &str) -> serde_json::Value {
    let archive = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures"))
        .join(fixture)
        .join("root.tar.gz");
    let out = Command::new(env!("CARGO_BIN_EXE_rdmatopo"))
        .args(["nccl-env", "--format", "json", "--root"])
        .arg(&archive)
        .env_clear()
        .output()
        .expect("run rdmatopo");
    assert!(
        out.status.success(),
        "rdmatopo nccl-env: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn dgx_h100_ib_storage_ports_are_left_out() {
    let plan = nccl_env("h100-dgx-ib-storage");
    let want: Vec<String> = GUIDE_COMPUTE.iter().map(|d| format!("{d}:1")).collect();
    assert_eq!(
        plan["env"]["NCCL_IB_HCA"].as_str().unwrap(),
        format!("={}", want.join(","))
    );
    // Rank r keeps GPU r's rail from the guide's table.
    for (r, dev) in GUIDE_COMPUTE.iter().enumerate() {
        assert_eq!(plan["ranks"][r]["hcas"][0], format!("{dev}:1"), "rank {r}");
    }
    let excluded = plan["excluded"].as_array().unwrap();
    for dev in ["mlx5_1", "mlx5_2", "mlx5_7", "mlx5_8"] {
        let e = excluded
            .iter()
            .find(|e| e["device"] == dev)
            .unwrap_or_else(|| panic!("{dev} not excluded: {excluded:?}"));
        let reason = e["reason"].as_str().unwrap();
        assert!(reason.contains("storage or front-end rail"), "{reason}");
        assert!(reason.contains("than NODE"), "{reason}");
    }
}

/// The same DGX with Ethernet storage ports: left out for their link layer, as before.
#[test]
fn dgx_h100_ethernet_storage_ports_keep_their_reason() {
    let plan = nccl_env("h100-dgx");
    let want: Vec<String> = GUIDE_COMPUTE.iter().map(|d| format!("{d}:1")).collect();
    assert_eq!(
        plan["env"]["NCCL_IB_HCA"].as_str().unwrap(),
        format!("={}", want.join(","))
    );
    let reason = plan["excluded"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["device"] == "mlx5_1")
        .unwrap()["reason"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        reason.contains("differs from the compute fabric"),
        "{reason}"
    );
}
