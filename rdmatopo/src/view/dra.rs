//! What each Dynamic Resource Allocation (DRA) driver would publish for this node's
//! GPUs and RDMA NICs in its ResourceSlice: device names and attributes, computed from
//! the model exactly as the drivers compute them from sysfs.
//!
//! Sources (the drivers' code, read at these commits):
//! - Kubernetes' helper every driver calls, `k8s.io/dynamic-resource-allocation/
//!   deviceattribute` (kubernetes/kubernetes, pci_linux.go at 4d1ed689,
//!   numa_linux.go at e467a91f): `resource.kubernetes.io/pcieRoot` is the first
//!   segment of `/sys/bus/pci/devices/<bdf>`'s target under `/sys/devices`, only when
//!   that target starts with `/sys/devices/pci` (a Hyper-V guest's functions, under
//!   a VMBus device, get none); `resource.kubernetes.io/pciBusID` is the BDF;
//!   `resource.kubernetes.io/numaNode` is the function's `numa_node`, never
//!   published when it is -1.
//! - `gpu.nvidia.com` (kubernetes-sigs/dra-driver-nvidia-gpu 95932046,
//!   cmd/gpu-kubelet-plugin/deviceinfo.go `GpuInfo.Attributes`, `CanonicalName`
//!   `gpu-<minor>`; nvlib.go `discoverNumaNode`): `type: gpu`, pciBusID, pcieRoot,
//!   numaNode (scalar unless `DRAListTypeAttributes`), per full GPU.
//! - `dra.net` (kubernetes-sigs/dranet f258477c, pkg/inventory/db.go
//!   `discoverPCIDevices`, `addPCIAttributes`, `discoverStandaloneRDMADevices`;
//!   pkg/names/names.go `NormalizePCIAddress`): one device per PCI network function
//!   (VFs included), named `pci-<domain>-<bus>-<dev>-<fn>`, with `dra.net/pciAddress`,
//!   `dra.net/rdma`, `dra.net/rdmaDevice`, pcieRoot and both numaNode attributes. No
//!   pciBusID.
//! - `sriovnetwork.k8snetworkplumbingwg.io` (k8snetworkplumbingwg/dra-driver-sriov
//!   cd9404f0, pkg/devicestate/discovery.go `DiscoverSriovDevices`, pkg/host/host.go
//!   `GetNumaNode`, `GetPCIeRoot`): one device per VF of a PF with a netdev, named by
//!   the VF's BDF with `-` for `:` and `.`; its pcieRoot is the **PF's** (empty when
//!   that cannot be resolved), `dra.net/numaNode` the PF's `numa_node` (**-1** when
//!   unknown), `resource.kubernetes.io/pciBusID` and `…/pciAddress` the VF's.
//!
//! ConnectX-8 Data Direct: every driver takes the root of the NIC's own function (the
//! PF, or the PF of a VF), never the root of its Data Direct DMA function, which NCCL
//! uses for the data path (`NCCL_IB_DATA_DIRECT`); the GPU's class to a NIC here is
//! the class to that same function.

use super::affinity::path_class;
use crate::model::{PciFunction, Topology};
use crate::parse::PciAddr;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

/// The standard attributes' domain (KEP-4381).
pub const STANDARD_DOMAIN: &str = "resource.kubernetes.io";
pub const ATTR_PCIE_ROOT: &str = "resource.kubernetes.io/pcieRoot";
pub const ATTR_PCI_BUS_ID: &str = "resource.kubernetes.io/pciBusID";
pub const ATTR_NUMA_NODE: &str = "resource.kubernetes.io/numaNode";

/// A DRA driver whose ResourceSlices this module reproduces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum DraDriver {
    #[serde(rename = "gpu.nvidia.com")]
    NvidiaGpu,
    #[serde(rename = "dra.net")]
    Dranet,
    #[serde(rename = "sriovnetwork.k8snetworkplumbingwg.io")]
    Sriov,
}

impl DraDriver {
    pub const ALL: [DraDriver; 3] = [Self::NvidiaGpu, Self::Dranet, Self::Sriov];

    /// The driver name its slices and claims carry.
    pub fn name(self) -> &'static str {
        match self {
            Self::NvidiaGpu => "gpu.nvidia.com",
            Self::Dranet => "dra.net",
            Self::Sriov => "sriovnetwork.k8snetworkplumbingwg.io",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|d| d.name() == name)
    }

    /// The NIC driver's attribute that holds a device's own PCI address, for CEL
    /// selectors (dranet publishes no pciBusID).
    pub fn pci_address_attribute(self) -> &'static str {
        match self {
            Self::NvidiaGpu => ATTR_PCI_BUS_ID,
            Self::Dranet => "dra.net/pciAddress",
            Self::Sriov => ATTR_PCI_BUS_ID,
        }
    }

    /// The NUMA attribute the driver publishes under the standard name, if any (the
    /// SR-IOV driver publishes only `dra.net/numaNode`, which no GPU has, so a
    /// `matchAttribute` on NUMA cannot pair its VFs with GPUs).
    pub fn standard_numa(self) -> bool {
        !matches!(self, Self::Sriov)
    }
}

impl fmt::Display for DraDriver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A ResourceSlice attribute value (`resource.k8s.io/v1` `DeviceAttribute`: exactly
/// one of these fields).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum AttrValue {
    #[serde(rename = "string")]
    String(String),
    #[serde(rename = "int")]
    Int(i64),
    #[serde(rename = "bool")]
    Bool(bool),
}

impl fmt::Display for AttrValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::String(s) => write!(f, "{s:?}"),
            Self::Int(i) => write!(f, "{i}"),
            Self::Bool(b) => write!(f, "{b}"),
        }
    }
}

/// One device of a driver's ResourceSlice.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DraDevice {
    pub driver: DraDriver,
    /// The device name in the slice.
    pub name: String,
    /// The PCI function it stands for.
    pub pci: PciAddr,
    /// The RDMA device of the function (NICs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rdma_device: Option<String>,
    /// Attributes by fully qualified name (`<domain>/<id>`), as CEL reaches them.
    pub attributes: BTreeMap<String, AttrValue>,
}

impl DraDevice {
    pub fn attr(&self, qualified: &str) -> Option<&AttrValue> {
        self.attributes.get(qualified)
    }

    fn set(&mut self, qualified: &str, v: AttrValue) {
        self.attributes.insert(qualified.to_string(), v);
    }
}

/// `resource.kubernetes.io/pcieRoot` of a function, as the Kubernetes helper derives
/// it from the function's canonical path: `None` when that path is not under
/// `/sys/devices/pci…` (a Hyper-V guest's VMBus devices).
pub fn pcie_root(f: &PciFunction) -> Option<String> {
    pcie_root_of_path(&f.path)
}

/// [`pcie_root`] of a canonical sysfs path.
pub fn pcie_root_of_path(path: &str) -> Option<String> {
    let rest = path.strip_prefix("/sys/devices/")?;
    let first = rest.split('/').next()?;
    first.starts_with("pci").then(|| first.to_string())
}

/// The devices `gpu.nvidia.com` publishes: one per full GPU NVML numbers, named by its
/// `/dev/nvidia<minor>` (NVML's index where the minor is unknown).
pub fn gpu_devices(topo: &Topology) -> Vec<DraDevice> {
    let mut out = Vec::new();
    for g in &topo.gpus {
        let Some(f) = topo.pci_function(g.pci) else {
            continue;
        };
        let mut d = DraDevice {
            driver: DraDriver::NvidiaGpu,
            name: format!("gpu-{}", g.minor.unwrap_or(g.index)),
            pci: g.pci,
            rdma_device: None,
            attributes: BTreeMap::new(),
        };
        d.set("gpu.nvidia.com/type", AttrValue::String("gpu".into()));
        if let Some(u) = &g.uuid {
            d.set("gpu.nvidia.com/uuid", AttrValue::String(u.clone()));
        }
        d.set(ATTR_PCI_BUS_ID, AttrValue::String(g.pci.to_string()));
        if let Some(r) = pcie_root(f) {
            d.set(ATTR_PCIE_ROOT, AttrValue::String(r));
        }
        if let Some(n) = f.numa_node {
            d.set(ATTR_NUMA_NODE, AttrValue::Int(n.into()));
        }
        out.push(d);
    }
    out
}

/// Whether a function is a network controller (PCI class 0x02), the drivers' filter.
fn is_network(f: &PciFunction) -> bool {
    f.class >> 16 == 0x02
}

/// The RDMA NIC devices `driver` publishes (functions with an RDMA device), in PCI
/// order. dranet publishes every network function and marks RDMA with `dra.net/rdma`;
/// the ones without RDMA are left out here, as the generated DeviceClass leaves them
/// out.
pub fn nic_devices(topo: &Topology, driver: DraDriver) -> Vec<DraDevice> {
    let rdma_of = |a: PciAddr| {
        topo.rdma_devices
            .iter()
            .find(|d| d.pci == Some(a))
            .map(|d| d.name.clone())
    };
    let mut out = Vec::new();
    match driver {
        DraDriver::NvidiaGpu => {}
        DraDriver::Dranet => {
            for f in topo.pci.iter().filter(|f| is_network(f)) {
                let Some(rdma) = rdma_of(f.address) else {
                    continue;
                };
                let addr = f.address.to_string();
                let mut d = DraDevice {
                    driver,
                    name: format!("pci-{}", addr.replace([':', '.'], "-")),
                    pci: f.address,
                    rdma_device: Some(rdma.clone()),
                    attributes: BTreeMap::new(),
                };
                d.set("dra.net/pciAddress", AttrValue::String(addr));
                d.set("dra.net/rdma", AttrValue::Bool(true));
                d.set("dra.net/rdmaDevice", AttrValue::String(rdma));
                if let Some(r) = pcie_root(f) {
                    d.set(ATTR_PCIE_ROOT, AttrValue::String(r));
                }
                if let Some(n) = f.numa_node {
                    d.set(ATTR_NUMA_NODE, AttrValue::Int(n.into()));
                    d.set("dra.net/numaNode", AttrValue::Int(n.into()));
                }
                out.push(d);
            }
        }
        DraDriver::Sriov => {
            let pfs = topo
                .pci
                .iter()
                .filter(|f| is_network(f) && !f.is_vf && netdev_present(topo, f));
            for pf in pfs {
                let Some(sriov) = &pf.sriov else { continue };
                let pf_root = pcie_root(pf).unwrap_or_default();
                let numa = pf.numa_node.map_or(-1, i64::from);
                for vf in sriov
                    .vfs
                    .iter()
                    .filter_map(|a| topo.pci_function(*a))
                    .filter(|f| is_network(f))
                {
                    let addr = vf.address.to_string();
                    let rdma = rdma_of(vf.address);
                    let mut d = DraDevice {
                        driver,
                        name: addr.replace([':', '.'], "-"),
                        pci: vf.address,
                        rdma_device: rdma.clone(),
                        attributes: BTreeMap::new(),
                    };
                    let p = "sriovnetwork.k8snetworkplumbingwg.io";
                    d.set(&format!("{p}/pciAddress"), AttrValue::String(addr.clone()));
                    d.set(
                        &format!("{p}/pfPciAddress"),
                        AttrValue::String(pf.address.to_string()),
                    );
                    if let Some(i) = vf.vf_index {
                        d.set(&format!("{p}/vfID"), AttrValue::Int(i.into()));
                    }
                    d.set(&format!("{p}/rdmaCapable"), AttrValue::Bool(rdma.is_some()));
                    d.set("k8s.cni.cncf.io/deviceID", AttrValue::String(addr.clone()));
                    d.set(ATTR_PCI_BUS_ID, AttrValue::String(addr));
                    d.set(ATTR_PCIE_ROOT, AttrValue::String(pf_root.clone()));
                    d.set("dra.net/numaNode", AttrValue::Int(numa));
                    if rdma.is_some() {
                        out.push(d);
                    }
                }
            }
        }
    }
    out
}

/// The PCIe path class between a published GPU and NIC (the class nvidia-smi shows
/// for the pair).
pub fn class_of(
    topo: &Topology,
    gpu: &DraDevice,
    nic: &DraDevice,
) -> Option<super::affinity::PathClass> {
    Some(path_class(
        topo,
        topo.pci_function(gpu.pci)?,
        topo.pci_function(nic.pci)?,
    ))
}

/// Whether a PF has a netdev the SR-IOV driver can name (it skips a PF without one).
fn netdev_present(topo: &Topology, f: &PciFunction) -> bool {
    topo.netdevs.iter().any(|n| n.pci == Some(f.address))
        || topo
            .rdma_devices
            .iter()
            .filter(|d| d.pci == Some(f.address))
            .any(|d| d.ports.iter().any(|p| p.netdev.is_some()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pcie_root_is_the_first_segment_under_sys_devices_pci() {
        let p = "/sys/devices/pci0000:15/0000:15:01.0/0000:18:00.0";
        assert_eq!(pcie_root_of_path(p).as_deref(), Some("pci0000:15"));
        // Hyper-V: the helper refuses a path not under /sys/devices/pci.
        let p = "/sys/devices/LNXSYSTM:00/LNXSYBUS:00/ACPI0004:00/VMBUS:00/00000000-0001-0000-0000-000000000000/pci0001:00/0001:00:00.0";
        assert_eq!(pcie_root_of_path(p), None);
    }
}
