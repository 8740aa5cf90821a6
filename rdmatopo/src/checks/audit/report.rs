//! What the audit reports of each container and of the node, and the terms it runs on
//! (its options, the doctor checks it takes).

use super::ids::SharedPools;
use crate::checks::doctor::Finding;
use crate::model::Severity;
use crate::parse::PciAddr;
use serde::{Deserialize, Serialize};

/// Schema tag of the report's JSON.
pub const SCHEMA: &str = "rdmatopo.audit/1";

/// The checks of `rdmatopo doctor` the audit runs on each container.
pub const DOCTOR_CHECKS: [&str; 3] = ["numa-affinity", "gpu-nic-distance", "multi-rail"];

/// Options of [`audit`](super::audit).
#[derive(Debug, Clone, Default)]
pub struct AuditOptions {
    /// k8s-rdma-shared-dev-plugin pools (from its `config.json`); `None`: the names
    /// `rdmatopo k8s rdma-shared-dev-plugin` writes.
    pub shared_pools: Option<SharedPools>,
    /// The ResourceSlices' devices, to place DRA-claimed devices by their attributes
    /// (`--resource-slices`); `None`: `gpu.nvidia.com` devices by name only.
    pub resource_slices: Option<Vec<crate::parse::SliceDevice>>,
    /// This node's name: slices of other nodes are not this node's devices.
    pub node_name: Option<String>,
}

/// A GPU a container holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditGpu {
    /// The kubelet's resource and device id.
    pub resource: String,
    pub device_id: String,
    /// The host's index (`nvidia-smi` on the node).
    pub index: u32,
    /// The index the container's own `nvidia-smi` and CUDA give it: its position among
    /// the container's GPUs in PCI bus order. The findings name it so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container_index: Option<u32>,
    pub pci: PciAddr,
    /// From sysfs `numa_node`.
    pub numa_node: Option<u32>,
}

/// A NIC (PF or VF, or a shared pool's HCA) a container holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditNic {
    pub resource: String,
    pub device_id: String,
    pub pci: PciAddr,
    /// The RDMA device of the function, when the host's sysfs shows it.
    pub rdma_device: Option<String>,
    pub netdev: Option<String>,
    pub is_vf: bool,
    /// From sysfs `numa_node`.
    pub numa_node: Option<u32>,
}

/// The CPUs of a container.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditCpus {
    /// The CPUs in cpulist form (`0-15`).
    pub cpus: String,
    /// No exclusive CPUs: the container runs on the kubelet's shared pool.
    pub shared_pool: bool,
    /// NUMA nodes these CPUs are on.
    pub numa_nodes: Vec<u32>,
}

/// A resource the audit does not judge (not a GPU or RDMA device), listed as seen.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OtherResource {
    pub resource: String,
    pub device_ids: Vec<String>,
}

/// One container and its verdict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditContainer {
    pub name: String,
    pub gpus: Vec<AuditGpu>,
    pub nics: Vec<AuditNic>,
    pub cpus: AuditCpus,
    /// NUMA nodes of the memory the memory manager pinned (empty: not pinned).
    pub memory_numa_nodes: Vec<u32>,
    /// The worst class from a GPU to its nearest NIC of this container (`PIX` …
    /// `SYS`); `None` without both GPUs and NICs.
    pub worst_path: Option<String>,
    /// Some GPU or NIC has none of the container's CPUs local to it.
    pub numa_misaligned: bool,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub other_resources: Vec<OtherResource>,
    /// DRA devices the kubelet reported that the audit does not place
    /// (`driver/pool/device`); NVIDIA DRA GPUs are among `gpus` instead.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dynamic_devices: Vec<String>,
    /// In the doctor's terms, worst first.
    pub findings: Vec<Finding>,
}

/// A pod with at least one container holding GPUs or NICs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditPod {
    pub namespace: String,
    pub name: String,
    pub containers: Vec<AuditContainer>,
}

/// Counts for the node.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditSummary {
    /// Every pod the kubelet listed.
    pub pods: usize,
    /// Containers holding a GPU or NIC (the ones judged).
    pub containers_judged: usize,
    pub numa_misaligned_containers: usize,
    pub errors: usize,
    pub warnings: usize,
    pub infos: usize,
}

/// What `k8s audit` found (`rdmatopo.audit/1`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditReport {
    pub schema: String,
    /// The root the node's topology was read from.
    pub root: String,
    /// The node's name, when the caller knows it (`--node-name`; the DaemonSet passes
    /// `spec.nodeName`).
    #[serde(default)]
    pub node: Option<String>,
    /// Whether the kubelet answered `GetAllocatableResources` (what is free is known).
    pub free_devices_known: bool,
    pub pods: Vec<AuditPod>,
    pub summary: AuditSummary,
}

impl AuditReport {
    /// The worst severity among real (not skipped) findings.
    pub fn worst(&self) -> Option<Severity> {
        self.containers()
            .flat_map(|c| &c.findings)
            .filter(|f| !f.skipped)
            .map(|f| f.severity)
            .max()
    }

    /// As `doctor`: 0 clean (infos at most), 1 warnings, 2 errors.
    pub fn exit_code(&self) -> i32 {
        crate::checks::doctor::exit_code(self.worst())
    }

    /// Every container judged, with its pod.
    pub fn containers(&self) -> impl Iterator<Item = &AuditContainer> {
        self.pods.iter().flat_map(|p| &p.containers)
    }
}
