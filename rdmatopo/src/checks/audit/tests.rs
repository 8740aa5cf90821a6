//! The audit on captured nodes, with allocations as the kubelet reports them.

use super::*;
use crate::model::allocation::{
    Allocatable, ContainerAllocation, DeviceAllocation, MemoryAllocation, PodAllocation,
};
use std::path::Path;
use std::sync::OnceLock;

fn fixture(name: &str) -> Topology {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures")
        .join(name)
        .join("root.tar.gz");
    crate::discover(Some(&root)).unwrap()
}

fn dgx() -> &'static Topology {
    static T: OnceLock<Topology> = OnceLock::new();
    T.get_or_init(|| fixture("h100-dgx"))
}

fn sriov_host() -> &'static Topology {
    static T: OnceLock<Topology> = OnceLock::new();
    T.get_or_init(|| fixture("host-h100-sriov"))
}

fn uuid(topo: &Topology, index: u32) -> String {
    topo.gpus[index as usize].uuid.clone().unwrap()
}

fn devices(resource: &str, ids: &[&str], numa: Option<Vec<u32>>) -> DeviceAllocation {
    DeviceAllocation {
        resource_name: resource.into(),
        device_ids: ids.iter().map(|s| s.to_string()).collect(),
        numa_nodes: numa,
    }
}

fn pod(name: &str, devices: Vec<DeviceAllocation>, cpus: std::ops::Range<u32>) -> PodAllocation {
    PodAllocation {
        namespace: "train".into(),
        name: name.into(),
        containers: vec![ContainerAllocation {
            name: "main".into(),
            devices,
            cpu_ids: cpus.collect(),
            memory: vec![MemoryAllocation {
                memory_type: "memory".into(),
                size: 1 << 30,
                numa_nodes: Some(vec![0]),
            }],
            dynamic_resources: Vec::new(),
        }],
        cpu_ids: Vec::new(),
    }
}

fn one(report: &AuditReport) -> &AuditContainer {
    assert_eq!(report.pods.len(), 1, "{report:#?}");
    &report.pods[0].containers[0]
}

/// The summaries of `check`'s findings, in order.
fn summaries<'c>(c: &'c AuditContainer, check: &str) -> Vec<&'c str> {
    c.findings
        .iter()
        .filter(|f| f.check == check)
        .map(|f| f.summary.as_str())
        .collect()
}

fn checks(c: &AuditContainer) -> Vec<(&str, Severity)> {
    c.findings
        .iter()
        .filter(|f| !f.skipped)
        .map(|f| (f.check.as_str(), f.severity))
        .collect()
}

#[test]
fn aligned_gpu_shared_hca_and_cpus_is_clean() {
    let t = dgx();
    let alloc = Allocation {
        pods: vec![
            pod(
                "good",
                vec![
                    devices("nvidia.com/gpu", &[&uuid(t, 0)], Some(vec![0])),
                    devices("rdma/hca_ibp24s0", &["7"], None),
                ],
                0..8,
            ),
            // A pod without devices is no finding and not listed.
            pod("web", vec![], 0..0),
        ],
        allocatable: None,
    };
    let r = audit(t, &alloc, &AuditOptions::default());
    let c = one(&r);
    assert_eq!(c.gpus[0].index, 0);
    assert_eq!(c.nics[0].rdma_device.as_deref(), Some("mlx5_0"));
    assert_eq!(c.worst_path.as_deref(), Some("PXB"));
    assert_eq!(c.cpus.cpus, "0-7");
    assert!(!c.cpus.shared_pool);
    assert_eq!(c.cpus.numa_nodes, [0]);
    assert_eq!(c.memory_numa_nodes, [0]);
    assert!(checks(c).is_empty(), "{:#?}", c.findings);
    assert_eq!(r.summary.pods, 2);
    assert_eq!(r.summary.containers_judged, 1);
    assert_eq!(r.exit_code(), 0);
    assert!(!r.free_devices_known);
}

#[test]
fn misplaced_container_gets_the_doctors_findings_and_the_free_nearest_nic() {
    let t = dgx();
    // GPU0 (node 0) with ibp154s0 (mlx5_6, node 1) and CPUs of node 1.
    let alloc = Allocation {
        pods: vec![
            pod(
                "bad",
                vec![
                    devices("nvidia.com/gpu", &[&uuid(t, 0)], Some(vec![0])),
                    devices("rdma/hca_ibp154s0", &["0"], None),
                ],
                56..64,
            ),
            // Holds GPU1's HCA: still shared, so it stays a candidate.
            pod(
                "other",
                vec![devices("rdma/hca_ibp64s0", &["0"], None)],
                64..66,
            ),
        ],
        allocatable: Some(Allocatable {
            devices: vec![
                devices("rdma/hca_ibp24s0", &["0", "1"], None),
                devices("rdma/hca_ibp154s0", &["0", "1"], None),
                devices("rdma/hca_ibp64s0", &["0"], None),
            ],
            cpu_ids: (0..224).collect(),
            memory: Vec::new(),
        }),
    };
    let r = audit(t, &alloc, &AuditOptions::default());
    let c = &r.pods[0].containers[0];
    assert_eq!(c.worst_path.as_deref(), Some("SYS"));
    assert!(c.numa_misaligned);
    let found = checks(c);
    assert!(
        found.contains(&("numa-affinity", Severity::Error)),
        "{found:?}"
    );
    assert!(
        found.contains(&("gpu-nic-distance", Severity::Error)),
        "{found:?}"
    );
    let distance = c
        .findings
        .iter()
        .find(|f| f.check == "gpu-nic-distance")
        .unwrap();
    // The doctor's wording, naming the free HCA next to GPU0.
    assert!(
        distance.summary.starts_with(
            "GPU0 (0000:1b:00.0) would use mlx5_6 at SYS while mlx5_0 (0000:18:00.0) is PXB from it"
        ),
        "{}",
        distance.summary
    );
    let numa = c
        .findings
        .iter()
        .find(|f| f.check == "numa-affinity")
        .unwrap();
    assert!(
        numa.evidence.iter().any(|e| e.path
            == "kubelet PodResources List: train/bad container main cpu_ids"
            && e.value == "56-63"),
        "{:#?}",
        numa.evidence
    );
    // The other pod holds an HCA and no GPU: its CPUs (node 1) are remote to it.
    assert_eq!(r.summary.containers_judged, 2);
    assert_eq!(r.exit_code(), 2);
    assert!(r.free_devices_known);
}

#[test]
fn nearest_nic_taken_by_others_is_not_offered() {
    let t = sriov_host();
    // GPU0's VFs are 0000:18:00.2 and .3; both taken, the container got a VF of
    // node 1. The only free VF is 0000:40:00.2 (NODE from GPU0).
    let resource = "nvidia.com/vf_enp24s0np0";
    let alloc = Allocation {
        pods: vec![
            pod(
                "bad",
                vec![
                    devices("nvidia.com/gpu", &[&uuid(t, 0)], Some(vec![0])),
                    devices(
                        "nvidia.com/vf_enp154s0np0",
                        &["0000:9a:00.2"],
                        Some(vec![1]),
                    ),
                ],
                0..4,
            ),
            pod(
                "a",
                vec![devices(resource, &["0000:18:00.2"], Some(vec![0]))],
                4..6,
            ),
            pod(
                "b",
                vec![devices(resource, &["0000:18:00.3"], Some(vec![0]))],
                6..8,
            ),
        ],
        allocatable: Some(Allocatable {
            devices: vec![
                devices(resource, &["0000:18:00.2", "0000:18:00.3"], Some(vec![0])),
                devices("nvidia.com/vf_enp64s0np0", &["0000:40:00.2"], Some(vec![0])),
                devices(
                    "nvidia.com/vf_enp154s0np0",
                    &["0000:9a:00.2"],
                    Some(vec![1]),
                ),
            ],
            cpu_ids: (0..224).collect(),
            memory: Vec::new(),
        }),
    };
    let r = audit(t, &alloc, &AuditOptions::default());
    let c = &r.pods[0].containers[0];
    assert!(c.nics[0].is_vf);
    assert_eq!(c.nics[0].rdma_device.as_deref(), Some("mlx5_20"));
    assert_eq!(c.worst_path.as_deref(), Some("SYS"));
    let distance = c
        .findings
        .iter()
        .find(|f| f.check == "gpu-nic-distance")
        .expect("a distance finding");
    assert!(
        distance
            .summary
            .contains("while VF mlx5_14 (0000:40:00.2) is NODE"),
        "{}",
        distance.summary
    );
    // NODE does not allow GPUDirect RDMA: a warning, not an error.
    assert_eq!(distance.severity, Severity::Warning);
}

#[test]
fn index_ids_and_old_mig_ids_map_to_gpus() {
    let t = dgx();
    let mig = format!("MIG-{}/1/0", uuid(t, 2));
    let alloc = Allocation {
        pods: vec![
            pod("idx", vec![devices("nvidia.com/gpu", &["5"], None)], 0..0),
            pod(
                "migidx",
                vec![devices("nvidia.com/mig-1g.10gb", &["3:1"], None)],
                0..0,
            ),
            pod(
                "mig",
                vec![devices("nvidia.com/mig-1g.10gb", &[&mig], None)],
                0..0,
            ),
        ],
        allocatable: None,
    };
    let r = audit(t, &alloc, &AuditOptions::default());
    let idx: Vec<u32> = r.containers().map(|c| c.gpus[0].index).collect();
    assert_eq!(idx, [5, 3, 2]);
    assert!(r.containers().all(|c| c.cpus.shared_pool));
    assert_eq!(r.pods[0].containers[0].cpus.cpus, "0-223");
}

#[test]
fn foreign_and_unknown_ids_are_findings_not_failures() {
    let t = dgx();
    let alloc = Allocation {
        pods: vec![pod(
            "odd",
            vec![
                devices(
                    "nvidia.com/gpu",
                    &["GPU-00000000-0000-0000-0000-000000000000", "17"],
                    None,
                ),
                devices(
                    "nvidia.com/mig-1g.10gb",
                    &["MIG-5c0f2d1e-0000-0000-0000-000000000000"],
                    None,
                ),
                devices("nvidia.com/vf_x", &["0000:ee:00.1"], None),
                devices("rdma/hca_nosuch", &["0"], None),
                devices("example.com/fpga", &["fpga0"], None),
            ],
            0..4,
        )],
        allocatable: None,
    };
    let r = audit(t, &alloc, &AuditOptions::default());
    let c = one(&r);
    let unknown = summaries(c, "unknown-device");
    assert_eq!(unknown.len(), 5, "{unknown:#?}");
    assert!(unknown[0].contains("is not a GPU of this node"));
    assert!(unknown[1].contains("neither a GPU UUID nor the index"));
    assert!(unknown[2].contains("list no such MIG device"));
    assert!(unknown[3].contains("PCI device 0000:ee:00.1 is not on this node"));
    assert!(unknown[4].contains("--rdma-shared-config"));
    assert_eq!(c.other_resources[0].resource, "example.com/fpga");
    assert!(c.gpus.is_empty() && c.nics.is_empty());
    assert_eq!(r.exit_code(), 1);
}

#[test]
fn plugin_numa_disagreeing_with_sysfs_is_reported() {
    let t = dgx();
    let alloc = Allocation {
        pods: vec![pod(
            "liar",
            vec![devices("nvidia.com/gpu", &[&uuid(t, 4)], Some(vec![0]))],
            56..60,
        )],
        allocatable: None,
    };
    let r = audit(t, &alloc, &AuditOptions::default());
    let c = one(&r);
    let f = c
        .findings
        .iter()
        .find(|f| f.check == "plugin-numa")
        .unwrap();
    assert_eq!(f.severity, Severity::Warning);
    assert!(
        f.summary
            .contains("reported NUMA node 0 for 0000:9d:00.0, which sysfs puts on node 1")
    );
    assert!(
        f.evidence
            .iter()
            .any(|e| e.path == "/sys/bus/pci/devices/0000:9d:00.0/numa_node" && e.value == "1")
    );
}

#[test]
fn two_gpus_on_one_rail_is_multi_rail() {
    let t = dgx();
    let alloc = Allocation {
        pods: vec![pod(
            "squeezed",
            vec![
                devices("nvidia.com/gpu", &[&uuid(t, 0), &uuid(t, 1)], Some(vec![0])),
                devices("rdma/hca_ibp24s0", &["0"], None),
            ],
            0..8,
        )],
        allocatable: None,
    };
    let r = audit(t, &alloc, &AuditOptions::default());
    let c = one(&r);
    let f = c.findings.iter().find(|f| f.check == "multi-rail").unwrap();
    assert_eq!(f.summary, "2 GPUs share 1 usable rail(s) (mlx5_0)");
    assert_eq!(c.worst_path.as_deref(), Some("NODE"));
}

/// The forms of the plugin's own sample ConfigMap (deployment/k8s/base/configmap.yaml:
/// the deprecated `devices`, and `vendors`/`deviceIDs` selectors) and a pool of several
/// HCAs: the plugin mounts every HCA of the pool into a container holding one slot.
#[test]
fn shared_pools_select_as_the_plugin_does() {
    let t = dgx();
    let config: crate::export::k8s::SharedDevPluginConfig = serde_json::from_str(
        r#"{"periodicUpdateInterval":300,"configList":[
            {"resourceName":"rail0","resourcePrefix":"example.com","rdmaHcaMax":1000,"devices":["ibp24s0"]},
            {"resourceName":"ib_all","rdmaHcaMax":63,"selectors":{"vendors":["15b3"],"linkTypes":["infiniband"]}},
            {"resourceName":"eth","rdmaHcaMax":63,"selectors":{"vendors":["15b3"],"drivers":["mlx5_core"],"linkTypes":["ether"]}},
            {"resourceName":"intel","rdmaHcaMax":63,"selectors":{"vendors":["8086"]}},
            {"resourceName":"docker","rdmaHcaMax":63,"selectors":{"ifNames":["docker0"]}},
            {"resourceName":"gone","rdmaHcaMax":10,"selectors":{"ifNames":["ib9"]}}]}"#,
    )
    .unwrap();
    config.validate().unwrap();
    let pools = config.pools();
    let selected = |name: &str| -> Vec<String> {
        let (_, s) = pools.iter().find(|(n, _)| n == name).unwrap();
        s.select(t).iter().map(|p| p.to_string()).collect()
    };
    assert_eq!(selected("example.com/rail0"), ["0000:18:00.0"]);
    // The eight compute CX-7s of the fixture's README, in address order.
    assert_eq!(
        selected("rdma/ib_all"),
        [
            "0000:18:00.0",
            "0000:40:00.0",
            "0000:4f:00.0",
            "0000:5e:00.0",
            "0000:9a:00.0",
            "0000:c0:00.0",
            "0000:ce:00.0",
            "0000:dc:00.0"
        ]
    );
    // The storage ports, not the Intel X550 (Ethernet, but no RDMA device).
    assert_eq!(
        selected("rdma/eth"),
        [
            "0000:29:00.0",
            "0000:29:00.1",
            "0000:aa:00.0",
            "0000:aa:00.1"
        ]
    );
    assert!(selected("rdma/intel").is_empty());

    let opts = AuditOptions {
        shared_pools: Some(pools.clone()),
        ..Default::default()
    };
    let alloc = Allocation {
        pods: vec![
            pod(
                "all",
                vec![
                    devices("nvidia.com/gpu", &[&uuid(t, 4)], None),
                    devices("rdma/ib_all", &["7"], None),
                ],
                56..60,
            ),
            pod(
                "odd",
                vec![
                    devices("example.com/rail0", &["3"], None),
                    devices("rdma/intel", &["0"], None),
                    devices("rdma/docker", &["0"], None),
                    devices("rdma/gone", &["1"], None),
                ],
                0..2,
            ),
        ],
        allocatable: None,
    };
    let r = audit(t, &alloc, &opts);
    let all = &r.pods[0].containers[0];
    let names: Vec<&str> = all
        .nics
        .iter()
        .map(|n| n.rdma_device.as_deref().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "mlx5_0", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_9", "mlx5_10", "mlx5_11"
        ]
    );
    assert!(all.nics.iter().all(|n| n.device_id == "7"));
    // GPU 4's own rail (mlx5_6) is in the pool: no distance finding.
    assert_eq!(all.worst_path.as_deref(), Some("PXB"));
    assert!(
        !checks(all).contains(&("gpu-nic-distance", Severity::Warning)),
        "{all:#?}"
    );
    let odd = &r.pods[1].containers[0];
    assert_eq!(odd.nics.len(), 1);
    assert_eq!(odd.nics[0].netdev.as_deref(), Some("ibp24s0"));
    let unknown = summaries(odd, "unknown-device");
    assert_eq!(
        unknown,
        [
            "rdma/intel device 0: shared RDMA pool rdma/intel: its selectors (vendors 8086) match no RDMA device of this node",
            "rdma/docker device 0: shared RDMA pool rdma/docker: its selectors (ifNames docker0) match no RDMA device of this node; netdev docker0 has no PCI function (the plugin matches a function's own netdev)",
            "rdma/gone device 1: shared RDMA pool rdma/gone: its selectors (ifNames ib9) match no RDMA device of this node; netdev ib9 is not on this node",
        ]
    );
}

#[test]
fn report_json_round_trips() {
    let t = dgx();
    let alloc = Allocation {
        pods: vec![pod(
            "p",
            vec![devices("nvidia.com/gpu", &["0"], None)],
            0..2,
        )],
        allocatable: None,
    };
    let r = audit(t, &alloc, &AuditOptions::default());
    let text = serde_json::to_string(&r).unwrap();
    assert!(text.contains(r#""schema":"rdmatopo.audit/1""#));
    let back: AuditReport = serde_json::from_str(&text).unwrap();
    assert_eq!(back, r);
    let a: Allocation = serde_json::from_str(&serde_json::to_string(&alloc).unwrap()).unwrap();
    assert_eq!(a, alloc);
}

#[test]
fn mig_uuids_map_to_their_parent_where_nvml_lists_them() {
    let mut t = dgx().clone();
    let parent = t.gpus[6].pci;
    let mut gpu = crate::model::NvmlGpu::new(6, format!("0000{parent}"));
    gpu.mig_mode = Some(crate::model::MigMode {
        current: true,
        pending: true,
        instances: 1,
        uuids: vec!["MIG-5C0F2D1E-7A3B-5E8F-9B1C-2D3E4F5A6B7C".into()],
    });
    t.nvml = Some(crate::model::NvmlSnapshot {
        schema: crate::model::NvmlSnapshot::SCHEMA.into(),
        driver_version: None,
        cuda_driver_version: None,
        device_count: None,
        gpus: vec![gpu],
    });
    let alloc = Allocation {
        pods: vec![pod(
            "mig",
            vec![devices(
                "nvidia.com/mig-1g.10gb",
                &["MIG-5c0f2d1e-7a3b-5e8f-9b1c-2d3e4f5a6b7c"],
                None,
            )],
            0..0,
        )],
        allocatable: None,
    };
    let r = audit(&t, &alloc, &AuditOptions::default());
    assert_eq!(one(&r).gpus[0].pci, parent);
}

#[test]
fn dra_gpus_are_placed_and_other_claims_listed() {
    use crate::model::allocation::{ClaimAllocation, ClaimDevice};
    let t = dgx();
    let mut p = pod(
        "dra",
        vec![devices("rdma/hca_ibp154s0", &["0"], None)],
        56..60,
    );
    let claim = |driver: &str, device: &str| ClaimDevice {
        driver_name: driver.into(),
        pool_name: "node-a".into(),
        device_name: device.into(),
        cdi_devices: vec![format!("k8s.gpu.nvidia.com/device={device}")],
    };
    p.containers[0].dynamic_resources = vec![ClaimAllocation {
        claim_name: "gpus".into(),
        claim_namespace: "train".into(),
        devices: vec![
            claim("gpu.nvidia.com", "gpu-4"),
            claim("gpu.nvidia.com", "gpu-9"),
            claim("net.example.com", "nic-0"),
        ],
    }];
    let alloc = Allocation {
        pods: vec![p],
        allocatable: None,
    };
    let r = audit(t, &alloc, &AuditOptions::default());
    let c = one(&r);
    assert_eq!(c.gpus[0].index, 4);
    assert_eq!(c.gpus[0].resource, "claim train/gpus");
    assert_eq!(c.worst_path.as_deref(), Some("PXB"));
    assert_eq!(c.dynamic_devices, ["net.example.com/node-a/nic-0"]);
    let unknown = summaries(c, "unknown-device");
    assert_eq!(
        unknown,
        ["DRA device gpu.nvidia.com/gpu-9 is not a GPU index of this node"]
    );
}

/// DRA claims placed through the node's ResourceSlices (as the three drivers publish
/// them for the SR-IOV host): a GPU and a VF judged alike, the claim named; another
/// node's device, a device in no slice and a malformed pciBusID each a finding, and
/// a driver that publishes no PCI address listed.
#[test]
fn dra_claims_are_placed_through_resource_slices() {
    use crate::model::allocation::{ClaimAllocation, ClaimDevice};
    let t = sriov_host();
    let mut list = crate::export::dra::resource_slices(t, "node-a");
    let other = crate::export::dra::resource_slices(t, "node-b");
    // A copy of node-b's slices, and one device with a broken address.
    let items = list["items"].as_array_mut().unwrap();
    items.extend(other["items"].as_array().unwrap().iter().cloned());
    let gpu_slice = items
        .iter_mut()
        .find(|s| s["spec"]["driver"] == "gpu.nvidia.com" && s["spec"]["nodeName"] == "node-a")
        .unwrap();
    let mut broken = gpu_slice["spec"]["devices"][0].clone();
    broken["name"] = "gpu-broken".into();
    broken["attributes"]["resource.kubernetes.io/pciBusID"] =
        serde_json::json!({"string": "0000:zz:00.0"});
    gpu_slice["spec"]["devices"]
        .as_array_mut()
        .unwrap()
        .push(broken);
    let slices = crate::parse::parse_resource_slices(&list.to_string()).unwrap();

    let gpus = crate::view::dra::gpu_devices(t);
    let vfs = crate::view::dra::nic_devices(t, crate::view::dra::DraDriver::Sriov);
    // GPU 5 and the first VF of its rail: the pod fixture's pair.
    let g5 = &gpus[5];
    let vf = vfs
        .iter()
        .find(|v| {
            crate::view::affinity::path_class(
                t,
                t.pci_function(g5.pci).unwrap(),
                t.pci_function(v.pci).unwrap(),
            )
            .allows_gdr()
        })
        .unwrap();
    let claim = |driver: &str, pool: &str, device: &str| ClaimDevice {
        driver_name: driver.into(),
        pool_name: pool.into(),
        device_name: device.into(),
        cdi_devices: Vec::new(),
    };
    let mut p = pod("dra", Vec::new(), 0..4);
    p.containers[0].dynamic_resources = vec![ClaimAllocation {
        claim_name: "gpu-nic".into(),
        claim_namespace: "train".into(),
        devices: vec![
            claim("gpu.nvidia.com", "node-a", &g5.name),
            claim("sriovnetwork.k8snetworkplumbingwg.io", "node-a", &vf.name),
            claim("gpu.nvidia.com", "node-b", "gpu-1"),
            claim("gpu.nvidia.com", "node-a", "gpu-77"),
            claim("gpu.nvidia.com", "node-a", "gpu-broken"),
            claim("net.example.com", "node-a", "nic-0"),
        ],
    }];
    let alloc = Allocation {
        pods: vec![p],
        allocatable: None,
    };
    let opts = AuditOptions {
        resource_slices: Some(slices),
        node_name: Some("node-a".into()),
        ..Default::default()
    };
    let r = audit(t, &alloc, &opts);
    let c = one(&r);
    assert_eq!(c.gpus.len(), 1);
    assert_eq!(c.gpus[0].pci, g5.pci);
    assert_eq!(c.gpus[0].resource, "claim train/gpu-nic");
    assert_eq!(c.nics.len(), 1);
    assert_eq!(c.nics[0].pci, vf.pci);
    assert_eq!(c.nics[0].resource, "claim train/gpu-nic");
    assert!(c.nics[0].is_vf);
    // Judged like device-plugin devices: the pair is at its rail's class.
    assert!(summaries(c, "gpu-nic-distance").is_empty(), "{c:#?}");
    let unknown = summaries(c, "unknown-device");
    assert_eq!(unknown.len(), 3, "{unknown:?}");
    assert!(
        unknown[0].contains("node node-b's ResourceSlice"),
        "{unknown:?}"
    );
    assert!(
        unknown[1].contains("in no ResourceSlice of this node"),
        "{unknown:?}"
    );
    assert!(
        unknown[2].contains("\"0000:zz:00.0\" is not a PCI address"),
        "{unknown:?}"
    );
    assert_eq!(c.dynamic_devices, ["net.example.com/node-a/nic-0"]);
}
