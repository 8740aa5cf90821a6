use super::*;
use crate::view::plan::testkit::dgx_like;
use proptest::prelude::*;
use std::path::Path;

fn fixture(name: &str) -> Topology {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures")
        .join(name)
        .join("root.tar.gz");
    crate::discover(Some(&root)).unwrap()
}

/// The Kubernetes regexes (apimachinery `validation.go`), as the oracle.
fn oracle_value(v: &str) -> bool {
    let re = regex::Regex::new(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$").unwrap();
    v.len() <= 63 && re.is_match(v)
}

fn oracle_key(k: &str) -> bool {
    let name = regex::Regex::new(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$").unwrap();
    let dns =
        regex::Regex::new(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
            .unwrap();
    match k.split_once('/') {
        Some((p, n)) => {
            !n.contains('/')
                && p.len() <= 253
                && dns.is_match(p)
                && p.split('.').all(|l| l.len() <= 63)
                && n.len() <= 63
                && name.is_match(n)
        }
        None => k.len() <= 63 && name.is_match(k),
    }
}

proptest! {
    #[test]
    fn label_value_syntax_matches_kubernetes(v in "[-A-Za-z0-9_./ ]{0,70}") {
        prop_assert_eq!(is_label_value(&v), oracle_value(&v), "{:?}", v);
    }

    #[test]
    fn label_key_syntax_matches_kubernetes(k in "[-a-zA-Z0-9_.]{0,12}(/[-A-Za-z0-9_.]{0,66})?") {
        prop_assert_eq!(is_label_key(&k), oracle_key(&k), "{:?}", k);
    }

    #[test]
    fn vf_ranges_parse_back(mut v in proptest::collection::btree_set(0u32..64, 1..20)) {
        let idx: Vec<u32> = std::mem::take(&mut v).into_iter().collect();
        let text = format!("ens1f0#{}", vf_ranges(&idx));
        let (pf, back) = parse_pf_name(&text).unwrap();
        prop_assert_eq!(pf, "ens1f0");
        prop_assert_eq!(back.unwrap(), idx);
    }
}

#[test]
fn label_syntax_edges() {
    assert!(is_label_value(""));
    assert!(is_label_value("PXB"));
    assert!(!is_label_value("-x"));
    assert!(!is_label_value(&"a".repeat(64)));
    assert!(is_label_key("rdmatopo.io/rdma.rails-numa0"));
    assert!(!is_label_key("Rdmatopo.io/x"));
    assert!(!is_label_key("rdmatopo.io/"));
    assert!(check_label_prefix("feature.node.kubernetes.io").is_ok());
    assert!(check_label_prefix("node.kubernetes.io").is_err());
    assert!(check_label_prefix("kubernetes.io").is_err());
    assert!(check_label_prefix("Example.com").is_err());
}

#[test]
fn pool_names_are_kubernetes_resource_names() {
    for (netdev, want) in [
        ("ibp24s0", "hca_ibp24s0"),
        ("eth0.100", "hca_eth0_100"),
        ("br-", "hca_br"),
        ("-", "hca"),
    ] {
        let name = pool_base("hca", netdev);
        assert_eq!(name, want);
        assert!(oracle_key(&format!("rdma/{name}")), "{name}");
    }
}

#[test]
fn pf_names_that_the_plugin_drops_are_refused() {
    for bad in ["", "#0-1", "ens1f0#", "ens1f0#3-1", "ens1f0#a", "ens1f0#0-"] {
        assert!(parse_pf_name(bad).is_err(), "{bad:?}");
    }
    assert_eq!(vf_ranges(&[0, 2, 3, 4, 7]), "0,2-4,7");
}

#[test]
fn shared_plugin_one_pool_per_ib_rail() {
    let topo = fixture("h100-dgx");
    let g = rdma_shared_dev_plugin(&topo, &SharedDevPluginOptions::default()).unwrap();
    let c = &g.value;
    assert_eq!(c.config_list.len(), 8);
    let rails = NodeRails::of(&topo).unwrap();
    for (res, rail) in c.config_list.iter().zip(&rails.rails) {
        let ifname = rail.port.pci_netdev.clone().unwrap();
        // The selector is the netdev of the rail's own PCI function.
        let dev = topo.netdev(&ifname).unwrap();
        assert_eq!(dev.pci, rail.port.pci);
        assert_eq!(res.selectors.if_names, vec![ifname.clone()]);
        assert_eq!(res.resource_name, format!("hca_{ifname}"));
        assert_eq!(res.rdma_hca_max, 63);
    }
    c.validate().unwrap();
    // The Ethernet and down ports are left out, and said so.
    assert!(g.notes.iter().any(|n| n.starts_with("left out mlx5_1:1")));
}

#[test]
fn shared_plugin_asked_for_everything_keeps_names_unique() {
    let topo = fixture("h100-dgx");
    let opts = SharedDevPluginOptions {
        include_excluded: true,
        rdma_hca_max: 0,
        ..Default::default()
    };
    let g = rdma_shared_dev_plugin(&topo, &opts).unwrap();
    let rails = NodeRails::of(&topo).unwrap();
    let with_netdev = rails
        .rails
        .iter()
        .map(|r| &r.port)
        .chain(rails.left_out.iter().map(|l| &l.port))
        .filter(|p| p.pci_netdev.is_some())
        .count();
    assert_eq!(g.value.config_list.len(), with_netdev);
    assert!(g.value.config_list.len() > 8);
    g.value.validate().unwrap();
}

#[test]
fn shared_plugin_rules_are_enforced() {
    let ok = SharedResource {
        resource_name: "hca_a".into(),
        resource_prefix: None,
        rdma_hca_max: 1,
        devices: Vec::new(),
        selectors: SharedSelectors {
            if_names: vec!["a".into()],
            ..SharedSelectors::default()
        },
    };
    let cfg = |list: Vec<SharedResource>| SharedDevPluginConfig {
        periodic_update_interval: None,
        config_list: list,
    };
    assert!(cfg(vec![ok.clone()]).validate().is_ok());
    assert!(cfg(vec![]).validate().is_err());
    assert!(cfg(vec![ok.clone(), ok.clone()]).validate().is_err());
    let mut hyphen = ok.clone();
    hyphen.resource_name = "hca-a".into();
    assert!(cfg(vec![hyphen]).validate().is_err());
    let mut empty = ok.clone();
    empty.selectors.if_names.clear();
    assert!(cfg(vec![empty.clone()]).validate().is_err());
    // The deprecated `devices` stands for ifNames, but not beside selectors.
    let mut devices = empty;
    devices.devices = vec!["a".into()];
    assert!(cfg(vec![devices.clone()]).validate().is_ok());
    assert_eq!(devices.effective_selectors(), ok.selectors);
    let mut both = ok;
    both.devices = vec!["a".into()];
    assert!(cfg(vec![both]).validate().is_err());
}

#[test]
fn sriov_pools_name_vfs_of_each_rail_pf() {
    let topo = fixture("host-h100-sriov");
    let g = sriov_device_plugin(&topo, &SriovDpOptions::default()).unwrap();
    let list = &g.value.resource_list;
    assert_eq!(list.len(), 8);
    let first = &list[0];
    assert_eq!(first.resource_name, "vf_enp24s0np0");
    assert_eq!(first.resource_prefix, "nvidia.com");
    assert_eq!(first.selectors[0].pf_names, vec!["enp24s0np0#0-1"]);
    assert!(first.selectors[0].is_rdma);
    assert_eq!(first.selectors[0].vendors, vec!["15b3"]);
    // Every VF index named exists under that PF.
    for r in list {
        for pf in &r.selectors[0].pf_names {
            let (name, idx) = parse_pf_name(pf).unwrap();
            let f = topo
                .pci_function(topo.netdev(name).unwrap().pci.unwrap())
                .unwrap();
            let vfs = &f.sriov.as_ref().unwrap().vfs;
            for i in idx.unwrap() {
                assert!((i as usize) < vfs.len(), "{pf}");
            }
        }
    }
}

#[test]
fn sriov_pools_per_switch_group_rails_under_one_switch() {
    let topo = fixture("host-h100-sriov");
    let by_rail = sriov_device_plugin(&topo, &SriovDpOptions::default()).unwrap();
    let opts = SriovDpOptions {
        pool_by: PoolBy::Switch,
        ..Default::default()
    };
    let by_switch = sriov_device_plugin(&topo, &opts).unwrap();
    let rails = NodeRails::of(&topo).unwrap();
    let switches: BTreeSet<_> = rails.rails.iter().map(|r| r.port.pcie_switch).collect();
    assert_eq!(by_switch.value.resource_list.len(), switches.len());
    let pfs = |c: &SriovDpConfig| -> BTreeSet<String> {
        c.resource_list
            .iter()
            .flat_map(|r| r.selectors[0].pf_names.clone())
            .collect()
    };
    assert_eq!(pfs(&by_rail.value), pfs(&by_switch.value));
}

#[test]
fn sriov_without_vfs_on_any_rail_is_an_error_that_says_why() {
    let err = sriov_device_plugin(&fixture("h100-dgx"), &SriovDpOptions::default());
    let Err(ViewError::Invalid(msg)) = err else {
        panic!("{err:?}")
    };
    assert!(msg.contains("SR-IOV"), "{msg}");
}

#[test]
fn nfd_labels_describe_the_rails() {
    let topo = fixture("h100-dgx");
    let g = nfd_labels(&topo, &NfdOptions::default()).unwrap();
    let l = |k: &str| g.value.get(&format!("rdmatopo.io/{k}")).cloned();
    assert_eq!(l("rdma.rails").as_deref(), Some("8"));
    assert_eq!(l("rdma.rails-numa0").as_deref(), Some("4"));
    assert_eq!(l("rdma.link-layer").as_deref(), Some("infiniband"));
    assert_eq!(l("rdma.link-speed-gbps").as_deref(), Some("400"));
    assert_eq!(l("gpu-rail.worst-path").as_deref(), Some("PXB"));
    assert_eq!(l("gpu.count").as_deref(), Some("8"));
    assert_eq!(l("rdma.capable").as_deref(), Some("true"));
    for (k, v) in &g.value {
        assert!(oracle_key(k) && oracle_value(v), "{k}={v}");
    }
    let file = nfd_feature_file(&g, Some("2030-01-01T00:00:00Z"));
    assert!(file.contains("\n# +expiry-time=2030-01-01T00:00:00Z\nrdmatopo.io/"));
    assert!(file.len() < 64 * 1024);
}

#[test]
fn nfd_gdr_ready_needs_peer_memory_and_close_rails() {
    let mut topo = dgx_like();
    topo.host.peermem = vec!["/sys/module/nvidia_peermem/version".into()];
    let ready = |t: &Topology| {
        nfd_labels(t, &NfdOptions::default()).unwrap().value["rdmatopo.io/gpudirect-rdma.ready"]
            .clone()
    };
    assert_eq!(ready(&topo), "true");
    let mut no_peermem = topo.clone();
    no_peermem.host.peermem.clear();
    assert_eq!(ready(&no_peermem), "false");
    // A GPU whose only nearby rail is down falls back to a farther one.
    let mut far = topo.clone();
    far.rdma_devices[0].ports[0].state = Some(crate::parse::PortState::Down);
    assert_eq!(ready(&far), "false");
}

#[test]
fn nfd_refuses_a_bad_prefix() {
    let topo = dgx_like();
    for p in ["Rdmatopo.io", "kubernetes.io", "a_b.io", ""] {
        assert!(
            nfd_labels(&topo, &NfdOptions { prefix: p.into() }).is_err(),
            "{p}"
        );
    }
}

#[test]
fn pod_asks_for_the_rails_of_its_gpus() {
    let topo = fixture("h100-dgx");
    let opts = PodOptions {
        gpus: 2,
        ..Default::default()
    };
    let g = pod(&topo, &opts).unwrap();
    let Workload::Pod { spec, metadata, .. } = &g.value else {
        panic!("not a pod")
    };
    assert!(metadata.annotations.is_empty());
    let limits = &spec.containers[0].resources.limits;
    assert_eq!(limits["nvidia.com/gpu"], 2);
    let rails = NodeRails::of(&topo).unwrap();
    // GPUs 0 and 1 (NUMA 0) and their rails.
    for gi in 0..2 {
        let r = &rails.rails[rails.gpus[gi].rails[0] as usize];
        let key = format!("rdma/hca_{}", r.port.pci_netdev.as_deref().unwrap());
        assert_eq!(limits.get(&key), Some(&1), "{key} in {limits:?}");
    }
    assert_eq!(limits.len(), 3);
    assert_eq!(
        spec.containers[0].security_context.capabilities.add,
        ["IPC_LOCK"]
    );
}

#[test]
fn sriov_job_names_one_network_per_vf() {
    let topo = fixture("host-h100-sriov");
    let opts = PodOptions {
        gpus: 4,
        network: PodNetwork::Sriov,
        kind: WorkloadKind::Job,
        ..Default::default()
    };
    let g = pod(&topo, &opts).unwrap();
    let Workload::Job { spec, .. } = &g.value else {
        panic!("not a job")
    };
    let nets = &spec.template.metadata.annotations[MULTUS_NETWORKS];
    assert_eq!(nets.split(',').count(), 4);
    assert!(nets.split(',').all(|n| n.starts_with("vf-enp")), "{nets}");
    let limits = &spec.template.spec.containers[0].resources.limits;
    let vfs: u32 = limits
        .iter()
        .filter(|(k, _)| k.starts_with("nvidia.com/vf_"))
        .map(|(_, v)| v)
        .sum();
    assert_eq!(vfs, 4);
}

#[test]
fn pod_needs_gpus_that_exist() {
    let topo = fixture("h100-dgx");
    for n in [0, 9] {
        let opts = PodOptions {
            gpus: n,
            ..Default::default()
        };
        assert!(pod(&topo, &opts).is_err(), "{n}");
    }
}

#[test]
fn a_node_without_rdma_gets_no_pools_and_is_told_why() {
    let topo = fixture("no-devices");
    let err = rdma_shared_dev_plugin(&topo, &SharedDevPluginOptions::default()).unwrap_err();
    assert!(err.to_string().contains("no PCI RDMA device"), "{err}");
    let labels = nfd_labels(&topo, &NfdOptions::default()).unwrap().value;
    assert_eq!(labels["rdmatopo.io/rdma.capable"], "false");
    assert_eq!(labels["rdmatopo.io/rdma.rails"], "0");
}
