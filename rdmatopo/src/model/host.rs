use crate::parse::{CgroupEntry, CpuSet, MemlockLimit, RdmaLimit};
pub use crate::parse::{CpuInfo, Mount, NvidiaProcGpu};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A NUMA node (`/sys/devices/system/node/node<N>/`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct NumaNode {
    /// The node number (`node<N>`).
    pub id: u32,
    /// `cpulist` (empty for memory-only nodes).
    pub cpus: CpuSet,
    /// `distance`: SLIT distances to every node, in node order.
    pub distances: Vec<u32>,
    /// `MemTotal` of `meminfo`, in KiB (the kernel's "kB"): what `k8s pod` sizes a
    /// pod's memory from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_kib: Option<u64>,
}

/// RDMA network-namespace mode (`/sys/module/ib_core/parameters/netns_mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NetnsMode {
    Shared,
    Exclusive,
}

/// Machine-wide facts.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Host {
    /// `/sys/devices/system/cpu/online`.
    pub cpus_online: Option<CpuSet>,
    pub cpu: Option<CpuInfo>,
    pub rdma_netns_mode: Option<NetnsMode>,
    /// Paths of the GPUDirect RDMA peer-memory markers that exist
    /// (`/sys/module/nvidia_peermem/version`, `/sys/kernel/mm/memory_peers/nv_mem/version`).
    pub peermem: Vec<String>,
    /// NVIDIA kernel driver version (`/sys/module/nvidia/version`).
    pub nvidia_driver: Option<String>,
    /// Interface of the default IPv4 route (`/proc/net/route`; `/proc/1/net/route`
    /// under a host procfs mounted into a pod, `Ctx::net_table`).
    pub default_route_interface: Option<String>,
}

/// Facts about the process that reads (the container's view).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Process {
    /// `Cpus_allowed_list` of `/proc/self/status`.
    pub cpus_allowed: Option<CpuSet>,
    /// Effective cgroup cpuset (`cpuset.cpus.effective`, or v1 `cpuset.effective_cpus`).
    pub cgroup_cpuset: Option<CpuSet>,
    /// `Max locked memory` soft limit of `/proc/self/limits`.
    pub memlock: Option<MemlockLimit>,
    /// `/proc/self/cgroup`.
    pub cgroups: Vec<CgroupEntry>,
    /// rdma cgroup `rdma.max`, when the controller is there.
    pub rdma_max: Option<Vec<RdmaLimit>>,
    /// rdma cgroup `rdma.current`.
    pub rdma_current: Option<Vec<RdmaLimit>>,
    /// The variables of `/proc/self/environ` that matter here (`CUDA_VISIBLE_DEVICES`,
    /// `NVIDIA_VISIBLE_DEVICES`, `LOCAL_RANK`, `PCIDEVICE_*`, `NCCL_*`, …).
    pub env: BTreeMap<String, String>,
    /// `/dev/infiniband/*` entries present.
    pub dev_infiniband: Vec<String>,
    /// Minor numbers of the `/dev/nvidia<N>` nodes present.
    pub dev_nvidia: Vec<u32>,
    /// GPUs listed under `/proc/driver/nvidia/gpus/`.
    pub proc_nvidia_gpus: Vec<String>,
    /// Whether `/proc/driver/nvidia` exists (the NVIDIA container runtime mounts its own
    /// copy, listing only the GPUs it gives the container).
    #[serde(default)]
    pub proc_driver_nvidia: bool,
    /// `/proc/driver/nvidia/gpus/<bdf>/information` of each listed GPU.
    #[serde(default)]
    pub proc_nvidia_gpu_info: Vec<NvidiaProcGpu>,
    /// Whether `/dev` could be listed: a capture without `/dev` says nothing about
    /// which device nodes the process has.
    #[serde(default)]
    pub dev_listed: bool,
    /// Effective capabilities (`CapEff` of `/proc/self/status`). A privileged container
    /// holds them all and sees the host's `/dev`.
    #[serde(default)]
    pub cap_eff: Option<u64>,
    /// Mounts of `/proc/self/mountinfo` that container runtimes make for devices: the
    /// NVIDIA runtime's `/proc/driver/nvidia` tmpfs and its bind mounts of
    /// `/proc/driver/nvidia/gpus/<bdf>` and `/dev/nvidia<N>`, and `/dev/infiniband/*`.
    #[serde(default)]
    pub device_mounts: Vec<Mount>,
    /// Container marker files that exist (`/.dockerenv`, `/run/.containerenv`,
    /// `/var/run/secrets/kubernetes.io/serviceaccount`).
    #[serde(default)]
    pub container_markers: Vec<String>,
    /// Names under `/var/run/nvidia-container-devices` (the NVIDIA device plugin's
    /// `volume-mounts` strategy: one entry per GPU index or UUID given).
    #[serde(default)]
    pub nvidia_container_devices: Vec<String>,
    /// The PCI functions the DRA device metadata files mounted into this container
    /// name (KEP-5304, alpha in Kubernetes 1.36: a driver's kubelet plugin writes one per
    /// claim, request and driver under `/var/run/kubernetes.io/dra-device-attributes`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dra_metadata_devices: Vec<DraMetadataDevice>,
}

/// One device of a DRA device metadata file, with the PCI address its attributes give.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DraMetadataDevice {
    /// The metadata file (`.../<claim>/<request>/<driver>-metadata.json`).
    pub file: String,
    pub driver: String,
    pub pool: String,
    pub device: String,
    /// `resource.kubernetes.io/pciBusID`, else DRANET's or the SR-IOV driver's address.
    pub pci: String,
}

/// Variables that carry a process's local rank, in the order they are trusted
/// (torchrun, Open MPI, Slurm, MPICH/Intel MPI, PMI).
pub const LOCAL_RANK_VARS: [&str; 5] = [
    "LOCAL_RANK",
    "OMPI_COMM_WORLD_LOCAL_RANK",
    "SLURM_LOCALID",
    "MPI_LOCALRANKID",
    "PMI_LOCAL_RANK",
];

/// Variables that carry the number of ranks on this node.
pub const LOCAL_SIZE_VARS: [&str; 4] = [
    "LOCAL_WORLD_SIZE",
    "OMPI_COMM_WORLD_LOCAL_SIZE",
    "MPI_LOCALNRANKS",
    "PMI_LOCAL_SIZE",
];

impl Process {
    /// Each item of the `PCIDEVICE_<PREFIX>_<NAME>` variables with its variable: the PCI
    /// addresses the SR-IOV and RDMA device plugins gave this container, as written
    /// (`_INFO` variables hold JSON, not a list).
    pub fn pcidevice_items(&self) -> impl Iterator<Item = (&str, &str)> {
        self.env
            .iter()
            .filter(|(key, _)| key.starts_with("PCIDEVICE_") && !key.ends_with("_INFO"))
            .flat_map(|(key, value)| {
                value
                    .split(',')
                    .map(str::trim)
                    .filter(|item| !item.is_empty())
                    .map(move |item| (key.as_str(), item))
            })
    }

    /// The PCI functions named as given to this container, each with the source that
    /// names it: the `PCIDEVICE_*` variables' items, then the DRA device metadata files'.
    pub fn given_functions(&self) -> impl Iterator<Item = (&str, &str)> {
        self.pcidevice_items().chain(
            self.dra_metadata_devices
                .iter()
                .map(|d| (d.file.as_str(), d.pci.as_str())),
        )
    }

    /// The CPUs this process may run on: the allowed list, narrowed by the cgroup cpuset.
    pub fn usable_cpus(&self) -> Option<CpuSet> {
        match (&self.cpus_allowed, &self.cgroup_cpuset) {
            (Some(a), Some(c)) => Some(a.intersection(c)),
            (Some(a), None) => Some(a.clone()),
            (None, Some(c)) => Some(c.clone()),
            (None, None) => None,
        }
    }
}
