//! Device-plugin ids to the node's devices.
//!
//! The id forms, as each plugin documents (or, lacking docs, builds) them:
//! - NVIDIA k8s-device-plugin: `--device-id-strategy` `uuid` (default: `GPU-<uuid>`, and
//!   `MIG-<uuid>` for MIG devices, `MIG-GPU-<uuid>/<gi>/<ci>` before driver R470) or
//!   `index` (`0`, and `<gpu>:<mig>` for MIG devices) — NVIDIA/k8s-device-plugin
//!   README, "Configuration Option Details", `DEVICE_ID_STRATEGY`, and
//!   `internal/rm/device_map.go` (`setMigEntry`: `fmt.Sprintf("%v:%v", i, j)`); the
//!   indices are NVML's, which enumerates in PCI bus order.
//! - sriov-network-device-plugin: the PCI address of each VF (or PF) it pools
//!   (k8snetworkplumbingwg/sriov-network-device-plugin README: the allocated addresses reach the
//!   pod as `PCIDEVICE_<RESOURCE>`).
//! - k8s-rdma-shared-dev-plugin: `0`…`rdmaHcaMax-1`, slots of one shared pool
//!   (Mellanox/k8s-rdma-shared-dev-plugin `pkg/resources/server.go`, `strconv.Itoa(id)`):
//!   the resource name, not the id, says which HCAs it is, and every container holding
//!   a slot gets the device nodes of all of them (`Allocate` mounts the whole pool).
//! - DRA: NVIDIA/k8s-dra-driver-gpu (driver `gpu.nvidia.com`) names its devices
//!   `gpu-<minor>` and `gpu-<minor>-mig-<profile>-<start>-<size>`
//!   (`GpuInfo.CanonicalName`, `MigDeviceInfo.CanonicalName`): the `/dev/nvidia<minor>`
//!   number, NVML's index where the model has no minor. Without slices, other DRA drivers'
//!   devices are listed, not placed.
//! - DRA with the node's ResourceSlices: any driver's device is placed by the PCI
//!   address its slice publishes (`resource.kubernetes.io/pciBusID`, else DRANET's
//!   `dra.net/pciAddress` or the SR-IOV driver's `…/pciAddress`; crate::view::dra
//!   cites the drivers' code), never by its name; a driver that publishes none is
//!   listed as such.

use crate::model::Topology;
use crate::parse::{PCI_ATTRIBUTES, PciAddr};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// What one device id is on this node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mapped {
    Gpu(PciAddr),
    Nic(PciAddr),
    /// A slot of a shared RDMA pool: the HCAs (PCI functions) the pool selects, all of
    /// which the container gets.
    Pool(Vec<PciAddr>),
    /// Looks like a GPU or NIC id but is not on this node (or cannot be placed): why.
    Unknown(String),
    /// A resource this audit does not judge (not a GPU or RDMA device).
    Other,
}

impl Mapped {
    /// The NIC functions it places: one, a pool's, or none.
    pub fn nics(&self) -> &[PciAddr] {
        match self {
            Mapped::Nic(pci) => std::slice::from_ref(pci),
            Mapped::Pool(hcas) => hcas,
            _ => &[],
        }
    }
}

/// The `selectors` of one k8s-rdma-shared-dev-plugin pool (`pkg/types/types.go`
/// `Selectors`). The plugin keeps a network-class PCI function (PF or VF) that has
/// `uverbs`, `umad` and `rdma_cm` device nodes, then filters by vendors, deviceIDs,
/// drivers, ifNames and linkTypes in turn (`GetFilteredDevices`): any entry of a list
/// matches, every non-empty list must, by exact string.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SharedSelectors {
    /// Vendor ids in lower-case hex without `0x` (`15b3`), as ghw reads `modalias`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub vendors: Vec<String>,
    /// Device ids, written like vendors (`101d`).
    #[serde(default, rename = "deviceIDs", skip_serializing_if = "Vec::is_empty")]
    pub device_ids: Vec<String>,
    /// Basenames of the function's `driver` link (`mlx5_core`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub drivers: Vec<String>,
    /// The first name, sorted, in the function's `net/` directory.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub if_names: Vec<String>,
    /// That netdev's encapsulation as netlink names it (`ether`, `infiniband`); a
    /// function without a netdev has none, so this list drops it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub link_types: Vec<String>,
}

impl SharedSelectors {
    /// No list given (the plugin refuses a pool with neither selectors nor `devices`).
    pub fn is_empty(&self) -> bool {
        self.lists().iter().all(|(_, l)| l.is_empty())
    }

    fn lists(&self) -> [(&'static str, &[String]); 5] {
        [
            ("vendors", &self.vendors),
            ("deviceIDs", &self.device_ids),
            ("drivers", &self.drivers),
            ("ifNames", &self.if_names),
            ("linkTypes", &self.link_types),
        ]
    }

    /// The RDMA functions of `topo` the plugin puts in this pool, in address order. An
    /// RDMA device with a uverbs device stands for the plugin's device-node test
    /// (`VerifyRdmaSpec`: `uverbs`, `umad` and `rdma_cm` nodes), whose `umad` a topology
    /// does not hold.
    pub fn select(&self, topo: &Topology) -> Vec<PciAddr> {
        topo.pci
            .iter()
            .filter(|f| f.class >> 16 == 0x02)
            .filter(|f| {
                topo.rdma_devices
                    .iter()
                    .any(|d| d.pci == Some(f.address) && d.uverbs.is_some())
            })
            .filter(|f| {
                // `utils.GetNetNames`: the first name, `os.ReadDir` order.
                let if_name = topo.first_netdev_of(f.address);
                let link_type = if_name
                    .and_then(|n| topo.netdev(n))
                    .and_then(|n| n.arphrd)
                    .map(encap_type);
                let facts = [
                    Some(format!("{:04x}", f.vendor)),
                    Some(format!("{:04x}", f.device)),
                    f.driver.clone(),
                    if_name.map(str::to_string),
                    link_type,
                ];
                self.lists().iter().zip(&facts).all(|((_, list), fact)| {
                    list.is_empty() || fact.as_ref().is_some_and(|v| list.contains(v))
                })
            })
            .map(|f| f.address)
            .collect()
    }

    /// Why a pool selects nothing here: its lists, and the ifNames this node lacks or
    /// that are not a PCI function's first netdev.
    fn why_empty(&self, topo: &Topology) -> String {
        let lists: Vec<String> = self
            .lists()
            .iter()
            .filter(|(_, l)| !l.is_empty())
            .map(|(name, l)| format!("{name} {}", l.join(",")))
            .collect();
        let mut why = format!(
            "its selectors ({}) match no RDMA device of this node",
            lists.join("; ")
        );
        for name in &self.if_names {
            match topo.netdev(name) {
                None => why.push_str(&format!("; netdev {name} is not on this node")),
                Some(n) if n.pci.is_none() => why.push_str(&format!(
                    "; netdev {name} has no PCI function (the plugin matches a function's own netdev)"
                )),
                Some(_) => {}
            }
        }
        why
    }
}

/// netlink's name of an `ARPHRD_*` type, for the two an RDMA function's netdev has
/// (vishvananda/netlink `nl/nl_linux.go`, `IfInfomsg.EncapType`).
fn encap_type(arphrd: u32) -> String {
    match arphrd {
        1 => "ether".into(),
        32 => "infiniband".into(),
        other => format!("arphrd {other}"),
    }
}

/// Shared-RDMA pools: the full resource name (with prefix: `rdma/hca_ibp24s0`) and
/// the selectors (`SharedDevPluginConfig::pools` in `export::k8s` reads them from the
/// plugin's `config.json`).
pub type SharedPools = Vec<(String, SharedSelectors)>;

/// Lookup tables of one node, built once.
#[derive(Debug)]
pub struct IdMap {
    by_uuid: HashMap<String, PciAddr>,
    by_index: HashMap<u32, PciAddr>,
    /// MIG device UUIDs (lower case) to their parent GPU, from NVML facts.
    by_mig: HashMap<String, PciAddr>,
    /// Full resource name (`rdma/hca_ibp24s0`) to the HCAs' PCI functions.
    shared: HashMap<String, Result<Vec<PciAddr>, String>>,
    gpu_functions: Vec<PciAddr>,
    /// `/dev/nvidia<minor>` numbers to GPUs, where the driver says.
    by_minor: HashMap<u32, PciAddr>,
    /// (driver, pool, device) of this node's ResourceSlices to what it is; `None`
    /// without slices.
    claimed: Option<HashMap<(String, String, String), Mapped>>,
    /// The same key for devices only other nodes' slices publish: the node's name.
    elsewhere: HashMap<(String, String, String), String>,
}

/// `pci<domain>:<bus>`, the form of `resource.kubernetes.io/pcieRoot`.
fn is_pcie_root(s: &str) -> bool {
    s.strip_prefix("pci").is_some_and(|r| {
        let b = r.as_bytes();
        b.len() == 7
            && b[4] == b':'
            && b.iter()
                .enumerate()
                .all(|(i, c)| i == 4 || c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
    })
}

impl IdMap {
    /// `pools`: shared-RDMA pools from the plugin's config; without one, the names
    /// `rdmatopo k8s rdma-shared-dev-plugin` writes (`rdma/hca_<netdev>`) for every
    /// netdev with a PCI function.
    pub fn new(topo: &Topology, pools: Option<&SharedPools>) -> Self {
        let mut by_uuid = HashMap::new();
        for g in &topo.gpus {
            if let Some(u) = &g.uuid {
                by_uuid.insert(u.to_ascii_lowercase(), g.pci);
            }
        }
        // NVML's index when its facts are there, else PCI bus order (the same order).
        let mut by_index: HashMap<u32, PciAddr> =
            topo.gpus.iter().map(|g| (g.index, g.pci)).collect();
        let mut by_mig = HashMap::new();
        if let Some(n) = &topo.nvml {
            for g in &n.gpus {
                if let (Some(mig), Some(pci)) = (&g.mig_mode, g.pci()) {
                    for u in &mig.uuids {
                        by_mig.insert(u.to_ascii_lowercase(), pci);
                    }
                }
                if let Some(pci) = g.pci() {
                    by_index.insert(g.index, pci);
                }
                if let (Some(u), Some(pci)) = (&g.uuid, g.pci()) {
                    by_uuid.insert(u.to_ascii_lowercase(), pci);
                }
            }
        }
        let mut shared = HashMap::new();
        match pools {
            Some(pools) => {
                for (name, selectors) in pools {
                    let hcas = selectors.select(topo);
                    let pool = if hcas.is_empty() {
                        Err(selectors.why_empty(topo))
                    } else {
                        Ok(hcas)
                    };
                    shared.insert(name.clone(), pool);
                }
            }
            None => {
                for n in &topo.netdevs {
                    if let Some(pci) = n.pci {
                        shared.insert(format!("rdma/hca_{}", n.name), Ok(vec![pci]));
                    }
                }
            }
        }
        Self {
            by_uuid,
            by_index,
            by_mig,
            shared,
            gpu_functions: topo.gpus.iter().map(|g| g.pci).collect(),
            by_minor: topo
                .gpus
                .iter()
                .filter_map(|g| Some((g.minor?, g.pci)))
                .collect(),
            claimed: None,
            elsewhere: HashMap::new(),
        }
    }

    /// What `id` of `resource` is on `topo`.
    pub fn map(&self, topo: &Topology, resource: &str, id: &str) -> Mapped {
        if let Some(pool) = self.shared.get(resource) {
            return match pool {
                Ok(hcas) => Mapped::Pool(hcas.clone()),
                Err(why) => Mapped::Unknown(format!("shared RDMA pool {resource}: {why}")),
            };
        }
        let lower = id.to_ascii_lowercase();
        if lower.starts_with("gpu-") {
            return match self.by_uuid.get(&lower) {
                Some(pci) => Mapped::Gpu(*pci),
                None => Mapped::Unknown(format!(
                    "GPU UUID {id} is not a GPU of this node (NVML facts and /proc/driver/nvidia/gpus/*/information list no such UUID)"
                )),
            };
        }
        if let Some(rest) = lower.strip_prefix("mig-") {
            // Before R470: `MIG-GPU-<parent uuid>/<gi>/<ci>` names its parent.
            if let Some(parent) = rest.split('/').next().filter(|p| p.starts_with("gpu-")) {
                return match self.by_uuid.get(parent) {
                    Some(pci) => Mapped::Gpu(*pci),
                    None => Mapped::Unknown(format!(
                        "MIG device {id}: its parent GPU is not a GPU of this node"
                    )),
                };
            }
            if let Some(pci) = self.by_mig.get(&lower) {
                return Mapped::Gpu(*pci);
            }
            return Mapped::Unknown(format!(
                "MIG device {id}: the node's NVML facts list no such MIG device, so its parent GPU is unknown"
            ));
        }
        if let Ok(addr) = id.parse::<PciAddr>()
            && id.contains(':')
        {
            return match topo.pci_function(addr) {
                Some(_) if self.gpu_functions.contains(&addr) => Mapped::Gpu(addr),
                Some(f) if matches!(f.class_code(), 0x0200 | 0x0207) => Mapped::Nic(addr),
                Some(_) => Mapped::Other,
                None => Mapped::Unknown(format!("PCI device {id} is not on this node")),
            };
        }
        if is_gpu_resource(resource) {
            // `index` strategy: `3`, or `3:1` for MIG device 1 of GPU 3.
            let gpu = id.split(':').next().unwrap_or(id);
            return match gpu.parse::<u32>().ok().and_then(|i| self.by_index.get(&i)) {
                Some(pci) => Mapped::Gpu(*pci),
                None => Mapped::Unknown(format!(
                    "{resource} id {id:?} is neither a GPU UUID nor the index of a GPU of this node"
                )),
            };
        }
        if resource.starts_with("rdma/") {
            return Mapped::Unknown(format!(
                "{resource} is not a shared RDMA pool this audit knows (give the plugin's config.json with --rdma-shared-config)"
            ));
        }
        Mapped::Other
    }
}

impl IdMap {
    /// Place DRA devices through `slices`: those of `node` (all, when it is unknown);
    /// a device only another node's slice publishes is remembered as such.
    pub fn add_slices(
        &mut self,
        topo: &Topology,
        slices: &[crate::parse::SliceDevice],
        node: Option<&str>,
    ) {
        let mut claimed = HashMap::new();
        for d in slices {
            let key = (d.driver.clone(), d.pool.clone(), d.name.clone());
            if let (Some(me), Some(theirs)) = (node, d.node.as_deref())
                && me != theirs
            {
                self.elsewhere.insert(key, theirs.to_string());
                continue;
            }
            claimed.insert(key, self.slice_device(topo, d));
        }
        self.claimed = Some(claimed);
    }

    /// What one slice device is on this node, from its attributes.
    fn slice_device(&self, topo: &Topology, d: &crate::parse::SliceDevice) -> Mapped {
        let what = format!("DRA device {}/{}/{}", d.driver, d.pool, d.name);
        if let Some(root) = d.attributes.get("resource.kubernetes.io/pcieRoot")
            && !root.is_empty()
            && !is_pcie_root(root)
        {
            return Mapped::Unknown(format!(
                "{what}: its slice's resource.kubernetes.io/pcieRoot {root:?} is not pci<domain>:<bus>"
            ));
        }
        let Some((attr, text)) = PCI_ATTRIBUTES
            .iter()
            .find_map(|a| d.attributes.get(*a).map(|v| (*a, v)))
        else {
            return Mapped::Other;
        };
        let Ok(addr) = text.parse::<PciAddr>() else {
            return Mapped::Unknown(format!(
                "{what}: its slice's {attr} {text:?} is not a PCI address"
            ));
        };
        match topo.pci_function(addr) {
            Some(_) if self.gpu_functions.contains(&addr) => Mapped::Gpu(addr),
            Some(f) if matches!(f.class_code(), 0x0200 | 0x0207) => Mapped::Nic(addr),
            Some(_) => Mapped::Other,
            None => Mapped::Unknown(format!(
                "{what}: its slice's {attr} {addr} is not a PCI function of this node"
            )),
        }
    }

    /// What a DRA claim's device (`driver`, `pool`, `device`) is on this node.
    pub fn map_claim_in_pool(&self, driver: &str, pool: &str, device: &str) -> Mapped {
        let Some(claimed) = &self.claimed else {
            return self.map_claim(driver, device);
        };
        let key = (driver.to_string(), pool.to_string(), device.to_string());
        if let Some(m) = claimed.get(&key) {
            return m.clone();
        }
        // A driver none of whose slices is here: listed as a driver the audit does not
        // know, not guessed at.
        if !claimed.keys().any(|(d, _, _)| d == driver)
            && !self.elsewhere.keys().any(|(d, _, _)| d == driver)
        {
            return Mapped::Other;
        }
        match self.elsewhere.get(&key) {
            Some(node) => Mapped::Unknown(format!(
                "DRA device {driver}/{pool}/{device} is published by node {node}'s ResourceSlice, not this node's"
            )),
            None => Mapped::Unknown(format!(
                "DRA device {driver}/{pool}/{device} is in no ResourceSlice of this node"
            )),
        }
    }

    /// What a DRA claim's device is on this node, by its name alone.
    pub fn map_claim(&self, driver: &str, device: &str) -> Mapped {
        if driver != "gpu.nvidia.com" {
            return Mapped::Other;
        }
        let number = device
            .strip_prefix("gpu-")
            .and_then(|rest| rest.split('-').next())
            .and_then(|n| n.parse::<u32>().ok());
        // The driver names a GPU by its /dev/nvidia minor (`GpuInfo.CanonicalName`,
        // dra-driver-nvidia-gpu 95932046); NVML's index where the minor is unknown.
        let by_minor = number.and_then(|n| self.by_minor.get(&n));
        match by_minor.or_else(|| number.and_then(|i| self.by_index.get(&i))) {
            Some(pci) => Mapped::Gpu(*pci),
            None => Mapped::Unknown(format!(
                "DRA device {driver}/{device} is not a GPU index of this node"
            )),
        }
    }
}

/// `nvidia.com/gpu`, `nvidia.com/mig-1g.10gb`, `nvidia.com/gpu.shared`.
pub fn is_gpu_resource(resource: &str) -> bool {
    resource
        .strip_prefix("nvidia.com/")
        .is_some_and(|r| r.starts_with("gpu") || r.starts_with("mig-"))
}
