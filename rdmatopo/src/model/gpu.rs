use crate::parse::{CpuSet, PciAddr};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// An NVIDIA GPU: a PCI function of VGA or 3D class, plus NVML facts when known.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Gpu {
    /// The PCI function (`/sys/bus/pci/devices/<bdf>`).
    pub pci: PciAddr,
    /// Position in PCI bus order (CUDA's default `CUDA_DEVICE_ORDER=PCI_BUS_ID` order).
    pub index: u32,
    /// NVML's product name, else the pci.ids name.
    pub name: Option<String>,
    /// NVML UUID (`GPU-…`), or the one in `/proc/driver/nvidia/gpus/<bdf>/information`.
    pub uuid: Option<String>,
    /// `numa_node` of the function, else of its host bridge, else the one node its
    /// `local_cpulist` covers (`Topology::numa_node_of`).
    pub numa_node: Option<u32>,
    /// `local_cpulist` of the function.
    pub local_cpus: Option<CpuSet>,
    /// `/dev/nvidia<minor>` number, when the driver says.
    pub minor: Option<u32>,
}

/// NVML's common-ancestor level (`nvmlGpuTopologyLevel_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TopologyLevel {
    Internal,
    Single,
    Multiple,
    Hostbridge,
    Node,
    System,
}

/// What sits at the far end of an NVLink.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NvLinkRemote {
    Gpu,
    Nvswitch,
    Cpu,
    Unknown,
}

/// One NVLink of a GPU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NvLink {
    pub link: u32,
    pub active: bool,
    /// NVML form (`00000000:05:00.0`), as reported.
    pub remote_bus_id: Option<String>,
    pub remote_kind: NvLinkRemote,
}

/// MIG mode of a GPU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MigMode {
    pub current: bool,
    pub pending: bool,
    #[serde(default)]
    pub instances: u32,
    /// UUIDs (`MIG-…`) of the MIG devices present (`nvmlDeviceGetMigDeviceHandleByIndex`,
    /// then `nvmlDeviceGetUUID`): what the NVIDIA device plugin advertises for them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub uuids: Vec<String>,
}

/// PCIe link as NVML reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NvmlPcie {
    pub max_gen: Option<u32>,
    pub max_width: Option<u32>,
    pub current_gen: Option<u32>,
    pub current_width: Option<u32>,
}

/// What NVML says about one GPU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NvmlGpu {
    pub index: u32,
    /// NVML's bus id (`00000000:18:00.0`).
    pub bus_id: String,
    pub name: Option<String>,
    pub uuid: Option<String>,
    #[serde(default)]
    pub minor_number: Option<u32>,
    #[serde(default)]
    pub numa_node: Option<u32>,
    #[serde(default)]
    pub cpu_affinity: Option<CpuSet>,
    #[serde(default)]
    pub mig_mode: Option<MigMode>,
    #[serde(default)]
    pub pcie: Option<NvmlPcie>,
    #[serde(default)]
    pub nvlinks: Vec<NvLink>,
    /// NVML's level towards each other GPU, keyed by that GPU's NVML bus id.
    #[serde(default)]
    pub topology: BTreeMap<String, TopologyLevel>,
    /// Active NVLink-C2C links to the CPU (`NVML_FI_DEV_C2C_LINK_COUNT`, then
    /// `NVML_FI_DEV_C2C_LINK_GET_STATUS` = 1 per link, as NCCL's `ncclTopoGetXmlFromGpu`
    /// counts them); `None` where NVML does not answer (no C2C, older driver).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub c2c_links: Option<u32>,
}

impl NvmlGpu {
    /// A GPU known only by its NVML index and bus id (the rest unknown), for facts
    /// assembled from partial sources such as an NCCL topology file.
    pub fn new(index: u32, bus_id: impl Into<String>) -> Self {
        Self {
            index,
            bus_id: bus_id.into(),
            name: None,
            uuid: None,
            minor_number: None,
            numa_node: None,
            cpu_affinity: None,
            mig_mode: None,
            pcie: None,
            nvlinks: Vec::new(),
            topology: BTreeMap::new(),
            c2c_links: None,
        }
    }

    /// The bus id in sysfs form, when NVML's text parses.
    pub fn pci(&self) -> Option<PciAddr> {
        self.bus_id.parse().ok()
    }
}

/// The NVML view of a machine (live, or replayed from `rdmatopo/nvml.json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NvmlSnapshot {
    pub schema: String,
    #[serde(default)]
    pub driver_version: Option<String>,
    #[serde(default)]
    pub cuda_driver_version: Option<i32>,
    /// How many GPUs NVML counts (`nvmlDeviceGetCount`); `gpus` holds fewer where some
    /// could not be read, and then says nothing of the others. Unknown in older snapshots.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_count: Option<u32>,
    pub gpus: Vec<NvmlGpu>,
}

impl NvmlSnapshot {
    pub const SCHEMA: &'static str = "rdmatopo.nvml/1";

    /// Facts for the GPU at `pci`.
    pub fn gpu(&self, pci: PciAddr) -> Option<&NvmlGpu> {
        self.gpus.iter().find(|g| g.pci() == Some(pci))
    }
}
