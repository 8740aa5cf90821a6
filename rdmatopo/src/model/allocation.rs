//! What the kubelet has handed to the pods of a node: its PodResources v1 answers
//! (`List` and `GetAllocatableResources` on
//! `/var/lib/kubelet/pod-resources/kubelet.sock`) as plain owned data.
//!
//! Field names follow the kubelet's `api.proto` (vendored in `rdmatopo/proto/`); the
//! gRPC client that fills them is `sources::kubelet` (feature `kubelet`), and
//! the JSON form lets a saved answer be judged offline.

use serde::{Deserialize, Serialize};

/// The kubelet's answers for one node.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Allocation {
    /// `List`: every pod the kubelet runs, with its containers' resources.
    pub pods: Vec<PodAllocation>,
    /// `GetAllocatableResources`; `None` when the kubelet does not implement it
    /// (before 1.23 without the `KubeletPodResourcesGetAllocatable` gate), so which
    /// devices are free is unknown.
    #[serde(default)]
    pub allocatable: Option<Allocatable>,
}

/// One pod (`PodResources`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PodAllocation {
    pub namespace: String,
    pub name: String,
    pub containers: Vec<ContainerAllocation>,
    /// Exclusive CPUs at pod level (pod-level resources; they overlap the containers').
    #[serde(default)]
    pub cpu_ids: Vec<u32>,
}

/// One container (`ContainerResources`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContainerAllocation {
    pub name: String,
    /// Device-plugin devices, one entry per resource (and NUMA placement).
    #[serde(default)]
    pub devices: Vec<DeviceAllocation>,
    /// Exclusive CPUs from the static CPU manager; empty means the shared pool.
    #[serde(default)]
    pub cpu_ids: Vec<u32>,
    /// Memory and hugepages from the static memory manager.
    #[serde(default)]
    pub memory: Vec<MemoryAllocation>,
    /// DRA claims (`dynamic_resources`).
    #[serde(default)]
    pub dynamic_resources: Vec<ClaimAllocation>,
}

/// Devices of one extended resource (`ContainerDevices`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceAllocation {
    /// `nvidia.com/gpu`, `nvidia.com/vf_enp24s0np0`, `rdma/hca_ibp24s0`.
    pub resource_name: String,
    /// The ids the device plugin advertised (`GPU-…`, `0000:18:00.2`, `0`).
    pub device_ids: Vec<String>,
    /// The NUMA nodes the plugin reported for these devices (`TopologyInfo`); `None`
    /// when it reported none.
    #[serde(default)]
    pub numa_nodes: Option<Vec<u32>>,
}

/// Memory of one kind (`ContainerMemory`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryAllocation {
    /// `memory`, `hugepages-1Gi`, …
    pub memory_type: String,
    pub size: u64,
    #[serde(default)]
    pub numa_nodes: Option<Vec<u32>>,
}

/// One DRA claim of a container (`DynamicResource`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClaimAllocation {
    pub claim_name: String,
    pub claim_namespace: String,
    pub devices: Vec<ClaimDevice>,
}

/// One device of a claim (`ClaimResource`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClaimDevice {
    pub driver_name: String,
    pub pool_name: String,
    pub device_name: String,
    /// Fully qualified CDI names (`nvidia.com/gpu=gpu-0`).
    #[serde(default)]
    pub cdi_devices: Vec<String>,
}

/// What the node can hand out (`AllocatableResourcesResponse`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Allocatable {
    pub devices: Vec<DeviceAllocation>,
    #[serde(default)]
    pub cpu_ids: Vec<u32>,
    #[serde(default)]
    pub memory: Vec<MemoryAllocation>,
}
