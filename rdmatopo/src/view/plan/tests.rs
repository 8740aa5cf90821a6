use super::testkit::{Builder, NicSpec, dgx_like, gid, netdev};
use super::*;
use crate::parse::GidType;
use proptest::prelude::*;

fn plan(t: &Topology) -> Plan {
    Plan::compute(t, &PlanOptions::default()).unwrap()
}

fn with_env(t: &Topology, kv: &[(&str, &str)]) -> Result<Plan, ViewError> {
    let opts = PlanOptions {
        env: kv
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        ..Default::default()
    };
    Plan::compute(t, &opts)
}

fn excluded_reason<'p>(p: &'p Plan, dev: &str) -> &'p str {
    &p.excluded
        .iter()
        .find(|e| e.device == dev)
        .unwrap_or_else(|| panic!("{dev} not excluded: {:?}", p.excluded))
        .reason
}

#[test]
fn dgx_like_one_rail_per_gpu_and_numa_split() {
    let p = plan(&dgx_like());
    assert_eq!(p.ranks.len(), 8);
    for r in &p.ranks {
        assert_eq!(r.hcas, vec![format!("mlx5_{}:1", r.local_rank)], "{r:?}");
        assert_eq!(r.gid_index, None);
    }
    assert_eq!(
        p.env["NCCL_IB_HCA"],
        "=mlx5_0:1,mlx5_1:1,mlx5_2:1,mlx5_3:1,mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_7:1"
    );
    assert_eq!(p.env["NCCL_SOCKET_IFNAME"], "=eno1");
    assert!(!p.env.contains_key("NCCL_IB_GID_INDEX"));
    assert!(excluded_reason(&p, "mlx5_8").contains("differs from the compute fabric (InfiniBand"));
    // Node 0 is 0-55,112-167: four ranks, hyperthread siblings kept together.
    let cpus: Vec<String> = p.ranks.iter().map(|r| r.cpus.to_string()).collect();
    assert_eq!(
        cpus,
        [
            "0-13,112-125",
            "14-27,126-139",
            "28-41,140-153",
            "42-55,154-167",
            "56-69,168-181",
            "70-83,182-195",
            "84-97,196-209",
            "98-111,210-223"
        ]
    );
    assert_eq!(p.ranks[5].numa_node, Some(1));
    for k in p.env.keys() {
        assert!(p.env_reasons.contains_key(k), "{k} has no reason");
    }
}

#[test]
fn local_rank_from_option_and_environment() {
    let t = dgx_like();
    let p = Plan::compute(
        &t,
        &PlanOptions {
            local_rank: Some(3),
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(p.ranks.len(), 1);
    assert_eq!(p.ranks[0].hcas, ["mlx5_3:1"]);
    // The node-wide variables do not depend on the rank.
    assert_eq!(p.env, plan(&t).env);
    let p = with_env(&t, &[("LOCAL_RANK", "6"), ("LOCAL_WORLD_SIZE", "8")]).unwrap();
    assert_eq!(p.ranks[0].local_rank, 6);
    let p = with_env(&t, &[("OMPI_COMM_WORLD_LOCAL_RANK", "2")]).unwrap();
    assert_eq!(p.ranks[0].local_rank, 2);
    assert!(with_env(&t, &[("LOCAL_RANK", "x")]).is_err());
    assert!(with_env(&t, &[("LOCAL_RANK", "8")]).is_err());
}

#[test]
fn cuda_visible_devices_in_every_form() {
    let t = dgx_like();
    let gpu = |p: &Plan, r: usize| p.ranks[r].gpu.to_string();
    let p = with_env(&t, &[("CUDA_VISIBLE_DEVICES", "2,3")]).unwrap();
    assert_eq!(p.ranks.len(), 2);
    assert_eq!(
        (gpu(&p, 0), gpu(&p, 1)),
        ("0000:3a:00.0".into(), "0000:5d:00.0".into())
    );
    assert_eq!(p.ranks[0].hcas, ["mlx5_2:1"]);
    let full = t.gpus[5].uuid.clone().unwrap();
    let p = with_env(&t, &[("CUDA_VISIBLE_DEVICES", &full)]).unwrap();
    assert_eq!(gpu(&p, 0), "0000:ab:00.0");
    let p = with_env(&t, &[("CUDA_VISIBLE_DEVICES", "GPU-000000a7,0")]).unwrap();
    assert_eq!(
        (gpu(&p, 0), gpu(&p, 1)),
        ("0000:db:00.0".into(), "0000:18:00.0".into())
    );
    let p = with_env(&t, &[("CUDA_VISIBLE_DEVICES", "000000a1")]).unwrap();
    assert_eq!(gpu(&p, 0), "0000:2a:00.0");
    // An ambiguous prefix, like an unknown index, ends the list for CUDA.
    let p = with_env(&t, &[("CUDA_VISIBLE_DEVICES", "1,GPU-0000,3")]).unwrap();
    assert_eq!(p.ranks.len(), 1);
    assert!(p.notes.iter().any(|n| n.contains("\"GPU-0000\"")));
    let p = with_env(&t, &[("CUDA_VISIBLE_DEVICES", "0,9,1")]).unwrap();
    assert_eq!(p.ranks.len(), 1);
    let p = with_env(&t, &[("CUDA_VISIBLE_DEVICES", "")]).unwrap();
    assert!(p.ranks.is_empty());
    let mut no_uuid = t.clone();
    no_uuid.gpus.iter_mut().for_each(|g| g.uuid = None);
    assert!(with_env(&no_uuid, &[("CUDA_VISIBLE_DEVICES", "GPU-1")]).is_err());
    assert!(with_env(&t, &[("CUDA_VISIBLE_DEVICES", "MIG-abc")]).is_err());
}

#[test]
fn far_hcas_excluded_when_close_ones_exist() {
    let t = dgx_like();
    let p = with_env(&t, &[("CUDA_VISIBLE_DEVICES", "0,1")]).unwrap();
    // GPUs 0 and 1 each have their own rail: GPUs 2 and 3's, NODE away, stay out too.
    assert_eq!(p.env["NCCL_IB_HCA"], "=mlx5_0:1,mlx5_1:1");
    assert!(excluded_reason(&p, "mlx5_6").contains("SYS"));
    let r = excluded_reason(&p, "mlx5_2");
    assert!(
        r.contains("rail of GPU 0000:3a:00.0") && r.contains("than NODE"),
        "{r}"
    );
    assert_eq!(p.ranks[1].hcas, ["mlx5_1:1"]);
    // With a GPU that has no close HCA, NODE ones stay.
    let mut far = t.clone();
    far.rdma_devices.retain(|d| d.name != "mlx5_1");
    let p = with_env(&far, &[("CUDA_VISIBLE_DEVICES", "0,1")]).unwrap();
    assert!(p.env["NCCL_IB_HCA"].contains("mlx5_2:1"), "{:?}", p.env);
}

#[test]
fn down_software_and_front_end_ports_are_excluded() {
    let mut b = Builder::new(&["0-15"]);
    b.host_bridge("pci0000:00", Some(0));
    b.switch(
        "pci0000:00",
        "0000:00:01.0",
        "0000:01:00.0",
        &["0000:02:00.0", "0000:02:01.0", "0000:02:02.0"],
    );
    b.gpu("0000:03:00.0", "pci0000:00", Some("0000:02:00.0"));
    b.nic(
        NicSpec::new("mlx5_0", "0000:04:00.0", Some("0000:02:01.0"), "pci0000:00")
            .roce("ens1", "10.0.0.1"),
    );
    b.nic(
        NicSpec::new("mlx5_1", "0000:05:00.0", Some("0000:02:02.0"), "pci0000:00")
            .roce("ens2", "10.0.1.1")
            .down(),
    );
    b.host_bridge("pci0000:80", Some(0));
    b.bridge("0000:80:01.0", "pci0000:80", None);
    b.nic(
        NicSpec::new("mlx5_2", "0000:81:00.0", Some("0000:80:01.0"), "pci0000:80")
            .roce("eno1", "192.168.0.2"),
    );
    let mut t = b.build();
    t.host.default_route_interface = Some("eno1".into());
    let mut rxe = t.rdma_devices[0].clone();
    rxe.name = "rxe0".into();
    rxe.pci = None;
    t.rdma_devices.push(rxe);
    let p = plan(&t);
    assert_eq!(p.env["NCCL_IB_HCA"], "=mlx5_0:1");
    assert!(excluded_reason(&p, "mlx5_1").contains("ports/1/state is DOWN"));
    assert!(excluded_reason(&p, "mlx5_2").contains("default route"));
    assert!(excluded_reason(&p, "rxe0").contains("software RDMA device"));
    // NCCL's own scan lands on 3 too: no NCCL_IB_GID_INDEX.
    assert!(!p.env.contains_key("NCCL_IB_GID_INDEX"));
    assert!(
        p.notes
            .iter()
            .any(|n| n.contains("own choice is the right GID"))
    );
    assert_eq!(p.ranks[0].gid_index, Some(3));
    assert_eq!(p.gid_index["mlx5_0:1"], 3);
    // The only HCA carrying the default route stays.
    let mut only = t.clone();
    only.host.default_route_interface = Some("ens1".into());
    only.rdma_devices.retain(|d| d.name == "mlx5_0");
    assert_eq!(plan(&only).env["NCCL_IB_HCA"], "=mlx5_0:1");
}

#[test]
fn gid_index_only_when_uniform() {
    let mut b = Builder::new(&["0-15"]);
    b.host_bridge("pci0000:00", Some(0));
    b.switch(
        "pci0000:00",
        "0000:00:01.0",
        "0000:01:00.0",
        &[
            "0000:02:00.0",
            "0000:02:01.0",
            "0000:02:02.0",
            "0000:02:03.0",
        ],
    );
    b.gpu("0000:03:00.0", "pci0000:00", Some("0000:02:00.0"));
    b.gpu("0000:06:00.0", "pci0000:00", Some("0000:02:03.0"));
    b.nic(
        NicSpec::new("mlx5_0", "0000:04:00.0", Some("0000:02:01.0"), "pci0000:00")
            .roce("net1", "10.0.0.1"),
    );
    b.nic(
        NicSpec::new("mlx5_1", "0000:05:00.0", Some("0000:02:02.0"), "pci0000:00")
            .roce("net2", "10.0.1.1"),
    );
    let mut t = b.build();
    // A pod: mlx5_1's table also holds the host's address, whose netdev is elsewhere,
    // and its own address sits at 4/5.
    let port = &mut t.rdma_devices[1].ports[0];
    port.gids = vec![
        gid(2, "::ffff:10.9.9.9", Some(GidType::IbRoceV1), Some("ens2")),
        gid(3, "::ffff:10.9.9.9", Some(GidType::RoceV2), Some("ens2")),
        gid(4, "::ffff:10.0.1.1", Some(GidType::IbRoceV1), Some("net2")),
        gid(5, "::ffff:10.0.1.1", Some(GidType::RoceV2), Some("net2")),
    ];
    let p = plan(&t);
    assert!(!p.env.contains_key("NCCL_IB_GID_INDEX"));
    assert_eq!(p.gid_index["mlx5_0:1"], 3);
    assert_eq!(p.gid_index["mlx5_1:1"], 5);
    assert!(p.notes.iter().any(|n| n.contains("mlx5_1:1=5")));
    // Two GPUs, two NICs at PIX: each GPU its own.
    assert_eq!(p.ranks[0].hcas, ["mlx5_0:1"]);
    assert_eq!(p.ranks[1].hcas, ["mlx5_1:1"]);
    assert_eq!(p.ranks[1].gid_index, Some(5));
    // With no GID whose netdev is here, the port cannot be used.
    t.netdevs.retain(|n| n.name != "net2");
    let p = plan(&t);
    assert!(excluded_reason(&p, "mlx5_1").contains("without a GID usable"));
    assert!(!p.env.contains_key("NCCL_IB_GID_INDEX"));
}

/// `NCCL_IB_GID_INDEX` is set only where NCCL's own scan (under the environment's
/// `NCCL_IB_ADDR_*` variables) would take another GID than the right one.
#[test]
fn gid_index_only_where_nccl_would_choose_wrong() {
    let mut b = Builder::new(&["0-15"]);
    b.host_bridge("pci0000:00", Some(0));
    b.switch(
        "pci0000:00",
        "0000:00:01.0",
        "0000:01:00.0",
        &["0000:02:00.0", "0000:02:01.0"],
    );
    b.gpu("0000:03:00.0", "pci0000:00", Some("0000:02:00.0"));
    b.nic(
        NicSpec::new("mlx5_1", "0000:04:00.0", Some("0000:02:01.0"), "pci0000:00")
            .roce("net1", "10.0.1.1"),
    );
    let mut t = b.build();
    // The upstream kernel shows a pod the host's GIDs (netdev ens2, not here) first.
    t.rdma_devices[0].ports[0].gids = vec![
        gid(2, "::ffff:10.9.9.9", Some(GidType::IbRoceV1), Some("ens2")),
        gid(3, "::ffff:10.9.9.9", Some(GidType::RoceV2), Some("ens2")),
        gid(4, "::ffff:10.0.1.1", Some(GidType::IbRoceV1), Some("net1")),
        gid(5, "::ffff:10.0.1.1", Some(GidType::RoceV2), Some("net1")),
    ];
    let p = plan(&t);
    assert_eq!(p.env["NCCL_IB_GID_INDEX"], "5");
    assert!(p.env_reasons["NCCL_IB_GID_INDEX"].contains("mlx5_1:1 would get 3 (10.9.9.9"));
    // A range that leaves the host's subnet out steers NCCL itself to 5.
    let p = with_env(&t, &[("NCCL_IB_ADDR_RANGE", "10.0.0.0/16")]).unwrap();
    assert!(!p.env.contains_key("NCCL_IB_GID_INDEX"));
    assert!(p.notes.iter().any(|n| n.contains("NCCL_IB_ADDR_RANGE")));
    // RoCE v1 wanted: NCCL keeps the host's v1 GID at 2; still wrong.
    let p = with_env(&t, &[("NCCL_IB_ROCE_VERSION_NUM", "1")]).unwrap();
    assert!(p.env_reasons["NCCL_IB_GID_INDEX"].contains("would get 2"));
}

#[test]
fn dual_port_cards_are_one_nic_and_ties_spread() {
    let mut b = Builder::new(&["0-31"]);
    b.host_bridge("pci0000:00", Some(0));
    b.switch(
        "pci0000:00",
        "0000:00:01.0",
        "0000:01:00.0",
        &[
            "0000:02:00.0",
            "0000:02:01.0",
            "0000:02:02.0",
            "0000:02:03.0",
        ],
    );
    b.gpu("0000:03:00.0", "pci0000:00", Some("0000:02:00.0"));
    b.gpu("0000:04:00.0", "pci0000:00", Some("0000:02:01.0"));
    for (name, a, dsp, guid) in [
        ("mlx5_0", "0000:05:00.0", "0000:02:02.0", "a"),
        ("mlx5_1", "0000:05:00.1", "0000:02:02.0", "a"),
        ("mlx5_2", "0000:06:00.0", "0000:02:03.0", "b"),
        ("mlx5_3", "0000:06:00.1", "0000:02:03.0", "b"),
    ] {
        let mut s = NicSpec::new(name, a, Some(dsp), "pci0000:00");
        s.guid = Some(format!("b8ce:f603:00a1:b2c{guid}"));
        b.nic(s);
    }
    let t = b.build();
    let p = plan(&t);
    assert_eq!(p.ranks[0].hcas, ["mlx5_0:1", "mlx5_1:1"]);
    assert_eq!(p.ranks[1].hcas, ["mlx5_2:1", "mlx5_3:1"]);
    assert!(
        p.ranks[0]
            .reasons
            .iter()
            .any(|r| r.contains("mlx5_0:1+mlx5_1:1"))
    );
    // NCCL's own fusion of each card's two ports into a virtual NIC.
    assert!(
        p.ranks[1]
            .reasons
            .iter()
            .any(|r| r == "NCCL fuses mlx5_2:1 and mlx5_3:1 into one virtual NIC (mlx5_2+mlx5_3)"),
        "{:?}",
        p.ranks[1].reasons
    );
    assert_eq!(
        p.notes
            .iter()
            .filter(|n| n.contains("into one virtual NIC"))
            .count(),
        2
    );
    // Turned off, or limited to equal rail ids that the list does not give.
    for env in [
        &[("NCCL_IB_MERGE_NICS", "0")][..],
        &[("NCCL_NET_MERGE_LEVEL", "LOC")],
        &[("NCCL_NET_MERGE_POLICY", "rail")],
    ] {
        let p = with_env(&t, env).unwrap();
        assert!(
            !p.notes.iter().any(|n| n.contains("virtual NIC")),
            "{env:?}"
        );
    }
    // NCCL_NETDEVS_POLICY: ALL gives both GPUs both cards, MAX:1 one card each.
    let p = with_env(&t, &[("NCCL_NETDEVS_POLICY", "all")]).unwrap();
    for r in &p.ranks {
        assert_eq!(r.hcas, ["mlx5_0:1", "mlx5_1:1", "mlx5_2:1", "mlx5_3:1"]);
    }
    let p = with_env(&t, &[("NCCL_NETDEVS_POLICY", "MAX:1")]).unwrap();
    assert_eq!(p.ranks[1].hcas, ["mlx5_2:1", "mlx5_3:1"]);
    assert!(
        p.ranks[1]
            .reasons
            .iter()
            .any(|r| r.contains("NCCL_NETDEVS_POLICY=MAX:1"))
    );
    // Not a policy NCCL knows: AUTO.
    let p = with_env(&t, &[("NCCL_NETDEVS_POLICY", "MAX:0")]).unwrap();
    assert_eq!(p.ranks[0].hcas, ["mlx5_0:1", "mlx5_1:1"]);
    // RAIL with rail ids from NCCL_IB_HCA: only mlx5_0/mlx5_1 share one.
    let p = with_env(
        &t,
        &[
            ("NCCL_NET_MERGE_POLICY", "RAIL"),
            (
                "NCCL_IB_HCA",
                "=mlx5_0:1:0,mlx5_1:1:0,mlx5_2:1:0,mlx5_3:1:1",
            ),
        ],
    )
    .unwrap();
    let fused: Vec<&String> = p
        .notes
        .iter()
        .filter(|n| n.contains("virtual NIC"))
        .collect();
    assert_eq!(fused.len(), 1, "{fused:?}");
    assert!(fused[0].contains("mlx5_0+mlx5_1"));
    // Two GPUs and four separate NICs under one switch: NCCL's example, 0,1 and 2,3.
    let mut b = Builder::new(&["0-31"]);
    b.host_bridge("pci0000:00", Some(0));
    b.switch(
        "pci0000:00",
        "0000:00:01.0",
        "0000:01:00.0",
        &[
            "0000:02:00.0",
            "0000:02:01.0",
            "0000:02:02.0",
            "0000:02:03.0",
            "0000:02:04.0",
            "0000:02:05.0",
        ],
    );
    b.gpu("0000:03:00.0", "pci0000:00", Some("0000:02:00.0"));
    b.gpu("0000:04:00.0", "pci0000:00", Some("0000:02:01.0"));
    for i in 0..4 {
        b.nic(NicSpec::new(
            &format!("mlx5_{i}"),
            &format!("0000:{:02x}:00.0", 5 + i),
            Some(&format!("0000:02:{:02x}.0", 2 + i)),
            "pci0000:00",
        ));
    }
    let p = plan(&b.build());
    assert_eq!(p.ranks[0].hcas, ["mlx5_0:1", "mlx5_1:1"]);
    assert_eq!(p.ranks[1].hcas, ["mlx5_2:1", "mlx5_3:1"]);
}

#[test]
fn pf_and_vf_of_one_port_and_vm_merge_clash() {
    let mut b = Builder::new(&["0-15"]);
    b.host_bridge("pci0000:00", Some(0));
    b.bridge("0000:00:01.0", "pci0000:00", None);
    b.gpu("0000:01:00.0", "pci0000:00", Some("0000:00:01.0"));
    b.bridge("0000:00:02.0", "pci0000:00", None);
    b.nic(NicSpec::new(
        "mlx5_0",
        "0000:02:00.0",
        Some("0000:00:02.0"),
        "pci0000:00",
    ));
    let mut vf = NicSpec::new("mlx5_1", "0000:02:00.2", Some("0000:00:02.0"), "pci0000:00");
    vf.is_vf_of = Some("0000:02:00.0".into());
    b.nic(vf);
    let p = plan(&b.build());
    assert_eq!(p.env["NCCL_IB_HCA"], "=mlx5_0:1");
    assert!(excluded_reason(&p, "mlx5_1").contains("same physical port as mlx5_0:1"));

    // A VM: two VFs of different adapters on bus 0 collapse to 0000:00:00.0 in NCCL.
    let mut b = Builder::new(&["0-15"]);
    b.host_bridge("pci0000:00", Some(0));
    b.gpu("0000:00:04.0", "pci0000:00", None);
    for (name, a, g) in [
        ("mlx5_0", "0000:00:05.0", "1"),
        ("mlx5_1", "0000:00:06.0", "2"),
    ] {
        let mut s = NicSpec::new(name, a, None, "pci0000:00");
        s.guid = Some(format!("0000:0000:0000:000{g}"));
        b.nic(s);
    }
    let p = plan(&b.build());
    assert_eq!(p.env["NCCL_IB_MERGE_VFS"], "0");
    assert!(p.env_reasons["NCCL_IB_MERGE_VFS"].contains("all become 0000:00:00.0"));
}

#[test]
fn cpu_binding_falls_back_loudly_and_is_never_empty() {
    let mut t = dgx_like();
    // The cgroup allows node 0 only; the ranks on node 1 lose locality.
    t.process.cgroup_cpuset = Some("0-55,112-167".parse().unwrap());
    let p = plan(&t);
    for r in &p.ranks {
        assert!(!r.cpus.is_empty());
    }
    assert!(p.notes.iter().any(|n| n.contains("lose CPU locality")));
    // Node 0's CPUs are taken by ranks 0-3, so the fallback is what remains: nothing,
    // hence the whole usable set.
    assert!(p.ranks[4].reasons.iter().any(|r| r.contains("fallback to")));
    // Fewer CPUs than ranks: shared, said, but never empty.
    t.process.cgroup_cpuset = Some("0-1".parse().unwrap());
    let p = plan(&t);
    assert!(p.ranks.iter().all(|r| !r.cpus.is_empty()));
    assert!(p.notes.iter().any(|n| n.contains("share")));
}

#[test]
fn json_contract() {
    let mut t = dgx_like();
    t.netdevs.push(netdev("ib0", None));
    let p = plan(&t);
    let v: serde_json::Value = serde_json::from_str(&p.to_json()).unwrap();
    assert_eq!(v["schema"], "rdmatopo.nccl-env/1");
    assert_eq!(v["env"]["NCCL_SOCKET_IFNAME"], "=eno1");
    assert_eq!(v["ranks"][0]["local_rank"], 0);
    assert_eq!(v["ranks"][0]["gpu"], "0000:18:00.0");
    assert_eq!(v["ranks"][0]["hcas"][0], "mlx5_0:1");
    assert_eq!(v["ranks"][0]["cpus"], "0-13,112-125");
    assert_eq!(v["ranks"][0]["numa_node"], 0);
    assert!(v["ranks"][0]["reasons"].as_array().unwrap().len() >= 3);
    assert_eq!(v["excluded"][0]["device"], "mlx5_8");
    let back: Plan = serde_json::from_str(&p.to_json()).unwrap();
    assert_eq!(back, p);
}

#[test]
fn no_gpu_no_ranks() {
    let mut t = dgx_like();
    t.gpus.clear();
    let p = plan(&t);
    assert!(p.ranks.is_empty());
    assert!(p.env.contains_key("NCCL_IB_HCA"));
    assert!(p.notes.iter().any(|n| n.contains("no GPU is visible")));
}

// ---- property tests ----

#[derive(Debug, Clone)]
struct NicGen {
    infiniband: bool,
    active: bool,
}

#[derive(Debug, Clone)]
struct SwitchGen {
    gpus: usize,
    nics: Vec<NicGen>,
}

/// A random machine: 1-2 NUMA nodes, each with 1-2 switches holding 0-2 GPUs and 0-3
/// HCAs, plus an optional front-end NIC carrying the default route.
fn machine() -> impl Strategy<Value = (Vec<usize>, Vec<Vec<SwitchGen>>, bool)> {
    let nic = (any::<bool>(), prop::bool::weighted(0.8)).prop_map(|(ib, a)| NicGen {
        infiniband: ib,
        active: a,
    });
    let switch = (0usize..3, prop::collection::vec(nic, 0..4))
        .prop_map(|(g, n)| SwitchGen { gpus: g, nics: n });
    let node = prop::collection::vec(switch, 1..3);
    (
        prop::collection::vec(1usize..24, 1..3),
        prop::collection::vec(node, 2),
        any::<bool>(),
    )
}

fn build_machine(cpus: &[usize], nodes: &[Vec<SwitchGen>], front_end: bool) -> Topology {
    let mut start = 0;
    let lists: Vec<String> = cpus
        .iter()
        .map(|n| {
            let s = format!("{}-{}", start, start + n - 1);
            start += n;
            s
        })
        .collect();
    let refs: Vec<&str> = lists.iter().map(String::as_str).collect();
    let mut b = Builder::new(&refs);
    let mut bus = 0x10u32;
    let mut nic_no = 0;
    for (numa, switches) in nodes.iter().take(cpus.len()).enumerate() {
        for sw in switches {
            let hb = format!("pci0000:{bus:02x}");
            b.host_bridge(&hb, Some(numa as u32));
            let rp = format!("0000:{bus:02x}:01.0");
            let usp = format!("0000:{:02x}:00.0", bus + 1);
            let dsps: Vec<String> = (0..sw.gpus + sw.nics.len())
                .map(|d| format!("0000:{:02x}:{d:02x}.0", bus + 2))
                .collect();
            let dref: Vec<&str> = dsps.iter().map(String::as_str).collect();
            b.switch(&hb, &rp, &usp, &dref);
            let mut d = 0;
            for _ in 0..sw.gpus {
                b.gpu(
                    &format!("0000:{:02x}:00.0", bus + 3 + d as u32),
                    &hb,
                    Some(&dsps[d]),
                );
                d += 1;
            }
            for n in &sw.nics {
                let a = format!("0000:{:02x}:00.0", bus + 3 + d as u32);
                let mut s = NicSpec::new(&format!("mlx5_{nic_no}"), &a, Some(&dsps[d]), &hb);
                if !n.infiniband {
                    s = s.roce(&format!("ens{nic_no}"), &format!("10.0.{nic_no}.1"));
                }
                if !n.active {
                    s = s.down();
                }
                b.nic(s);
                nic_no += 1;
                d += 1;
            }
            bus += 0x10;
        }
    }
    let mut t = if front_end {
        b.host_bridge("pci0000:00", Some(0));
        b.bridge("0000:00:01.0", "pci0000:00", None);
        b.nic(
            NicSpec::new(
                "mlx5_99",
                "0000:01:00.0",
                Some("0000:00:01.0"),
                "pci0000:00",
            )
            .roce("eno1", "192.168.0.9"),
        );
        let mut t = b.build();
        t.host.default_route_interface = Some("eno1".into());
        t
    } else {
        b.build()
    };
    t.process.env.clear();
    t
}

fn shuffled(t: &Topology, seed: u64) -> Topology {
    // A deterministic permutation per seed: rotate and reverse.
    let mut s = t.clone();
    let k = seed as usize;
    let rot = |n: usize| if n == 0 { 0 } else { k % n };
    let n = s.rdma_devices.len();
    s.rdma_devices.rotate_left(rot(n));
    if seed & 1 == 1 {
        s.rdma_devices.reverse();
        s.netdevs.reverse();
        s.gpus.reverse();
        s.numa_nodes.reverse();
    }
    let n = s.netdevs.len();
    s.netdevs.rotate_left(rot(n));
    let n = s.host_bridges.len();
    s.host_bridges.rotate_left(rot(n));
    for d in &mut s.rdma_devices {
        d.ports.reverse();
        for p in &mut d.ports {
            p.gids.reverse();
        }
    }
    s
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn plan_does_not_depend_on_listing_order((cpus, nodes, fe) in machine(), seed in 0u64..1000) {
        let t = build_machine(&cpus, &nodes, fe);
        let a = Plan::compute(&t, &PlanOptions::default()).unwrap();
        let b = Plan::compute(&shuffled(&t, seed), &PlanOptions::default()).unwrap();
        prop_assert_eq!(a, b);
    }

    #[test]
    fn ranks_on_one_numa_node_share_no_cpu((cpus, nodes, fe) in machine()) {
        let t = build_machine(&cpus, &nodes, fe);
        let p = Plan::compute(&t, &PlanOptions::default()).unwrap();
        for r in &p.ranks {
            prop_assert!(!r.cpus.is_empty(), "rank {} has no CPU", r.local_rank);
        }
        for a in &p.ranks {
            for b in &p.ranks {
                if a.local_rank >= b.local_rank || a.numa_node != b.numa_node {
                    continue;
                }
                let node = a.numa_node.and_then(|n| t.numa_node(n)).unwrap();
                let on_node = p.ranks.iter().filter(|r| r.numa_node == a.numa_node).count();
                if node.cpus.len() >= on_node {
                    prop_assert!(a.cpus.intersection(&b.cpus).is_empty(),
                        "ranks {} and {} overlap: {} / {}", a.local_rank, b.local_rank, a.cpus, b.cpus);
                }
                // Every CPU of a rank is local to its GPU's node.
                prop_assert!(a.cpus.is_subset(&node.cpus));
            }
        }
    }

    #[test]
    fn every_chosen_port_is_active((cpus, nodes, fe) in machine()) {
        let t = build_machine(&cpus, &nodes, fe);
        let p = Plan::compute(&t, &PlanOptions::default()).unwrap();
        let active = |label: &str| {
            let (dev, port) = label.split_once(':').unwrap();
            let port: u32 = port.parse().unwrap();
            t.rdma_device(dev).unwrap().ports.iter().any(|q| q.number == port && q.is_active())
        };
        if let Some(hca) = p.env.get("NCCL_IB_HCA") {
            let list = hca.strip_prefix('=').unwrap();
            for label in list.split(',') {
                prop_assert!(active(label), "{} is not ACTIVE", label);
            }
        }
        for r in &p.ranks {
            for h in &r.hcas {
                prop_assert!(active(h), "{} is not ACTIVE", h);
                prop_assert!(p.env["NCCL_IB_HCA"].split([',', '=']).any(|x| x == h));
            }
        }
        // One link layer only.
        let layers: BTreeSet<Option<&str>> = p.env.get("NCCL_IB_HCA").map(|h| {
            h[1..].split(',').map(|l| t.rdma_device(l.split(':').next().unwrap()).unwrap().ports[0].link_layer.map(|l| l.as_str())).collect()
        }).unwrap_or_default();
        prop_assert!(layers.len() <= 1);
    }
}
