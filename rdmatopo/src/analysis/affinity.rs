//! nvidia-smi's path classes between GPUs and NICs, computed from the PCIe tree.
//!
//! NVML's levels (`nvmlGpuTopologyLevel_t`) and the `nvidia-smi topo -m` legend:
//! PIX = at most one PCIe switch (a root port counts as one bridge, and a switch's
//! upstream port with its downstream ports as one), PXB = several switches without the
//! host bridge, PHB = through one host bridge, NODE = across host bridges within a NUMA
//! node, SYS = across NUMA nodes. NVLink makes GPU pairs `NV<n>`.

use super::AnalysisError;
use crate::model::{NvLinkRemote, PciFunction, PciRole, Topology};
use crate::parse::{CpuSet, PciAddr};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

/// A cell of the matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PathClass {
    /// The device itself.
    X,
    /// A bonded set of this many NVLinks.
    Nv(u32),
    Pix,
    Pxb,
    Phb,
    Node,
    Sys,
}

impl PathClass {
    /// Rank for "closer is better" comparisons (X and NVLink first).
    pub fn rank(&self) -> u32 {
        match self {
            Self::X => 0,
            Self::Nv(_) => 1,
            Self::Pix => 2,
            Self::Pxb => 3,
            Self::Phb => 4,
            Self::Node => 5,
            Self::Sys => 6,
        }
    }

    /// GPUDirect RDMA is used at PXB or closer by NCCL's default `NCCL_NET_GDR_LEVEL`.
    pub fn allows_gdr(&self) -> bool {
        self.rank() <= Self::Pxb.rank()
    }
}

impl fmt::Display for PathClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::X => f.write_str("X"),
            Self::Nv(n) => write!(f, "NV{n}"),
            Self::Pix => f.write_str("PIX"),
            Self::Pxb => f.write_str("PXB"),
            Self::Phb => f.write_str("PHB"),
            Self::Node => f.write_str("NODE"),
            Self::Sys => f.write_str("SYS"),
        }
    }
}

impl std::str::FromStr for PathClass {
    type Err = AnalysisError;
    fn from_str(s: &str) -> Result<Self, AnalysisError> {
        Ok(match s.trim() {
            "X" => Self::X,
            "PIX" => Self::Pix,
            "PXB" => Self::Pxb,
            "PHB" => Self::Phb,
            "NODE" => Self::Node,
            "SYS" => Self::Sys,
            other => match other.strip_prefix("NV").and_then(|n| n.parse().ok()) {
                Some(n) => Self::Nv(n),
                None => {
                    return Err(AnalysisError::Invalid(format!(
                        "not a path class: {other:?}"
                    )));
                }
            },
        })
    }
}

impl Serialize for PathClass {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for PathClass {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

/// The "bridge units" above a function, top first: each root port is one unit, and a
/// switch (upstream port plus its downstream ports) is one unit named by its upstream
/// port.
fn bridge_units(topo: &Topology, f: &PciFunction) -> Vec<PciAddr> {
    let mut units: Vec<PciAddr> = topo
        .ancestors(f.address)
        .into_iter()
        .filter(|b| b.role != PciRole::SwitchDownstream)
        .map(|b| b.address)
        .collect();
    units.reverse();
    units
}

/// NUMA node of a function: its own `numa_node`, else its host bridge's.
pub fn numa_of(topo: &Topology, f: &PciFunction) -> Option<u32> {
    f.numa_node.or_else(|| {
        topo.host_bridges
            .iter()
            .find(|h| h.name == f.host_bridge)?
            .numa_node
    })
}

/// The PCIe path class between two functions (no NVLink).
pub fn path_class(topo: &Topology, a: &PciFunction, b: &PciFunction) -> PathClass {
    if a.address == b.address {
        return PathClass::X;
    }
    if a.host_bridge != b.host_bridge {
        return match (numa_of(topo, a), numa_of(topo, b)) {
            (Some(x), Some(y)) => {
                if x == y {
                    PathClass::Node
                } else {
                    PathClass::Sys
                }
            }
            // Unknown NUMA (VMs, single-node firmware): a single-node machine, or the
            // same local CPUs, means one node.
            _ if topo.numa_nodes.len() <= 1 => PathClass::Node,
            _ if a.local_cpus.is_some() && a.local_cpus == b.local_cpus => PathClass::Node,
            _ => PathClass::Sys,
        };
    }
    let ua = bridge_units(topo, a);
    let ub = bridge_units(topo, b);
    let common = ua.iter().zip(&ub).take_while(|(x, y)| x == y).count();
    if common == 0 {
        return PathClass::Phb;
    }
    let traversed = 1 + (ua.len() - common) + (ub.len() - common);
    if traversed <= 1 {
        PathClass::Pix
    } else {
        PathClass::Pxb
    }
}

/// Number of active NVLinks from GPU `a` to GPU `b` (direct, or both on NVSwitches).
fn nvlinks_between(topo: &Topology, a: PciAddr, b: PciAddr) -> u32 {
    let Some(nvml) = &topo.nvml else { return 0 };
    let (Some(ga), Some(gb)) = (nvml.gpu(a), nvml.gpu(b)) else {
        return 0;
    };
    let active = |g: &crate::model::NvmlGpu| {
        g.nvlinks
            .iter()
            .filter(|l| l.active)
            .cloned()
            .collect::<Vec<_>>()
    };
    let (la, lb) = (active(ga), active(gb));
    let direct = la
        .iter()
        .filter(|l| {
            l.remote_bus_id
                .as_deref()
                .and_then(|r| r.parse::<PciAddr>().ok())
                == Some(b)
        })
        .count();
    if direct > 0 {
        return direct as u32;
    }
    // Through NVSwitches: nvidia-smi reports the bonded links of the pair, the smaller
    // side's switch-link count.
    let to_switch = |ls: &[crate::model::NvLink]| {
        ls.iter()
            .filter(|l| l.remote_kind == NvLinkRemote::Nvswitch)
            .count()
    };
    to_switch(&la).min(to_switch(&lb)) as u32
}

/// One row/column of the matrix.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MatrixDevice {
    /// `GPU0`, `NIC0`.
    pub name: String,
    /// `gpu` or `nic`.
    pub kind: String,
    pub pci: PciAddr,
    /// RDMA device name of a NIC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rdma: Option<String>,
}

/// The `nvidia-smi topo -m` matrix (`rdmatopo.topo/1`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopoMatrix {
    pub schema: String,
    pub devices: Vec<MatrixDevice>,
    pub matrix: BTreeMap<String, BTreeMap<String, PathClass>>,
    /// Per GPU: its local CPUs that this process may use.
    pub cpu_affinity: BTreeMap<String, String>,
    /// Per GPU: its NUMA node, `N/A` when unknown.
    pub numa_affinity: BTreeMap<String, String>,
}

impl TopoMatrix {
    pub const SCHEMA: &'static str = "rdmatopo.topo/1";

    /// Build the matrix over `gpus` and the RDMA devices named in `nics` (both in the
    /// order given).
    pub fn build(topo: &Topology, gpus: &[PciAddr], nics: &[&str]) -> Self {
        let mut devices: Vec<MatrixDevice> = gpus
            .iter()
            .enumerate()
            .map(|(i, a)| MatrixDevice {
                name: format!("GPU{i}"),
                kind: "gpu".into(),
                pci: *a,
                rdma: None,
            })
            .collect();
        let mut n = 0;
        for name in nics {
            let Some(pci) = topo.rdma_device(name).and_then(|d| d.pci) else {
                continue;
            };
            devices.push(MatrixDevice {
                name: format!("NIC{n}"),
                kind: "nic".into(),
                pci,
                rdma: Some(name.to_string()),
            });
            n += 1;
        }
        let mut matrix = BTreeMap::new();
        for a in &devices {
            let mut row = BTreeMap::new();
            for b in &devices {
                row.insert(b.name.clone(), Self::cell(topo, a, b));
            }
            matrix.insert(a.name.clone(), row);
        }
        let usable = topo.process.usable_cpus();
        let mut cpu_affinity = BTreeMap::new();
        let mut numa_affinity = BTreeMap::new();
        for d in devices.iter().filter(|d| d.kind == "gpu") {
            let f = topo.pci_function(d.pci);
            let local = f.and_then(|f| local_cpus(topo, f)).unwrap_or_default();
            let cpus = match &usable {
                Some(u) => local.intersection(u),
                None => local,
            };
            cpu_affinity.insert(d.name.clone(), cpus.to_string());
            let numa = f
                .and_then(|f| numa_of(topo, f))
                .map_or("N/A".to_string(), |n| n.to_string());
            numa_affinity.insert(d.name.clone(), numa);
        }
        Self {
            schema: Self::SCHEMA.into(),
            devices,
            matrix,
            cpu_affinity,
            numa_affinity,
        }
    }

    /// All GPUs and all PCI-backed RDMA devices.
    pub fn for_topology(topo: &Topology) -> Self {
        let gpus: Vec<PciAddr> = topo.gpus.iter().map(|g| g.pci).collect();
        let nics: Vec<&str> = topo
            .rdma_devices
            .iter()
            .filter(|d| d.pci.is_some())
            .map(|d| d.name.as_str())
            .collect();
        Self::build(topo, &gpus, &nics)
    }

    fn cell(topo: &Topology, a: &MatrixDevice, b: &MatrixDevice) -> PathClass {
        if a.name == b.name {
            return PathClass::X;
        }
        if a.kind == "gpu" && b.kind == "gpu" {
            let links = nvlinks_between(topo, a.pci, b.pci);
            if links > 0 {
                return PathClass::Nv(links);
            }
        }
        match (topo.pci_function(a.pci), topo.pci_function(b.pci)) {
            (Some(fa), Some(fb)) => path_class(topo, fa, fb),
            _ => PathClass::Sys,
        }
    }

    /// The class between two named devices.
    pub fn get(&self, a: &str, b: &str) -> Option<PathClass> {
        self.matrix.get(a)?.get(b).copied()
    }
}

/// CPUs local to a function: `local_cpulist`, else its NUMA node's CPUs.
pub fn local_cpus(topo: &Topology, f: &PciFunction) -> Option<CpuSet> {
    f.local_cpus
        .clone()
        .or_else(|| topo.numa_node(numa_of(topo, f)?).map(|n| n.cpus.clone()))
}

/// nvidia-smi's legend, verbatim.
pub const LEGEND: &str = "Legend:

  X    = Self
  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)
  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node
  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)
  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)
  PIX  = Connection traversing at most a single PCIe bridge
  NV#  = Connection traversing a bonded set of # NVLinks
";

impl TopoMatrix {
    /// The table in `nvidia-smi topo -m`'s layout: tab-separated, ` X ` on the diagonal,
    /// GPU rows ending in CPU affinity, NUMA affinity and GPU NUMA ID, the legend, and
    /// the NIC legend when there are NICs. `underline` adds the header's terminal
    /// underline, as nvidia-smi does on a terminal.
    pub fn to_table(&self, underline: bool) -> String {
        let mut out = String::new();
        let names: Vec<&str> = self.devices.iter().map(|d| d.name.as_str()).collect();
        let (on, off) = if underline {
            ("\x1b[4m", "\x1b[0m")
        } else {
            ("", "")
        };
        out.push('\t');
        out.push_str(on);
        out.push_str(&names.join("\t"));
        out.push_str("\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID");
        out.push_str(off);
        out.push('\n');
        for d in &self.devices {
            out.push_str(&d.name);
            for other in &names {
                let cell = self.get(&d.name, other).unwrap_or(PathClass::Sys);
                out.push('\t');
                if cell == PathClass::X {
                    out.push_str(" X ")
                } else {
                    out.push_str(&cell.to_string())
                }
            }
            match d.kind.as_str() {
                "gpu" => {
                    let cpus = self.cpu_affinity.get(&d.name).map_or("", String::as_str);
                    let numa = self
                        .numa_affinity
                        .get(&d.name)
                        .map_or("N/A", String::as_str);
                    out.push_str(&format!("\t{cpus}\t{numa}\t\tN/A\n"));
                }
                _ => out.push_str("\t\t\t\t\n"),
            }
        }
        out.push('\n');
        out.push_str(LEGEND);
        let nics: Vec<&MatrixDevice> = self.devices.iter().filter(|d| d.kind == "nic").collect();
        if !nics.is_empty() {
            out.push_str("\nNIC Legend:\n\n");
            for n in nics {
                out.push_str(&format!(
                    "  {}: {}\n",
                    n.name,
                    n.rdma.as_deref().unwrap_or("?")
                ));
            }
            out.push('\n');
        }
        out
    }
}
