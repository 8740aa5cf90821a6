//! RoCE QoS end to end: `rdmatopo qos --format json`, the `NCCL_IB_TC` of `nccl-env`,
//! and `rdmatopo diff` on the QoS fixtures.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;
use std::path::PathBuf;
use std::process::Command;

fn root(name: &str) -> PathBuf {
    support::root(name)
}

fn run(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_rdmatopo"))
        .args(args)
        .env_remove("RDMATOPO_ROOT")
        .output()
        .expect("run rdmatopo");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

fn json(args: &[&str]) -> serde_json::Value {
    let (code, text) = run(args);
    assert_eq!(code, 0, "{text}");
    serde_json::from_str(&text).unwrap()
}

#[test]
fn qos_json_per_port() {
    let r = root("roce-qos-lossless");
    let v = json(&["qos", "--root", r.to_str().unwrap(), "--format", "json"]);
    assert_eq!(v["schema"], "rdmatopo.qos/1");
    let ports = v["ports"].as_array().unwrap();
    assert_eq!(ports.len(), 4);
    for p in ports {
        assert_eq!(p["traffic_class"], 106);
        assert_eq!(p["priority"], 3);
        assert_eq!(p["ecn_np"], serde_json::json!([3]));
        assert_eq!(p["ecn_rp"], serde_json::json!([3]));
        assert_eq!(p["lossless"], serde_json::json!([3]));
        assert_eq!(p["rdma_cm_tos"], 106);
        assert_eq!(p["gid_types"], serde_json::json!(["IB/RoCE v1", "RoCE v2"]));
    }
    assert_eq!(v["nccl"]["env"]["NCCL_IB_TC"], "106");
}

#[test]
fn qos_json_says_what_is_not_exposed() {
    let r = root("dual-socket-pcie");
    let v = json(&["qos", "--root", r.to_str().unwrap(), "--format", "json"]);
    let p = &v["ports"][0];
    assert_eq!(p["traffic_class_exposed"], false);
    assert!(p["ecn_np"].is_null() && p["lossless"].is_null());
    assert!(v["nccl"]["env"].as_object().unwrap().is_empty());
    // The inventory carries the raw facts, `null` where the driver has no file.
    let inv = json(&[
        "inventory",
        "--root",
        r.to_str().unwrap(),
        "--format",
        "json",
    ]);
    assert!(inv["qos"]["ports"][0]["traffic_class"].is_null());
    let codes: Vec<&str> = inv["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["code"] == "qos-not-exposed")
        .map(|d| d["path"].as_str().unwrap())
        .collect();
    assert_eq!(
        codes,
        [
            "/sys/class/infiniband/mlx5_0/tc/1/traffic_class",
            "/sys/class/net/enp184s0f0np0/ecn",
            "/sys/class/net/enp184s0f0np0/qos/prio2buffer"
        ]
    );
}

#[test]
fn nccl_env_sets_the_configured_class() {
    let r = root("roce-qos-lossless");
    let (_, sh) = run(&["nccl-env", "--root", r.to_str().unwrap()]);
    assert!(sh.contains("export NCCL_IB_TC='106'"), "{sh}");
    let r = root("dual-socket-pcie");
    let (_, sh) = run(&["nccl-env", "--root", r.to_str().unwrap()]);
    assert!(!sh.contains("NCCL_IB_TC"), "{sh}");
    // A VF without a class of its own sends through its PF's port, configured for 106.
    let r = root("pod-vf-qos-mismatch");
    let (_, sh) = run(&["nccl-env", "--root", r.to_str().unwrap()]);
    assert!(sh.contains("export NCCL_IB_TC='106'"), "{sh}");
    assert!(
        sh.contains("unset on the VF, whose traffic leaves through its PF mlx5_9"),
        "{sh}"
    );
}

#[test]
fn diff_shows_the_rail_that_lost_ecn() {
    let (a, b) = (root("roce-qos-lossless"), root("roce-qos-ecn-gap"));
    let (code, text) = run(&[
        "diff",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--format",
        "json",
    ]);
    assert_eq!(code, 1);
    let d: serde_json::Value = serde_json::from_str(&text).unwrap();
    let facts = d["facts"].as_array().unwrap();
    let changed: Vec<(&str, &str, &str)> = facts
        .iter()
        .filter(|f| f["changed"] == true)
        .map(|f| {
            (
                f["topic"].as_str().unwrap(),
                f["a"].as_str().unwrap(),
                f["b"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        changed,
        [(
            "qos mlx5_3",
            "tc 106, prio 3, ECN 3, lossless 3",
            "tc 106, prio 3, ECN none, lossless 3"
        )]
    );
    let checks: Vec<&str> = d["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["check"].as_str().unwrap())
        .collect();
    assert_eq!(checks, ["roce-qos"]);
}

#[test]
fn diff_of_a_pod_without_and_with_the_vf_mismatch() {
    let (a, b) = (root("pod-h100-1gpu-1vf"), root("pod-vf-qos-mismatch"));
    let (code, text) = run(&[
        "diff",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--format",
        "json",
    ]);
    assert_eq!(code, 1, "{text}");
    let d: serde_json::Value = serde_json::from_str(&text).unwrap();
    let fact = d["facts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["topic"] == "qos mlx5_22")
        .unwrap();
    assert_eq!(fact["a"], "tc n/a, ECN on the PF (not visible), PFC n/a");
    assert_eq!(
        fact["b"],
        "tc unset, ECN on the PF (not visible), PFC n/a, VF trust off spoofchk on"
    );
    let qos = d["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["check"] == "roce-qos")
        .unwrap();
    assert_eq!(
        (qos["a"].as_str(), qos["b"].as_str()),
        (Some("skipped"), Some("warning"))
    );
}
