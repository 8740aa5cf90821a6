//! NCCL topology files (`NCCL_TOPO_FILE`, `NCCL_TOPO_DUMP_FILE`): write one that NCCL's
//! own loader accepts, and read one (an NCCL dump, a cloud vendor's file) back into a
//! [`Topology`] that the analysis can classify.
//!
//! The writer follows NCCL's loader (nccl `src/graph/xml.cc`): `<system version="1">`
//! with no `<?xml …?>` prolog (NCCL's parser rejects it), `<cpu>` per NUMA node with
//! `numaid affinity arch vendor familyid modelid`, and `<pci busid class vendor device
//! subsystem_vendor subsystem_device link_speed link_width>` nodes arranged by NCCL's
//! tree rule: a device's parent is its sysfs *grandparent*, so a PCIe switch is
//! represented by its upstream port and root ports are skipped. Bus ids are lowercase
//! with a 4-digit domain, numbers have no leading zeros (NCCL parses `0…` as octal),
//! link speed and width are the smaller of the device's and its upstream port's
//! `max_link_*`, as NCCL reads them. An HCA's node carries NCCL's merged bus id
//! (function digit zeroed, and the device digits too under `NCCL_IB_MERGE_VFS=1`), which
//! is how NCCL finds it. The ports of one card thus share one `<nic>`, which is what
//! makes NCCL ≥ 2.24 fuse them into a virtual NIC (`PATH_PORT`, `ncclTopoAutoMerge`);
//! the virtual NIC itself is NCCL's to make at load and is never written.
//!
//! By default the file is the `<cpu>`/`<pci>` skeleton that NCCL's maintainers
//! recommend (NVIDIA/nccl#1843): values in the file override detection, so nothing is
//! written that NCCL would otherwise measure. `<gpu>` is never written (its `sm` is not
//! in sysfs and a wrong `gdr="0"` disables GPUDirect RDMA); `<nic><net …/></nic>` with
//! name, dev, speed and port is written on request.

use crate::model::{
    CpuInfo, Diagnostic, Gpu, HostBridge, NumaNode, NvLink, NvLinkRemote, NvmlGpu, NvmlSnapshot,
    PciFunction, PciRole, PcieLink, Port, RdmaDevice, Severity, Topology,
};
use crate::parse::natural_cmp;
use crate::parse::{
    CpuSet, LinkLayer, LinkSpeed, PciAddr, PortState, Rate, parse_cpumask, parse_hex_u32,
};
use crate::view::affinity::numa_of;
use crate::view::container::DisplayedDevices;
use crate::view::plan::DataDirect;
use std::collections::BTreeMap;
use std::fmt::Write;

/// NCCL's parser keeps at most this many characters of an attribute value.
const MAX_VALUE_LEN: usize = 255;
/// Deepest element nesting accepted when reading.
const MAX_DEPTH: usize = 64;
/// The NVLink target NCCL writes for a peer it cannot see (assumed an NVSwitch).
const INVISIBLE_NVLINK_PEER: &str = "fffffff:ffff:ff";

/// A topology file that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NcclXmlError {
    #[error("not well-formed XML at byte {position}: {message}")]
    Syntax { position: u64, message: String },
    #[error("no <system> element: not an NCCL topology file")]
    NoSystem,
    #[error("<system version={0:?}>: NCCL only loads version 1")]
    Version(String),
    #[error("elements nested deeper than {MAX_DEPTH}")]
    TooDeep,
}

/// What to put in a written file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct XmlOptions {
    /// NCCL merges HCA functions by zeroing the device digits of their bus id too
    /// (`NCCL_IB_MERGE_VFS=1`, NCCL's default).
    pub merge_vfs: bool,
    /// Write `<nic><net name dev speed port/></nic>` under each HCA.
    pub nets: bool,
    /// Where NCCL puts an HCA with a ConnectX-8 Data Direct DMA function
    /// (`NCCL_IB_DATA_DIRECT`): at the DMA function as `<dev>_dma` (its default), at the
    /// PF, or both.
    pub data_direct: DataDirect,
}

impl Default for XmlOptions {
    fn default() -> Self {
        Self {
            merge_vfs: true,
            nets: false,
            data_direct: DataDirect::default(),
        }
    }
}

/// An element of an NCCL topology file.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Element {
    pub name: String,
    pub attrs: Vec<(String, String)>,
    pub children: Vec<Element>,
}

impl Element {
    fn new(name: &str) -> Self {
        Self {
            name: name.to_string(),
            ..Self::default()
        }
    }

    fn attr(mut self, key: &str, value: impl Into<String>) -> Self {
        self.attrs.push((key.to_string(), value.into()));
        self
    }

    /// The value of attribute `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.attrs
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    fn render(&self, depth: usize, out: &mut String) {
        let pad = "  ".repeat(depth);
        let _ = write!(out, "{pad}<{}", self.name);
        for (k, v) in &self.attrs {
            let _ = write!(out, " {k}=\"{}\"", quick_xml::escape::escape(v.as_str()));
        }
        if self.children.is_empty() {
            out.push_str("/>\n");
            return;
        }
        out.push_str(">\n");
        for c in &self.children {
            c.render(depth + 1, out);
        }
        let _ = writeln!(out, "{pad}</{}>", self.name);
    }
}

/// NCCL's bus id of a PCI function: lowercase, 4-digit domain (`int64ToBusId`).
pub fn busid(addr: PciAddr) -> String {
    addr.to_string()
}

/// The bus id NCCL gives an HCA: function digit zeroed (ports of one card merge), and
/// the device digits too when `merge_vfs` (VFs merge into their PF).
pub fn hca_busid(addr: PciAddr, merge_vfs: bool) -> PciAddr {
    PciAddr::new(
        addr.domain,
        addr.bus,
        if merge_vfs { 0 } else { addr.device },
        0,
    )
}

/// NCCL's `familyid` for a Linux `cpu family`: base family plus extended family
/// shifted left by 4 (CPUID leaf 1), not their sum as Linux prints it. Intel family 6
/// stays 6; AMD Rome (Linux 23) is 143, Milan/Genoa (25) 175.
pub fn familyid(linux_family: u32) -> u32 {
    if linux_family >= 0xf {
        0xf + ((linux_family - 0xf) << 4)
    } else {
        linux_family
    }
}

/// Linux's `cpu family` from NCCL's `familyid`.
pub fn linux_family(familyid: u32) -> u32 {
    let (base, ext) = (familyid & 0xf, familyid >> 4);
    if base == 0xf { base + ext } else { base }
}

/// The kernel's `max_link_speed` text for a rate (`32.0 GT/s PCIe`), the form NCCL's
/// bandwidth table knows.
fn speed_text(s: LinkSpeed) -> String {
    if (s.gts - 2.5).abs() < 0.01 {
        "2.5 GT/s PCIe".to_string()
    } else {
        format!("{:.1} GT/s PCIe", s.gts)
    }
}

/// A CPU set as a sysfs `cpumap` (32-bit hex words, most significant first) covering
/// `nbits` CPUs.
fn cpumap(set: &CpuSet, nbits: u32) -> String {
    let nbits = nbits.max(set.iter().last().map_or(1, |c| c + 1));
    let words = nbits.div_ceil(32) as usize;
    let mut w = vec![0u32; words];
    for c in set.iter() {
        w[(c / 32) as usize] |= 1 << (c % 32);
    }
    let lead_bits = nbits - 32 * (words as u32 - 1);
    let lead_digits = lead_bits.div_ceil(4) as usize;
    w.iter()
        .enumerate()
        .rev()
        .map(|(i, v)| {
            if i == words - 1 {
                format!("{v:0lead_digits$x}")
            } else {
                format!("{v:08x}")
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// Where a node hangs in NCCL's tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Parent {
    Cpu(i64),
    Pci(PciAddr),
}

struct TreeNode {
    parent: Parent,
    attrs_from: PciAddr,
    /// The sysfs parent of `attrs_from`, whose `max_link_*` also caps the link.
    upstream: Option<PciAddr>,
    nets: Vec<Element>,
}

/// Put a device and, as needed, its ancestors into NCCL's tree. `real` is the device's
/// own address, `shown` the bus id NCCL gives it (an HCA's merged one).
fn place(topo: &Topology, real: PciAddr, shown: PciAddr, nodes: &mut BTreeMap<PciAddr, TreeNode>) {
    let mut chain: Vec<PciAddr> = topo.ancestors(real).iter().map(|f| f.address).collect();
    chain.reverse();
    chain.push(real);
    let mut i = chain.len() - 1;
    let mut me = shown;
    while !nodes.contains_key(&me) {
        let me_real = chain[i];
        // NCCL strips two path components per level: the parent is the grandparent
        // in sysfs, and a device within two levels of the root complex hangs on the CPU.
        let parent = if i >= 2 {
            Parent::Pci(chain[i - 2])
        } else {
            let numa = topo.pci_function(me_real).and_then(|f| f.numa_node);
            Parent::Cpu(numa.map_or(-1, i64::from))
        };
        let attrs_from = if topo.pci_function(me).is_some() {
            me
        } else {
            me_real
        };
        let upstream = topo.pci_function(attrs_from).and_then(|f| f.parent);
        nodes.insert(
            me,
            TreeNode {
                parent,
                attrs_from,
                upstream,
                nets: Vec::new(),
            },
        );
        match parent {
            Parent::Pci(p) => {
                i -= 2;
                me = p;
            }
            Parent::Cpu(_) => break,
        }
    }
}

/// The NCCL topology XML of `topo`.
pub fn write(topo: &Topology, opts: &XmlOptions) -> String {
    write_shown(topo, opts, &DisplayedDevices::of(topo, true))
}

/// The NCCL topology XML of the GPUs and HCAs `shown` (inside a container, its own:
/// those its NCCL finds, as CUDA and `ibv_open_device` let it).
pub fn write_shown(topo: &Topology, opts: &XmlOptions, shown: &DisplayedDevices) -> String {
    let mut nodes: BTreeMap<PciAddr, TreeNode> = BTreeMap::new();
    for g in topo.gpus.iter().filter(|g| shown.shows_gpu(g.pci)) {
        place(topo, g.pci, g.pci, &mut nodes);
    }
    // HCAs in NCCL's device order (PCI bus id since NCCL 2.29.7, then name); `port` is
    // the verbs port plus the number of earlier devices merged onto the same bus id.
    // A Data Direct device is NCCL's `<dev>_dma` at its DMA function, whose sysfs path
    // mlx5 gives and NCCL keeps whole (no digit zeroed: ncclIbInitDevices, v2.30.7-1).
    let mut hcas: Vec<(PciAddr, PciAddr, String, &RdmaDevice)> = Vec::new();
    for d in topo.rdma_devices.iter().filter(|d| shown.shows(&d.name)) {
        let Some(real) = d.pci.filter(|a| topo.pci_function(*a).is_some()) else {
            continue;
        };
        let dma = d
            .data_direct
            .filter(|a| opts.data_direct.uses_dma() && topo.pci_function(*a).is_some());
        if dma.is_none() || opts.data_direct == DataDirect::Both {
            hcas.push((real, hca_busid(real, opts.merge_vfs), d.name.clone(), d));
        }
        if let Some(dma) = dma {
            hcas.push((dma, dma, format!("{}_dma", d.name), d));
        }
    }
    hcas.sort_by(|a, b| a.1.cmp(&b.1).then_with(|| natural_cmp(&a.2, &b.2)));
    let mut merged_count: BTreeMap<PciAddr, u32> = BTreeMap::new();
    let mut dev_index = 0u32;
    for (real, shown, name, d) in hcas {
        place(topo, real, shown, &mut nodes);
        let earlier = merged_count.entry(shown).or_default();
        let real_port = *earlier;
        *earlier += 1;
        if !opts.nets {
            continue;
        }
        for p in d.ports.iter().filter(|p| p.is_active()) {
            let mut net = Element::new("net")
                .attr("name", &name)
                .attr("dev", dev_index.to_string());
            if let Some(r) = &p.rate {
                net = net.attr("speed", format!("{}", (r.gbps * 1000.0).round() as u64));
            }
            net = net.attr("port", (p.number + real_port).to_string());
            dev_index += 1;
            if let Some(n) = nodes.get_mut(&shown) {
                n.nets.push(net);
            }
        }
    }

    let nbits = topo
        .host
        .cpus_online
        .as_ref()
        .and_then(|c| c.iter().last())
        .map_or(0, |c| c + 1);
    let mut cpus: BTreeMap<i64, Element> = BTreeMap::new();
    for n in nodes.values() {
        if let Parent::Cpu(id) = n.parent {
            cpus.entry(id)
                .or_insert_with(|| cpu_element(topo, id, nbits));
        }
    }
    fn children_of(
        nodes: &BTreeMap<PciAddr, TreeNode>,
        topo: &Topology,
        parent: Parent,
        depth: usize,
    ) -> Vec<Element> {
        if depth > MAX_DEPTH {
            return Vec::new();
        }
        let mut kids: Vec<(&PciAddr, &TreeNode)> =
            nodes.iter().filter(|(_, n)| n.parent == parent).collect();
        kids.sort_by_key(|(a, _)| busid(**a));
        kids.into_iter()
            .map(|(a, n)| {
                let mut e = pci_element(topo, *a, n);
                e.children = children_of(nodes, topo, Parent::Pci(*a), depth + 1);
                if !n.nets.is_empty() {
                    let mut nic = Element::new("nic");
                    nic.children = n.nets.clone();
                    e.children.push(nic);
                }
                e
            })
            .collect()
    }
    let mut system = Element::new("system").attr("version", "1");
    // NCCL creates `numaid=-1` last in practice (devices without locality).
    let mut ids: Vec<i64> = cpus.keys().copied().collect();
    ids.sort_by_key(|id| (*id < 0, *id));
    for id in ids {
        let Some(mut cpu) = cpus.remove(&id) else {
            continue;
        };
        cpu.children = children_of(&nodes, topo, Parent::Cpu(id), 0);
        system.children.push(cpu);
    }
    let mut out = String::new();
    system.render(0, &mut out);
    out
}

fn cpu_element(topo: &Topology, numaid: i64, nbits: u32) -> Element {
    let mut e = Element::new("cpu").attr("numaid", numaid.to_string());
    if let Some(node) = u32::try_from(numaid).ok().and_then(|n| topo.numa_node(n)) {
        let map = cpumap(&node.cpus, nbits);
        if map.len() <= MAX_VALUE_LEN {
            e = e.attr("affinity", map);
        }
    }
    let cpu: Option<&CpuInfo> = topo.host.cpu.as_ref();
    let vendor = cpu.and_then(|c| c.vendor.as_deref());
    let x86 = matches!(
        vendor,
        Some("GenuineIntel" | "AuthenticAMD" | "CentaurHauls" | "HygonGenuine")
    ) || vendor.is_some_and(|v| v.trim() == "Shanghai");
    if x86 {
        e = e.attr("arch", "x86_64");
        if let Some(v) = vendor {
            e = e.attr("vendor", v);
        }
        if let Some(f) = cpu.and_then(|c| c.family) {
            e = e.attr("familyid", familyid(f).to_string());
        }
        if let Some(m) = cpu.and_then(|c| c.model) {
            e = e.attr("modelid", m.to_string());
        }
    } else if cpu.and_then(|c| c.arm_architecture).is_some_and(|a| a >= 8) {
        // As NCCL writes it on aarch64 (`ncclTopoGetXmlFromCpu`): no vendor or ids.
        e = e.attr("arch", "arm64");
    }
    e
}

fn pci_element(topo: &Topology, shown: PciAddr, node: &TreeNode) -> Element {
    let f = topo.pci_function(node.attrs_from);
    let up = node.upstream.and_then(|a| topo.pci_function(a));
    let mut e = Element::new("pci").attr("busid", busid(shown));
    let Some(f) = f else {
        return e.attr("link_speed", "").attr("link_width", "0");
    };
    e = e
        .attr("class", format!("0x{:06x}", f.class))
        .attr("vendor", format!("0x{:04x}", f.vendor))
        .attr("device", format!("0x{:04x}", f.device));
    if let Some(v) = f.subsystem_vendor {
        e = e.attr("subsystem_vendor", format!("0x{v:04x}"));
    }
    if let Some(v) = f.subsystem_device {
        e = e.attr("subsystem_device", format!("0x{v:04x}"));
    }
    let speeds = [Some(f), up]
        .into_iter()
        .flatten()
        .filter_map(|x| x.link.max_speed);
    let speed = speeds.min_by(|a, b| a.gts.total_cmp(&b.gts));
    let widths = [Some(f), up]
        .into_iter()
        .flatten()
        .filter_map(|x| x.link.max_width)
        .filter(|w| *w > 0);
    let width = widths.min().unwrap_or(0);
    e.attr("link_speed", speed.map(speed_text).unwrap_or_default())
        .attr("link_width", width.to_string())
}

/// Parse the text of a topology file into its `<system>` element.
///
/// # Errors
/// When the text is not well-formed, has no `<system>`, or nests too deep.
pub fn parse(text: &str) -> Result<Element, NcclXmlError> {
    use quick_xml::events::{BytesStart, Event};
    let mut reader = quick_xml::Reader::from_str(text);
    reader.config_mut().trim_text(true);
    let syntax =
        |reader: &quick_xml::Reader<&[u8]>, e: &dyn std::fmt::Display| NcclXmlError::Syntax {
            position: reader.error_position(),
            message: e.to_string(),
        };
    let element =
        |reader: &quick_xml::Reader<&[u8]>, s: &BytesStart| -> Result<Element, NcclXmlError> {
            let mut el = Element::new(&String::from_utf8_lossy(s.name().as_ref()));
            for a in s.attributes() {
                let a = a.map_err(|e| syntax(reader, &e))?;
                let v = a.unescape_value().map_err(|e| syntax(reader, &e))?;
                el.attrs.push((
                    String::from_utf8_lossy(a.key.as_ref()).into_owned(),
                    v.into_owned(),
                ));
            }
            Ok(el)
        };
    let mut stack: Vec<Element> = vec![Element::new("#document")];
    loop {
        let ev = reader.read_event().map_err(|e| syntax(&reader, &e))?;
        match ev {
            Event::Start(s) => {
                if stack.len() > MAX_DEPTH {
                    return Err(NcclXmlError::TooDeep);
                }
                stack.push(element(&reader, &s)?);
            }
            Event::Empty(s) => {
                let el = element(&reader, &s)?;
                if let Some(top) = stack.last_mut() {
                    top.children.push(el);
                }
            }
            Event::End(_) => {
                let Some(done) = stack.pop() else { break };
                match stack.last_mut() {
                    Some(top) => top.children.push(done),
                    None => {
                        return Err(NcclXmlError::Syntax {
                            position: reader.buffer_position(),
                            message: "unbalanced end tag".into(),
                        });
                    }
                }
            }
            Event::Eof => break,
            _ => {}
        }
    }
    if stack.len() != 1 {
        return Err(NcclXmlError::Syntax {
            position: reader.buffer_position(),
            message: format!(
                "<{}> is not closed",
                stack.last().map_or("", |e| e.name.as_str())
            ),
        });
    }
    let doc = stack.pop().unwrap_or_default();
    let system = doc
        .children
        .into_iter()
        .find(|e| e.name == "system")
        .ok_or(NcclXmlError::NoSystem)?;
    match system.get("version") {
        Some(v) if v.trim().parse::<i64>() == Ok(1) => Ok(system),
        other => Err(NcclXmlError::Version(other.unwrap_or("").to_string())),
    }
}

/// Read a topology file into a model: each `<cpu>` becomes a NUMA node with one host
/// bridge, each `<pci>` a PCI function (bridges as switch upstream ports, as NCCL
/// represents them), each GPU-class `<pci>` or `<gpu>` a GPU, each `<net>` (or a
/// NIC-class `<pci>` without one, named by its bus id) an RDMA device whose ports are
/// ACTIVE (NCCL only lists those). The link layer follows the PCI class (`0x0207`
/// InfiniBand, `0x0200` Ethernet). `label` names the source in [`Topology::root`].
///
/// # Errors
/// See [`parse`].
pub fn read(text: &str, label: &str) -> Result<Topology, NcclXmlError> {
    let system = parse(text)?;
    let mut r = ReadState {
        topo: Topology::empty(label),
        nvml: Vec::new(),
        gpu_dev: BTreeMap::new(),
    };
    for cpu in system.children.iter().filter(|e| e.name == "cpu") {
        r.cpu(cpu);
    }
    r.finish();
    Ok(r.topo)
}

struct ReadState {
    topo: Topology,
    nvml: Vec<NvmlGpu>,
    gpu_dev: BTreeMap<PciAddr, u32>,
}

impl ReadState {
    fn diag(&mut self, code: &str, message: String) {
        self.topo
            .diagnostics
            .push(Diagnostic::new(Severity::Warning, code, None, message));
    }

    fn cpu(&mut self, cpu: &Element) {
        let numaid: i64 = cpu
            .get("numaid")
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(-1);
        let hb = format!("cpu{numaid}");
        let node = u32::try_from(numaid).ok();
        let cpus = cpu.get("affinity").and_then(|a| parse_cpumask(a).ok());
        if let Some(id) = node
            && self.topo.numa_node(id).is_none()
        {
            self.topo.numa_nodes.push(NumaNode {
                id,
                cpus: cpus.clone().unwrap_or_default(),
                distances: Vec::new(),
                memory_kib: None,
            });
        }
        let arm64 = cpu.get("arch").map(str::trim) == Some("arm64");
        if self.topo.host.cpu.is_none() && (cpu.get("vendor").is_some() || arm64) {
            self.topo.host.cpu = Some(CpuInfo {
                vendor: cpu.get("vendor").map(str::to_string),
                family: cpu
                    .get("familyid")
                    .and_then(|v| v.trim().parse().ok())
                    .map(linux_family),
                model: cpu.get("modelid").and_then(|v| v.trim().parse().ok()),
                model_name: None,
                arm_architecture: arm64.then_some(8),
            });
        }
        if !self.topo.host_bridges.iter().any(|h| h.name == hb) {
            self.topo.host_bridges.push(HostBridge {
                name: hb.clone(),
                path: format!("/nccl-topo/{hb}"),
                numa_node: node,
            });
        }
        let ctx = Ctx {
            hb: &hb,
            numa: node,
            cpus: cpus.as_ref(),
        };
        for child in &cpu.children {
            match child.name.as_str() {
                "pci" => self.pci(child, None, &format!("/nccl-topo/{hb}"), &ctx, 0),
                "nic" => self.nic(child, None, None),
                _ => {}
            }
        }
    }

    fn pci(
        &mut self,
        el: &Element,
        parent: Option<PciAddr>,
        parent_path: &str,
        ctx: &Ctx,
        depth: usize,
    ) {
        if depth > MAX_DEPTH {
            return;
        }
        let Some(addr) = el.get("busid").and_then(|b| b.parse::<PciAddr>().ok()) else {
            let b = el.get("busid").unwrap_or("").to_string();
            self.diag(
                "unparsable-busid",
                format!("<pci busid={b:?}> is not a PCI address; skipped with its children"),
            );
            return;
        };
        if self.topo.pci.iter().any(|f| f.address == addr) {
            self.diag(
                "duplicate-busid",
                format!("<pci busid=\"{addr}\"> appears twice; the second is skipped"),
            );
            return;
        }
        let hex = |k: &str| {
            el.get(k)
                .and_then(|v| parse_hex_u32("PCI attribute", v).ok())
        };
        let class = el
            .get("class")
            .and_then(|v| crate::parse::parse_pci_class(v).ok())
            .unwrap_or(0);
        let path = format!("{parent_path}/{addr}");
        let speed = el
            .get("link_speed")
            .and_then(|s| crate::parse::parse_link_speed(s).ok().flatten());
        let width = el
            .get("link_width")
            .and_then(|w| w.trim().parse::<u32>().ok());
        let f = PciFunction {
            address: addr,
            path: path.clone(),
            host_bridge: ctx.hb.to_string(),
            parent,
            role: if class >> 8 == 0x0604 {
                PciRole::SwitchUpstream
            } else {
                PciRole::Endpoint
            },
            class,
            vendor: hex("vendor")
                .and_then(|v| u16::try_from(v).ok())
                .unwrap_or(0),
            device: hex("device")
                .and_then(|v| u16::try_from(v).ok())
                .unwrap_or(0),
            subsystem_vendor: hex("subsystem_vendor").and_then(|v| u16::try_from(v).ok()),
            subsystem_device: hex("subsystem_device").and_then(|v| u16::try_from(v).ok()),
            vendor_name: None,
            device_name: None,
            driver: None,
            numa_node: ctx.numa,
            local_cpus: ctx.cpus.cloned(),
            link: PcieLink {
                current_speed: speed,
                current_width: width,
                max_speed: speed,
                max_width: width,
            },
            sriov: None,
            physfn: None,
            vf_index: None,
            is_vf: false,
            iommu_group: None,
            acs: None,
        };
        self.topo.pci.push(f);
        let mut is_gpu = class >> 16 == 0x03;
        let mut has_nic = false;
        for child in &el.children {
            match child.name.as_str() {
                "pci" => self.pci(child, Some(addr), &path, ctx, depth + 1),
                "gpu" => {
                    is_gpu = true;
                    self.gpu(child, addr);
                }
                "nic" => {
                    has_nic = true;
                    self.nic(child, Some(addr), Some(class));
                }
                _ => {}
            }
        }
        if is_gpu {
            self.gpu_dev.entry(addr).or_insert(u32::MAX);
        } else if !has_nic && class >> 16 == 0x02 {
            // A skeleton file's NIC slot: NCCL fills in the device at run time.
            let name = addr.to_string();
            self.add_port(&name, Some(addr), Some(class), 1, None, None);
        }
    }

    fn gpu(&mut self, el: &Element, addr: PciAddr) {
        let dev = el.get("dev").and_then(|d| d.trim().parse::<u32>().ok());
        self.gpu_dev.insert(addr, dev.unwrap_or(u32::MAX));
        let mut links = Vec::new();
        for l in el.children.iter().filter(|c| c.name == "nvlink") {
            let count: u32 = l
                .get("count")
                .and_then(|c| c.trim().parse().ok())
                .unwrap_or(1);
            let target = l.get("target").unwrap_or("");
            let remote = target.parse::<PciAddr>().ok();
            let tclass = l
                .get("tclass")
                .and_then(|c| parse_hex_u32("tclass", c).ok());
            let kind = match tclass {
                _ if target == INVISIBLE_NVLINK_PEER => NvLinkRemote::Nvswitch,
                Some(0x068001) => NvLinkRemote::Cpu,
                Some(c) if c >> 8 == 0x0680 => NvLinkRemote::Nvswitch,
                Some(c) if c >> 16 == 0x03 => NvLinkRemote::Gpu,
                _ => NvLinkRemote::Unknown,
            };
            for _ in 0..count.min(64) {
                links.push(NvLink {
                    link: links.len() as u32,
                    active: true,
                    remote_bus_id: remote.map(|r| r.nvml()),
                    remote_kind: kind,
                });
            }
        }
        self.nvml.push(NvmlGpu {
            nvlinks: links,
            ..NvmlGpu::new(dev.unwrap_or(0), addr.nvml())
        });
    }

    fn nic(&mut self, el: &Element, addr: Option<PciAddr>, class: Option<u32>) {
        for net in el.children.iter().filter(|c| c.name == "net") {
            let Some(name) = net.get("name") else {
                continue;
            };
            if name.contains('+') {
                // A fused virtual NIC: its members are listed on their own.
                continue;
            }
            let port: u32 = net
                .get("port")
                .and_then(|p| p.trim().parse().ok())
                .unwrap_or(1);
            let speed: Option<u64> = net.get("speed").and_then(|s| s.trim().parse().ok());
            let guid = net.get("guid").map(str::to_string);
            self.add_port(name, addr, class, port.max(1), speed, guid);
        }
    }

    fn add_port(
        &mut self,
        name: &str,
        pci: Option<PciAddr>,
        class: Option<u32>,
        number: u32,
        speed: Option<u64>,
        guid: Option<String>,
    ) {
        let link_layer = match class.map(|c| c >> 8) {
            Some(0x0207) => Some(LinkLayer::InfiniBand),
            Some(0x0200) => Some(LinkLayer::Ethernet),
            _ => None,
        };
        let port = Port {
            number,
            state: Some(PortState::Active),
            phys_state: None,
            rate: speed.map(|s| Rate {
                gbps: s as f64 / 1000.0,
                lanes: 0,
                speed: String::new(),
            }),
            link_layer,
            lid: None,
            gid_table_len: 0,
            gids: Vec::new(),
            netdev: None,
        };
        if let Some(d) = self.topo.rdma_devices.iter_mut().find(|d| d.name == name) {
            if !d.ports.iter().any(|p| p.number == number) {
                d.ports.push(port);
            }
            return;
        }
        self.topo.rdma_devices.push(RdmaDevice {
            name: name.to_string(),
            pci,
            node_type: None,
            node_guid: None,
            sys_image_guid: guid,
            fw_ver: None,
            hca_type: None,
            board_id: None,
            ports: vec![port],
            uverbs: None,
            data_direct: None,
        });
    }

    fn finish(&mut self) {
        let t = &mut self.topo;
        t.pci.sort_by_key(|f| f.address);
        t.numa_nodes.sort_by_key(|n| n.id);
        t.rdma_devices.sort_by(|a, b| natural_cmp(&a.name, &b.name));
        for d in &mut t.rdma_devices {
            d.ports.sort_by_key(|p| p.number);
        }
        let gpus: Vec<PciAddr> = self.gpu_dev.keys().copied().collect();
        t.gpus = gpus
            .iter()
            .enumerate()
            .map(|(i, a)| {
                let f = t.pci_function(*a);
                Gpu {
                    pci: *a,
                    index: i as u32,
                    name: None,
                    uuid: None,
                    numa_node: f.and_then(|f| numa_of(t, f)),
                    local_cpus: f.and_then(|f| f.local_cpus.clone()),
                    minor: None,
                }
            })
            .collect();
        let cpus: CpuSet = t
            .numa_nodes
            .iter()
            .fold(CpuSet::new(), |a, n| a.union(&n.cpus));
        if !cpus.is_empty() {
            t.host.cpus_online = Some(cpus);
        }
        if !self.nvml.is_empty() {
            t.nvml = Some(NvmlSnapshot {
                schema: NvmlSnapshot::SCHEMA.to_string(),
                driver_version: None,
                cuda_driver_version: None,
                device_count: None,
                gpus: std::mem::take(&mut self.nvml),
            });
        }
    }
}

struct Ctx<'a> {
    hb: &'a str,
    numa: Option<u32>,
    cpus: Option<&'a CpuSet>,
}

#[cfg(test)]
mod tests;
