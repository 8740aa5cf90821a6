//! The doctor's conclusions on the fixtures built for it (each fault) and on their
//! fault-free counterpart, check by check.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;
use rdmatopo::checks::doctor::{self, Outcome, Report};

fn report(name: &str) -> Report {
    let root = support::root(name);
    doctor::run(&support::discover(&root))
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
    assert!(has(
        &r,
        "numa-affinity",
        "(4-7,116-119) is local to GPU0 (host GPU5, 0000:c3:00.0)"
    ));
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
    let root = support::root("pod-h100-acs-redirect");
    let owned = support::discover_in(&root, rdmatopo::View::Owned);
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
        "GPU0 (host GPU5, 0000:c3:00.0)",
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

/// Exclusive RDMA netns mode (rdma-cni): the pod's namespace lists its VF's RDMA device
/// alone, while the uverbs entries of the host's other devices stay in sysfs naming
/// devices it cannot see. It is judged as the shared-mode pod is, less what it cannot see.
#[test]
fn exclusive_netns_pod_sees_and_judges_its_own_device() {
    let root = support::root("pod-h100-rdma-exclusive");
    let topo = support::discover(&root);
    assert_eq!(
        topo.host.rdma_netns_mode,
        Some(rdmatopo::model::NetnsMode::Exclusive)
    );
    let names: Vec<&str> = topo.rdma_devices.iter().map(|d| d.name.as_str()).collect();
    assert_eq!((names, topo.rdma_device_count()), (vec!["mlx5_22"], 1));
    let r = doctor::run(&topo);
    assert!(has(&r, "netns", "RDMA netns mode is exclusive"));
    let netns = r.findings.iter().find(|f| f.check == "netns").unwrap();
    let mode = ("/sys/module/ib_core/parameters/netns_mode", "N");
    assert!(
        netns
            .evidence
            .iter()
            .any(|e| (e.path.as_str(), e.value.as_str()) == mode)
    );
    // The PF's RDMA device is in the host's namespace: the PF is named by its address.
    assert!(has(
        &r,
        "sriov",
        "mlx5_22 is VF 0 of 0000:c0:00.0 (2 VFs enabled)"
    ));
    for check in [
        "numa-affinity",
        "gpu-nic-distance",
        "mtu",
        "multi-rail",
        "pcie-link",
        "gpudirect-rdma",
        "memlock",
        "roce-gid",
        // No other container's device is visible to be listed.
        "rdma-devices",
    ] {
        assert_eq!(outcome(&r, check), Outcome::Ok, "{check}");
    }
    assert_eq!(r.exit_code(), 0);
}

/// An InfiniBand pod given four GPUs and, by the RDMA shared device plugin, all eight
/// compute HCAs: the four far ones are the rails of another pod's GPUs, which NCCL's
/// search passes over while the near ones are up, and no netdev of an IB port is needed
/// in the pod's namespace.
#[test]
fn infiniband_pod_given_every_hca_of_a_shared_pool() {
    let r = report("pod-h100-ib-shared");
    let rails = r.findings.iter().find(|f| f.check == "multi-rail").unwrap();
    assert_eq!(outcome(&r, "multi-rail"), Outcome::Info);
    assert!(rails.summary.contains(
        "NCCL also opens mlx5_0, mlx5_3, mlx5_4 and mlx5_5 (InfiniBand, 400 Gb/s), SYS from every GPU in use"
    ));
    assert!(rails.fix.ends_with(
        "NCCL_IB_HCA==mlx5_6:1,mlx5_9:1,mlx5_10:1,mlx5_11:1 (from `rdmatopo nccl-env`)"
    ));
    assert!(has(
        &r,
        "netns",
        "the IPoIB netdevs of mlx5_0, mlx5_3, mlx5_4, mlx5_5, mlx5_6, mlx5_9, mlx5_10 and mlx5_11 stay in the host namespace"
    ));
    assert!(!has(&r, "netns", "their MTU and carrier cannot be read"));
    let netns = r.findings.iter().find(|f| f.check == "netns").unwrap();
    assert!(
        netns
            .why
            .contains("an InfiniBand port is addressed by its LID and port GIDs")
    );
    assert_eq!(netns.fix, "nothing to change");
    for check in ["numa-affinity", "gpu-nic-distance", "pcie-link", "memlock"] {
        assert_eq!(outcome(&r, check), Outcome::Ok, "{check}");
    }
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

/// A macvlan pod on a shared HCA: the upstream kernel lists the host's GIDs (host
/// netdev names) at 0-3 of the pod's table, MLNX_OFED reads them as zero. Either way
/// the pod's GID is its macvlan's (5), and only its slots count; doctor names the
/// host's as another namespace's where they are listed.
#[test]
fn macvlan_pod_gid_is_its_namespaces_on_every_driver() {
    for name in ["pod-macvlan-inbox", "pod-macvlan-ofed"] {
        let r = report(name);
        assert!(
            has(
                &r,
                "netns",
                "GID index right here: mlx5_9 -> 5 (10.109.0.131 on net1)"
            ),
            "{name}"
        );
        // The host's four GIDs are named as another namespace's where the driver
        // shows them (upstream), and nowhere under MLNX_OFED, which reads them as zero.
        assert_eq!(
            has(
                &r,
                "netns",
                "mlx5_9 also lists 4 GIDs of enp192s0np0 (netdevs outside this namespace: unusable here)"
            ),
            name == "pod-macvlan-inbox",
            "{name}"
        );
        assert_eq!(
            has(&r, "netns", "enp192s0np0"),
            name == "pod-macvlan-inbox",
            "{name}"
        );
        // The upstream kernel lists the host's GIDs first, and NCCL's own scan
        // (ncclIbGetGidIndex) takes the host's IPv4 RoCE v2 GID at 3; MLNX_OFED's
        // zeroed slots leave NCCL on the pod's 5.
        let netns = r.findings.iter().find(|f| f.check == "netns").unwrap();
        if name == "pod-macvlan-inbox" {
            assert_eq!(
                netns.fix,
                "set NCCL_IB_GID_INDEX=5: NCCL's own GID choice would take another namespace's GID here (mlx5_9 -> 3)"
            );
        } else {
            assert!(netns.fix.starts_with("nothing to change"), "{}", netns.fix);
        }
        assert_eq!(outcome(&r, "roce-gid"), Outcome::Ok, "{name}");
        let note = &r
            .checks
            .iter()
            .find(|c| c.check == "roce-gid")
            .unwrap()
            .note;
        assert_eq!(
            note, "RoCE v2 IPv4 GID per port: mlx5_9: 5 (10.109.0.131)",
            "{name}"
        );
        let plan =
            rdmatopo::view::gid::choose_gid(&support::discover(&support::root(name)), "mlx5_9", 1)
                .unwrap();
        assert_eq!(
            (plan.index, plan.netdev.as_deref()),
            (5, Some("net1")),
            "{name}"
        );
    }
}

/// `gids` keeps show_gids's rows and marks those of other namespaces after its last
/// column; the OFED table has none to mark.
#[test]
fn gids_marks_other_namespaces_rows() {
    let gids = |name: &str| {
        let root = support::root(name);
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_rdmatopo"))
            .args(["gids", "--root"])
            .arg(&root)
            .arg("mlx5_9")
            .env_clear()
            .output()
            .unwrap();
        assert!(out.status.success(), "{name}");
        // show_gids's table on stdout; the legend and NCCL's choice on stderr.
        (
            String::from_utf8(out.stdout).unwrap(),
            String::from_utf8(out.stderr).unwrap(),
        )
    };
    let (inbox, inbox_said) = gids("pod-macvlan-inbox");
    let rows: Vec<&str> = inbox
        .lines()
        .filter(|l| l.starts_with("mlx5_9\t"))
        .collect();
    assert_eq!(rows.len(), 6, "{inbox}");
    for row in &rows[..4] {
        assert!(row.ends_with("\tenp192s0np0\t[other netns]"), "{row}");
    }
    assert_eq!(
        rows[5],
        "mlx5_9\t1\t5\t0000:0000:0000:0000:0000:ffff:0a6d:0083\t10.109.0.131  \tv2\tnet1"
    );
    assert!(inbox.ends_with("n_gids_found=6\n"), "{inbox}");
    assert!(inbox_said.starts_with("[other netns]: 4 GIDs of netdevs outside"));
    assert!(inbox_said.contains("  mlx5_9\tindex 5\t10.109.0.131 on net1"));
    let (ofed, ofed_said) = gids("pod-macvlan-ofed");
    assert!(!ofed.contains("[other netns]"), "{ofed}");
    assert!(!ofed_said.contains("[other netns]"), "{ofed_said}");
    assert!(ofed.ends_with("n_gids_found=2\n"));
    assert!(ofed_said.contains("  mlx5_9\tindex 5\t10.109.0.131 on net1"));
}

/// A forced `NCCL_IB_GID_INDEX` that lands on the host's GID (listed by the upstream
/// kernel) is no GID of this namespace: the same error as an empty slot.
#[test]
fn forced_gid_index_on_a_host_gid_is_an_error() {
    for name in ["pod-macvlan-inbox", "pod-macvlan-ofed"] {
        let root = support::root(name);
        let mut topo = support::discover(&root);
        topo.process
            .env
            .insert("NCCL_IB_GID_INDEX".into(), "3".into());
        let r = doctor::run(&topo);
        assert!(
            has(
                &r,
                "netns",
                "NCCL_IB_GID_INDEX=3 but mlx5_9 has no GID at index 3 in this namespace"
            ),
            "{name}"
        );
        assert!(has(&r, "netns", "(the right one here is 5)"), "{name}");
        assert_eq!(
            has(
                &r,
                "netns",
                "(10.109.0.54 there is enp192s0np0's, a netdev of another namespace)"
            ),
            name.ends_with("inbox"),
            "{name}"
        );
        assert_eq!(r.exit_code(), 2, "{name}");
    }
}

/// MLNX_OFED 4.x shows a VF's own netdev `ecn/`: DCQCN off there, on the priority its
/// PF's class gives it, is a warning with the VF's files as evidence and the PF's as the
/// fix; current MLNX_OFED shows none, and the state is the PF's, not visible.
#[test]
fn ecn_of_a_pod_s_vf_is_judged_where_the_driver_shows_it() {
    let r = report("pod-vf-ecn-ofed4");
    assert_eq!(outcome(&r, "roce-qos"), Outcome::Warning);
    let f = r
        .findings
        .iter()
        .find(|f| f.check == "roce-qos" && f.summary.contains("ECN (DCQCN) is off"))
        .expect("an ECN finding");
    assert!(f.summary.contains("priority 3 on mlx5_22"), "{}", f.summary);
    assert!(
        f.evidence
            .iter()
            .any(|e| e.path == "/sys/class/net/net1/ecn/roce_np/enable/3" && e.value == "0"),
        "{:?}",
        f.evidence
    );
    assert!(
        f.fix.contains("<netdev of mlx5_9>/ecn/roce_rp/enable/3"),
        "{}",
        f.fix
    );
    let without = report("pod-vf-qos-mismatch");
    assert!(!has(&without, "roce-qos", "ECN (DCQCN) is off"));
}

/// The GPUs of `tree` by a whole read and by `topo`'s, which must agree.
fn gpus_of(tree: &rdmatopo::sysfs::MemTree) -> Vec<String> {
    let read = |needs| {
        let fs = rdmatopo::Sysfs::memory(tree.clone(), "edited");
        let topo = rdmatopo::discover_needs(&fs, needs).unwrap();
        topo.gpus
            .iter()
            .map(|g| g.pci.to_string())
            .collect::<Vec<_>>()
    };
    let whole = read(rdmatopo::Needs::ALL);
    assert_eq!(
        read(rdmatopo::Needs::TOPO),
        whole,
        "topo's read numbers other GPUs"
    );
    whole
}

/// A GPU passed to a VM (`vfio-pci`) has no number on its host, as in nvidia-smi: one
/// GPU, GPU0 = 01:00.0, and doctor says why 03:00.0 is left out. The same GPU bound to no
/// driver (the nvidia probe failed) is a warning. Where the nvidia driver holds nothing,
/// every NVIDIA display function is a GPU, as before.
#[test]
fn a_gpu_outside_the_nvidia_driver_has_no_number() {
    let r = report("workstation-vfio");
    assert_eq!(outcome(&r, "gpu-driver"), Outcome::Info);
    assert!(has(
        &r,
        "gpu-driver",
        "0000:03:00.0 (AD102GL [RTX 6000 Ada Generation]) is bound to vfio-pci, not nvidia"
    ));
    assert_eq!(
        outcome(&report("workstation-2gpu"), "gpu-driver"),
        Outcome::Ok
    );

    let archive = support::root("workstation-vfio");
    let passed = rdmatopo::snapshot::load(&archive).unwrap();
    assert_eq!(gpus_of(&passed), ["0000:01:00.0"]);
    let unbind = |tree: &mut rdmatopo::sysfs::MemTree, bdf: &str, driver: &str| {
        let path = tree
            .entries()
            .map(|(p, _)| p.to_string())
            .find(|p| p.starts_with("/sys/devices/") && p.ends_with(&format!("/{bdf}/uevent")))
            .unwrap();
        let uevent = tree
            .text(&path)
            .unwrap()
            .replace(&format!("DRIVER={driver}\n"), "");
        tree.file(&path, &uevent)
            .remove(&path.replace("/uevent", "/driver"))
            .remove(&format!("/sys/bus/pci/drivers/{driver}/{bdf}"));
    };
    let mut failed = passed.clone();
    unbind(&mut failed, "0000:03:00.0", "vfio-pci");
    assert_eq!(gpus_of(&failed), ["0000:01:00.0"]);
    let fs = rdmatopo::Sysfs::memory(failed, "edited");
    let r = doctor::run(&rdmatopo::discover_needs(&fs, rdmatopo::Needs::ALL).unwrap());
    assert_eq!(outcome(&r, "gpu-driver"), Outcome::Warning);
    assert!(has(
        &r,
        "gpu-driver",
        "0000:03:00.0 (AD102GL [RTX 6000 Ada Generation]) is bound to no driver"
    ));

    let mut no_nvidia = passed;
    unbind(&mut no_nvidia, "0000:01:00.0", "nvidia");
    no_nvidia.remove("/sys/bus/pci/drivers/nvidia");
    assert_eq!(gpus_of(&no_nvidia), ["0000:01:00.0", "0000:03:00.0"]);
}

/// DCQCN on priority 3 only while no class is visible from the pod (`pod-vf-ecn-partial`):
/// the priorities that are off are named, with the host's fix on the PF.
#[test]
fn ecn_on_some_priorities_of_a_pod_s_vf_without_a_visible_class() {
    let r = report("pod-vf-ecn-partial");
    assert_eq!(outcome(&r, "roce-qos"), Outcome::Warning);
    let f = r
        .findings
        .iter()
        .find(|f| f.check == "roce-qos" && f.summary.contains("on only for priority 3"))
        .expect("a partial-ECN finding");
    assert!(
        f.summary.contains("off for 0,1,2,4,5,6,7 on mlx5_22"),
        "{}",
        f.summary
    );
    assert!(
        f.evidence
            .iter()
            .any(|e| e.path == "/sys/class/net/net1/ecn/roce_np/enable" && e.value == "on for 3"),
        "{:?}",
        f.evidence
    );
    assert!(f.fix.contains("NCCL_IB_TC=106"), "{}", f.fix);
    assert!(
        f.fix
            .contains("/sys/class/net/<netdev of mlx5_9>/ecn/roce_rp/enable/$p"),
        "{}",
        f.fix
    );
}
