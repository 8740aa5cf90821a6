//! Kubernetes configuration from the node's real topology: resource pools for
//! k8s-rdma-shared-dev-plugin and sriov-network-device-plugin (one per compute rail,
//! or per PCIe switch), Node Feature Discovery labels, and a Pod or Job that asks for
//! GPUs with their rails.
//!
//! Which ports are rails comes from the NCCL plan ([`crate::view::rails`]): storage,
//! front-end and down ports are left out unless asked for. Every generator is a pure
//! function of the [`Topology`] returning serde values; the notes beside each value
//! are facts for the reader (the CLI writes them as YAML comments).
//!
//! The plugins' own rules are kept here: k8s-rdma-shared-dev-plugin resource names
//! match `^[a-zA-Z0-9_]+$` and are unique, `rdmaHcaMax` ≥ 0, every entry has
//! selectors; sriov-network-device-plugin names are unique per prefix and use no
//! hyphen (its README), `pfNames` VF ranges are `<pf>#<i>,<a>-<b>`. NFD label names
//! and values follow the Kubernetes label syntax.

use crate::checks::audit::SharedPools;
pub use crate::checks::audit::SharedSelectors;
use crate::model::{NetnsMode, Topology};
use crate::parse::{LinkLayer, PciAddr};
use crate::view::ViewError;
use crate::view::rails::{HcaPort, NodeRails};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// A generated value and the facts behind it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Generated<T> {
    pub value: T,
    /// One line each: the node facts and choices a reader should see (YAML comments).
    pub notes: Vec<String>,
}

// ---------------------------------------------------------------------------------
// Kubernetes objects (only the fields generated here)
// ---------------------------------------------------------------------------------

/// `metadata`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectMeta {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

/// A `v1` ConfigMap.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConfigMap {
    pub api_version: String,
    pub kind: String,
    pub metadata: ObjectMeta,
    pub data: BTreeMap<String, String>,
}

impl ConfigMap {
    /// A ConfigMap holding `value` as pretty JSON under `key`.
    pub fn with_json<T: Serialize>(
        name: &str,
        namespace: &str,
        key: &str,
        value: &T,
    ) -> Result<Self, ViewError> {
        let mut text = serde_json::to_string_pretty(value)
            .map_err(|e| ViewError::Invalid(format!("cannot serialize {key}: {e}")))?;
        text.push('\n');
        Ok(Self {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            metadata: ObjectMeta {
                name: name.into(),
                namespace: Some(namespace.into()),
                ..Default::default()
            },
            data: BTreeMap::from([(key.to_string(), text)]),
        })
    }
}

// ---------------------------------------------------------------------------------
// Names
// ---------------------------------------------------------------------------------

fn is_alnum(c: char) -> bool {
    c.is_ascii_alphanumeric()
}

/// A label value: empty, or at most 63 of `[A-Za-z0-9._-]` with an alphanumeric
/// first and last character.
pub fn is_label_value(v: &str) -> bool {
    v.is_empty() || is_label_name_part(v)
}

/// The name part of a qualified name: 1–63 of `[A-Za-z0-9._-]`, alphanumeric at both
/// ends.
fn is_label_name_part(n: &str) -> bool {
    n.len() <= 63
        && n.starts_with(is_alnum)
        && n.ends_with(is_alnum)
        && n.chars()
            .all(|c| is_alnum(c) || matches!(c, '-' | '_' | '.'))
}

/// A DNS subdomain (RFC 1123): at most 253 characters, dot-separated labels of
/// lowercase letters, digits and `-`, alphanumeric at both ends.
pub fn is_dns_subdomain(s: &str) -> bool {
    s.len() <= 253
        && !s.is_empty()
        && s.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && l.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
                && l.ends_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
                && l.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        })
}

/// A label key: `[prefix/]name`, the prefix a DNS subdomain.
pub fn is_label_key(k: &str) -> bool {
    match k.rsplit_once('/') {
        Some((prefix, name)) => is_dns_subdomain(prefix) && is_label_name_part(name),
        None => is_label_name_part(k),
    }
}

/// NFD's nfd-master drops labels in `kubernetes.io` and `*.kubernetes.io`, except these.
const NFD_ALLOWED_K8S_NS: [&str; 2] = ["feature.node.kubernetes.io", "profile.node.kubernetes.io"];

fn check_label_prefix(prefix: &str) -> Result<(), ViewError> {
    if !is_dns_subdomain(prefix) {
        return Err(ViewError::Invalid(format!(
            "label prefix {prefix:?} is not a DNS subdomain (lowercase letters, digits, '-' and '.', at most 253 characters)"
        )));
    }
    let k8s = prefix == "kubernetes.io" || prefix.ends_with(".kubernetes.io");
    if k8s && !NFD_ALLOWED_K8S_NS.contains(&prefix) {
        return Err(ViewError::Invalid(format!(
            "label prefix {prefix:?}: NFD denies kubernetes.io namespaces other than {}",
            NFD_ALLOWED_K8S_NS.join(" and ")
        )));
    }
    Ok(())
}

/// `[a-zA-Z0-9_]` only (every other character becomes `_`), ending in a letter or
/// digit: the plugins take a trailing `_`, but Kubernetes resource names must end
/// alphanumeric.
fn resource_word(s: &str) -> String {
    let w: String = s
        .chars()
        .map(|c| if is_alnum(c) || c == '_' { c } else { '_' })
        .collect();
    w.trim_end_matches('_').to_string()
}

/// `kind_<netdev>` as a resource name.
fn pool_base(kind: &str, netdev: &str) -> String {
    format!("{kind}_{}", resource_word(netdev))
        .trim_end_matches('_')
        .to_string()
}

/// `base`, or `base_2`, `base_3`, … when taken.
fn unique(base: String, taken: &mut BTreeSet<String>) -> String {
    let mut name = base.clone();
    let mut n = 2;
    while !taken.insert(name.clone()) {
        name = format!("{base}_{n}");
        n += 1;
    }
    name
}

/// A DNS-1123 label for a Multus network from a pool name.
fn network_name(pool: &str) -> String {
    let s: String = pool
        .to_ascii_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let s = s.trim_matches('-');
    s[..s.len().min(63)].trim_end_matches('-').to_string()
}

// ---------------------------------------------------------------------------------
// Describing rails
// ---------------------------------------------------------------------------------

fn link_word(l: Option<LinkLayer>) -> &'static str {
    match l {
        Some(LinkLayer::InfiniBand) => "InfiniBand",
        Some(LinkLayer::Ethernet) => "Ethernet (RoCE)",
        _ => "unknown link layer",
    }
}

fn gbps(v: f64) -> String {
    format!("{v}")
}

/// `mlx5_0:1 (0000:18:00.0, ibp24s0, InfiniBand 400 Gb/s, NUMA 0)`.
fn describe_port(p: &HcaPort) -> String {
    let mut parts = Vec::new();
    if let Some(a) = p.pci {
        parts.push(a.to_string());
    }
    if let Some(n) = &p.netdev {
        parts.push(n.clone());
    }
    let mut link = link_word(p.link_layer).to_string();
    if let Some(r) = p.rate_gbps {
        link.push_str(&format!(" {} Gb/s", gbps(r)));
    }
    parts.push(link);
    if let Some(n) = p.numa_node {
        parts.push(format!("NUMA {n}"));
    }
    format!("{} ({})", p.label, parts.join(", "))
}

/// `for GPU 0000:1b:00.0 at PXB`.
fn describe_gpus(p: &HcaPort) -> String {
    if p.gpus.is_empty() {
        return "no GPU prefers it".to_string();
    }
    let gpus: Vec<String> = p.gpus.iter().map(PciAddr::to_string).collect();
    match p.gpu_class {
        Some(c) => format!("for GPU {} at {c}", gpus.join(", ")),
        None => format!("for GPU {}", gpus.join(", ")),
    }
}

/// The ports a pool generator considers: the rails, then (when asked) the other ports
/// of PCI-backed HCAs with the reason they are not rails.
fn candidate_ports(rails: &NodeRails, include_excluded: bool) -> Vec<(&HcaPort, Option<&str>)> {
    let mut v: Vec<(&HcaPort, Option<&str>)> =
        rails.rails.iter().map(|r| (&r.port, None)).collect();
    if include_excluded {
        v.extend(
            rails
                .left_out
                .iter()
                .map(|l| (&l.port, Some(l.reason.as_str()))),
        );
    }
    v
}

fn rail_word(rails: &NodeRails, p: &HcaPort) -> String {
    match rails.rails.iter().find(|r| r.port.label == p.label) {
        Some(r) => format!("rail {}", r.index),
        None => "not a rail".to_string(),
    }
}

fn node_summary(topo: &Topology, rails: &NodeRails) -> String {
    let mut s = format!(
        "node: {} GPU{}, {} compute rail{}",
        topo.gpus.len(),
        if topo.gpus.len() == 1 { "" } else { "s" },
        rails.rails.len(),
        if rails.rails.len() == 1 { "" } else { "s" }
    );
    if !rails.rails.is_empty() {
        s.push_str(&format!(" ({}", link_word(rails.link_layer())));
        if let Some(r) = rails.min_rate_gbps() {
            s.push_str(&format!(", slowest {} Gb/s", gbps(r)));
        }
        s.push(')');
    }
    if let Some(c) = rails.worst_gpu_class() {
        s.push_str(&format!(", worst GPU-rail path {c}"));
    }
    s.push_str(&format!(
        ", RDMA netns mode {}",
        match topo.host.rdma_netns_mode {
            Some(NetnsMode::Shared) => "shared",
            Some(NetnsMode::Exclusive) => "exclusive",
            None => "unknown",
        }
    ));
    s.push_str(if topo.host.peermem.is_empty() {
        ", no GPUDirect RDMA peer-memory module"
    } else {
        ", GPUDirect RDMA peer memory loaded"
    });
    s
}

fn container_note(topo: &Topology) -> Option<String> {
    let view = crate::view::container::ContainerView::of(topo);
    view.context.is_container().then(|| {
        format!(
            "the root is a {}'s view: this describes the devices it lists, read as the node's",
            view.context
        )
    })
}

// ---------------------------------------------------------------------------------
// k8s-rdma-shared-dev-plugin
// ---------------------------------------------------------------------------------

/// Options of [`rdma_shared_dev_plugin`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SharedDevPluginOptions {
    /// Pods that may share one pool at once (`rdmaHcaMax`).
    pub rdma_hca_max: u32,
    /// `resourcePrefix`; `None` keeps the plugin's default, `rdma`.
    pub resource_prefix: Option<String>,
    /// Also make pools of the ports the plan leaves out (storage, front-end, down).
    pub include_excluded: bool,
    /// `periodicUpdateInterval` in seconds; `None` keeps the plugin's 60.
    pub periodic_update_interval: Option<u32>,
}

impl Default for SharedDevPluginOptions {
    /// `rdmaHcaMax` 63, as the NVIDIA Network Operator sets it: a RoCE port has 128 GID
    /// entries (nccl.md, ecosystem.md C.1), and each pod's macvlan takes a v1 and a v2.
    fn default() -> Self {
        Self {
            rdma_hca_max: 63,
            resource_prefix: None,
            include_excluded: false,
            periodic_update_interval: None,
        }
    }
}

/// One `configList` entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SharedResource {
    pub resource_name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_prefix: Option<String>,
    /// Missing reads as 0, as the plugin's Go struct does (a pool of no slots).
    #[serde(default)]
    pub rdma_hca_max: u32,
    /// Deprecated netdev list, which the plugin takes as `selectors.ifNames`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<String>,
    #[serde(default, skip_serializing_if = "SharedSelectors::is_empty")]
    pub selectors: SharedSelectors,
}

impl SharedResource {
    /// The full resource name: `rdma/<name>`, or `<resourcePrefix>/<name>`.
    pub fn full_name(&self) -> String {
        let prefix = self
            .resource_prefix
            .as_deref()
            .filter(|p| !p.is_empty())
            .unwrap_or("rdma");
        format!("{prefix}/{}", self.resource_name)
    }

    /// The selectors the plugin applies: `selectors`, or `devices` as ifNames.
    pub fn effective_selectors(&self) -> SharedSelectors {
        if self.selectors.is_empty() {
            SharedSelectors {
                if_names: self.devices.clone(),
                ..SharedSelectors::default()
            }
        } else {
            self.selectors.clone()
        }
    }
}

/// The plugin's `config.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SharedDevPluginConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub periodic_update_interval: Option<u32>,
    pub config_list: Vec<SharedResource>,
}

impl SharedDevPluginConfig {
    /// Every pool with the selectors the plugin applies, as `k8s audit` places the
    /// plugin's slots.
    pub fn pools(&self) -> SharedPools {
        self.config_list
            .iter()
            .map(|r| (r.full_name(), r.effective_selectors()))
            .collect()
    }

    /// The plugin's `ValidateConfigs` rules: a non-empty list, names of
    /// `[a-zA-Z0-9_]`, unique, and selectors or (deprecated) `devices`, not both.
    ///
    /// # Errors
    /// The first rule broken.
    pub fn validate(&self) -> Result<(), ViewError> {
        if self.config_list.is_empty() {
            return Err(ViewError::Invalid("configList is empty".into()));
        }
        let mut seen = BTreeSet::new();
        for r in &self.config_list {
            let n = &r.resource_name;
            if n.is_empty() || !n.chars().all(|c| is_alnum(c) || c == '_') {
                return Err(ViewError::Invalid(format!(
                    "resourceName {n:?} does not match ^[a-zA-Z0-9_]+$"
                )));
            }
            if !seen.insert(n.as_str()) {
                return Err(ViewError::Invalid(format!("resourceName {n:?} repeats")));
            }
            match (r.selectors.is_empty(), r.devices.is_empty()) {
                (true, true) => {
                    return Err(ViewError::Invalid(format!(
                        "{n}: neither selectors nor devices"
                    )));
                }
                (false, false) => {
                    return Err(ViewError::Invalid(format!(
                        "{n}: both selectors and devices"
                    )));
                }
                _ => {}
            }
        }
        Ok(())
    }
}

/// A pool and the ports in it.
#[derive(Debug, Clone)]
struct Pool<R> {
    resource: R,
    ports: Vec<String>,
}

/// What a pool generator made: the pools, notes for the reader, and why candidate
/// ports got no pool (also among the notes).
#[derive(Debug, Clone)]
struct Pools<R> {
    pools: Vec<Pool<R>>,
    notes: Vec<String>,
    skipped: Vec<String>,
}

fn shared_pools(
    topo: &Topology,
    rails: &NodeRails,
    opts: &SharedDevPluginOptions,
) -> Pools<SharedResource> {
    let mut notes = Vec::new();
    let mut skipped = Vec::new();
    let mut taken = BTreeSet::new();
    let mut pools = Vec::new();
    for (p, left_out) in candidate_ports(rails, opts.include_excluded) {
        let Some(ifname) = p.pci_netdev.as_ref().or(p.netdev.as_ref()) else {
            skipped.push(format!(
                "{}: {} has no netdev, and the plugin selects devices by netdev name only: no pool",
                rail_word(rails, p),
                describe_port(p)
            ));
            continue;
        };
        let name = unique(pool_base("hca", ifname), &mut taken);
        let why = match left_out {
            Some(r) => format!("not a compute rail ({r})"),
            None => describe_gpus(p),
        };
        // A bond's port netdev is the bond; the plugin sees the PCI function's own.
        let selected = match &p.netdev {
            Some(n) if n != ifname => {
                format!(
                    ", selected by {ifname} (the PCI function's netdev, which the plugin reads)"
                )
            }
            _ => String::new(),
        };
        let resource = SharedResource {
            resource_name: name,
            resource_prefix: opts.resource_prefix.clone(),
            rdma_hca_max: opts.rdma_hca_max,
            devices: Vec::new(),
            selectors: SharedSelectors {
                if_names: vec![ifname.clone()],
                ..SharedSelectors::default()
            },
        };
        notes.push(format!(
            "{}: {}, {}{selected}, {why}",
            resource.full_name(),
            rail_word(rails, p),
            describe_port(p)
        ));
        pools.push(Pool {
            resource,
            ports: vec![p.label.clone()],
        });
    }
    if !opts.include_excluded {
        for l in &rails.left_out {
            notes.push(format!(
                "left out {}: {} (--include-excluded adds it)",
                l.port.label, l.reason
            ));
        }
    }
    if topo.host.rdma_netns_mode == Some(NetnsMode::Exclusive) {
        notes.push(
            "the RDMA netns mode is exclusive: k8s-rdma-shared-dev-plugin refuses to start in that mode"
                .into(),
        );
    }
    notes.push(
        "the plugin advertises its pools without a NUMA node, so the kubelet Topology Manager cannot align them with GPUs; request the pool of each GPU's rail"
            .into(),
    );
    notes.extend(skipped.iter().cloned());
    Pools {
        pools,
        notes,
        skipped,
    }
}

/// The `config.json` of k8s-rdma-shared-dev-plugin: one pool per compute rail, each
/// selecting its netdev by name.
///
/// # Errors
/// When no port can make a pool (the plugin refuses an empty `configList`), or the
/// plan cannot be computed.
pub fn rdma_shared_dev_plugin(
    topo: &Topology,
    opts: &SharedDevPluginOptions,
) -> Result<Generated<SharedDevPluginConfig>, ViewError> {
    let rails = NodeRails::of(topo)?;
    let Pools {
        pools,
        mut notes,
        skipped,
    } = shared_pools(topo, &rails, opts);
    if pools.is_empty() {
        return Err(ViewError::Invalid(no_pool_reason(
            topo,
            &rails,
            "compute rail with a netdev",
            &skipped,
        )));
    }
    let config = SharedDevPluginConfig {
        periodic_update_interval: opts.periodic_update_interval,
        config_list: pools.into_iter().map(|p| p.resource).collect(),
    };
    config.validate()?;
    notes.insert(0, node_summary(topo, &rails));
    notes.extend(container_note(topo));
    Ok(Generated {
        value: config,
        notes,
    })
}

/// `a; b; c; … (n in all)`.
fn some_of(items: &[String]) -> String {
    const SHOWN: usize = 4;
    if items.len() <= SHOWN {
        items.join("; ")
    } else {
        format!("{}; … ({} in all)", items[..SHOWN].join("; "), items.len())
    }
}

fn no_pool_reason(topo: &Topology, rails: &NodeRails, what: &str, skipped: &[String]) -> String {
    let mut s = format!("no {what} on this node, so no resource pool");
    if !rails.rdma_capable {
        s.push_str(" (no PCI RDMA device)");
    }
    if !skipped.is_empty() {
        s.push_str(&format!("; {}", some_of(skipped)));
    }
    if !rails.left_out.is_empty() {
        let why: Vec<String> = rails
            .left_out
            .iter()
            .map(|l| format!("{}: {}", l.port.label, l.reason))
            .collect();
        s.push_str(&format!("; left out of the rails: {}", some_of(&why)));
    }
    if let Some(n) = container_note(topo) {
        s.push_str(&format!("; {n}"));
    }
    s
}

// ---------------------------------------------------------------------------------
// sriov-network-device-plugin
// ---------------------------------------------------------------------------------

/// How VF pools are cut.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PoolBy {
    /// One pool per rail: a pod asks for the VF of its GPU's rail.
    #[default]
    Rail,
    /// One pool per PCIe switch: the rails under one switch share a pool.
    Switch,
}

/// Options of [`sriov_device_plugin`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SriovDpOptions {
    /// `resourcePrefix` of every pool (the plugin's own default is `intel.com`).
    pub resource_prefix: String,
    pub pool_by: PoolBy,
    /// Also make pools of the ports the plan leaves out.
    pub include_excluded: bool,
}

impl Default for SriovDpOptions {
    fn default() -> Self {
        Self {
            resource_prefix: "nvidia.com".into(),
            pool_by: PoolBy::Rail,
            include_excluded: false,
        }
    }
}

/// One `selectors` entry of a `netDevice` resource.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SriovSelectors {
    pub vendors: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<String>,
    pub pf_names: Vec<String>,
    pub is_rdma: bool,
}

/// One `resourceList` entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SriovResource {
    pub resource_name: String,
    pub resource_prefix: String,
    pub device_type: String,
    pub selectors: Vec<SriovSelectors>,
}

/// The plugin's `config.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SriovDpConfig {
    pub resource_list: Vec<SriovResource>,
}

impl SriovDpConfig {
    /// The plugin's rules: names of `[a-zA-Z0-9_]` (its code also takes `-`, its
    /// README advises against), `prefix/name` unique, a known `deviceType`, and
    /// selectors whose `pfNames` parse.
    ///
    /// # Errors
    /// The first rule broken.
    pub fn validate(&self) -> Result<(), ViewError> {
        let mut seen = BTreeSet::new();
        for r in &self.resource_list {
            let n = &r.resource_name;
            if n.is_empty() || !n.chars().all(|c| is_alnum(c) || c == '_') {
                return Err(ViewError::Invalid(format!(
                    "resourceName {n:?} does not match ^[a-zA-Z0-9_]+$"
                )));
            }
            if !seen.insert(format!("{}/{n}", r.resource_prefix)) {
                return Err(ViewError::Invalid(format!(
                    "{}/{n} repeats",
                    r.resource_prefix
                )));
            }
            if !matches!(
                r.device_type.as_str(),
                "netDevice" | "accelerator" | "auxNetDevice"
            ) {
                return Err(ViewError::Invalid(format!(
                    "{n}: deviceType {:?}",
                    r.device_type
                )));
            }
            if r.selectors.is_empty() || r.selectors.iter().any(|s| s.pf_names.is_empty()) {
                return Err(ViewError::Invalid(format!("{n}: no pfNames selector")));
            }
            for pf in r.selectors.iter().flat_map(|s| &s.pf_names) {
                parse_pf_name(pf)?;
            }
        }
        Ok(())
    }
}

/// `pf#0-3,5` into the PF and its VF indexes (all, when there is no `#`).
///
/// # Errors
/// When a range does not parse, as the plugin would drop the selector.
pub fn parse_pf_name(s: &str) -> Result<(&str, Option<Vec<u32>>), ViewError> {
    let bad = || ViewError::Invalid(format!("pfNames entry {s:?} is not <pf>[#<i>,<a>-<b>…]"));
    let Some((pf, ranges)) = s.split_once('#') else {
        return if s.is_empty() {
            Err(bad())
        } else {
            Ok((s, None))
        };
    };
    if pf.is_empty() {
        return Err(bad());
    }
    let mut out = Vec::new();
    for part in ranges.split(',') {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (u32, u32) =
                    (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?);
                if a > b {
                    return Err(bad());
                }
                out.extend(a..=b);
            }
            None => out.push(part.parse().map_err(|_| bad())?),
        }
    }
    Ok((pf, Some(out)))
}

/// `0-7`, `0,2-5`.
fn vf_ranges(indexes: &[u32]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < indexes.len() {
        let start = indexes[i];
        let mut end = start;
        while i + 1 < indexes.len() && indexes[i + 1] == end + 1 {
            i += 1;
            end = indexes[i];
        }
        parts.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
        i += 1;
    }
    parts.join(",")
}

/// A rail PF's `pfNames` entry, and what a reader should know about its VFs.
fn pf_entry(p: &HcaPort, pf: &str) -> (String, Vec<String>) {
    let mut notes = Vec::new();
    let Some(v) = &p.sriov else {
        return (pf.to_string(), notes);
    };
    let entry = if v.vf_indexes.is_empty() {
        notes.push(format!(
            "{pf}: sriov_numvfs is 0 (up to {} VFs): create them before the device plugin starts, it does not rescan (/sys/bus/pci/devices/{}/sriov_numvfs)",
            v.total_vfs,
            p.pci.map(|a| a.to_string()).unwrap_or_default()
        ));
        pf.to_string()
    } else {
        format!("{pf}#{}", vf_ranges(&v.vf_indexes))
    };
    if !v.vf_indexes.is_empty() && v.rdma_vfs == 0 {
        notes.push(format!(
            "{pf}: its VFs have no RDMA device (driver not bound, or RDMA disabled on them), so isRdma matches none"
        ));
    }
    (entry, notes)
}

fn sriov_pools(rails: &NodeRails, opts: &SriovDpOptions) -> Pools<SriovResource> {
    let mut notes = Vec::new();
    let mut skipped = Vec::new();
    // Ports that can give VFs, grouped per pool.
    // (port, why it is not a rail, PF netdev), grouped by pool key.
    type Member<'a> = (&'a HcaPort, Option<&'a str>, &'a str);
    let mut groups: Vec<(Option<PciAddr>, Vec<Member>)> = Vec::new();
    for (p, left_out) in candidate_ports(rails, opts.include_excluded) {
        let (Some(_), Some(pf)) = (&p.sriov, p.pci_netdev.as_deref()) else {
            let why = if p.is_vf {
                "it is itself a virtual function (the view of a VM or pod), with no VFs of its own"
            } else if p.sriov.is_none() {
                "its function has no SR-IOV capability (no sriov_totalvfs)"
            } else {
                "its function has no netdev to name in pfNames"
            };
            skipped.push(format!(
                "{}: {}: {why}: no VF pool",
                rail_word(rails, p),
                describe_port(p)
            ));
            continue;
        };
        let key = match opts.pool_by {
            PoolBy::Switch => p.pcie_switch,
            PoolBy::Rail => None,
        };
        match groups.iter_mut().find(|(k, _)| key.is_some() && *k == key) {
            Some((_, g)) => g.push((p, left_out, pf)),
            None => groups.push((key, vec![(p, left_out, pf)])),
        }
    }
    let mut taken = BTreeSet::new();
    let mut pools = Vec::new();
    for (switch_index, (switch, members)) in groups.into_iter().enumerate() {
        let base = match (opts.pool_by, switch) {
            (PoolBy::Switch, _) => format!("vf_switch{switch_index}"),
            (PoolBy::Rail, _) => pool_base("vf", members[0].2),
        };
        let name = unique(base, &mut taken);
        let mut pf_names = Vec::new();
        let mut vendors = BTreeSet::new();
        let mut devices = BTreeSet::new();
        for (p, left_out, pf) in &members {
            let (entry, more) = pf_entry(p, pf);
            pf_names.push(entry.clone());
            notes.extend(more);
            if let Some(v) = &p.sriov {
                match (&v.vf_vendor, &v.vf_device_id) {
                    (Some(ven), Some(dev)) => {
                        vendors.insert(ven.clone());
                        devices.insert(dev.clone());
                    }
                    _ => {
                        vendors.extend(p.vendor.clone());
                    }
                }
            }
            let why = match left_out {
                Some(r) => format!("not a compute rail ({r})"),
                None => describe_gpus(p),
            };
            let under = match switch {
                Some(s) => format!(", under the PCIe switch at {s}"),
                None => String::new(),
            };
            notes.push(format!(
                "{}/{name}: {entry}: {}, {}{under}, {why}",
                opts.resource_prefix,
                rail_word(rails, p),
                describe_port(p)
            ));
        }
        // A pool must not mix VFs with and without a device id: the id selector then
        // matches only some. Keep the ids only when every PF has VFs.
        let all_have_vfs = members
            .iter()
            .all(|(p, _, _)| p.sriov.as_ref().is_some_and(|v| v.vf_device_id.is_some()));
        pools.push(Pool {
            resource: SriovResource {
                resource_name: name,
                resource_prefix: opts.resource_prefix.clone(),
                device_type: "netDevice".into(),
                selectors: vec![SriovSelectors {
                    vendors: vendors.into_iter().collect(),
                    devices: if all_have_vfs {
                        devices.into_iter().collect()
                    } else {
                        Vec::new()
                    },
                    pf_names,
                    is_rdma: true,
                }],
            },
            ports: members.iter().map(|(p, _, _)| p.label.clone()).collect(),
        });
    }
    if !opts.include_excluded {
        for l in &rails.left_out {
            notes.push(format!(
                "left out {}: {} (--include-excluded adds it)",
                l.port.label, l.reason
            ));
        }
    }
    notes.push(
        "each VF is advertised with its NUMA node (excludeTopology is not set), so with topologyManagerPolicy single-numa-node the kubelet keeps VFs and GPUs on one NUMA node; PCIe-switch alignment comes from asking for the pool of the GPU's rail"
            .into(),
    );
    notes.extend(skipped.iter().cloned());
    Pools {
        pools,
        notes,
        skipped,
    }
}

/// The `config.json` of sriov-network-device-plugin: one `netDevice` pool of RDMA
/// VFs per rail (or per PCIe switch), selected by `pfNames` with VF ranges.
///
/// # Errors
/// When no rail's physical function has SR-IOV, or the plan cannot be computed.
pub fn sriov_device_plugin(
    topo: &Topology,
    opts: &SriovDpOptions,
) -> Result<Generated<SriovDpConfig>, ViewError> {
    check_resource_prefix(&opts.resource_prefix)?;
    let rails = NodeRails::of(topo)?;
    let Pools {
        pools,
        mut notes,
        skipped,
    } = sriov_pools(&rails, opts);
    if pools.is_empty() {
        return Err(ViewError::Invalid(no_pool_reason(
            topo,
            &rails,
            "compute rail on an SR-IOV physical function",
            &skipped,
        )));
    }
    let config = SriovDpConfig {
        resource_list: pools.into_iter().map(|p| p.resource).collect(),
    };
    config.validate()?;
    notes.insert(0, node_summary(topo, &rails));
    notes.extend(container_note(topo));
    Ok(Generated {
        value: config,
        notes,
    })
}

fn check_resource_prefix(prefix: &str) -> Result<(), ViewError> {
    if is_dns_subdomain(prefix) {
        Ok(())
    } else {
        Err(ViewError::Invalid(format!(
            "resource prefix {prefix:?} is not a DNS subdomain"
        )))
    }
}

// ---------------------------------------------------------------------------------
// Node Feature Discovery
// ---------------------------------------------------------------------------------

/// Options of [`nfd_labels`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NfdOptions {
    /// Label namespace (`rdmatopo.io`).
    pub prefix: String,
}

impl Default for NfdOptions {
    fn default() -> Self {
        Self {
            prefix: "rdmatopo.io".into(),
        }
    }
}

/// Labels a scheduler can use, `<prefix>/<name>` → value:
///
/// | name | value |
/// |---|---|
/// | `rdma.capable` | a PCI RDMA device exists |
/// | `rdma.rails` | compute rails (ports NCCL would use) |
/// | `rdma.rails-numa<N>` | rails on NUMA node N |
/// | `rdma.link-layer` | `infiniband` or `ethernet`, when the rails agree |
/// | `rdma.link-speed-gbps` | the slowest rail's rate |
/// | `rdma.gid-index` | the rails' RoCE GID index, when they agree |
/// | `rdma.netns-mode` | `shared` or `exclusive` |
/// | `gpu.count` | NVIDIA GPUs |
/// | `gpu-rail.worst-path` | worst path class between a GPU and its rail (`PIX`…`SYS`) |
/// | `gpu-rail.unpaired-gpus` | GPUs without a rail |
/// | `gpudirect-rdma.peermem` | a peer-memory module is loaded (`nvidia_peermem`, `nv_peer_mem`) |
/// | `gpudirect-rdma.ready` | peer memory, and every GPU has a rail at PXB or closer |
///
/// DMA-BUF GPUDirect (no peer-memory module) cannot be seen in sysfs: `ready=false`
/// with `peermem=false` may still work through DMA-BUF.
///
/// # Errors
/// A prefix that is not a DNS subdomain or that NFD denies, or no plan.
pub fn nfd_labels(
    topo: &Topology,
    opts: &NfdOptions,
) -> Result<Generated<BTreeMap<String, String>>, ViewError> {
    check_label_prefix(&opts.prefix)?;
    let rails = NodeRails::of(topo)?;
    let mut labels: BTreeMap<String, String> = BTreeMap::new();
    let mut put = |k: &str, v: String| {
        labels.insert(format!("{}/{k}", opts.prefix), v);
    };
    put("rdma.capable", rails.rdma_capable.to_string());
    put("rdma.rails", rails.rails.len().to_string());
    let mut per_numa: BTreeMap<u32, usize> = BTreeMap::new();
    for r in &rails.rails {
        if let Some(n) = r.port.numa_node {
            *per_numa.entry(n).or_default() += 1;
        }
    }
    for (n, count) in &per_numa {
        put(&format!("rdma.rails-numa{n}"), count.to_string());
    }
    if !rails.rails.is_empty() {
        match rails.link_layer() {
            Some(LinkLayer::InfiniBand) => put("rdma.link-layer", "infiniband".into()),
            Some(LinkLayer::Ethernet) => put("rdma.link-layer", "ethernet".into()),
            _ => {}
        }
        if let Some(r) = rails.min_rate_gbps() {
            put("rdma.link-speed-gbps", gbps(r));
        }
    }
    // The rails' right RoCE GID index when they agree, whether or not NCCL needs
    // NCCL_IB_GID_INDEX to find it.
    let gid_indexes: BTreeSet<u32> = rails
        .rails
        .iter()
        .filter_map(|r| crate::view::gid::choose_gid(topo, &r.port.device, r.port.port))
        .map(|g| g.index)
        .collect();
    if let [only] = gid_indexes.iter().collect::<Vec<_>>().as_slice() {
        put("rdma.gid-index", only.to_string());
    }
    match topo.host.rdma_netns_mode {
        Some(NetnsMode::Shared) => put("rdma.netns-mode", "shared".into()),
        Some(NetnsMode::Exclusive) => put("rdma.netns-mode", "exclusive".into()),
        None => {}
    }
    put("gpu.count", topo.gpus.len().to_string());
    let unpaired = rails.gpus.iter().filter(|g| g.rails.is_empty()).count();
    if !topo.gpus.is_empty() {
        if let Some(c) = rails.worst_gpu_class() {
            put("gpu-rail.worst-path", c.to_string());
        }
        put("gpu-rail.unpaired-gpus", unpaired.to_string());
    }
    let peermem = !topo.host.peermem.is_empty();
    put("gpudirect-rdma.peermem", peermem.to_string());
    let ready = peermem
        && !topo.gpus.is_empty()
        && unpaired == 0
        && rails
            .gpus
            .iter()
            .all(|g| g.class.is_some_and(|c| c.allows_gdr()));
    put("gpudirect-rdma.ready", ready.to_string());

    for (k, v) in &labels {
        if !is_label_key(k) || !is_label_value(v) {
            return Err(ViewError::Invalid(format!(
                "label {k}={v} is not valid Kubernetes label syntax"
            )));
        }
    }
    let mut notes = vec![node_summary(topo, &rails)];
    for g in &rails.gpus {
        let rail_list: Vec<String> = g
            .rails
            .iter()
            .filter_map(|i| rails.rails.get(*i as usize))
            .map(|r| r.port.label.clone())
            .collect();
        notes.push(match (rail_list.is_empty(), g.class) {
            (true, _) => format!("GPU {}: no rail", g.pci),
            (false, Some(c)) => format!("GPU {}: rail {} at {c}", g.pci, rail_list.join(", ")),
            (false, None) => format!("GPU {}: rail {}", g.pci, rail_list.join(", ")),
        });
    }
    // No container note: the node DaemonSet always reads from a pod, on purpose.
    Ok(Generated {
        value: labels,
        notes,
    })
}

/// NFD's local feature file (`features.d/`): comments, an optional
/// `# +expiry-time=<RFC 3339>` directive, then `key=value` lines.
pub fn nfd_feature_file(
    labels: &Generated<BTreeMap<String, String>>,
    expiry: Option<&str>,
) -> String {
    let mut s = String::new();
    for n in &labels.notes {
        s.push_str("# ");
        s.push_str(&n.replace(['\n', '\r'], " "));
        s.push('\n');
    }
    if let Some(t) = expiry {
        s.push_str(&format!("# +expiry-time={t}\n"));
    }
    for (k, v) in &labels.value {
        s.push_str(&format!("{k}={v}\n"));
    }
    s
}
// ---------------------------------------------------------------------------------
// Pod / Job
// ---------------------------------------------------------------------------------

/// Which device plugin gives the pod its rails.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PodNetwork {
    /// k8s-rdma-shared-dev-plugin pools (`rdma/hca_<netdev>`).
    #[default]
    RdmaShared,
    /// sriov-network-device-plugin VF pools, each with a Multus network.
    Sriov,
}

/// What to generate.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WorkloadKind {
    #[default]
    Pod,
    Job,
}

/// Options of [`pod`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodOptions {
    pub gpus: u32,
    pub network: PodNetwork,
    pub kind: WorkloadKind,
    pub name: String,
    pub image: String,
    /// Extended resource of the GPUs.
    pub gpu_resource: String,
    /// How the shared plugin's pools are named (as in [`rdma_shared_dev_plugin`]).
    pub shared: SharedDevPluginOptions,
    /// How the SR-IOV pools are named (as in [`sriov_device_plugin`]).
    pub sriov: SriovDpOptions,
    /// Whole CPUs; `None` sizes them from the node ([`pod`]).
    pub cpus: Option<u32>,
    /// Memory as a Kubernetes quantity (`64Gi`); `None` sizes it from the node.
    pub memory: Option<String>,
}

impl Default for PodOptions {
    fn default() -> Self {
        Self {
            gpus: 1,
            network: PodNetwork::RdmaShared,
            kind: WorkloadKind::Pod,
            name: "rdma-workload".into(),
            image: "example.invalid/your-image:latest".into(),
            gpu_resource: "nvidia.com/gpu".into(),
            shared: SharedDevPluginOptions::default(),
            sriov: SriovDpOptions::default(),
            cpus: None,
            memory: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Capabilities {
    pub add: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SecurityContext {
    pub capabilities: Capabilities,
}

/// A resource quantity: a count (GPUs, pool slots, whole CPUs) or a number with a
/// unit (memory, `247Gi`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Quantity {
    Count(u64),
    Text(String),
}

impl From<u32> for Quantity {
    fn from(n: u32) -> Self {
        Self::Count(n.into())
    }
}

impl std::fmt::Display for Quantity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Count(n) => write!(f, "{n}"),
            Self::Text(s) => f.write_str(s),
        }
    }
}

/// A container's `resources`: the generated ones always have requests equal to
/// limits, so that the pod is Guaranteed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resources {
    pub limits: BTreeMap<String, Quantity>,
    #[serde(default)]
    pub requests: BTreeMap<String, Quantity>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VolumeMount {
    pub name: String,
    pub mount_path: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Container {
    pub name: String,
    pub image: String,
    pub resources: Resources,
    pub security_context: SecurityContext,
    pub volume_mounts: Vec<VolumeMount>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EmptyDir {
    pub medium: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Volume {
    pub name: String,
    pub empty_dir: EmptyDir,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodSpec {
    pub restart_policy: String,
    pub containers: Vec<Container>,
    pub volumes: Vec<Volume>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PodTemplate {
    pub metadata: ObjectMeta,
    pub spec: PodSpec,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JobSpec {
    pub backoff_limit: u32,
    pub template: PodTemplate,
}

/// A `v1` Pod or a `batch/v1` Job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Workload {
    Pod {
        #[serde(rename = "apiVersion")]
        api_version: String,
        kind: String,
        metadata: ObjectMeta,
        spec: PodSpec,
    },
    Job {
        #[serde(rename = "apiVersion")]
        api_version: String,
        kind: String,
        metadata: ObjectMeta,
        spec: JobSpec,
    },
}

impl Workload {
    /// The pod's spec (a Job's template).
    pub fn pod_spec(&self) -> &PodSpec {
        match self {
            Self::Pod { spec, .. } => spec,
            Self::Job { spec, .. } => &spec.template.spec,
        }
    }

    /// The pod's annotations (a Job's template's).
    pub fn pod_annotations(&self) -> &BTreeMap<String, String> {
        match self {
            Self::Pod { metadata, .. } => &metadata.annotations,
            Self::Job { spec, .. } => &spec.template.metadata.annotations,
        }
    }
}

/// `spec` of a NetworkAttachmentDefinition: the CNI configuration as JSON text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetworkAttachmentSpec {
    pub config: String,
}

/// A Multus `k8s.cni.cncf.io/v1` NetworkAttachmentDefinition (the Network Plumbing
/// Working Group's CRD: github.com/k8snetworkplumbingwg/multi-net-spec).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NetworkAttachmentDefinition {
    pub api_version: String,
    pub kind: String,
    pub metadata: ObjectMeta,
    pub spec: NetworkAttachmentSpec,
}

/// What `k8s pod` writes: the NetworkAttachmentDefinitions the pod names (to apply
/// first), and the Pod or Job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PodManifests {
    pub networks: Vec<NetworkAttachmentDefinition>,
    pub workload: Workload,
}

/// The Multus annotation naming the pod's secondary networks.
pub const MULTUS_NETWORKS: &str = "k8s.v1.cni.cncf.io/networks";
/// The NetworkAttachmentDefinition annotation naming the device plugin resource a
/// network's device comes from (Multus asks the kubelet which device of it the pod got).
pub const NAD_RESOURCE_NAME: &str = "k8s.v1.cni.cncf.io/resourceName";

/// GPUs for a pod of `n`: the first `n` of the lowest NUMA node that has that many,
/// else the first `n` in PCI order.
fn choose_gpus(rails: &NodeRails, n: usize) -> Vec<usize> {
    let mut by_numa: BTreeMap<Option<u32>, Vec<usize>> = BTreeMap::new();
    for (i, g) in rails.gpus.iter().enumerate() {
        by_numa.entry(g.numa_node).or_default().push(i);
    }
    by_numa
        .iter()
        .filter(|(numa, _)| numa.is_some())
        .find(|(_, v)| v.len() >= n)
        .map(|(_, v)| v[..n].to_vec())
        .unwrap_or_else(|| (0..n.min(rails.gpus.len())).collect())
}

/// A Kubernetes quantity as `--memory` takes it: a whole number, bare (bytes) or with
/// a binary (`Ki` … `Ei`) or decimal (`k` … `E`) suffix, not zero.
fn check_memory(q: &str) -> Result<(), ViewError> {
    let digits = q.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let suffix = &q[digits.len()..];
    let ok = !digits.is_empty()
        && digits.chars().all(|c| c.is_ascii_digit())
        && digits.chars().any(|c| c != '0')
        && matches!(
            suffix,
            "" | "Ki" | "Mi" | "Gi" | "Ti" | "Pi" | "Ei" | "k" | "M" | "G" | "T" | "P" | "E"
        );
    if ok {
        Ok(())
    } else {
        Err(ViewError::Argument(format!(
            "memory {q:?} is not a whole Kubernetes quantity such as 64Gi or 500M"
        )))
    }
}

/// The NUMA node of a GPU for sizing: its own, or the only node with CPUs.
fn sizing_node(topo: &Topology, numa: Option<u32>) -> Option<u32> {
    numa.or_else(|| {
        match topo
            .numa_nodes
            .iter()
            .filter(|n| !n.cpus.is_empty())
            .collect::<Vec<_>>()
            .as_slice()
        {
            [only] => Some(only.id),
            _ => None,
        }
    })
}

/// What the pod is sized to, with where each number comes from.
struct PodSize {
    cpus: u32,
    memory: String,
    notes: Vec<String>,
}

/// CPUs and memory of the pod. By default each GPU brings its share of its NUMA
/// node, as `nccl-env` binds local ranks (the node's CPUs split evenly among its
/// GPUs), less one CPU: a pod of every GPU of a node then leaves CPUs there for the
/// kubelet's reservation, which the static CPU manager policy requires to be above
/// zero ("the static policy requires systemreserved.cpu + kubereserved.cpu to be
/// greater than zero", kubernetes pkg/kubelet/cm/cpumanager/cpu_manager.go). Memory
/// is the node's `MemTotal` in the same proportion as the CPUs taken, in whole GiB.
fn pod_size(
    topo: &Topology,
    rails: &NodeRails,
    chosen: &[usize],
    opts: &PodOptions,
) -> Result<PodSize, ViewError> {
    let mut cpus = 0u32;
    let mut mem_kib: Option<u64> = Some(0);
    let mut unknown_cpus: Option<String> = None;
    let mut unknown_mem: Option<String> = None;
    // Each distinct share, with how many of the pod's GPUs bring it.
    let mut how: Vec<(String, u32)> = Vec::new();
    for gi in chosen {
        let g = &rails.gpus[*gi];
        let node = sizing_node(topo, g.numa_node).and_then(|n| topo.numa_node(n));
        let Some(node) = node.filter(|n| !n.cpus.is_empty()) else {
            unknown_cpus.get_or_insert(format!(
                "GPU {}'s NUMA node (or its CPUs) is unknown in this root",
                g.pci
            ));
            mem_kib = None;
            continue;
        };
        let node_cpus = node.cpus.len() as u64;
        let sharing = rails
            .gpus
            .iter()
            .filter(|o| sizing_node(topo, o.numa_node) == Some(node.id))
            .count()
            .max(1) as u64;
        let mine = (node_cpus / sharing).saturating_sub(1).max(1);
        cpus += u32::try_from(mine).unwrap_or(u32::MAX);
        match node.memory_kib {
            Some(total) => {
                if let Some(m) = mem_kib.as_mut() {
                    *m += total * mine / node_cpus;
                }
            }
            None => {
                unknown_mem.get_or_insert(format!(
                    "NUMA node {}'s meminfo is not in this root",
                    node.id
                ));
                mem_kib = None;
            }
        }
        let line = format!(
            "{mine} of NUMA node {}'s {node_cpus} CPUs ({sharing} GPU{} there)",
            node.id,
            if sharing == 1 { "" } else { "s" }
        );
        match how.iter_mut().find(|(l, _)| *l == line) {
            Some((_, k)) => *k += 1,
            None => how.push((line, 1)),
        }
    }
    let mut notes = Vec::new();
    let cpus = match (opts.cpus, unknown_cpus) {
        (Some(n), _) => {
            notes.push(format!("cpu {n}: --cpus"));
            n
        }
        (None, Some(why)) => {
            return Err(ViewError::Argument(format!(
                "cannot size the pod's CPUs: {why}; pass --cpus N (and --memory)"
            )));
        }
        (None, None) => {
            notes.push(format!(
                "cpu {cpus}: each GPU's share of its NUMA node's CPUs (split among its GPUs, as nccl-env binds ranks), one less so a pod of every GPU leaves the kubelet's reserved CPUs free: {}",
                how.iter()
                    .map(|(l, k)| format!("{k} GPU{} × {l}", if *k == 1 { "" } else { "s" }))
                    .collect::<Vec<_>>()
                    .join("; ")
            ));
            cpus
        }
    };
    let memory = match (&opts.memory, mem_kib) {
        (Some(q), _) => {
            check_memory(q)?;
            notes.push(format!("memory {q}: --memory"));
            q.clone()
        }
        (None, Some(kib)) => {
            let gib = (kib / (1024 * 1024)).max(1);
            notes.push(format!(
                "memory {gib}Gi: the NUMA nodes' MemTotal in the proportion of their CPUs the pod takes, in whole GiB"
            ));
            format!("{gib}Gi")
        }
        (None, None) => {
            let why = unknown_mem
                .unwrap_or_else(|| "the GPUs' NUMA nodes are unknown in this root".into());
            return Err(ViewError::Argument(format!(
                "cannot size the pod's memory: {why}; pass --memory QUANTITY (such as 64Gi)"
            )));
        }
    };
    Ok(PodSize {
        cpus,
        memory,
        notes,
    })
}

/// One sriov-cni network for a VF pool: the NetworkAttachmentDefinition and notes.
///
/// sriov-cni reads no MTU from its configuration: it reports the VF's MTU after the
/// move, and on release puts back the MTU the VF had (k8snetworkplumbingwg/sriov-cni
/// pkg/sriov/sriov.go `SetupVF`, `ResetVFConfig`, at 1b7acc5b). So the rail's MTU is
/// set by the `tuning` plugin chained after it, whose `mtu` sets the pod interface's
/// (containernetworking/plugins plugins/meta/tuning/tuning.go, at 3d27709f). An
/// InfiniBand VF takes ib-sriov-cni (`"type": "ib-sriov"`) instead, as NVIDIA's
/// Network Operator documents. IPAM is optional to both (their READMEs) but a RoCE v2
/// GID needs an address: whereabouts (k8snetworkplumbingwg/whereabouts: `range`,
/// `exclude`) hands out the rail's subnet, less this node's address on it.
fn sriov_network(
    name: &str,
    resource: &str,
    ports: &[&HcaPort],
) -> (NetworkAttachmentDefinition, Vec<String>) {
    let mut notes = Vec::new();
    let labels: Vec<&str> = ports.iter().map(|p| p.label.as_str()).collect();
    let ib = ports
        .iter()
        .all(|p| p.link_layer == Some(LinkLayer::InfiniBand));
    let mut first = serde_json::json!({ "type": if ib { "ib-sriov" } else { "sriov" } });
    if ib {
        first["link_state"] = "enable".into();
    }
    let addrs: Vec<(std::net::Ipv4Addr, u8)> = ports
        .iter()
        .flat_map(|p| p.ipv4.iter())
        .filter_map(|a| {
            let (ip, len) = a.split_once('/')?;
            Some((ip.parse().ok()?, len.parse().ok().filter(|l| *l <= 32)?))
        })
        .collect();
    match addrs.first() {
        Some((ip, len)) => {
            let mask = if *len == 0 {
                0
            } else {
                u32::MAX << (32 - u32::from(*len))
            };
            let net = std::net::Ipv4Addr::from(u32::from(*ip) & mask);
            let exclude: Vec<String> = addrs.iter().map(|(a, _)| format!("{a}/32")).collect();
            first["ipam"] = serde_json::json!({
                "type": "whereabouts",
                "range": format!("{net}/{len}"),
                "exclude": exclude,
            });
            notes.push(format!(
                "{name}: whereabouts hands out {net}/{len}, the subnet of {} on this node, less its address: exclude the other nodes' addresses too, or give pods a range of their own",
                labels.join(", ")
            ));
        }
        None => notes.push(format!(
            "{name}: no IPv4 address on {} here, so no IPAM: add one if the VF needs an address (a RoCE v2 GID does)",
            labels.join(", ")
        )),
    }
    let mtus: BTreeSet<u32> = ports.iter().filter_map(|p| p.netdev_mtu).collect();
    let mut plugins = vec![first];
    match mtus.first() {
        Some(mtu) => {
            plugins.push(serde_json::json!({ "type": "tuning", "mtu": mtu }));
            if mtus.len() > 1 {
                notes.push(format!(
                    "{name}: its rails' MTUs differ ({}); the smallest is set",
                    mtus.iter()
                        .map(u32::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
        }
        None => notes.push(format!(
            "{name}: the MTU of {} is unknown here, so the VF keeps the one it has",
            labels.join(", ")
        )),
    }
    let config = serde_json::json!({
        "cniVersion": "0.4.0",
        "name": name,
        "plugins": plugins,
    });
    let nad = NetworkAttachmentDefinition {
        api_version: "k8s.cni.cncf.io/v1".into(),
        kind: "NetworkAttachmentDefinition".into(),
        metadata: ObjectMeta {
            name: name.into(),
            annotations: BTreeMap::from([(NAD_RESOURCE_NAME.to_string(), resource.to_string())]),
            ..Default::default()
        },
        spec: NetworkAttachmentSpec {
            config: config.to_string(),
        },
    };
    (nad, notes)
}

/// A Pod (or Job) asking for `gpus` GPUs and the rails of those GPUs: one
/// `rdma/hca_<netdev>` per rail from the shared plugin, or one VF per rail from the
/// SR-IOV pools with a Multus network each (generated beside it: sriov-cni with the
/// rail's MTU); `IPC_LOCK` (RDMA pins memory), and a memory-backed `/dev/shm` (NCCL's
/// shared-memory transport).
///
/// The pod is Guaranteed: CPU (whole CPUs) and memory requests equal their limits in
/// every container, the QoS rule of kubernetes.io/docs/concepts/workloads/pods/pod-qos/
/// (`ComputePodQOS`, kubernetes pkg/apis/core/helper/qos/qos.go). The static CPU
/// manager gives exclusive CPUs only to "containers in Guaranteed pods with integer CPU
/// requests" (kubernetes.io/docs/tasks/administer-cluster/cpu-management-policies/),
/// so the CPU count is whole; the topology manager aligns those CPUs with the GPUs and
/// VFs. The notes say which GPUs, rails and sizes were assumed and why.
///
/// # Errors
/// Zero GPUs, more GPUs than the node has, a size that cannot be derived and was not
/// given, or no pool for the chosen network.
pub fn pod(topo: &Topology, opts: &PodOptions) -> Result<Generated<PodManifests>, ViewError> {
    let rails = NodeRails::of(topo)?;
    let n = opts.gpus as usize;
    if n == 0 {
        return Err(ViewError::Argument("a pod needs at least one GPU".into()));
    }
    if n > rails.gpus.len() {
        return Err(ViewError::Argument(format!(
            "{n} GPUs asked for, but this node has {}",
            rails.gpus.len()
        )));
    }
    if !is_dns_subdomain(&opts.name) {
        return Err(ViewError::Argument(format!(
            "name {:?} is not a DNS subdomain (lowercase letters, digits, '-', '.')",
            opts.name
        )));
    }
    if opts.cpus == Some(0) {
        return Err(ViewError::Argument(
            "a Guaranteed pod needs at least one whole CPU".into(),
        ));
    }
    let chosen = choose_gpus(&rails, n);
    let size = pod_size(topo, &rails, &chosen, opts)?;
    let mut wanted_ports: Vec<&str> = Vec::new();
    for gi in &chosen {
        for ri in &rails.gpus[*gi].rails {
            if let Some(r) = rails.rails.get(*ri as usize)
                && !wanted_ports.contains(&r.port.label.as_str())
            {
                wanted_ports.push(&r.port.label);
            }
        }
    }

    let mut notes = vec![node_summary(topo, &rails)];
    let mut limits: BTreeMap<String, u32> =
        BTreeMap::from([(opts.gpu_resource.clone(), opts.gpus)]);
    let mut networks: Vec<String> = Vec::new();
    let mut nads: Vec<NetworkAttachmentDefinition> = Vec::new();
    let mut nad_notes: Vec<String> = Vec::new();
    // The resource of each wanted port.
    let mut resource_of: BTreeMap<&str, String> = BTreeMap::new();
    match opts.network {
        PodNetwork::RdmaShared => {
            let Pools { pools, skipped, .. } = shared_pools(topo, &rails, &opts.shared);
            if pools.is_empty() {
                return Err(ViewError::Invalid(no_pool_reason(
                    topo,
                    &rails,
                    "compute rail with a netdev",
                    &skipped,
                )));
            }
            for p in &pools {
                for port in &p.ports {
                    if let Some(w) = wanted_ports.iter().find(|w| *w == port) {
                        let res = p.resource.full_name();
                        resource_of.insert(w, res.clone());
                        *limits.entry(res).or_default() = 1;
                    }
                }
            }
        }
        PodNetwork::Sriov => {
            check_resource_prefix(&opts.sriov.resource_prefix)?;
            let Pools { pools, skipped, .. } = sriov_pools(&rails, &opts.sriov);
            if pools.is_empty() {
                return Err(ViewError::Invalid(no_pool_reason(
                    topo,
                    &rails,
                    "compute rail on an SR-IOV physical function",
                    &skipped,
                )));
            }
            for p in &pools {
                let res = format!(
                    "{}/{}",
                    p.resource.resource_prefix, p.resource.resource_name
                );
                let net = network_name(&p.resource.resource_name);
                let mut used: Vec<&HcaPort> = Vec::new();
                for port in &p.ports {
                    if let Some(w) = wanted_ports.iter().find(|w| *w == port) {
                        resource_of.insert(w, res.clone());
                        *limits.entry(res.clone()).or_default() += 1;
                        networks.push(net.clone());
                        used.extend(
                            rails
                                .rails
                                .iter()
                                .filter(|r| r.port.label == *port)
                                .map(|r| &r.port),
                        );
                    }
                }
                if !used.is_empty() {
                    let (nad, more) = sriov_network(&net, &res, &used);
                    nads.push(nad);
                    nad_notes.extend(more);
                }
            }
        }
    }

    for gi in &chosen {
        let g = &rails.gpus[*gi];
        let numa = g.numa_node.map_or("?".to_string(), |n| n.to_string());
        let mut line = format!("GPU {} (NUMA {numa})", g.pci);
        if g.rails.is_empty() {
            line.push_str(": no rail");
        }
        for ri in &g.rails {
            let Some(r) = rails.rails.get(*ri as usize) else {
                continue;
            };
            let class = g.class.map(|c| format!(" at {c}")).unwrap_or_default();
            let res = resource_of
                .get(r.port.label.as_str())
                .map_or("no pool".to_string(), |s| s.clone());
            line.push_str(&format!(
                " -> rail {} {}{class} -> {res}",
                r.index,
                describe_port(&r.port)
            ));
        }
        notes.push(line);
    }
    notes.push(format!(
        "the GPU device plugin picks the {n} GPU{} at admission; these rails are those of the GPUs above",
        if n == 1 { "" } else { "s" }
    ));
    notes.push(
        "requests = limits for cpu (whole CPUs) and memory: a Guaranteed pod, which the kubelet's static CPU manager gives exclusive CPUs and the topology manager aligns with the GPUs"
            .into(),
    );
    notes.extend(size.notes);
    match opts.network {
        PodNetwork::RdmaShared => {
            notes.push(
                "rdma-shared-dev-plugin pools carry no NUMA node, so the kubelet cannot align them with the GPUs it gives"
                    .into(),
            );
            if rails.link_layer() == Some(LinkLayer::Ethernet) {
                notes.push(
                    "RoCE: the pod also needs a netdev on each rail in its own network namespace (a Multus macvlan or ipvlan network on the rail's interface) for a usable GID"
                        .into(),
                );
            }
        }
        PodNetwork::Sriov => {
            notes.push(format!(
                "each network in {MULTUS_NETWORKS} is a NetworkAttachmentDefinition below (apply them first, in the pod's namespace): sriov-cni on a VF of its pool ({NAD_RESOURCE_NAME}), then the tuning plugin setting the rail's MTU"
            ));
            notes.extend(nad_notes);
            notes.push(
                "kubelet topologyManagerPolicy single-numa-node (topologyManagerScope pod) with this Guaranteed pod keeps the VFs and CPUs on the GPUs' NUMA node"
                    .into(),
            );
        }
    }
    notes.push(
        "inside the pod, `rdmatopo nccl-env` gives the NCCL variables for what the pod was given (HCA names and GID indexes differ from the host's)"
            .into(),
    );
    notes.extend(container_note(topo));

    let mut annotations = BTreeMap::new();
    if !networks.is_empty() {
        annotations.insert(MULTUS_NETWORKS.to_string(), networks.join(","));
    }
    let mut limits: BTreeMap<String, Quantity> =
        limits.into_iter().map(|(k, v)| (k, v.into())).collect();
    limits.insert("cpu".into(), size.cpus.into());
    limits.insert("memory".into(), Quantity::Text(size.memory));
    let spec = PodSpec {
        restart_policy: "Never".into(),
        containers: vec![Container {
            name: "main".into(),
            image: opts.image.clone(),
            resources: Resources {
                requests: limits.clone(),
                limits,
            },
            security_context: SecurityContext {
                capabilities: Capabilities {
                    add: vec!["IPC_LOCK".into()],
                },
            },
            volume_mounts: vec![VolumeMount {
                name: "dshm".into(),
                mount_path: "/dev/shm".into(),
            }],
        }],
        volumes: vec![Volume {
            name: "dshm".into(),
            empty_dir: EmptyDir {
                medium: "Memory".into(),
            },
        }],
    };
    let workload = match opts.kind {
        WorkloadKind::Pod => Workload::Pod {
            api_version: "v1".into(),
            kind: "Pod".into(),
            metadata: ObjectMeta {
                name: opts.name.clone(),
                annotations,
                ..Default::default()
            },
            spec,
        },
        WorkloadKind::Job => Workload::Job {
            api_version: "batch/v1".into(),
            kind: "Job".into(),
            metadata: ObjectMeta {
                name: opts.name.clone(),
                ..Default::default()
            },
            spec: JobSpec {
                backoff_limit: 0,
                template: PodTemplate {
                    metadata: ObjectMeta {
                        annotations,
                        ..Default::default()
                    },
                    spec,
                },
            },
        },
    };
    Ok(Generated {
        value: PodManifests {
            networks: nads,
            workload,
        },
        notes,
    })
}

#[cfg(test)]
mod tests;
