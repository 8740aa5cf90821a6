//! The model: plain owned data, deterministic order (PCI address, then name), and a
//! JSON form that is the contract shared by the CLI, Python and C.

pub mod allocation;
mod diagnostic;
mod gpu;
mod host;
mod net;
mod numa;
mod pci;
mod pci_id;
mod qos;
mod rdma;

pub use diagnostic::{Diagnostic, Severity};
pub use gpu::{Gpu, MigMode, NvLink, NvLinkRemote, NvmlGpu, NvmlPcie, NvmlSnapshot, TopologyLevel};
pub use host::{
    CpuInfo, DraMetadataDevice, Host, LOCAL_RANK_VARS, LOCAL_SIZE_VARS, Mount, NetnsMode, NumaNode,
    NvidiaProcGpu, Process,
};
pub use net::{Bond, Netdev, NetdevKind};
pub use pci::{HostBridge, PciFunction, PciRole, PcieLink, Sriov};
pub use qos::{Ecn, EcnPoint, NetdevQos, PortQos, QosFacts, VfQos};
pub use rdma::{DeviceIndexSnapshot, Gid, Port, RdmaDevice, VerbsDevice, VerbsPort, VerbsSnapshot};

use crate::parse::PciAddr;
use serde::{Deserialize, Serialize};

/// Schema tag of [`Topology`]'s JSON. Version 2 writes PCI ids and class as their
/// sysfs text (`"0x10de"`) where version 1 wrote decimal numbers.
pub const INVENTORY_SCHEMA: &str = "rdmatopo.inventory/2";

/// Versions of the inventory schema [`Topology::from_json`] reads: this one and the one
/// before (the README's N and N-1). Spelled apart from the prefix so that `--version`,
/// which lists the ids the sources write, does not list version 1.
const INVENTORY_VERSIONS_READ: [&str; 2] = ["2", "1"];
const INVENTORY_SCHEMA_PREFIX: &str = "rdmatopo.inventory/";

/// Everything rdmatopo learned about one machine (or one container's view of it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Topology {
    /// `rdmatopo.inventory/2`, the schema of this JSON.
    pub schema: String,
    /// The root the facts were read from (`/` when live).
    pub root: String,
    #[doc(hidden)]
    pub host: Host,
    #[doc(hidden)]
    pub process: Process,
    /// NUMA nodes (`/sys/devices/system/node/node<N>`), in id order.
    pub numa_nodes: Vec<NumaNode>,
    #[doc(hidden)]
    pub host_bridges: Vec<HostBridge>,
    /// Every PCI function, bridges included, in address order.
    pub pci: Vec<PciFunction>,
    /// The GPUs NVML numbers, in PCI order: where the `nvidia` driver holds a function,
    /// the NVIDIA display functions it holds; elsewhere every one
    /// ([`Topology::unnumbered_gpus`] are the others).
    pub gpus: Vec<Gpu>,
    /// RDMA devices (`/sys/class/infiniband/<name>`), in the kernel's registration order where known (its device index), else by name.
    pub rdma_devices: Vec<RdmaDevice>,
    /// Network interfaces of this network namespace (`/sys/class/net`), by name.
    pub netdevs: Vec<Netdev>,
    /// NVML facts, when a live or snapshot source provided them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[doc(hidden)]
    pub nvml: Option<NvmlSnapshot>,
    /// libibverbs facts, when a live or snapshot source provided them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[doc(hidden)]
    pub verbs: Option<VerbsSnapshot>,
    /// The kernel's RDMA device indices, when the RDMA netlink or a snapshot gave them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[doc(hidden)]
    pub device_index: Option<DeviceIndexSnapshot>,
    /// RoCE QoS facts (traffic class, ECN, port buffers, VF settings), where the
    /// driver exposes them.
    #[serde(default, skip_serializing_if = "QosFacts::is_empty")]
    #[doc(hidden)]
    pub qos: QosFacts,
    /// Which devices this model holds in full; absent when it holds every device (a
    /// host, `--all`, or a container whose devices could not be told apart).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub view: Option<DetailView>,
    /// What could not be read or made sense of, each naming its path.
    pub diagnostics: Vec<Diagnostic>,
}

/// The devices a container's model was read for ("owned" view): its own GPUs and RDMA
/// devices in full; the RDMA devices of its VFs' PFs in part; every other RDMA device
/// by name only ([`DetailView::other_rdma_devices`], not in
/// [`Topology::rdma_devices`]: a host's hundreds of VFs are other pods'), every other
/// GPU by place, class and node, and no other PCI function (the host's NICs and their
/// VFs are not placed). The GPUs found are
/// those bound to `nvidia` (all by class on a machine without the `nvidia` driver).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct DetailView {
    /// The container's GPUs, in PCI order.
    pub gpus: Vec<PciAddr>,
    /// RDMA devices read in full (the container's), in model order.
    pub rdma_devices: Vec<String>,
    /// RDMA devices of the PFs of its VFs: ports and attributes, and of each port's GID
    /// table at most the slots up to the first that names a netdev of this namespace.
    pub pf_rdma_devices: Vec<String>,
    /// PCI functions read in full: the container's GPUs and RDMA functions, the PFs of
    /// its VFs and every bridge above them, and the functions below the root port of a
    /// GPU none of whose NICs is there, in address order.
    pub pci: Vec<PciAddr>,
    /// Why the view was narrowed, for a header.
    pub reason: String,
    /// The other RDMA devices in `/sys/class/infiniband` (other containers'), by name
    /// only, in model order: listed, never read. All of them, or the first few where
    /// the answer read shows no more (the rest are counted in `unnamed_rdma_devices`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub other_rdma_devices: Vec<String>,
    /// How many other RDMA devices follow those of `other_rdma_devices`, counted in the
    /// listing and not named (0 where every one is named).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub unnamed_rdma_devices: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl Topology {
    /// An empty model for `root` (what discovery fills in).
    #[doc(hidden)]
    pub fn empty(root: impl Into<String>) -> Self {
        Self {
            schema: INVENTORY_SCHEMA.to_string(),
            root: root.into(),
            host: Host::default(),
            process: Process::default(),
            numa_nodes: Vec::new(),
            host_bridges: Vec::new(),
            pci: Vec::new(),
            gpus: Vec::new(),
            rdma_devices: Vec::new(),
            netdevs: Vec::new(),
            nvml: None,
            verbs: None,
            device_index: None,
            qos: QosFacts::default(),
            view: None,
            diagnostics: Vec::new(),
        }
    }

    /// NVIDIA display functions that are no GPU of [`Topology::gpus`]: bound to
    /// another driver than `nvidia` (`vfio-pci`, passed to a VM) or to none, on a
    /// machine where `nvidia` holds others. nvidia-smi, CUDA and NCCL do not see them.
    pub fn unnumbered_gpus(&self) -> impl Iterator<Item = &PciFunction> {
        self.pci
            .iter()
            .filter(|f| f.is_nvidia_gpu() && !self.gpus.iter().any(|g| g.pci == f.address))
    }

    /// The RDMA devices of the machine the model names but does not hold (another
    /// container's, in an owned view): [`DetailView::other_rdma_devices`], all of them
    /// or the first few ([`Topology::other_rdma_device_count`] says how many there are).
    pub fn other_rdma_devices(&self) -> &[String] {
        self.view
            .as_ref()
            .map_or(&[], |v| v.other_rdma_devices.as_slice())
    }

    /// How many RDMA devices of the machine the model does not hold: those named in
    /// [`DetailView::other_rdma_devices`] and those only counted.
    pub fn other_rdma_device_count(&self) -> usize {
        self.view
            .as_ref()
            .map_or(0, |v| v.other_rdma_devices.len() + v.unnamed_rdma_devices)
    }

    /// How many RDMA devices the machine shows: those held and those not.
    pub fn rdma_device_count(&self) -> usize {
        self.rdma_devices.len() + self.other_rdma_device_count()
    }

    /// Whether the model holds RDMA device `name` in full (every device of a whole read).
    pub fn holds_rdma_details(&self, name: &str) -> bool {
        self.view
            .as_ref()
            .is_none_or(|v| v.rdma_devices.iter().any(|d| d == name))
    }

    /// The PCI function at `addr`.
    pub fn pci_function(&self, addr: PciAddr) -> Option<&PciFunction> {
        self.pci
            .binary_search_by(|f| f.address.cmp(&addr))
            .ok()
            .map(|i| &self.pci[i])
    }

    /// The RDMA device called `name`.
    pub fn rdma_device(&self, name: &str) -> Option<&RdmaDevice> {
        self.rdma_devices.iter().find(|d| d.name == name)
    }

    /// The netdev called `name`.
    pub fn netdev(&self, name: &str) -> Option<&Netdev> {
        self.netdevs.iter().find(|n| n.name == name)
    }

    /// The first netdev of the PCI function `pci` in name order (its `net/` directory
    /// as `ls` lists it): the name device plugins select it by.
    pub fn first_netdev_of(&self, pci: PciAddr) -> Option<&str> {
        self.netdevs
            .iter()
            .filter(|n| n.pci == Some(pci))
            .map(|n| n.name.as_str())
            .min()
    }

    /// The NUMA node with id `id`.
    pub fn numa_node(&self, id: u32) -> Option<&NumaNode> {
        self.numa_nodes.iter().find(|n| n.id == id)
    }

    /// Upstream bridges of `addr`, nearest first (not including `addr`).
    pub fn ancestors(&self, addr: PciAddr) -> Vec<&PciFunction> {
        let mut out = Vec::new();
        let mut cur = self.pci_function(addr).and_then(|f| f.parent);
        while let Some(a) = cur {
            let Some(f) = self.pci_function(a) else { break };
            if out.len() > 64 || out.iter().any(|o: &&PciFunction| o.address == a) {
                break; // a cycle can only come from a hand-edited JSON model
            }
            out.push(f);
            cur = f.parent;
        }
        out
    }

    /// Serialize to the JSON contract.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    /// Read the JSON contract back, in this schema or the previous one (PCI ids as
    /// numbers); the model read carries this schema's tag, as it now is in its form.
    ///
    /// # Errors
    /// When the text is not a model of either schema.
    #[doc(hidden)]
    pub fn read_json(text: &str) -> Result<Self, serde_json::Error> {
        let mut topo: Self = serde_json::from_str(text)?;
        let version = topo.schema.strip_prefix(INVENTORY_SCHEMA_PREFIX);
        if !version.is_some_and(|v| INVENTORY_VERSIONS_READ.contains(&v)) {
            return Err(serde::de::Error::custom(format!(
                "schema {:?} is not {INVENTORY_SCHEMA_PREFIX}{} (the versions this build reads)",
                topo.schema,
                INVENTORY_VERSIONS_READ.join(" or ")
            )));
        }
        topo.schema = INVENTORY_SCHEMA.to_string();
        Ok(topo)
    }
}
