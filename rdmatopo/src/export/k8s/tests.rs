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
    assert!(
        g.value.networks.is_empty(),
        "the shared plugin names no network"
    );
    let Workload::Pod { spec, metadata, .. } = &g.value.workload else {
        panic!("not a pod")
    };
    assert!(metadata.annotations.is_empty());
    let limits = &spec.containers[0].resources.limits;
    assert_eq!(limits["nvidia.com/gpu"], Quantity::Count(2));
    let rails = NodeRails::of(&topo).unwrap();
    // GPUs 0 and 1 (NUMA 0) and their rails.
    for gi in 0..2 {
        let r = &rails.rails[rails.gpus[gi].rails[0] as usize];
        let key = format!("rdma/hca_{}", r.port.pci_netdev.as_deref().unwrap());
        assert_eq!(
            limits.get(&key),
            Some(&Quantity::Count(1)),
            "{key} in {limits:?}"
        );
    }
    // The GPUs, their two rails, cpu and memory.
    assert_eq!(limits.len(), 5);
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
    let Workload::Job { spec, .. } = &g.value.workload else {
        panic!("not a job")
    };
    let nets = &spec.template.metadata.annotations[MULTUS_NETWORKS];
    assert_eq!(nets.split(',').count(), 4);
    assert!(nets.split(',').all(|n| n.starts_with("vf-enp")), "{nets}");
    let limits = &spec.template.spec.containers[0].resources.limits;
    let vfs: u64 = limits
        .iter()
        .filter(|(k, _)| k.starts_with("nvidia.com/vf_"))
        .map(|(_, v)| match v {
            Quantity::Count(n) => *n,
            Quantity::Text(t) => panic!("{t}"),
        })
        .sum();
    assert_eq!(vfs, 4);
}

/// A Kubernetes quantity in its base unit (bytes, or thousandths for `m`), as
/// apimachinery's `resource.Quantity` reads the whole numbers written here.
fn quantity_value(q: &serde_json::Value) -> u128 {
    if let Some(n) = q.as_u64() {
        return u128::from(n) * 1000;
    }
    let t = q.as_str().expect("a quantity is a number or a string");
    let digits = t.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let n: u128 = digits.parse().unwrap_or_else(|_| panic!("quantity {t}"));
    let scale: u128 = match &t[digits.len()..] {
        "m" => 1,
        "" => 1000,
        "k" => 1000 * 1000,
        "M" => 1000 * 1000u128.pow(2),
        "G" => 1000 * 1000u128.pow(3),
        "T" => 1000 * 1000u128.pow(4),
        "Ki" => 1000 * 1024,
        "Mi" => 1000 * 1024u128.pow(2),
        "Gi" => 1000 * 1024u128.pow(3),
        "Ti" => 1000 * 1024u128.pow(4),
        other => panic!("suffix {other} in {t}"),
    };
    n * scale
}

/// The pod's QoS class as Kubernetes computes it from the object: requests default to
/// limits where unset (`SetDefaults_Pod`), then `ComputePodQOS` (kubernetes
/// pkg/apis/core/helper/qos/qos.go): per container of `initContainers` and
/// `containers`, cpu and memory each Guaranteed (request = limit, not zero),
/// BestEffort (both zero) or Burstable; a pod is Guaranteed when every container is.
fn qos_class(pod_spec: &serde_json::Value) -> &'static str {
    let mut pod_qos: Option<&'static str> = None;
    let containers = ["initContainers", "containers"]
        .iter()
        .filter_map(|k| pod_spec.get(k).and_then(|v| v.as_array()))
        .flatten();
    for c in containers {
        let limits = c["resources"]["limits"]
            .as_object()
            .cloned()
            .unwrap_or_default();
        let mut requests = c["resources"]["requests"]
            .as_object()
            .cloned()
            .unwrap_or_default();
        for (k, v) in &limits {
            requests.entry(k.clone()).or_insert_with(|| v.clone());
        }
        let mut container_qos: Option<&'static str> = None;
        for res in ["cpu", "memory"] {
            let req = requests.get(res).map_or(0, quantity_value);
            let lim = limits.get(res).map_or(0, quantity_value);
            let q = if req != lim {
                "Burstable"
            } else if req == 0 {
                "BestEffort"
            } else {
                "Guaranteed"
            };
            match container_qos {
                None => container_qos = Some(q),
                Some(prev) if prev != q => container_qos = Some("Burstable"),
                Some(_) => {}
            }
        }
        let q = container_qos.unwrap_or("BestEffort");
        match pod_qos {
            None => pod_qos = Some(q),
            Some(prev) if prev != q || q == "Burstable" => return "Burstable",
            Some(_) => {}
        }
    }
    pod_qos.unwrap_or("BestEffort")
}

#[test]
fn qos_class_reads_pods_as_kubernetes_does() {
    let spec = |resources: serde_json::Value| serde_json::json!({"containers": [{"name": "main", "resources": resources}]});
    // What `k8s pod` wrote before: GPUs and pools only.
    assert_eq!(
        qos_class(&spec(serde_json::json!({"limits": {"nvidia.com/gpu": 2}}))),
        "BestEffort"
    );
    assert_eq!(
        qos_class(&spec(serde_json::json!({"limits": {"cpu": 4}}))),
        "Burstable"
    );
    assert_eq!(
        qos_class(&spec(
            serde_json::json!({"limits": {"cpu": 4, "memory": "1Gi"}})
        )),
        "Guaranteed",
        "requests default to limits"
    );
    assert_eq!(
        qos_class(&spec(serde_json::json!({
            "limits": {"cpu": 4, "memory": "1Gi"},
            "requests": {"cpu": "4000m", "memory": "1024Mi"}
        }))),
        "Guaranteed"
    );
    assert_eq!(
        qos_class(&spec(serde_json::json!({
            "limits": {"cpu": 4, "memory": "1Gi"},
            "requests": {"cpu": 2, "memory": "1Gi"}
        }))),
        "Burstable"
    );
    let mut two = spec(serde_json::json!({"limits": {"cpu": 4, "memory": "1Gi"}}));
    two["initContainers"] = serde_json::json!([{"name": "init"}]);
    assert_eq!(qos_class(&two), "Burstable", "a BestEffort init container");
}

fn all_fixtures() -> Vec<String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| {
            let p = e.ok()?.path();
            p.join("root.tar.gz")
                .exists()
                .then(|| p.file_name()?.to_str().map(String::from))?
        })
        .collect();
    names.sort();
    names
}

#[test]
fn every_generated_pod_is_guaranteed_with_whole_cpus() {
    let mut checked = 0;
    for name in all_fixtures() {
        let topo = fixture(&name);
        for network in [PodNetwork::RdmaShared, PodNetwork::Sriov] {
            for kind in [WorkloadKind::Pod, WorkloadKind::Job] {
                let opts = PodOptions {
                    network,
                    kind,
                    ..Default::default()
                };
                let Ok(g) = pod(&topo, &opts) else { continue };
                let v = serde_json::to_value(&g.value.workload).unwrap();
                let spec = match kind {
                    WorkloadKind::Pod => &v["spec"],
                    WorkloadKind::Job => &v["spec"]["template"]["spec"],
                };
                assert_eq!(qos_class(spec), "Guaranteed", "{name} {network:?} {kind:?}");
                for c in spec["containers"].as_array().unwrap() {
                    let cpu = quantity_value(&c["resources"]["requests"]["cpu"]);
                    assert!(
                        cpu > 0 && cpu.is_multiple_of(1000),
                        "{name}: cpu {cpu}m is not whole"
                    );
                }
                checked += 1;
            }
        }
    }
    assert!(checked >= 40, "only {checked} pods generated");
}

/// A file of a fixture's tree, read here apart from discovery: the path from the root,
/// or its end when it starts with `/` (the device's own directory, not a symlink).
fn fixture_file(name: &str, rel: &str) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures")
        .join(name)
        .join("root.tar.gz");
    let file = std::fs::File::open(root).unwrap();
    let mut ar = tar::Archive::new(flate2::read::GzDecoder::new(file));
    for e in ar.entries().unwrap() {
        let mut e = e.unwrap();
        let full = e.path().unwrap().to_string_lossy().to_string();
        let path = full.strip_prefix("root/").unwrap_or(&full);
        if path == rel || (rel.starts_with('/') && path.ends_with(rel)) {
            let mut s = String::new();
            std::io::Read::read_to_string(&mut e, &mut s).unwrap();
            return s;
        }
    }
    panic!("{rel} not in {name}")
}

#[test]
fn pod_size_is_each_gpus_numa_share_less_one_cpu() {
    let topo = fixture("h100-dgx");
    let cpus = crate::parse::parse_cpulist(&fixture_file(
        "h100-dgx",
        "sys/devices/system/node/node0/cpulist",
    ))
    .unwrap()
    .len() as u64;
    let meminfo = fixture_file("h100-dgx", "sys/devices/system/node/node0/meminfo");
    let total_kib: u64 = meminfo
        .lines()
        .find(|l| l.contains("MemTotal:"))
        .and_then(|l| l.split_whitespace().nth(3))
        .unwrap()
        .parse()
        .unwrap();
    // Four GPUs on node 0 (the DGX H100's layout, the fixture's README).
    let share = cpus / 4 - 1;
    let g = pod(&topo, &PodOptions::default()).unwrap();
    let res = &g.value.workload.pod_spec().containers[0].resources;
    assert_eq!(res.limits["cpu"], Quantity::Count(share));
    let gib = total_kib * share / cpus / (1024 * 1024);
    assert_eq!(res.limits["memory"], Quantity::Text(format!("{gib}Gi")));
    assert_eq!(res.requests, res.limits);

    let given = PodOptions {
        cpus: Some(8),
        memory: Some("64Gi".into()),
        ..Default::default()
    };
    let res = &pod(&topo, &given)
        .unwrap()
        .value
        .workload
        .pod_spec()
        .containers[0]
        .resources
        .clone();
    assert_eq!(res.requests["cpu"], Quantity::Count(8));
    assert_eq!(res.requests["memory"], Quantity::Text("64Gi".into()));
    for bad in ["64GB", "0", "1.5Gi", "", "Gi"] {
        let opts = PodOptions {
            memory: Some(bad.into()),
            ..Default::default()
        };
        assert!(
            matches!(pod(&topo, &opts), Err(ViewError::Argument(_))),
            "{bad:?}"
        );
    }
}

#[test]
fn a_pod_that_cannot_be_sized_asks_for_the_flags() {
    let mut topo = fixture("h100-dgx");
    for n in &mut topo.numa_nodes {
        n.memory_kib = None;
    }
    let err = pod(&topo, &PodOptions::default()).unwrap_err();
    assert!(err.to_string().contains("--memory"), "{err}");
    let opts = PodOptions {
        memory: Some("64Gi".into()),
        ..Default::default()
    };
    assert!(pod(&topo, &opts).is_ok());
    topo.numa_nodes.clear();
    let err = pod(&topo, &opts).unwrap_err();
    assert!(err.to_string().contains("--cpus"), "{err}");
}

#[test]
fn sriov_pod_brings_a_network_for_each_it_names_with_the_rails_mtu() {
    let name = "host-h100-sriov";
    let topo = fixture(name);
    for by in [PoolBy::Rail, PoolBy::Switch] {
        let opts = PodOptions {
            gpus: 8,
            network: PodNetwork::Sriov,
            sriov: SriovDpOptions {
                pool_by: by,
                ..Default::default()
            },
            ..Default::default()
        };
        let g = pod(&topo, &opts).unwrap();
        let named: BTreeSet<&str> = g.value.workload.pod_annotations()[MULTUS_NETWORKS]
            .split(',')
            .collect();
        let made: BTreeSet<&str> = g
            .value
            .networks
            .iter()
            .map(|n| n.metadata.name.as_str())
            .collect();
        assert_eq!(named, made, "{by:?}");
        let limits = &g.value.workload.pod_spec().containers[0].resources.limits;
        let rails = NodeRails::of(&topo).unwrap();
        for nad in &g.value.networks {
            assert_eq!(nad.api_version, "k8s.cni.cncf.io/v1");
            let resource = &nad.metadata.annotations[NAD_RESOURCE_NAME];
            assert!(limits.contains_key(resource), "{resource} not asked for");
            let config: serde_json::Value = serde_json::from_str(&nad.spec.config).unwrap();
            assert_eq!(config["name"], nad.metadata.name.as_str());
            let plugins = config["plugins"].as_array().unwrap();
            assert_eq!(plugins[0]["type"], "sriov");
            assert_eq!(plugins[1]["type"], "tuning");
            // The MTU of the rails' PF netdevs, read from the tree itself.
            let pool_word = resource.rsplit('/').next().unwrap();
            let mtus: BTreeSet<u64> = rails
                .rails
                .iter()
                .filter(|r| {
                    let pf = r.port.pci_netdev.as_deref().unwrap();
                    by == PoolBy::Switch || pool_word == format!("vf_{pf}")
                })
                .map(|r| {
                    let pf = r.port.netdev.as_deref().unwrap();
                    fixture_file(name, &format!("/net/{pf}/mtu"))
                        .trim()
                        .parse()
                        .unwrap()
                })
                .collect();
            assert_eq!(
                plugins[1]["mtu"].as_u64(),
                mtus.first().copied(),
                "{resource}"
            );
            assert_eq!(plugins[0]["ipam"]["type"], "whereabouts");
        }
    }
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

#[test]
fn sriov_network_follows_the_link_layer_address_and_mtu_of_its_rails() {
    let topo = fixture("host-h100-sriov");
    let rails = NodeRails::of(&topo).unwrap();
    let (a, b) = (rails.rails[0].port.clone(), rails.rails[1].port.clone());
    let plugins = |nad: &NetworkAttachmentDefinition| -> Vec<serde_json::Value> {
        let c: serde_json::Value = serde_json::from_str(&nad.spec.config).unwrap();
        c["plugins"].as_array().unwrap().clone()
    };

    // RoCE with an address: sriov-cni, whereabouts over the subnet less this node.
    let (nad, _) = sriov_network("net-a", "nvidia.com/vf_a", &[&a]);
    let p = plugins(&nad);
    assert_eq!(p[0]["type"], "sriov");
    let (ip, len) = a.ipv4[0].split_once('/').unwrap();
    assert_eq!(
        p[0]["ipam"]["exclude"],
        serde_json::json!([format!("{ip}/32")])
    );
    let range = p[0]["ipam"]["range"].as_str().unwrap();
    assert!(range.ends_with(&format!("/{len}")), "{range}");
    assert_eq!(
        p[1],
        serde_json::json!({"type": "tuning", "mtu": a.netdev_mtu.unwrap()})
    );
    assert_eq!(
        nad.metadata.annotations[NAD_RESOURCE_NAME],
        "nvidia.com/vf_a"
    );

    // InfiniBand without an address: ib-sriov-cni, no IPAM, and the note says so.
    let mut ib = a.clone();
    ib.link_layer = Some(LinkLayer::InfiniBand);
    ib.ipv4.clear();
    ib.netdev_mtu = Some(4092);
    let (nad, notes) = sriov_network("net-ib", "nvidia.com/vf_ib", &[&ib]);
    let p = plugins(&nad);
    assert_eq!(p[0]["type"], "ib-sriov");
    assert!(p[0].get("ipam").is_none());
    assert_eq!(p[1]["mtu"], 4092);
    assert!(notes.iter().any(|n| n.contains("no IPAM")), "{notes:?}");

    // One pool over rails of different MTUs takes the smallest; an unknown MTU is left.
    let mut small = b.clone();
    small.netdev_mtu = Some(1500);
    let (nad, notes) = sriov_network("net-ab", "nvidia.com/vf_sw", &[&a, &small]);
    assert_eq!(plugins(&nad)[1]["mtu"], 1500);
    assert!(notes.iter().any(|n| n.contains("MTUs differ")), "{notes:?}");
    let mut unknown = a.clone();
    unknown.netdev_mtu = None;
    let (nad, _) = sriov_network("net-u", "nvidia.com/vf_u", &[&unknown]);
    assert_eq!(plugins(&nad).len(), 1, "no tuning without an MTU");
}

/// The `k8s` commands read for `Needs::K8S` (no GID slot past NCCL's choice): each
/// generator answers as from a whole read, on every fixture and with each option that
/// changes what it reads of the node.
#[test]
fn k8s_needs_give_every_generator_the_whole_answer() {
    use crate::export::dra::{DraOptions, dra_claim, resource_slices};
    use crate::view::dra::DraDriver;
    /// `answer` of the K8S read against `answer` of the whole read.
    fn same<T: PartialEq + std::fmt::Debug>(
        (k8s, whole): (&Topology, &Topology),
        what: &str,
        answer: impl Fn(&Topology) -> T,
    ) {
        assert_eq!(answer(k8s), answer(whole), "{what}");
    }
    let fixtures = all_fixtures();
    assert!(fixtures.len() >= 40, "only {} fixtures", fixtures.len());
    for name in fixtures {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../fixtures")
            .join(&name)
            .join("root.tar.gz");
        let tree = crate::snapshot::load(&root).unwrap();
        let read = |needs| {
            let fs = crate::Sysfs::memory(tree.clone(), root.display().to_string());
            crate::discover_needs(&fs, needs).unwrap()
        };
        let (k8s, whole) = (read(crate::Needs::K8S), read(crate::Needs::ALL));
        let both = (&k8s, &whole);
        let shared = SharedDevPluginOptions::default();
        same(both, &format!("{name}: rdma-shared-dev-plugin"), |t| {
            rdma_shared_dev_plugin(t, &shared)
        });
        for pool_by in [PoolBy::Rail, PoolBy::Switch] {
            let opts = SriovDpOptions {
                pool_by,
                include_excluded: true,
                ..Default::default()
            };
            same(both, &format!("{name}: sriov-device-plugin {pool_by:?}"), |t| {
                sriov_device_plugin(t, &opts)
            });
        }
        let nfd = NfdOptions::default();
        same(both, &format!("{name}: nfd"), |t| nfd_labels(t, &nfd));
        for gpus in [1, 2, 8] {
            for network in [PodNetwork::RdmaShared, PodNetwork::Sriov] {
                let opts = PodOptions {
                    gpus,
                    network,
                    kind: WorkloadKind::Job,
                    ..Default::default()
                };
                same(both, &format!("{name}: pod {gpus} {network:?}"), |t| pod(t, &opts));
            }
            for nic_driver in [DraDriver::Dranet, DraDriver::Sriov] {
                let opts = DraOptions {
                    gpus: gpus as usize,
                    nic_driver,
                    name: "claim".into(),
                    namespace: None,
                };
                same(both, &format!("{name}: dra {gpus} {nic_driver:?}"), |t| {
                    dra_claim(t, &opts)
                });
            }
        }
        same(both, &format!("{name}: resource slices"), |t| {
            resource_slices(t, "node-a")
        });
    }
}
