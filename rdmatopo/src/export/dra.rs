//! `rdmatopo k8s dra`: DeviceClasses and a ResourceClaimTemplate (`resource.k8s.io/v1`)
//! for N GPUs and one RDMA NIC each, which only ever yield each GPU a NIC at the best
//! path class this node offers it, and the allocations such a claim allows.
//!
//! The choice: per-pair `matchAttribute: resource.kubernetes.io/pcieRoot` where every
//! GPU-NIC pair sharing a root is at the GPU's best class and enough pairs exist; else
//! per-pair `matchAttribute: resource.kubernetes.io/numaNode` under the same test; else
//! CEL selectors that name each GPU by `pciBusID` and its best NICs by the NIC driver's
//! PCI address attribute. The facts come from [`crate::view::dra`].
//!
//! Semantics followed (KEP-4381, `resource.k8s.io/v1` types): a request's device must
//! pass its class's and its own CEL selectors; one device serves one request of a claim;
//! a `matchAttribute` constraint holds when every device of its requests has the
//! attribute and all values are equal.

use super::k8s::ObjectMeta;
use crate::model::Topology;
use crate::view::ViewError;
use crate::view::affinity::PathClass;
use crate::view::dra::{
    ATTR_NUMA_NODE, ATTR_PCI_BUS_ID, ATTR_PCIE_ROOT, AttrValue, DraDevice, DraDriver, class_of,
    gpu_devices, nic_devices,
};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub const API_VERSION: &str = "resource.k8s.io/v1";

/// A `resource.k8s.io/v1` DeviceClass (the fields generated here).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceClass {
    pub api_version: String,
    pub kind: String,
    pub metadata: ObjectMeta,
    pub spec: DeviceClassSpec,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceClassSpec {
    pub selectors: Vec<DeviceSelector>,
}

/// `DeviceSelector` (only `cel` exists).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceSelector {
    pub cel: CelDeviceSelector,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CelDeviceSelector {
    pub expression: String,
}

impl DeviceSelector {
    fn cel(expression: String) -> Self {
        Self {
            cel: CelDeviceSelector { expression },
        }
    }
}

/// A `resource.k8s.io/v1` ResourceClaimTemplate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceClaimTemplate {
    pub api_version: String,
    pub kind: String,
    pub metadata: ObjectMeta,
    pub spec: ResourceClaimTemplateSpec,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceClaimTemplateSpec {
    pub spec: ResourceClaimSpec,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceClaimSpec {
    pub devices: DeviceClaim,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceClaim {
    pub requests: Vec<DeviceRequest>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub constraints: Vec<DeviceConstraint>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceRequest {
    pub name: String,
    pub exactly: ExactDeviceRequest,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExactDeviceRequest {
    pub device_class_name: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub selectors: Vec<DeviceSelector>,
    pub allocation_mode: String,
    pub count: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceConstraint {
    pub requests: Vec<String>,
    pub match_attribute: String,
}

/// How the claim ties each GPU to its NIC.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Strategy {
    /// Per-pair `matchAttribute: resource.kubernetes.io/pcieRoot`.
    PcieRoot,
    /// Per-pair `matchAttribute: resource.kubernetes.io/numaNode`.
    NumaNode,
    /// CEL selectors naming each GPU and its best NICs by PCI address.
    PciAddress,
}

/// `--gpus`, the NIC driver, names.
#[derive(Debug, Clone)]
pub struct DraOptions {
    pub gpus: usize,
    pub nic_driver: DraDriver,
    /// The ResourceClaimTemplate's name.
    pub name: String,
    pub namespace: Option<String>,
}

/// One GPU's best class and the NICs at it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuBest {
    /// `GPU<n>` as nvidia-smi numbers it.
    pub gpu: String,
    /// The device name in `gpu.nvidia.com`'s slice.
    pub device: String,
    pub pci_bus_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pcie_root: Option<String>,
    pub best_class: PathClass,
    /// The NIC driver's devices at that class (RDMA device names).
    pub best_nics: Vec<String>,
}

/// What the node offers and why the claim is built as it is (`--explain`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Explain {
    pub gpu_driver: String,
    pub nic_driver: String,
    pub gpus: usize,
    /// Whether per-pair pcieRoot constraints alone give every GPU its best class on
    /// this node, for this many GPUs.
    pub pcie_root_enough: bool,
    /// Why not: the counterexample, or why it cannot be met.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pcie_root_problem: Option<String>,
    /// What one pcieRoot constraint over every request would do.
    pub single_pcie_root: String,
    pub strategy: Strategy,
    pub best: Vec<GpuBest>,
}

/// The objects of `k8s dra` and the explanation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DraManifests {
    pub device_classes: Vec<DeviceClass>,
    pub template: ResourceClaimTemplate,
    pub explain: Explain,
    /// One line each: the facts behind the choice (YAML comments).
    pub notes: Vec<String>,
}

/// The GPU DeviceClass's name and selector (the selector of the NVIDIA driver's own
/// `gpu.nvidia.com` class, deployments/helm/…/deviceclass-gpu.yaml at 95932046).
pub const GPU_CLASS: &str = "rdmatopo-gpu";
pub const NIC_CLASS: &str = "rdmatopo-rdma-nic";

fn gpu_class_expression() -> String {
    "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'".into()
}

fn nic_class_expression(d: DraDriver) -> String {
    match d {
        DraDriver::Sriov => "device.driver == 'sriovnetwork.k8snetworkplumbingwg.io' && device.attributes['sriovnetwork.k8snetworkplumbingwg.io'].rdmaCapable == true".into(),
        _ => format!(
            "device.driver == '{0}' && device.attributes['{0}'].rdma == true",
            d.name()
        ),
    }
}

/// `device.attributes['<domain>'].<id>` for a qualified attribute name.
pub fn cel_attr(qualified: &str) -> String {
    let (domain, id) = qualified.rsplit_once('/').unwrap_or(("", qualified));
    format!("device.attributes['{domain}'].{id}")
}

/// The classes the claim names, for `nic_driver`.
pub fn device_classes(nic_driver: DraDriver) -> Vec<DeviceClass> {
    let class = |name: &str, expr: String| DeviceClass {
        api_version: API_VERSION.into(),
        kind: "DeviceClass".into(),
        metadata: ObjectMeta {
            name: name.into(),
            ..Default::default()
        },
        spec: DeviceClassSpec {
            selectors: vec![DeviceSelector::cel(expr)],
        },
    };
    vec![
        class(GPU_CLASS, gpu_class_expression()),
        class(NIC_CLASS, nic_class_expression(nic_driver)),
    ]
}

/// The node's GPU and NIC devices with their classes.
struct Facts {
    gpus: Vec<DraDevice>,
    nics: Vec<DraDevice>,
    /// `class[g][n]`.
    class: Vec<Vec<PathClass>>,
    best: Vec<PathClass>,
}

impl Facts {
    fn of(topo: &Topology, nic_driver: DraDriver) -> Result<Self, ViewError> {
        let gpus = gpu_devices(topo);
        let nics = nic_devices(topo, nic_driver);
        if gpus.is_empty() {
            return Err(ViewError::Argument(
                "this node has no GPU gpu.nvidia.com would publish".into(),
            ));
        }
        if nics.is_empty() {
            return Err(ViewError::Argument(match nic_driver {
                DraDriver::Sriov => "the SR-IOV DRA driver would publish no RDMA NIC on this node: it publishes the VFs of PFs with a netdev, and no PF here has an RDMA-capable VF".into(),
                d => format!("{d} would publish no RDMA NIC on this node"),
            }));
        }
        let mut class = Vec::new();
        for g in &gpus {
            let mut row = Vec::new();
            for n in &nics {
                row.push(class_of(topo, g, n).unwrap_or(PathClass::Sys));
            }
            class.push(row);
        }
        let best = class
            .iter()
            .map(|r| {
                r.iter()
                    .copied()
                    .min_by_key(PathClass::rank)
                    .unwrap_or(PathClass::Sys)
            })
            .collect();
        Ok(Self {
            gpus,
            nics,
            class,
            best,
        })
    }

    fn good(&self, g: usize, n: usize) -> bool {
        self.class[g][n].rank() == self.best[g].rank()
    }

    fn gpu_label(&self, topo: &Topology, g: usize) -> String {
        let pci = self.gpus[g].pci;
        topo.gpus
            .iter()
            .find(|x| x.pci == pci)
            .map_or_else(|| self.gpus[g].name.clone(), |x| format!("GPU{}", x.index))
    }

    fn nic_label(&self, n: usize) -> String {
        self.nics[n]
            .rdma_device
            .clone()
            .unwrap_or_else(|| self.nics[n].name.clone())
    }

    /// The pairs a per-pair `matchAttribute` on `attr` allows.
    fn allowed_by(&self, attr: &str) -> Vec<Vec<bool>> {
        self.gpus
            .iter()
            .map(|g| {
                self.nics
                    .iter()
                    .map(|n| match (g.attr(attr), n.attr(attr)) {
                        (Some(a), Some(b)) => a == b,
                        _ => false,
                    })
                    .collect()
            })
            .collect()
    }

    /// The first allowed pair below the GPU's best class, as a sentence.
    fn counterexample(&self, topo: &Topology, allowed: &[Vec<bool>]) -> Option<String> {
        for (g, row) in allowed.iter().enumerate() {
            for (n, ok) in row.iter().enumerate() {
                if *ok && !self.good(g, n) {
                    let better = (0..self.nics.len()).find(|m| self.good(g, *m))?;
                    return Some(format!(
                        "{} could get {} ({}) while {} is {}",
                        self.gpu_label(topo, g),
                        self.nic_label(n),
                        self.class[g][n],
                        self.nic_label(better),
                        self.best[g]
                    ));
                }
            }
        }
        None
    }
}

/// Size of a maximum matching of GPUs to distinct NICs over `edge` (Kuhn's augmenting
/// paths; a node has a handful of each).
fn max_matching(edge: &[Vec<bool>], gpus: &[usize]) -> usize {
    let nics = edge.first().map_or(0, Vec::len);
    let mut owner: Vec<Option<usize>> = vec![None; nics];
    fn augment(
        g: usize,
        edge: &[Vec<bool>],
        seen: &mut [bool],
        owner: &mut [Option<usize>],
    ) -> bool {
        for n in 0..owner.len() {
            if edge[g][n] && !seen[n] {
                seen[n] = true;
                if owner[n].is_none_or(|h| augment(h, edge, seen, owner)) {
                    owner[n] = Some(g);
                    return true;
                }
            }
        }
        false
    }
    let mut size = 0;
    for &g in gpus {
        let mut seen = vec![false; nics];
        if augment(g, edge, &mut seen, &mut owner) {
            size += 1;
        }
    }
    size
}

/// What one pcieRoot constraint over all 2N requests allows: every device on one root.
fn single_root_verdict(topo: &Topology, f: &Facts, n: usize) -> String {
    let mut roots: BTreeMap<&AttrValue, (Vec<usize>, Vec<usize>)> = BTreeMap::new();
    for (g, d) in f.gpus.iter().enumerate() {
        if let Some(r) = d.attr(ATTR_PCIE_ROOT) {
            roots.entry(r).or_default().0.push(g);
        }
    }
    for (m, d) in f.nics.iter().enumerate() {
        if let Some(r) = d.attr(ATTR_PCIE_ROOT) {
            roots.entry(r).or_default().1.push(m);
        }
    }
    let fits: Vec<_> = roots
        .iter()
        .filter(|(_, (g, m))| g.len() >= n && m.len() >= n)
        .collect();
    if fits.is_empty() {
        return format!(
            "one pcieRoot constraint over all {n} GPU{s} and {n} NIC{s} never schedules here: no root holds {n} GPU{s} and {n} of the driver's NICs",
            s = if n == 1 { "" } else { "s" }
        );
    }
    for (root, (gs, ms)) in &fits {
        for &g in gs {
            for &m in ms {
                if !f.good(g, m) {
                    return format!(
                        "one pcieRoot constraint over all requests falls short: on {root} {} could get {} ({}) while its best is {}",
                        f.gpu_label(topo, g),
                        f.nic_label(m),
                        f.class[g][m],
                        f.best[g]
                    );
                }
            }
        }
    }
    format!(
        "one pcieRoot constraint over all requests is met on {} and keeps every GPU at its best",
        fits.iter()
            .map(|(r, _)| r.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// The DeviceClasses and ResourceClaimTemplate for `opts.gpus` GPUs and their NICs.
pub fn dra_claim(topo: &Topology, opts: &DraOptions) -> Result<DraManifests, ViewError> {
    if !super::k8s::is_dns_subdomain(&opts.name) {
        return Err(ViewError::Argument(format!(
            "name {:?} is not a DNS subdomain (lowercase letters, digits, '-', '.')",
            opts.name
        )));
    }
    let f = Facts::of(topo, opts.nic_driver)?;
    let n = opts.gpus;
    if n == 0 {
        return Err(ViewError::Argument("a claim needs at least one GPU".into()));
    }
    if n > f.gpus.len() {
        return Err(ViewError::Argument(format!(
            "{n} GPUs asked for, but gpu.nvidia.com would publish {} on this node",
            f.gpus.len()
        )));
    }
    let all: Vec<usize> = (0..f.gpus.len()).collect();
    let good: Vec<Vec<bool>> = (0..f.gpus.len())
        .map(|g| (0..f.nics.len()).map(|m| f.good(g, m)).collect())
        .collect();
    let best_pairs = max_matching(&good, &all);
    if best_pairs < n {
        return Err(ViewError::Argument(format!(
            "only {best_pairs} GPU{} can each have a distinct {} NIC at their best class on this node ({} NIC{} published); {n} asked for",
            if best_pairs == 1 { "" } else { "s" },
            opts.nic_driver,
            f.nics.len(),
            if f.nics.len() == 1 { "" } else { "s" }
        )));
    }

    // pcieRoot, then NUMA: sound when every pair the attribute allows is at its GPU's
    // best class, usable when N such pairs have distinct NICs.
    let judge = |attr: &str| -> (bool, Option<String>) {
        let allowed = f.allowed_by(attr);
        if let Some(c) = f.counterexample(topo, &allowed) {
            return (false, Some(c));
        }
        let pairs = max_matching(&allowed, &all);
        if pairs == 0 {
            return (false, None);
        }
        (pairs >= n, None)
    };
    let (root_ok, root_counter) = judge(ATTR_PCIE_ROOT);
    let root_problem = if root_ok {
        None
    } else if let Some(c) = root_counter {
        Some(c)
    } else {
        let allowed = f.allowed_by(ATTR_PCIE_ROOT);
        let pairs = max_matching(&allowed, &all);
        Some(if pairs == 0 {
            if f.gpus.iter().all(|g| g.attr(ATTR_PCIE_ROOT).is_none()) {
                "no GPU has a pcieRoot (their sysfs paths are not under /sys/devices/pci…), so no GPU shares a root with a NIC".to_string()
            } else {
                "no GPU shares a root with a NIC".to_string()
            }
        } else {
            format!(
                "only {pairs} GPU{} share{} a root with a distinct NIC; {n} asked for",
                if pairs == 1 { "" } else { "s" },
                if pairs == 1 { "s" } else { "" }
            )
        })
    };
    let strategy = if root_ok {
        Strategy::PcieRoot
    } else if opts.nic_driver.standard_numa() && judge(ATTR_NUMA_NODE).0 {
        Strategy::NumaNode
    } else {
        Strategy::PciAddress
    };

    let mut requests = Vec::new();
    let mut constraints = Vec::new();
    let mut notes = Vec::new();
    let request = |name: String, class: &str, selectors: Vec<DeviceSelector>| DeviceRequest {
        name,
        exactly: ExactDeviceRequest {
            device_class_name: class.into(),
            selectors,
            allocation_mode: "ExactCount".into(),
            count: 1,
        },
    };
    match strategy {
        Strategy::PcieRoot | Strategy::NumaNode => {
            let attr = if strategy == Strategy::PcieRoot {
                ATTR_PCIE_ROOT
            } else {
                ATTR_NUMA_NODE
            };
            for i in 0..n {
                requests.push(request(format!("gpu-{i}"), GPU_CLASS, Vec::new()));
                requests.push(request(format!("nic-{i}"), NIC_CLASS, Vec::new()));
                constraints.push(DeviceConstraint {
                    requests: vec![format!("gpu-{i}"), format!("nic-{i}")],
                    match_attribute: attr.into(),
                });
            }
        }
        Strategy::PciAddress => {
            // N GPUs with distinct best NICs, best classes first.
            let mut order = all.clone();
            order.sort_by_key(|g| (f.best[*g].rank(), *g));
            let mut chosen: Vec<usize> = Vec::new();
            for g in order {
                if chosen.len() == n {
                    break;
                }
                let mut with = chosen.clone();
                with.push(g);
                if max_matching(&good, &with) == with.len() {
                    chosen = with;
                }
            }
            chosen.sort_unstable();
            let nic_attr = opts.nic_driver.pci_address_attribute();
            for (i, &g) in chosen.iter().enumerate() {
                let gpu_sel = format!("{} == '{}'", cel_attr(ATTR_PCI_BUS_ID), f.gpus[g].pci);
                let addrs: Vec<String> = (0..f.nics.len())
                    .filter(|m| f.good(g, *m))
                    .map(|m| format!("'{}'", f.nics[m].pci))
                    .collect();
                let nic_sel = format!("{} in [{}]", cel_attr(nic_attr), addrs.join(", "));
                requests.push(request(
                    format!("gpu-{i}"),
                    GPU_CLASS,
                    vec![DeviceSelector::cel(gpu_sel)],
                ));
                requests.push(request(
                    format!("nic-{i}"),
                    NIC_CLASS,
                    vec![DeviceSelector::cel(nic_sel)],
                ));
            }
        }
    }

    let best: Vec<GpuBest> = (0..f.gpus.len())
        .map(|g| GpuBest {
            gpu: f.gpu_label(topo, g),
            device: f.gpus[g].name.clone(),
            pci_bus_id: f.gpus[g].pci.to_string(),
            pcie_root: match f.gpus[g].attr(ATTR_PCIE_ROOT) {
                Some(AttrValue::String(s)) => Some(s.clone()),
                _ => None,
            },
            best_class: f.best[g],
            best_nics: (0..f.nics.len())
                .filter(|m| f.good(g, *m))
                .map(|m| f.nic_label(m))
                .collect(),
        })
        .collect();
    let single = single_root_verdict(topo, &f, n);
    notes.push(format!(
        "{} GPU{} (gpu.nvidia.com), {} RDMA NIC{} ({}) on this node",
        f.gpus.len(),
        if f.gpus.len() == 1 { "" } else { "s" },
        f.nics.len(),
        if f.nics.len() == 1 { "" } else { "s" },
        opts.nic_driver
    ));
    for b in &best {
        notes.push(format!(
            "{} ({}, {}): best NIC class {} via {}",
            b.gpu,
            b.pci_bus_id,
            b.pcie_root.as_deref().unwrap_or("no pcieRoot"),
            b.best_class,
            b.best_nics.join(", ")
        ));
    }
    notes.push(match (&strategy, &root_problem) {
        (Strategy::PcieRoot, _) => {
            "per-pair pcieRoot is enough here: every GPU-NIC pair sharing a root is at the GPU's best class".into()
        }
        (s, Some(p)) => format!(
            "per-pair pcieRoot is not enough here: {p}; so {}",
            match s {
                Strategy::NumaNode => "each pair matches on resource.kubernetes.io/numaNode, where every same-node pair is at the GPU's best class",
                _ => "each GPU is named by pciBusID and its NIC chosen among its best by PCI address",
            }
        ),
        _ => String::new(),
    });
    notes.push(single.clone());
    if opts.nic_driver == DraDriver::Sriov {
        notes.push("the SR-IOV DRA driver publishes each VF with its PF's pcieRoot and dra.net/numaNode (-1 where unknown), never resource.kubernetes.io/numaNode".into());
    }

    let template = ResourceClaimTemplate {
        api_version: API_VERSION.into(),
        kind: "ResourceClaimTemplate".into(),
        metadata: ObjectMeta {
            name: opts.name.clone(),
            namespace: opts.namespace.clone(),
            ..Default::default()
        },
        spec: ResourceClaimTemplateSpec {
            spec: ResourceClaimSpec {
                devices: DeviceClaim {
                    requests,
                    constraints,
                },
            },
        },
    };
    Ok(DraManifests {
        device_classes: device_classes(opts.nic_driver),
        template,
        explain: Explain {
            gpu_driver: DraDriver::NvidiaGpu.name().into(),
            nic_driver: opts.nic_driver.name().into(),
            gpus: n,
            pcie_root_enough: root_ok,
            pcie_root_problem: root_problem,
            single_pcie_root: single,
            strategy,
            best,
        },
        notes,
    })
}

/// Every allocation `claim` allows over `devices` (one device per request, each
/// request's own; `select` evaluates a CEL selector on a device), calling `visit` with
/// the device index chosen for each request. `ordered` lists request pairs `(a, b)`
/// whose devices must come in index order: interchangeable requests, so that each set
/// of pairings is visited once. `visit` returns `false` to stop. Returns how many were
/// visited, or the first selector error.
pub fn enumerate_allocations(
    classes: &[DeviceClass],
    claim: &DeviceClaim,
    devices: &[DraDevice],
    select: &mut dyn FnMut(&str, &DraDevice) -> Result<bool, String>,
    ordered: &[(usize, usize)],
    visit: &mut dyn FnMut(&[usize]) -> bool,
) -> Result<u64, String> {
    // Candidates per request: the class's selectors and the request's.
    let mut candidates: Vec<Vec<usize>> = Vec::new();
    for r in &claim.requests {
        let class = classes
            .iter()
            .find(|c| c.metadata.name == r.exactly.device_class_name)
            .ok_or_else(|| {
                format!(
                    "request {}: no DeviceClass {}",
                    r.name, r.exactly.device_class_name
                )
            })?;
        if r.exactly.count != 1 {
            return Err(format!(
                "request {}: count {} (only 1 is evaluated)",
                r.name, r.exactly.count
            ));
        }
        let mut c = Vec::new();
        'device: for (i, d) in devices.iter().enumerate() {
            for s in class.spec.selectors.iter().chain(&r.exactly.selectors) {
                if !select(&s.cel.expression, d)? {
                    continue 'device;
                }
            }
            c.push(i);
        }
        candidates.push(c);
    }
    let index: BTreeMap<&str, usize> = claim
        .requests
        .iter()
        .enumerate()
        .map(|(i, r)| (r.name.as_str(), i))
        .collect();
    let mut cons: Vec<(Vec<usize>, &str)> = Vec::new();
    for c in &claim.constraints {
        let rs = c
            .requests
            .iter()
            .map(|n| {
                index
                    .get(n.as_str())
                    .copied()
                    .ok_or_else(|| format!("constraint names no request {n}"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let rs = if rs.is_empty() {
            (0..claim.requests.len()).collect()
        } else {
            rs
        };
        cons.push((rs, c.match_attribute.as_str()));
    }
    let mut chosen: Vec<usize> = Vec::new();
    let mut count = 0u64;
    // Stopped early or not, the count is of those visited.
    let _ = walk(
        &candidates,
        &cons,
        devices,
        ordered,
        &mut chosen,
        &mut count,
        visit,
    );
    Ok(count)
}

fn walk(
    candidates: &[Vec<usize>],
    cons: &[(Vec<usize>, &str)],
    devices: &[DraDevice],
    ordered: &[(usize, usize)],
    chosen: &mut Vec<usize>,
    count: &mut u64,
    visit: &mut dyn FnMut(&[usize]) -> bool,
) -> bool {
    let r = chosen.len();
    if r == candidates.len() {
        *count += 1;
        return visit(chosen);
    }
    'cand: for &d in &candidates[r] {
        if chosen.contains(&d) {
            continue;
        }
        for &(a, b) in ordered {
            if b == r && a < r && chosen[a] >= d {
                continue 'cand;
            }
        }
        for (rs, attr) in cons {
            if !rs.contains(&r) {
                continue;
            }
            let Some(v) = devices[d].attr(attr) else {
                continue 'cand;
            };
            for &o in rs.iter().filter(|o| **o < r) {
                if devices[chosen[o]].attr(attr) != Some(v) {
                    continue 'cand;
                }
            }
        }
        chosen.push(d);
        let go_on = walk(candidates, cons, devices, ordered, chosen, count, visit);
        chosen.pop();
        if !go_on {
            return false;
        }
    }
    true
}

/// Request pairs whose devices may be taken in index order without losing an
/// allocation up to renaming: pairs `(gpu-i, nic-i)` with the same selectors and the
/// same constraint attribute as pair `(gpu-j, nic-j)`, as [`dra_claim`] builds them.
pub fn interchangeable_gpu_requests(claim: &DeviceClaim) -> Vec<(usize, usize)> {
    let key = |i: usize| -> Option<(String, String, String)> {
        let g = claim.requests.get(2 * i)?;
        let n = claim.requests.get(2 * i + 1)?;
        let attr = claim
            .constraints
            .iter()
            .find(|c| c.requests.contains(&g.name))
            .map(|c| {
                // Only plain pairs are interchangeable.
                if c.requests.len() == 2 && c.requests.contains(&n.name) {
                    c.match_attribute.clone()
                } else {
                    format!("?{}", c.requests.join(","))
                }
            })
            .unwrap_or_default();
        let sel = |r: &DeviceRequest| {
            format!("{}|{:?}", r.exactly.device_class_name, r.exactly.selectors)
        };
        Some((sel(g), sel(n), attr))
    };
    let pairs = claim.requests.len() / 2;
    let mut out = Vec::new();
    for j in 1..pairs {
        let i = j - 1;
        if key(i).is_some() && key(i) == key(j) && !key(i).is_some_and(|k| k.2.starts_with('?')) {
            out.push((2 * i, 2 * j));
        }
    }
    out
}

/// The ResourceSlices the three drivers would publish for this node, as `kubectl get
/// resourceslices -o json` prints them (a `v1` List; one slice per driver, pool named
/// after the node as the drivers name it). A driver's own attributes appear without
/// its domain, as in its slices.
pub fn resource_slices(topo: &Topology, node: &str) -> serde_json::Value {
    let mut items = Vec::new();
    for driver in DraDriver::ALL {
        let devices = match driver {
            DraDriver::NvidiaGpu => gpu_devices(topo),
            d => nic_devices(topo, d),
        };
        if devices.is_empty() {
            continue;
        }
        let own = format!("{}/", driver.name());
        let devices: Vec<serde_json::Value> = devices
            .iter()
            .map(|d| {
                let attrs: serde_json::Map<String, serde_json::Value> = d
                    .attributes
                    .iter()
                    .map(|(k, v)| {
                        let k = k.strip_prefix(&own).unwrap_or(k).to_string();
                        (k, serde_json::to_value(v).unwrap_or_default())
                    })
                    .collect();
                serde_json::json!({"name": d.name, "attributes": attrs})
            })
            .collect();
        items.push(serde_json::json!({
            "apiVersion": API_VERSION,
            "kind": "ResourceSlice",
            "metadata": {"name": format!("{node}-{}", driver.name().replace('.', "-"))},
            "spec": {
                "driver": driver.name(),
                "nodeName": node,
                "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                "devices": devices,
            },
        }));
    }
    serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items})
}
