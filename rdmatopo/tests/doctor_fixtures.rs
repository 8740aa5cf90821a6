//! The doctor's conclusions on the fixtures built for it (each fault) and on their
//! fault-free counterpart, check by check.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;
use rdmatopo::checks::doctor::{self, Outcome, Report};

fn report(name: &str) -> Report {
    let root = support::fixtures_dir().join(name).join("root");
    doctor::run(&rdmatopo::discover(Some(&root)).unwrap())
}

fn outcome(r: &Report, check: &str) -> Outcome {
    r.checks.iter().find(|c| c.check == check).unwrap().outcome
}

fn has(r: &Report, check: &str, text: &str) -> bool {
    r.findings
        .iter()
        .any(|f| f.check == check && f.summary.contains(text))
}

#[test]
fn misplaced_pod() {
    let r = report("pod-h100-misplaced");
    assert_eq!(outcome(&r, "numa-affinity"), Outcome::Error);
    assert!(has(&r, "numa-affinity", "(4-7,116-119) is local to GPU5"));
    assert_eq!(outcome(&r, "mtu"), Outcome::Warning);
    assert!(has(
        &r,
        "mtu",
        "mlx5_22 runs at active MTU 1024 (from net1 MTU 1450)"
    ));
    assert_eq!(r.exit_code(), 2);
}

#[test]
fn limited_pod() {
    let r = report("pod-h100-limits");
    assert_eq!(outcome(&r, "rdma-cgroup"), Outcome::Error);
    assert!(has(&r, "rdma-cgroup", "mlx5_22 hca_object=500"));
    assert!(has(&r, "rdma-cgroup", "mlx5_22 uses 2 of 2 hca_handle"));
    assert_eq!(outcome(&r, "memlock"), Outcome::Error);
    assert_eq!(outcome(&r, "gpudirect-rdma"), Outcome::Warning);
}

#[test]
fn pod_without_uverbs() {
    let r = report("pod-h100-no-uverbs");
    assert_eq!(outcome(&r, "rdma-devices"), Outcome::Error);
    assert!(has(
        &r,
        "rdma-devices",
        "mlx5_22 (uverbs22) cannot be opened"
    ));
}

#[test]
fn acs_redirect_on_the_switch_the_doctor_recommends() {
    // The whole read, and the pod's own (narrowed) view that `rdmatopo doctor` uses.
    let root = support::fixtures_dir()
        .join("pod-h100-acs-redirect")
        .join("root");
    let owned = rdmatopo::discover_in(Some(&root), rdmatopo::View::Owned).unwrap();
    assert!(owned.view.is_some(), "not narrowed");
    let r = report("pod-h100-acs-redirect");
    assert_eq!(doctor::run(&owned), r);
    // The pod's VF is NODE from its GPU: the distance check recommends the PF under the
    // GPU's own switch, whose downstream ports redirect peer-to-peer.
    assert_eq!(outcome(&r, "gpu-nic-distance"), Outcome::Error);
    assert!(has(&r, "gpu-nic-distance", "see acs-redirect"));
    assert_eq!(outcome(&r, "acs-redirect"), Outcome::Warning);
    let w = r
        .findings
        .iter()
        .find(|f| f.check == "acs-redirect")
        .unwrap();
    for text in [
        "0000:bf:00.0",
        "0000:bf:01.0",
        "0000:c2:00.0",
        "GPU5 (0000:c3:00.0)",
        "(0000:c0:00.0), the device gpu-nic-distance recommends",
    ] {
        assert!(w.summary.contains(text), "{text}: {}", w.summary);
    }
    assert!(w.fix.contains("disable ACS"), "{}", w.fix);
}

#[test]
fn the_same_pod_without_faults() {
    let r = report("pod-h100-1gpu-1vf");
    for check in [
        "numa-affinity",
        "gpu-nic-distance",
        "mtu",
        "rdma-cgroup",
        "multi-rail",
        "pcie-link",
        "acs-redirect",
        "gpudirect-rdma",
        "memlock",
        "roce-gid",
    ] {
        assert_eq!(outcome(&r, check), Outcome::Ok, "{check}");
    }
    assert_eq!(outcome(&r, "rdma-devices"), Outcome::Info);
    assert_eq!(r.exit_code(), 0);
}

#[test]
fn hosts() {
    // ACS is on at the root ports only, above every GPU-NIC switch: no redirect between them.
    assert_eq!(outcome(&report("h100-dgx"), "acs-redirect"), Outcome::Ok);
    // The CX-7 at b8:00.0 trained at 16 GT/s of 32.
    let r = report("dual-socket-pcie");
    assert_eq!(outcome(&r, "pcie-link"), Outcome::Warning);
    assert!(has(
        &r,
        "pcie-link",
        "mlx5_2 (0000:b8:00.0) link trained at 16 GT/s x16"
    ));
    // Idle GPUs at 2.5 GT/s are information only; no peer-memory module is a warning.
    let r = report("workstation-2gpu");
    assert_eq!(outcome(&r, "pcie-link"), Outcome::Info);
    assert_eq!(outcome(&r, "gpudirect-rdma"), Outcome::Warning);
    // Nothing to judge on a machine without devices.
    let r = report("no-devices");
    assert_eq!(r.exit_code(), 0);
    assert!(r.findings.is_empty());
}
