//! nvidia-smi's path classes between GPUs and NICs, computed from the PCIe tree.
//!
//! NVML's levels (`nvmlGpuTopologyLevel_t`) and the `nvidia-smi topo -m` legend:
//! PIX = at most one PCIe switch (a root port counts as one bridge, and a switch's
//! upstream port with its downstream ports as one), PXB = several switches without the
//! host bridge, PHB = through one host bridge, NODE = across host bridges within a NUMA
//! node, SYS = across NUMA nodes. NVLink makes GPU pairs `NV<n>`.

use super::error::ViewError;
use super::nic_order::{device_index, order_by_registration};
use crate::model::{NvLinkRemote, PciFunction, PciRole, RdmaDevice, Topology};
use crate::parse::{CpuSet, NcclPathLevel, PciAddr};
use serde::ser::SerializeStruct;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::fmt;

/// A cell of the matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PathClass {
    /// The device itself.
    X,
    /// A bonded set of this many NVLinks.
    Nv(u32),
    /// At most one PCIe bridge between the two (same switch port).
    Pix,
    /// Several PCIe bridges between them, below one host bridge.
    Pxb,
    /// Through a PCIe host bridge (the CPU), on one NUMA node.
    Phb,
    /// Across host bridges of one NUMA node.
    Node,
    /// Across NUMA nodes (the SMP interconnect, QPI/UPI or Infinity Fabric).
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

    /// The same path in NCCL's terms, as its level variables name it. NCCL has no
    /// NODE: its topology joins every host bridge of a NUMA node at one CPU, so a path
    /// between two of them is PHB there.
    #[doc(hidden)]
    pub fn nccl_level(&self) -> NcclPathLevel {
        match self {
            Self::X => NcclPathLevel::Loc,
            Self::Nv(_) => NcclPathLevel::Nvl,
            Self::Pix => NcclPathLevel::Pix,
            Self::Pxb => NcclPathLevel::Pxb,
            Self::Phb | Self::Node => NcclPathLevel::Phb,
            Self::Sys => NcclPathLevel::Sys,
        }
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

/// Parse a class as `nvidia-smi topo -m` prints it (`X`, `NV18`, `PIX`, …, `SYS`).
impl std::str::FromStr for PathClass {
    type Err = crate::error::Error;
    fn from_str(s: &str) -> Result<Self, crate::error::Error> {
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
                    return Err(ViewError::Invalid(format!("not a path class: {other:?}")).into());
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

/// NUMA node of a function: its own `numa_node`, else its host bridge's, else the one
/// node its `local_cpulist` covers ([`Topology::numa_node_of`], the rule `topo`, plan,
/// doctor, C and Python share).
pub fn numa_of(topo: &Topology, f: &PciFunction) -> Option<u32> {
    topo.numa_node_of(f)
}

/// The devices of `pool` with a PCI function nearest `from` by PCIe class, all that
/// tie (in pool order), and their class; `None` when no device of the pool has one.
pub fn nearest_devices<'t>(
    topo: &'t Topology,
    from: &PciFunction,
    pool: impl IntoIterator<Item = &'t RdmaDevice>,
) -> Option<(Vec<&'t RdmaDevice>, PathClass)> {
    let classed: Vec<(&RdmaDevice, PathClass)> = pool
        .into_iter()
        .filter_map(|d| Some((d, path_class(topo, from, topo.pci_function(d.pci?)?))))
        .collect();
    let best = classed
        .iter()
        .map(|(_, c)| *c)
        .min_by_key(PathClass::rank)?;
    let nearest = classed
        .iter()
        .filter(|(_, c)| c.rank() == best.rank())
        .map(|(d, _)| *d)
        .collect();
    Some((nearest, best))
}

/// The PCIe path class between two functions (no NVLink).
pub fn path_class(topo: &Topology, a: &PciFunction, b: &PciFunction) -> PathClass {
    if a.address == b.address {
        return PathClass::X;
    }
    if a.host_bridge != b.host_bridge {
        return across_host_bridges(topo, a, numa_of(topo, a), b, numa_of(topo, b));
    }
    within_host_bridge(&bridge_units(topo, a), &bridge_units(topo, b))
}

/// [`path_class`] between functions under different host bridges, given their NUMA
/// nodes.
fn across_host_bridges(
    topo: &Topology,
    a: &PciFunction,
    numa_a: Option<u32>,
    b: &PciFunction,
    numa_b: Option<u32>,
) -> PathClass {
    match (numa_a, numa_b) {
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
    }
}

/// [`path_class`] between two functions under one host bridge, given their bridge
/// units (top first).
fn within_host_bridge(ua: &[PciAddr], ub: &[PciAddr]) -> PathClass {
    let common = ua.iter().zip(ub).take_while(|(x, y)| x == y).count();
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

/// A function with what [`path_class`] asks of it, looked up once per matrix device
/// rather than once per cell.
struct Endpoint<'a> {
    f: &'a PciFunction,
    numa: Option<u32>,
    units: Vec<PciAddr>,
}

impl<'a> Endpoint<'a> {
    fn of(topo: &Topology, f: &'a PciFunction) -> Self {
        Self {
            f,
            numa: numa_of(topo, f),
            units: bridge_units(topo, f),
        }
    }

    /// [`path_class`] from `self` to `other`.
    fn class_to(&self, topo: &Topology, other: &Self) -> PathClass {
        let (a, b) = (self.f, other.f);
        if a.address == b.address {
            PathClass::X
        } else if a.host_bridge != b.host_bridge {
            across_host_bridges(topo, a, self.numa, b, other.numa)
        } else {
            within_host_bridge(&self.units, &other.units)
        }
    }
}

/// A GPU's active NVLinks as the matrix needs them, read from NVML's facts once per GPU.
struct GpuLinks {
    /// The peer at the far end of each active direct link.
    peers: Vec<Option<PciAddr>>,
    /// Active links that end on an NVSwitch.
    to_switch: usize,
}

impl GpuLinks {
    fn of(topo: &Topology, gpu: PciAddr) -> Option<Self> {
        let g = topo.nvml.as_ref()?.gpu(gpu)?;
        let active = || g.nvlinks.iter().filter(|l| l.active);
        Some(Self {
            peers: active()
                .map(|l| l.remote_bus_id.as_deref().and_then(|r| r.parse().ok()))
                .collect(),
            to_switch: active()
                .filter(|l| l.remote_kind == NvLinkRemote::Nvswitch)
                .count(),
        })
    }

    /// Number of active NVLinks from this GPU to GPU `b` at `b_pci` (direct, or both on
    /// NVSwitches: nvidia-smi reports the bonded links of the pair, the smaller side's
    /// switch-link count).
    fn to(&self, b_pci: PciAddr, b: &Self) -> u32 {
        let direct = self.peers.iter().filter(|p| **p == Some(b_pci)).count();
        if direct > 0 {
            return direct as u32;
        }
        self.to_switch.min(b.to_switch) as u32
    }
}

/// Number of active NVLinks from GPU `a` to GPU `b`, computed afresh for each pair as
/// the matrix did before [`GpuLinks`]: the tests' independent reference.
#[cfg(test)]
fn nvlinks_between(topo: &Topology, a: PciAddr, b: PciAddr) -> u32 {
    let Some(nvml) = &topo.nvml else { return 0 };
    let (Some(ga), Some(gb)) = (nvml.gpu(a), nvml.gpu(b)) else {
        return 0;
    };
    let direct = ga
        .nvlinks
        .iter()
        .filter(|l| l.active)
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
    let to_switch = |g: &crate::model::NvmlGpu| {
        g.nvlinks
            .iter()
            .filter(|l| l.active && l.remote_kind == NvLinkRemote::Nvswitch)
            .count()
    };
    to_switch(ga).min(to_switch(gb)) as u32
}

/// How a GPU is known to reach its CPU over NVLink-C2C (Grace: GH200, GB200, GB300;
/// GB10), which NCCL treats as a `C2C` link from GPU to CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum C2cAttach {
    /// NVML counts this many active C2C links (what NCCL itself reads).
    Nvml(u32),
    /// No NVML facts; the GPU hangs directly from an NVIDIA root port (Grace
    /// `10de:22b1/22b2/22b8`, Vera `10de:2f95/2f96`, GB10 `10de:22d1`, as rdma-core's
    /// kernel-boot/rdma_topo and the DGX Spark's lspci name them), as a GH200's, a
    /// GB200's and a GB10's do. A PCIe GPU in a Grace server's slot does too, so this
    /// says "likely", not "is": only NVML tells.
    NvidiaRootPort(PciAddr),
}

/// Whether `gpu` is attached to its CPU by NVLink-C2C: NVML's count where NVML
/// answered for it, else its root port's vendor; `None` when neither says so.
pub fn c2c_attach(topo: &Topology, gpu: &PciFunction) -> Option<C2cAttach> {
    if let Some(n) = topo.nvml.as_ref().and_then(|s| {
        s.gpus
            .iter()
            .find(|g| g.bus_id.parse::<PciAddr>().ok() == Some(gpu.address))
    }) {
        return n.c2c_links.filter(|c| *c > 0).map(C2cAttach::Nvml);
    }
    let ancestors = topo.ancestors(gpu.address);
    let [root] = ancestors.as_slice() else {
        return None;
    };
    (root.vendor == 0x10de && root.is_bridge()).then_some(C2cAttach::NvidiaRootPort(root.address))
}

/// One row/column of the matrix.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct MatrixDevice {
    /// `GPU0`, `NIC0`.
    pub name: String,
    /// `gpu` or `nic`.
    pub kind: String,
    /// The PCI function.
    pub pci: PciAddr,
    /// RDMA device name of a NIC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rdma: Option<String>,
    /// A GPU's host index ([`crate::model::Gpu::index`]) where the matrix numbers it
    /// otherwise: a container's matrix numbers its GPUs as its nvidia-smi does
    /// (`view::naming`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_index: Option<u32>,
}

/// The `nvidia-smi topo -m` matrix (`rdmatopo.topo/1`).
///
/// The cells are dense, row-major in [`devices`](Self::devices()) order; read them with
/// [`get`](Self::get) by name or [`class`](Self::class) by index. The JSON form is
/// `{"schema", "devices", "matrix": {row: {column: class}}, "cpu_affinity",
/// "numa_affinity"}`, rows and columns sorted by name.
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "TopoMatrixJson")]
#[non_exhaustive]
pub struct TopoMatrix {
    /// `rdmatopo.topo/1`.
    pub schema: String,
    /// Rows and columns, in order (names unique).
    devices: Vec<MatrixDevice>,
    /// `devices.len()²` cells, `(i, j)` at `i * devices.len() + j`. `None` only where
    /// a deserialized matrix lacks the cell.
    cells: Vec<Option<PathClass>>,
    /// Per GPU: its local CPUs that this process may use, as NVML's CPU affinity masks
    /// them with the caller's; empty when none is (fixtures/pod-h100-misplaced/README.md).
    pub cpu_affinity: BTreeMap<String, String>,
    /// Per GPU: its NUMA nodes as nvidia-smi lists them (`0`, `0-1`), `N/A` when
    /// unknown ([`Topology::numa_affinity_text`]).
    pub numa_affinity: BTreeMap<String, String>,
}

impl TopoMatrix {
    /// The schema id of the matrix's JSON.
    pub const SCHEMA: &'static str = "rdmatopo.topo/1";

    /// Build the matrix over `gpus` (in the order given) and the RDMA devices named in
    /// `nics`: in the order they registered where the model holds every one's kernel
    /// index, as nvidia-smi numbers them, else in the order given
    /// (`nic_order`).
    #[doc(hidden)]
    pub fn build(topo: &Topology, gpus: &[PciAddr], nics: &[&str]) -> Self {
        let mut devices: Vec<MatrixDevice> = gpus
            .iter()
            .enumerate()
            .map(|(i, a)| MatrixDevice {
                name: format!("GPU{i}"),
                kind: "gpu".into(),
                pci: *a,
                rdma: None,
                host_index: topo
                    .gpus
                    .iter()
                    .find(|g| g.pci == *a)
                    .map(|g| g.index)
                    .filter(|h| usize::try_from(*h).ok() != Some(i)),
            })
            .collect();
        // The first RDMA device of each name, as `Topology::rdma_device` finds it.
        let mut rdma: HashMap<&str, &RdmaDevice> = HashMap::new();
        if !nics.is_empty() {
            for d in &topo.rdma_devices {
                rdma.entry(d.name.as_str()).or_insert(d);
            }
        }
        let mut nics: Vec<&str> = nics
            .iter()
            .copied()
            .filter(|n| rdma.get(n).is_some_and(|d| d.pci.is_some()))
            .collect();
        order_by_registration(&mut nics, device_index(topo));
        let mut n = 0;
        for name in nics {
            let Some(pci) = rdma.get(name).and_then(|d| d.pci) else {
                continue;
            };
            devices.push(MatrixDevice {
                name: format!("NIC{n}"),
                kind: "nic".into(),
                pci,
                rdma: Some(name.to_string()),
                host_index: None,
            });
            n += 1;
        }
        let ends: Vec<Option<Endpoint>> = devices
            .iter()
            .map(|d| topo.pci_function(d.pci).map(|f| Endpoint::of(topo, f)))
            .collect();
        let cells = Self::cells(topo, &devices, &ends);
        let usable = topo.process.usable_cpus();
        let mut cpu_affinity = BTreeMap::new();
        let mut numa_affinity = BTreeMap::new();
        for (d, end) in devices.iter().zip(&ends).filter(|(d, _)| d.kind == "gpu") {
            let f = end.as_ref().map(|e| e.f);
            let local = f.and_then(|f| local_cpus(topo, f)).unwrap_or_default();
            let cpus = match &usable {
                Some(u) => local.intersection(u),
                None => local,
            };
            cpu_affinity.insert(d.name.clone(), cpus.to_string());
            let numa = f.map_or("N/A".to_string(), |f| topo.numa_affinity_text(f));
            numa_affinity.insert(d.name.clone(), numa);
        }
        Self {
            schema: Self::SCHEMA.into(),
            devices,
            cells,
            cpu_affinity,
            numa_affinity,
        }
    }

    /// All GPUs and all PCI-backed RDMA devices.
    pub fn for_topology(topo: &Topology) -> Self {
        // A container's owned view: its own devices (the others were not placed).
        if let Some(view) = &topo.view {
            let nics: Vec<&str> = view.rdma_devices.iter().map(String::as_str).collect();
            return Self::build(topo, &view.gpus, &nics);
        }
        let gpus: Vec<PciAddr> = topo.gpus.iter().map(|g| g.pci).collect();
        let nics: Vec<&str> = topo
            .rdma_devices
            .iter()
            .filter(|d| d.pci.is_some())
            .map(|d| d.name.as_str())
            .collect();
        Self::build(topo, &gpus, &nics)
    }

    /// Every cell of `devices` (unique names), `ends[i]` being `devices[i]`'s function.
    /// X on the diagonal; NVLink between GPUs, from each side (NVML's counts need not
    /// agree); else the PCIe class, the same both ways, or SYS without a function.
    fn cells(
        topo: &Topology,
        devices: &[MatrixDevice],
        ends: &[Option<Endpoint>],
    ) -> Vec<Option<PathClass>> {
        let n = devices.len();
        let mut cells = vec![None; n * n];
        let links: Vec<Option<GpuLinks>> = devices
            .iter()
            .map(|d| {
                (d.kind == "gpu")
                    .then(|| GpuLinks::of(topo, d.pci))
                    .flatten()
            })
            .collect();
        for (i, (a, ea)) in devices.iter().zip(ends).enumerate() {
            cells[i * n + i] = Some(PathClass::X);
            for (j, (b, eb)) in devices.iter().zip(ends).enumerate().skip(i + 1) {
                let pcie = match (ea, eb) {
                    (Some(ea), Some(eb)) => ea.class_to(topo, eb),
                    _ => PathClass::Sys,
                };
                let (mut ab, mut ba) = (pcie, pcie);
                if let (Some(la), Some(lb)) = (&links[i], &links[j]) {
                    let n_ab = la.to(b.pci, lb);
                    if n_ab > 0 {
                        ab = PathClass::Nv(n_ab);
                    }
                    let n_ba = lb.to(a.pci, la);
                    if n_ba > 0 {
                        ba = PathClass::Nv(n_ba);
                    }
                }
                cells[i * n + j] = Some(ab);
                cells[j * n + i] = Some(ba);
            }
        }
        cells
    }

    /// Rows and columns, in order: GPUs, then NICs.
    pub fn devices(&self) -> &[MatrixDevice] {
        &self.devices
    }

    /// The index of the device called `name` in [`devices`](Self::devices()).
    pub fn index_of(&self, name: &str) -> Option<usize> {
        // Built matrices list GPU<i> at i and NIC<k> at k after the GPUs; check the
        // guess, and search when it misses.
        let guess = if let Some(i) = name.strip_prefix("GPU") {
            i.parse::<usize>().ok()
        } else if let Some(k) = name.strip_prefix("NIC") {
            let gpus = self.devices.partition_point(|d| d.kind == "gpu");
            k.parse::<usize>().ok().and_then(|k| k.checked_add(gpus))
        } else {
            None
        };
        if let Some(i) = guess
            && self.devices.get(i).is_some_and(|d| d.name == name)
        {
            return Some(i);
        }
        self.devices.iter().position(|d| d.name == name)
    }

    /// The class between the devices at indices `i` and `j`.
    pub fn class(&self, i: usize, j: usize) -> Option<PathClass> {
        self.row(i)?.get(j).copied().flatten()
    }

    /// The cells of row `i`, in [`devices`](Self::devices()) order (`None` only where a
    /// deserialized matrix lacks the cell).
    pub fn row(&self, i: usize) -> Option<&[Option<PathClass>]> {
        let n = self.devices.len();
        if i >= n {
            return None;
        }
        self.cells.get(i * n..(i + 1) * n)
    }

    /// The class between two named devices.
    pub fn get(&self, a: &str, b: &str) -> Option<PathClass> {
        self.class(self.index_of(a)?, self.index_of(b)?)
    }

    /// Device indices sorted by name: the JSON's row and column order.
    fn by_name(&self) -> Vec<usize> {
        let mut order: Vec<usize> = (0..self.devices.len()).collect();
        order.sort_by(|&a, &b| self.devices[a].name.cmp(&self.devices[b].name));
        order
    }
}

/// The `matrix` of the JSON: `{row: {column: class}}`, both sorted by name.
struct CellsByName<'a> {
    m: &'a TopoMatrix,
    order: Vec<usize>,
}

/// One row of [`CellsByName`].
struct RowByName<'a> {
    m: &'a TopoMatrix,
    row: usize,
    order: &'a [usize],
}

impl CellsByName<'_> {
    /// The rows with a cell (every row of a built matrix: it has X), by name.
    fn rows(&self) -> impl Iterator<Item = (&str, RowByName<'_>)> + '_ {
        self.order
            .iter()
            .filter(|&&row| {
                self.m
                    .row(row)
                    .is_some_and(|cells| cells.iter().any(Option::is_some))
            })
            .map(|&row| {
                let cells = RowByName {
                    m: self.m,
                    row,
                    order: &self.order,
                };
                (self.m.devices[row].name.as_str(), cells)
            })
    }
}

impl Serialize for CellsByName<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.rows())
    }
}

impl RowByName<'_> {
    fn cells(&self) -> impl Iterator<Item = (&str, PathClass)> + '_ {
        self.order.iter().filter_map(|&col| {
            let class = self.m.class(self.row, col)?;
            Some((self.m.devices[col].name.as_str(), class))
        })
    }
}

impl Serialize for RowByName<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.cells())
    }
}

impl fmt::Debug for CellsByName<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.rows()).finish()
    }
}

impl fmt::Debug for RowByName<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.cells()).finish()
    }
}

impl Serialize for TopoMatrix {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("TopoMatrix", 5)?;
        st.serialize_field("schema", &self.schema)?;
        st.serialize_field("devices", &self.devices)?;
        let matrix = CellsByName {
            m: self,
            order: self.by_name(),
        };
        st.serialize_field("matrix", &matrix)?;
        st.serialize_field("cpu_affinity", &self.cpu_affinity)?;
        st.serialize_field("numa_affinity", &self.numa_affinity)?;
        st.end()
    }
}

impl fmt::Debug for TopoMatrix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let matrix = CellsByName {
            m: self,
            order: self.by_name(),
        };
        f.debug_struct("TopoMatrix")
            .field("schema", &self.schema)
            .field("devices", &self.devices)
            .field("matrix", &matrix)
            .field("cpu_affinity", &self.cpu_affinity)
            .field("numa_affinity", &self.numa_affinity)
            .finish()
    }
}

/// [`TopoMatrix`] as its JSON reads.
#[derive(Deserialize)]
struct TopoMatrixJson {
    schema: String,
    devices: Vec<MatrixDevice>,
    matrix: BTreeMap<String, BTreeMap<String, PathClass>>,
    cpu_affinity: BTreeMap<String, String>,
    numa_affinity: BTreeMap<String, String>,
}

impl TryFrom<TopoMatrixJson> for TopoMatrix {
    type Error = String;

    /// Rows and columns must name devices, each device once.
    fn try_from(j: TopoMatrixJson) -> Result<Self, String> {
        let mut index: HashMap<&str, usize> = HashMap::with_capacity(j.devices.len());
        for (i, d) in j.devices.iter().enumerate() {
            if index.insert(d.name.as_str(), i).is_some() {
                return Err(format!("device {:?} is listed twice", d.name));
            }
        }
        let n = j.devices.len();
        let mut cells = vec![None; n * n];
        let find = |name: &str| {
            index
                .get(name)
                .copied()
                .ok_or_else(|| format!("matrix names {name:?}, not among the devices"))
        };
        for (a, row) in &j.matrix {
            let i = find(a)?;
            for (b, class) in row {
                cells[i * n + find(b)?] = Some(*class);
            }
        }
        Ok(Self {
            schema: j.schema,
            devices: j.devices,
            cells,
            cpu_affinity: j.cpu_affinity,
            numa_affinity: j.numa_affinity,
        })
    }
}

/// CPUs local to a function: `local_cpulist`, else its NUMA node's CPUs.
pub fn local_cpus(topo: &Topology, f: &PciFunction) -> Option<CpuSet> {
    f.local_cpus
        .clone()
        .or_else(|| topo.numa_node(numa_of(topo, f)?).map(|n| n.cpus.clone()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{NvLink, NvmlGpu, NvmlSnapshot};
    use crate::view::plan::testkit::dgx_like;

    /// The matrix as it was kept before it went dense: a map of maps filled cell by
    /// cell, serialized by serde's derive.
    #[derive(Serialize)]
    struct MapOfMaps<'a> {
        schema: &'a str,
        devices: &'a [MatrixDevice],
        matrix: BTreeMap<String, BTreeMap<String, PathClass>>,
        cpu_affinity: &'a BTreeMap<String, String>,
        numa_affinity: &'a BTreeMap<String, String>,
    }

    fn map_of_maps<'a>(topo: &Topology, m: &'a TopoMatrix) -> MapOfMaps<'a> {
        let cell = |a: &MatrixDevice, b: &MatrixDevice| {
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
        };
        let matrix = m
            .devices()
            .iter()
            .map(|a| {
                let row = m.devices().iter().map(|b| (b.name.clone(), cell(a, b)));
                (a.name.clone(), row.collect())
            })
            .collect();
        MapOfMaps {
            schema: &m.schema,
            devices: m.devices(),
            matrix,
            cpu_affinity: &m.cpu_affinity,
            numa_affinity: &m.numa_affinity,
        }
    }

    fn link(to: PciAddr, kind: NvLinkRemote, active: bool) -> NvLink {
        NvLink {
            link: 0,
            active,
            remote_bus_id: (kind == NvLinkRemote::Gpu).then(|| to.to_string()),
            remote_kind: kind,
        }
    }

    /// A DGX-like machine listed as 13 GPUs and 11 NICs (so `GPU10` sorts before
    /// `GPU2`): the 8 GPUs, 4 of them again, one without a PCI function; NVML with
    /// lopsided direct NVLinks (GPU0 counts 3 to GPU1, GPU1 counts 1 back) and
    /// NVSwitch links on GPU2 and GPU3.
    fn lopsided() -> (Topology, TopoMatrix) {
        let mut t = dgx_like();
        let g: Vec<PciAddr> = t.gpus.iter().map(|g| g.pci).collect();
        let gpu = |i: usize, links: Vec<NvLink>| NvmlGpu {
            nvlinks: links,
            ..NvmlGpu::new(i as u32, g[i].to_string())
        };
        let sw = |n: usize| vec![link(g[0], NvLinkRemote::Nvswitch, true); n];
        t.nvml = Some(NvmlSnapshot {
            schema: NvmlSnapshot::SCHEMA.into(),
            driver_version: None,
            cuda_driver_version: None,
            device_count: None,
            gpus: vec![
                gpu(
                    0,
                    vec![
                        link(g[1], NvLinkRemote::Gpu, true),
                        link(g[1], NvLinkRemote::Gpu, true),
                        link(g[1], NvLinkRemote::Gpu, true),
                        link(g[1], NvLinkRemote::Gpu, false),
                    ],
                ),
                gpu(1, vec![link(g[0], NvLinkRemote::Gpu, true)]),
                gpu(2, sw(4)),
                gpu(3, sw(6)),
            ],
        });
        let mut gpus = g.clone();
        gpus.extend_from_slice(&g[..4]);
        gpus.push("0000:ee:00.0".parse().unwrap());
        let mut nics: Vec<&str> = t.rdma_devices.iter().map(|d| d.name.as_str()).collect();
        nics.extend(["mlx5_0", "mlx5_1", "no_such_device"]);
        let m = TopoMatrix::build(&t, &gpus, &nics);
        (t, m)
    }

    #[test]
    fn json_is_the_map_of_maps() {
        let (t, m) = lopsided();
        assert_eq!(m.devices().len(), 13 + 11);
        assert_eq!(m.get("GPU0", "GPU1"), Some(PathClass::Nv(3)));
        assert_eq!(m.get("GPU1", "GPU0"), Some(PathClass::Nv(1)));
        assert_eq!(m.get("GPU2", "GPU3"), Some(PathClass::Nv(4)));
        assert_eq!(m.get("GPU3", "GPU2"), Some(PathClass::Nv(4)));
        assert_eq!(m.get("GPU0", "GPU8"), Some(PathClass::X));
        assert_eq!(m.get("GPU12", "NIC0"), Some(PathClass::Sys));
        let old = map_of_maps(&t, &m);
        assert_eq!(
            serde_json::to_string(&m).unwrap(),
            serde_json::to_string(&old).unwrap()
        );
        assert_eq!(
            serde_json::to_string_pretty(&m).unwrap(),
            serde_json::to_string_pretty(&old).unwrap()
        );
        let json = serde_json::to_string(&m).unwrap();
        assert!(json.contains(
            r#""matrix":{"GPU0":{"GPU0":"X","GPU1":"NV3","GPU10":"NODE","GPU11":"NODE","GPU12":"SYS","GPU2":"NODE","#
        ));
    }

    #[test]
    fn json_round_trips() {
        let (_, m) = lopsided();
        let json = serde_json::to_string_pretty(&m).unwrap();
        let back: TopoMatrix = serde_json::from_str(&json).unwrap();
        assert_eq!(back, m);
        assert_eq!(serde_json::to_string_pretty(&back).unwrap(), json);

        let empty = TopoMatrix::build(&dgx_like(), &[], &[]);
        let json = serde_json::to_string(&empty).unwrap();
        assert!(json.contains(r#""devices":[],"matrix":{}"#), "{json}");
        assert_eq!(serde_json::from_str::<TopoMatrix>(&json).unwrap(), empty);
    }

    #[test]
    fn json_with_missing_cells_round_trips() {
        let (_, m) = lopsided();
        let mut value = serde_json::to_value(&m).unwrap();
        let matrix = value["matrix"].as_object_mut().unwrap();
        matrix.remove("NIC3");
        matrix["GPU0"].as_object_mut().unwrap().remove("NIC10");
        let back: TopoMatrix = serde_json::from_value(value.clone()).unwrap();
        assert_eq!(back.get("GPU0", "NIC10"), None);
        assert_eq!(back.get("NIC3", "GPU0"), None);
        assert_eq!(back.get("GPU0", "NIC3"), m.get("GPU0", "NIC3"));
        assert_ne!(back, m);
        assert_eq!(serde_json::to_value(&back).unwrap(), value);
        let json = serde_json::to_string(&back).unwrap();
        assert_eq!(serde_json::from_str::<TopoMatrix>(&json).unwrap(), back);
    }

    #[test]
    fn json_naming_unknown_or_repeated_devices_is_refused() {
        let (_, m) = lopsided();
        let mut value = serde_json::to_value(&m).unwrap();
        value["matrix"]["GPU0"]["NIC99"] = "SYS".into();
        let err = serde_json::from_value::<TopoMatrix>(value).unwrap_err();
        assert!(err.to_string().contains("NIC99"), "{err}");
        let mut value = serde_json::to_value(&m).unwrap();
        let first = value["devices"][0].clone();
        value["devices"].as_array_mut().unwrap().push(first);
        let err = serde_json::from_value::<TopoMatrix>(value).unwrap_err();
        assert!(err.to_string().contains("listed twice"), "{err}");
    }

    #[test]
    fn get_class_and_row_agree() {
        let (_, m) = lopsided();
        let n = m.devices().len();
        for (i, a) in m.devices().iter().enumerate() {
            assert_eq!(m.index_of(&a.name), Some(i));
            let row = m.row(i).unwrap();
            assert_eq!(row.len(), n);
            for (j, b) in m.devices().iter().enumerate() {
                let class = m.class(i, j);
                assert!(class.is_some());
                assert_eq!(m.get(&a.name, &b.name), class);
                assert_eq!(row[j], class);
                if i == j {
                    assert_eq!(class, Some(PathClass::X));
                }
            }
        }
        assert_eq!(m.class(n, 0), None);
        assert_eq!(m.class(0, n), None);
        assert!(m.row(n).is_none());
        for name in ["GPU13", "NIC11", "GPU+1", "gpu0", "", "NIC"] {
            assert_eq!(m.get(name, "GPU0"), None, "{name}");
            assert_eq!(m.get("GPU0", name), None, "{name}");
        }
    }

    #[test]
    fn names_are_found_in_any_order() {
        let (_, m) = lopsided();
        let mut value = serde_json::to_value(&m).unwrap();
        value["devices"].as_array_mut().unwrap().reverse();
        let r: TopoMatrix = serde_json::from_value(value).unwrap();
        for a in m.devices() {
            for b in m.devices() {
                assert_eq!(r.get(&a.name, &b.name), m.get(&a.name, &b.name));
            }
        }
        assert_eq!(r.index_of("GPU0"), Some(m.devices().len() - 1));
    }
}
