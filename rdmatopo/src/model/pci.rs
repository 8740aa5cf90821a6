use crate::parse::{AcsState, CpuSet, LinkSpeed, PciAddr};
use serde::{Deserialize, Serialize};

/// A PCI host bridge / root complex: the `pci<domain>:<bus>` directory under
/// `/sys/devices` (or under a VMBus device in Hyper-V guests).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostBridge {
    /// `pci0000:00`.
    pub name: String,
    /// Canonical sysfs path.
    pub path: String,
    /// NUMA node of the functions below it (`numa_node` of the first one that knows).
    pub numa_node: Option<u32>,
}

/// Where a function sits in the PCIe hierarchy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum PciRole {
    /// A bridge directly below the host bridge.
    RootPort,
    /// A bridge below a root port or a downstream port.
    SwitchUpstream,
    /// A bridge below a switch upstream port.
    SwitchDownstream,
    /// Anything that is not a PCI-to-PCI bridge.
    Endpoint,
}

/// PCIe link state of a function (`current_link_speed`, `current_link_width`,
/// `max_link_speed`, `max_link_width`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct PcieLink {
    /// `current_link_speed`.
    pub current_speed: Option<LinkSpeed>,
    /// `current_link_width`.
    pub current_width: Option<u32>,
    /// `max_link_speed`.
    pub max_speed: Option<LinkSpeed>,
    /// `max_link_width`.
    pub max_width: Option<u32>,
}

impl PcieLink {
    /// Trained below its capability (speed or width), when both are known and non-zero.
    pub fn is_degraded(&self) -> bool {
        let speed = matches!((self.current_speed, self.max_speed), (Some(c), Some(m)) if c.gts + 0.01 < m.gts);
        let width = matches!((self.current_width, self.max_width), (Some(c), Some(m)) if c > 0 && m > 0 && c < m);
        speed || width
    }
}

/// SR-IOV capability of a physical function.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Sriov {
    /// `sriov_totalvfs`.
    pub total_vfs: u32,
    /// `sriov_numvfs`.
    pub num_vfs: u32,
    /// The VFs, in VF index order: where `virtfn<N>` links to, placed by `sriov_offset`
    /// and `sriov_stride` where the kernel shows them.
    pub vfs: Vec<PciAddr>,
}

/// One PCI function, from `/sys/bus/pci/devices/<bdf>/`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct PciFunction {
    /// The address (`0000:18:00.0`, the directory name).
    pub address: PciAddr,
    /// Canonical sysfs directory (`/sys/devices/pci0000:15/…/0000:18:00.0`).
    pub path: String,
    /// The host bridge above it (`pci0000:15`).
    pub host_bridge: String,
    /// The bridge directly above it; `None` when it sits on the host bridge.
    pub parent: Option<PciAddr>,
    /// Where it sits in the tree, from its class and its parent's.
    pub role: PciRole,
    /// `class` (`0x030200`), or `PCI_CLASS` of `uevent`, which states the class and
    /// the four ids below in one file; JSON writes that text.
    #[serde(with = "super::pci_id::class")]
    pub class: u32,
    /// `vendor` (`0x10de`; `PCI_ID` of `uevent`); JSON writes that text.
    #[serde(with = "super::pci_id::id")]
    pub vendor: u16,
    /// `device` (`PCI_ID` of `uevent`).
    #[serde(with = "super::pci_id::id")]
    pub device: u16,
    /// `subsystem_vendor` (`PCI_SUBSYS_ID` of `uevent`).
    #[serde(with = "super::pci_id::optional_id")]
    pub subsystem_vendor: Option<u16>,
    /// `subsystem_device` (`PCI_SUBSYS_ID` of `uevent`).
    #[serde(with = "super::pci_id::optional_id")]
    pub subsystem_device: Option<u16>,
    /// Vendor name from the pci.ids database.
    pub vendor_name: Option<String>,
    /// Device name from the pci.ids database.
    pub device_name: Option<String>,
    /// Basename of the `driver` link.
    pub driver: Option<String>,
    /// `numa_node`; `-1` (unknown) is `None`.
    pub numa_node: Option<u32>,
    /// `local_cpulist`.
    pub local_cpus: Option<CpuSet>,
    /// PCIe link state.
    pub link: PcieLink,
    /// Present on physical functions able to create VFs.
    pub sriov: Option<Sriov>,
    /// Target of `physfn`, on virtual functions.
    pub physfn: Option<PciAddr>,
    /// Index of this VF under its PF (`virtfn<N>`).
    pub vf_index: Option<u32>,
    /// A virtual function: has `physfn`, or its device id is a known VF id (a VF passed
    /// into a VM or pod without its PF).
    pub is_vf: bool,
    /// Basename of the `iommu_group` link.
    pub iommu_group: Option<u32>,
    /// Access Control Services from the `config` file; read for bridges only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[doc(hidden)]
    pub acs: Option<AcsState>,
}

impl PciFunction {
    /// Base class and subclass (`0x0302`).
    pub fn class_code(&self) -> u16 {
        (self.class >> 8) as u16
    }

    /// A PCI-to-PCI bridge (class `0x0604`).
    pub fn is_bridge(&self) -> bool {
        self.class_code() == 0x0604
    }

    /// `vvvv:dddd`.
    pub fn id(&self) -> String {
        format!("{:04x}:{:04x}", self.vendor, self.device)
    }

    /// NVIDIA GPU: vendor 0x10de with VGA (0x0300) or 3D (0x0302) class. NVSwitch
    /// (0x0680) and the HDMI audio function (0x0403) are not GPUs.
    pub fn is_nvidia_gpu(&self) -> bool {
        self.vendor == 0x10de && matches!(self.class_code(), 0x0300 | 0x0302)
    }
}
