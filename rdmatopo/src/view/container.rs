//! Which of the devices this process can see were given to it.
//!
//! Inside a pod `/sys/bus/pci` lists every device of the host, and so does
//! `/sys/class/infiniband` in the shared RDMA netns mode. Advice about "the" GPU or NIC
//! is only right for the devices this container was given. Each source below votes for
//! or against a device, or only notes what it saw:
//!
//! - GPUs: the entries of `/proc/driver/nvidia/gpus/` (the NVIDIA container runtime
//!   mounts a tmpfs there and bind-mounts only the GPUs it gives), the `/dev/nvidia<N>`
//!   nodes (minor numbers mapped through NVML or the `Device Minor:` line of
//!   `/proc/driver/nvidia/gpus/<bdf>/information`), the GPUs NVML lists (inside a
//!   container, those it may open), `NVIDIA_VISIBLE_DEVICES` and device-plugin
//!   `PCIDEVICE_*` variables. `CUDA_VISIBLE_DEVICES` selects among them.
//! - RDMA devices: `/dev/infiniband/uverbs<N>` (through
//!   `/sys/class/infiniband_verbs/uverbs<N>/ibdev`), the VFs named by `PCIDEVICE_*`, the
//!   netdevs in this network namespace, and the exclusive RDMA netns mode.
//!
//! A device with votes only for it is owned, with votes only against it is visible
//! (someone else's), with both is unknown and a finding. A device no source speaks
//! about belongs to the machine on a host, and is unknown in a container.

use crate::model::{Gpu, Netdev, NetdevKind, NetnsMode, RdmaDevice, Topology};
use crate::parse::{CpuSet, PciAddr};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;

/// What kind of view of the machine this process has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Context {
    /// No sign of a container: every device belongs to this machine.
    Host,
    /// A Kubernetes pod with its own network namespace.
    Pod,
    /// A Kubernetes pod with `hostNetwork: true`.
    PodHostNetwork,
    /// A container outside Kubernetes (Docker, Podman, nspawn).
    Container,
}

impl Context {
    /// The context `topo`'s process view shows, as [`ContainerView::of`] decides it,
    /// without working out which devices are whose.
    pub fn of(topo: &Topology) -> Self {
        detect_context(topo).0
    }

    /// Whether devices may belong to someone else.
    pub fn is_container(&self) -> bool {
        *self != Self::Host
    }

    /// Words for tables and messages.
    pub fn describe(&self) -> &'static str {
        match self {
            Self::Host => "host",
            Self::Pod => "pod",
            Self::PodHostNetwork => "pod with host network",
            Self::Container => "container",
        }
    }
}

impl fmt::Display for Context {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.describe())
    }
}

/// Whether a device is this container's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Ownership {
    /// Given to this container (or, on a host, part of the machine).
    Owned,
    /// Listed here, but given to someone else: never the subject of this container's
    /// advice or findings.
    Visible,
    /// The sources say nothing or disagree.
    Unknown,
}

impl fmt::Display for Ownership {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Owned => "owned",
            Self::Visible => "visible",
            Self::Unknown => "unknown",
        })
    }
}

/// One fact behind a conclusion.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Evidence {
    /// A path (`/dev/nvidia3`) or an environment variable (`NVIDIA_VISIBLE_DEVICES`).
    pub source: String,
    /// What it showed.
    pub value: String,
}

impl Evidence {
    fn new(source: impl Into<String>, value: impl Into<String>) -> Self {
        Self {
            source: source.into(),
            value: value.into(),
        }
    }
}

impl fmt::Display for Evidence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.source, self.value)
    }
}

/// A device and whether it is this container's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Owned<K> {
    /// The device: a PCI address (GPUs) or a name (RDMA devices, netdevs).
    #[serde(rename = "device")]
    pub key: K,
    pub state: Ownership,
    pub evidence: Vec<Evidence>,
}

/// Which GPUs, RDMA devices, netdevs and CPUs belong to this process's container.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContainerView {
    pub context: Context,
    pub context_evidence: Vec<Evidence>,
    /// Whether the netdevs listed are the host's (a host, or a host-network container).
    pub host_network: bool,
    /// `/sys/module/ib_core/parameters/netns_mode`.
    pub rdma_netns_mode: Option<NetnsMode>,
    /// Every GPU of the model, in PCI order.
    pub gpus: Vec<Owned<PciAddr>>,
    /// Every RDMA device of the model, in model order.
    pub rdma: Vec<Owned<String>>,
    /// Every netdev of this network namespace.
    pub netdevs: Vec<Owned<String>>,
    /// The CPUs this process may run on (`Cpus_allowed_list` narrowed by the cgroup
    /// cpuset).
    pub cpus: Option<CpuSet>,
    pub cpus_evidence: Vec<Evidence>,
    /// The GPUs CUDA will enumerate, in CUDA order, when `CUDA_VISIBLE_DEVICES` is set.
    pub cuda_visible: Option<Vec<PciAddr>>,
    /// Ownership of every GPU and RDMA device is known (none is unknown).
    pub certain: bool,
    /// Disagreements between sources, and what could not be resolved.
    pub findings: Vec<String>,
}

impl ContainerView {
    /// Work out the view from the model.
    pub fn of(topo: &Topology) -> Self {
        let (context, context_evidence, host_network) = detect_context(topo);
        let mut a = Analysis::new(topo, context, host_network);
        let gpus = a.gpus();
        let cuda_visible = a.cuda_visible(&gpus);
        let gpus = match cuda_visible.1 {
            Some(notes) => with_notes(gpus, notes),
            None => gpus,
        };
        let rdma = a.rdma();
        let netdevs = a.netdevs(&rdma);
        let (cpus, cpus_evidence) = a.cpus();
        let certain = gpus.iter().all(|g| g.state != Ownership::Unknown)
            && rdma.iter().all(|r| r.state != Ownership::Unknown);
        Self {
            context,
            context_evidence,
            host_network,
            rdma_netns_mode: topo.host.rdma_netns_mode,
            gpus,
            rdma,
            netdevs,
            cpus,
            cpus_evidence,
            cuda_visible: cuda_visible.0,
            certain,
            findings: a.findings,
        }
    }

    /// Whether the GPU at `pci` is this container's (`Unknown` for a GPU not in the model).
    pub fn gpu(&self, pci: PciAddr) -> Ownership {
        state_of(&self.gpus, &pci)
    }

    /// Whether the RDMA device `name` is this container's.
    pub fn rdma_device(&self, name: &str) -> Ownership {
        state_of(&self.rdma, &name.to_string())
    }

    /// Whether the netdev `name` is this container's.
    pub fn netdev(&self, name: &str) -> Ownership {
        state_of(&self.netdevs, &name.to_string())
    }

    /// GPUs known to be this container's, in PCI order.
    pub fn owned_gpus(&self) -> Vec<PciAddr> {
        keys_in(&self.gpus, |s| s == Ownership::Owned)
    }

    /// RDMA devices known to be this container's.
    pub fn owned_rdma(&self) -> Vec<String> {
        keys_in(&self.rdma, |s| s == Ownership::Owned)
    }

    /// GPUs advice may concern: the owned ones and, when ownership is not certain, the
    /// unknown ones too (an assumption the caller should state).
    pub fn usable_gpus(&self) -> Vec<PciAddr> {
        keys_in(&self.gpus, |s| s != Ownership::Visible)
    }

    /// RDMA devices advice may concern: owned and unknown ones.
    pub fn usable_rdma(&self) -> Vec<String> {
        keys_in(&self.rdma, |s| s != Ownership::Visible)
    }
}

/// Which GPUs and RDMA devices an answer about the machine's devices shows: inside a
/// container whose devices are certain, those it owns (`--all` shows every one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shown {
    /// The RDMA devices shown; `None`: every device of the model.
    pub owned_rdma: Option<BTreeSet<String>>,
    /// The GPUs shown; `None`: every GPU of the model.
    pub owned_gpus: Option<BTreeSet<PciAddr>>,
    /// The devices left out, in natural order: the model's others and those an owned
    /// view only names ([`Topology::other_rdma_devices`]).
    pub left_out: Vec<String>,
    pub context: Context,
}

impl Shown {
    /// For `topo`: every device where `all`, on a host, or where ownership is uncertain.
    pub fn of(topo: &Topology, all: bool) -> Self {
        if all {
            return Self {
                owned_rdma: None,
                owned_gpus: None,
                left_out: Vec::new(),
                context: Context::of(topo),
            };
        }
        let view = ContainerView::of(topo);
        let narrowed = view.context.is_container() && view.certain;
        let owned_rdma: Option<BTreeSet<String>> =
            narrowed.then(|| view.owned_rdma().into_iter().collect());
        let owned_gpus = narrowed.then(|| view.owned_gpus().into_iter().collect());
        let left_out = match &owned_rdma {
            None => Vec::new(),
            Some(owned) => crate::parse::merge_natural(
                topo.rdma_devices
                    .iter()
                    .map(|d| d.name.as_str())
                    .filter(|n| !owned.contains(*n)),
                topo.other_rdma_devices(),
            )
            .into_iter()
            .map(str::to_string)
            .collect(),
        };
        Self {
            owned_rdma,
            owned_gpus,
            left_out,
            context: view.context,
        }
    }

    /// Whether the RDMA device `name` is shown.
    pub fn shows(&self, name: &str) -> bool {
        self.owned_rdma.as_ref().is_none_or(|o| o.contains(name))
    }

    /// Whether the GPU at `pci` is shown.
    pub fn shows_gpu(&self, pci: PciAddr) -> bool {
        self.owned_gpus.as_ref().is_none_or(|o| o.contains(&pci))
    }

    /// The line saying what is left out, when anything is.
    pub fn note(&self) -> Option<String> {
        let names: Vec<&str> = self.left_out.iter().map(String::as_str).collect();
        (!names.is_empty()).then(|| {
            format!(
                "RDMA devices of another container are left out ({}): {}; `--all` shows every visible device",
                self.context,
                super::list_short(&names)
            )
        })
    }
}

fn state_of<K: PartialEq>(list: &[Owned<K>], key: &K) -> Ownership {
    list.iter()
        .find(|o| &o.key == key)
        .map_or(Ownership::Unknown, |o| o.state)
}

fn keys_in<K: Clone>(list: &[Owned<K>], keep: impl Fn(Ownership) -> bool) -> Vec<K> {
    list.iter()
        .filter(|o| keep(o.state))
        .map(|o| o.key.clone())
        .collect()
}

fn with_notes(
    mut gpus: Vec<Owned<PciAddr>>,
    mut notes: BTreeMap<PciAddr, Evidence>,
) -> Vec<Owned<PciAddr>> {
    for g in &mut gpus {
        if let Some(e) = notes.remove(&g.key) {
            g.evidence.push(e);
        }
    }
    gpus
}

// ---------------------------------------------------------------------------------
// Context
// ---------------------------------------------------------------------------------

/// Parts of the cgroup paths that container runtimes create for a container (not those
/// of the runtimes' own services, such as `containerd.service` or `docker.service`).
const CONTAINER_CGROUP_WORDS: [&str; 9] = [
    "kubepods",
    "/docker/",
    "docker-",
    "cri-containerd-",
    "crio-",
    "libpod-",
    "/lxc/",
    "lxc.payload",
    "/actions_job/",
];

/// Capabilities only a privileged container holds together: CAP_SYS_MODULE,
/// CAP_SYS_RAWIO and CAP_SYS_ADMIN. Such a container sees the host's `/dev`.
const PRIVILEGED_CAPS: u64 = (1 << 16) | (1 << 17) | (1 << 21);

/// Whether the NVIDIA container runtime set up this mount namespace: its tmpfs over
/// `/proc/driver/nvidia`, or its bind mounts of GPU procfs entries and device nodes.
fn nvidia_runtime_mounts(topo: &Topology) -> Vec<String> {
    topo.process
        .device_mounts
        .iter()
        .filter(|m| {
            (m.mount_point == "/proc/driver/nvidia" && m.fs_type == "tmpfs")
                || m.mount_point.starts_with("/proc/driver/nvidia/gpus/")
                || m.mount_point.starts_with("/dev/nvidia")
        })
        .map(|m| format!("{} ({})", m.mount_point, m.fs_type))
        .collect()
}

fn detect_context(topo: &Topology) -> (Context, Vec<Evidence>, bool) {
    let p = &topo.process;
    let mut evidence = Vec::new();
    let mut container = false;
    let mut kubernetes = false;
    for cg in &p.cgroups {
        let words: Vec<&str> = CONTAINER_CGROUP_WORDS
            .iter()
            .copied()
            .filter(|w| cg.path.contains(w))
            .collect();
        if !words.is_empty() {
            container = true;
            kubernetes |= words.contains(&"kubepods");
            evidence.push(Evidence::new(
                "/proc/self/cgroup",
                format!("{}:{}:{}", cg.hierarchy, cg.controllers.join(","), cg.path),
            ));
        }
    }
    if let Some(v) = p.env.get("KUBERNETES_SERVICE_HOST") {
        container = true;
        kubernetes = true;
        evidence.push(Evidence::new("KUBERNETES_SERVICE_HOST", v.clone()));
    }
    if let Some(v) = p.env.get("container") {
        container = true;
        evidence.push(Evidence::new("container", v.clone()));
    }
    for m in &p.container_markers {
        container = true;
        kubernetes |= m.ends_with("kubernetes.io/serviceaccount");
        evidence.push(Evidence::new(m.clone(), "exists"));
    }
    let runtime = nvidia_runtime_mounts(topo);
    if !runtime.is_empty() {
        container = true;
        evidence.push(Evidence::new(
            "/proc/self/mountinfo",
            format!("NVIDIA container runtime mounts: {}", runtime.join(", ")),
        ));
    }
    if !container {
        evidence.push(Evidence::new(
            "/proc/self/cgroup",
            "no container runtime in the cgroup path, no container marker file or variable",
        ));
        return (Context::Host, evidence, true);
    }
    if let Some(cap) = p.cap_eff
        && cap & PRIVILEGED_CAPS == PRIVILEGED_CAPS
    {
        evidence.push(Evidence::new(
            "/proc/self/status",
            format!("CapEff {cap:016x}: privileged, /dev is the host's"),
        ));
    }
    let (host_network, net_evidence) = detect_host_network(topo);
    evidence.extend(net_evidence);
    let context = match (kubernetes, host_network) {
        (true, false) => Context::Pod,
        (true, true) => Context::PodHostNetwork,
        (false, _) => Context::Container,
    };
    (context, evidence, host_network)
}

fn is_stacked(n: &Netdev) -> bool {
    n.kind == NetdevKind::Virtual && n.iflink.is_some_and(|l| l != 0 && Some(l) != n.ifindex)
}

/// Host network: PF netdevs are visible and carry the default route. Own namespace:
/// the default route leaves through a veth-like device (`iflink != ifindex`, no PCI
/// function), or no PF netdev is visible at all.
fn detect_host_network(topo: &Topology) -> (bool, Vec<Evidence>) {
    let pf: Vec<&Netdev> = topo
        .netdevs
        .iter()
        .filter(|n| matches!(n.kind, NetdevKind::Physical | NetdevKind::Bond))
        .collect();
    let pf_names = || {
        let names: Vec<&str> = pf.iter().take(4).map(|n| n.name.as_str()).collect();
        let more = pf.len().saturating_sub(names.len());
        if more > 0 {
            format!("{} and {more} more", names.join(", "))
        } else {
            names.join(", ")
        }
    };
    let route = topo
        .host
        .default_route_interface
        .as_deref()
        .and_then(|name| topo.netdev(name));
    match route {
        Some(n) if matches!(n.kind, NetdevKind::Physical | NetdevKind::Bond) => (
            true,
            vec![Evidence::new(
                "/proc/net/route",
                format!(
                    "default route via {} ({}): the host's network namespace",
                    n.name,
                    describe_netdev(n)
                ),
            )],
        ),
        Some(n) if is_stacked(n) => (
            false,
            vec![Evidence::new(
                format!("/sys/class/net/{}", n.name),
                format!(
                    "default route via {}, {}: a network namespace of its own",
                    n.name,
                    describe_netdev(n)
                ),
            )],
        ),
        _ if !pf.is_empty() => (
            true,
            vec![Evidence::new(
                "/sys/class/net",
                format!(
                    "PCI netdevs of physical functions visible ({}): the host's network namespace",
                    pf_names()
                ),
            )],
        ),
        _ => (
            false,
            vec![Evidence::new(
                "/sys/class/net",
                "no netdev of a physical function visible: a network namespace of its own",
            )],
        ),
    }
}

fn describe_netdev(n: &Netdev) -> String {
    match (n.kind, n.pci) {
        (NetdevKind::VirtualFunction, Some(a)) => format!("VF {a}"),
        (NetdevKind::Physical, Some(a)) => format!("PCI {a}"),
        (NetdevKind::Bond, _) => "bond".to_string(),
        (NetdevKind::Loopback, _) => "loopback".to_string(),
        _ if is_stacked(n) => format!(
            "veth-like, ifindex {} iflink {}, no PCI device",
            n.ifindex.map_or("?".into(), |i| i.to_string()),
            n.iflink.map_or("?".into(), |i| i.to_string())
        ),
        _ => "virtual".to_string(),
    }
}

// ---------------------------------------------------------------------------------
// Voting
// ---------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Vote {
    For,
    Against,
    /// Seen, but says nothing about ownership.
    Note,
}

#[derive(Debug, Default)]
struct Tally {
    items: Vec<(Vote, Evidence)>,
}

impl Tally {
    fn add(&mut self, vote: Vote, source: impl Into<String>, value: impl Into<String>) {
        self.items.push((vote, Evidence::new(source, value)));
    }

    /// Whether any source voted for or against.
    fn voted(&self) -> bool {
        self.items.iter().any(|(v, _)| *v != Vote::Note)
    }

    fn sources(&self, vote: Vote) -> Vec<String> {
        let mut v: Vec<String> = self
            .items
            .iter()
            .filter(|(x, _)| *x == vote)
            .map(|(_, e)| e.source.clone())
            .collect();
        v.dedup();
        v
    }

    /// The state, and a finding when the sources disagree.
    fn decide(
        self,
        what: &str,
        context: Context,
        findings: &mut Vec<String>,
    ) -> (Ownership, Vec<Evidence>) {
        let has = |v: Vote| self.items.iter().any(|(x, _)| *x == v);
        let (for_, against) = (has(Vote::For), has(Vote::Against));
        let state = match (for_, against) {
            (true, false) => Ownership::Owned,
            (false, true) => Ownership::Visible,
            (true, true) => {
                findings.push(format!(
                    "{what}: sources disagree: {} it is this container's, {} it is not",
                    says(&self.sources(Vote::For)),
                    says(&self.sources(Vote::Against))
                ));
                Ownership::Unknown
            }
            (false, false) if context.is_container() => Ownership::Unknown,
            (false, false) => Ownership::Owned,
        };
        let mut evidence: Vec<Evidence> = self.items.into_iter().map(|(_, e)| e).collect();
        if !for_ && !against {
            evidence.push(if context.is_container() {
                Evidence::new("context", "in a container, and no source says whose it is")
            } else {
                Evidence::new("context", "host: part of this machine")
            });
        }
        (state, evidence)
    }
}

/// "A says", "A and B say", "A, B and C say": one side of a disagreement.
fn says(sources: &[String]) -> String {
    match sources {
        [] => String::new(),
        [one] => format!("{one} says"),
        [rest @ .., last] => format!("{} and {last} say", rest.join(", ")),
    }
}

struct Analysis<'a> {
    topo: &'a Topology,
    context: Context,
    host_network: bool,
    /// `/dev` holds only what the runtime gave (a container, not privileged, `/dev`
    /// captured): a missing node is a device not given, a present one a device given.
    filtered_dev: bool,
    /// The NVIDIA runtime's tmpfs is over `/proc/driver/nvidia`: its GPU list is the
    /// container's.
    nvidia_procfs_masked: bool,
    /// `PCIDEVICE_<PREFIX>_<NAME>` variables: PCI address → variable.
    pcidevice: BTreeMap<PciAddr, String>,
    links: NetLinks,
    findings: Vec<String>,
}

/// Which netdevs of this namespace belong to which RDMA device, indexed once: a port's
/// netdev (the GID `ndevs` relation, which names a macvlan on a shared HCA) or one on
/// the device's PCI function. Indexed so that relating every netdev to every device
/// stays linear in their number.
#[derive(Debug, Default)]
struct NetLinks {
    /// RDMA device name → indices into `topo.netdevs`.
    netdevs_of: HashMap<String, Vec<usize>>,
    /// Netdev name → indices into `topo.rdma_devices`.
    rdma_behind: HashMap<String, Vec<usize>>,
}

impl NetLinks {
    fn of(topo: &Topology) -> Self {
        let by_name: HashMap<&str, usize> = topo
            .netdevs
            .iter()
            .enumerate()
            .map(|(i, n)| (n.name.as_str(), i))
            .collect();
        let mut by_pci: HashMap<PciAddr, Vec<usize>> = HashMap::new();
        for (i, n) in topo.netdevs.iter().enumerate() {
            if let Some(a) = n.pci {
                by_pci.entry(a).or_default().push(i);
            }
        }
        let mut links = Self::default();
        for (di, d) in topo.rdma_devices.iter().enumerate() {
            let mut ns: Vec<usize> = d
                .ports
                .iter()
                .filter_map(|p| by_name.get(p.netdev.as_deref()?).copied())
                .chain(
                    d.pci
                        .and_then(|a| by_pci.get(&a))
                        .into_iter()
                        .flatten()
                        .copied(),
                )
                .collect();
            ns.sort_unstable();
            ns.dedup();
            for &n in &ns {
                links
                    .rdma_behind
                    .entry(topo.netdevs[n].name.clone())
                    .or_default()
                    .push(di);
            }
            // Most devices of a pod's host have none here: nothing to index.
            if !ns.is_empty() {
                links.netdevs_of.insert(d.name.clone(), ns);
            }
        }
        links
    }
}

impl<'a> Analysis<'a> {
    fn new(topo: &'a Topology, context: Context, host_network: bool) -> Self {
        let p = &topo.process;
        let privileged = p
            .cap_eff
            .is_some_and(|c| c & PRIVILEGED_CAPS == PRIVILEGED_CAPS);
        let mut a = Self {
            topo,
            context,
            host_network,
            filtered_dev: context.is_container() && p.dev_listed && !privileged,
            nvidia_procfs_masked: p
                .device_mounts
                .iter()
                .any(|m| m.mount_point == "/proc/driver/nvidia" && m.fs_type == "tmpfs"),
            pcidevice: BTreeMap::new(),
            links: NetLinks::of(topo),
            findings: Vec::new(),
        };
        a.read_pcidevice();
        a
    }

    /// The netdevs of this namespace that belong to RDMA device `d`.
    fn netdevs_of(&self, d: &RdmaDevice) -> Vec<&'a Netdev> {
        let topo = self.topo;
        self.links
            .netdevs_of
            .get(&d.name)
            .map(|v| v.iter().map(|i| &topo.netdevs[*i]).collect())
            .unwrap_or_default()
    }

    /// The RDMA devices whose netdev `n` is.
    fn rdma_behind(&self, n: &Netdev) -> Vec<&'a RdmaDevice> {
        let topo = self.topo;
        self.links
            .rdma_behind
            .get(&n.name)
            .map(|v| v.iter().map(|i| &topo.rdma_devices[*i]).collect())
            .unwrap_or_default()
    }

    fn read_pcidevice(&mut self) {
        for (key, item) in self.topo.process.pcidevice_items() {
            match item.parse::<PciAddr>() {
                Ok(addr) if self.topo.pci_function(addr).is_some() => {
                    self.pcidevice.insert(addr, key.to_string());
                }
                Ok(addr) => self.findings.push(format!(
                    "{key} names {addr}, which is not a PCI function under /sys/bus/pci/devices"
                )),
                Err(_) => self
                    .findings
                    .push(format!("{key} holds {item:?}, which is not a PCI address")),
            }
        }
    }

    // -----------------------------------------------------------------------------
    // GPUs
    // -----------------------------------------------------------------------------

    /// `/dev/nvidia<N>` minor of each GPU: NVML's, else the driver's procfs line.
    fn gpu_minors(&mut self) -> BTreeMap<PciAddr, (u32, &'static str)> {
        let mut out = BTreeMap::new();
        for g in &self.topo.gpus {
            // NVML's own answer: `Gpu::minor` falls back to the driver's procfs line.
            let nvml = self
                .topo
                .nvml
                .as_ref()
                .and_then(|n| n.gpu(g.pci))
                .and_then(|n| n.minor_number);
            let procfs = self.proc_info(g.pci).and_then(|i| i.minor);
            match (nvml, procfs) {
                (Some(n), Some(m)) if n != m => {
                    self.findings.push(format!(
                        "GPU {}: NVML says minor {n}, /proc/driver/nvidia/gpus/{}/information says {m}",
                        g.pci, g.pci
                    ));
                    out.insert(g.pci, (n, "NVML"));
                }
                (Some(n), _) => {
                    out.insert(g.pci, (n, "NVML"));
                }
                (None, Some(m)) => {
                    out.insert(g.pci, (m, "procfs"));
                }
                (None, None) => {}
            }
        }
        out
    }

    fn proc_info(&self, pci: PciAddr) -> Option<&'a crate::model::NvidiaProcGpu> {
        self.topo
            .process
            .proc_nvidia_gpu_info
            .iter()
            .find(|i| i.bus_id.parse::<PciAddr>().ok() == Some(pci))
    }

    /// UUID of a GPU: NVML's, else the driver's procfs line.
    fn gpu_uuid(&self, g: &Gpu) -> Option<String> {
        g.uuid
            .clone()
            .or_else(|| self.proc_info(g.pci).and_then(|i| i.uuid.clone()))
    }

    fn gpus(&mut self) -> Vec<Owned<PciAddr>> {
        let topo = self.topo;
        let mut tallies: BTreeMap<PciAddr, Tally> = topo
            .gpus
            .iter()
            .map(|g| (g.pci, Tally::default()))
            .collect();
        if topo.gpus.is_empty() {
            return Vec::new();
        }
        self.vote_gpu_procfs(&mut tallies);
        self.vote_gpu_dev_nodes(&mut tallies);
        self.vote_gpu_nvml(&mut tallies);
        self.vote_nvidia_visible_devices(&mut tallies);
        for (addr, var) in &self.pcidevice {
            if let Some(t) = tallies.get_mut(addr) {
                t.add(Vote::For, var.clone(), format!("names {addr}"));
            }
        }
        let context = self.context;
        if context.is_container() && !tallies.values().any(Tally::voted) {
            self.findings.push(format!(
                "no source narrows the {} GPUs down to this container's (no NVIDIA runtime mount, no device node, /proc/driver/nvidia entry or NVML GPU missing, no GPU list in NVIDIA_VISIBLE_DEVICES): a container without the NVIDIA runtime, a privileged one, or a capture without /dev",
                tallies.len()
            ));
        }
        let out: Vec<Owned<PciAddr>> = topo
            .gpus
            .iter()
            .map(|g| {
                let tally = tallies.remove(&g.pci).unwrap_or_default();
                let (state, evidence) =
                    tally.decide(&format!("GPU {}", g.pci), context, &mut self.findings);
                Owned {
                    key: g.pci,
                    state,
                    evidence,
                }
            })
            .collect();
        out
    }

    fn vote_gpu_procfs(&mut self, tallies: &mut BTreeMap<PciAddr, Tally>) {
        let p = &self.topo.process;
        if !p.proc_driver_nvidia {
            return;
        }
        let mut listed = BTreeSet::new();
        for name in &p.proc_nvidia_gpus {
            match name.parse::<PciAddr>() {
                Ok(a) if tallies.contains_key(&a) => {
                    listed.insert(a);
                }
                _ => self.findings.push(format!(
                    "/proc/driver/nvidia/gpus/{name} is not an NVIDIA GPU under /sys/bus/pci/devices"
                )),
            }
        }
        let subset = listed.len() < tallies.len();
        for (addr, t) in tallies.iter_mut() {
            let path = format!("/proc/driver/nvidia/gpus/{addr}");
            if listed.contains(addr) {
                if self.nvidia_procfs_masked {
                    t.add(
                        Vote::For,
                        path,
                        "listed in the NVIDIA runtime's /proc/driver/nvidia",
                    );
                } else if subset && self.context.is_container() {
                    t.add(Vote::For, path, "listed, while other GPUs are not");
                } else {
                    t.add(Vote::Note, path, "listed");
                }
            } else {
                let driver = self.topo.pci_function(*addr).and_then(|f| f.driver.clone());
                let why = match driver.as_deref() {
                    Some("nvidia") | None => "not listed".to_string(),
                    Some(d) => format!("not listed (bound to {d}, not nvidia)"),
                };
                t.add(Vote::Against, path, why);
            }
        }
    }

    /// NVML inside a container lists the GPUs this process may open and passes over the
    /// others (NVIDIA/nvidia-docker#170), whatever `/dev` holds: a device node can be
    /// created where the device cgroup refuses it (by NVML itself in CDI containers
    /// before the toolkit's `disable-device-node-modification` hook,
    /// NVIDIA/nvidia-container-toolkit#1203), so such a node is no vote
    /// ([`Self::vote_gpu_dev_nodes`]). A list of every GPU narrows nothing; a list short
    /// of GPUs NVML counted but could not read rules none out.
    fn vote_gpu_nvml(&mut self, tallies: &mut BTreeMap<PciAddr, Tally>) {
        let Some(nvml) = &self.topo.nvml else {
            return;
        };
        // An empty list says more of NVML than of the container.
        if !self.context.is_container() || nvml.gpus.is_empty() {
            return;
        }
        let opened = |addr: &PciAddr| nvml.gpu(*addr).is_some();
        let subset = !tallies.keys().all(opened);
        for (addr, t) in tallies.iter_mut() {
            if opened(addr) {
                if subset {
                    t.add(Vote::For, "NVML", "lists it, and not every GPU");
                } else {
                    t.add(Vote::Note, "NVML", "lists it, as every GPU");
                }
            } else if self.nvml_refuses(*addr) {
                t.add(
                    Vote::Against,
                    "NVML",
                    "does not list it: this container may not open it",
                );
            } else {
                let unread =
                    (nvml.device_count.unwrap_or(0) as usize).saturating_sub(nvml.gpus.len());
                t.add(
                    Vote::Note,
                    "NVML",
                    format!("does not list it, but could not read {unread} of the GPUs it counts"),
                );
            }
        }
    }

    /// Whether NVML in this container, having read every GPU it counts, leaves out the
    /// GPU at `pci`: the container may not open it, whatever `/dev` holds.
    fn nvml_refuses(&self, pci: PciAddr) -> bool {
        self.context.is_container()
            && self.topo.nvml.as_ref().is_some_and(|n| {
                !n.gpus.is_empty()
                    && n.device_count.is_none_or(|c| c as usize <= n.gpus.len())
                    && n.gpu(pci).is_none()
            })
    }

    fn vote_gpu_dev_nodes(&mut self, tallies: &mut BTreeMap<PciAddr, Tally>) {
        let p = &self.topo.process;
        if !p.dev_listed {
            return;
        }
        let minors = self.gpu_minors();
        let present: BTreeSet<u32> = p.dev_nvidia.iter().copied().collect();
        let mapped: BTreeSet<u32> = minors.values().map(|(m, _)| *m).collect();
        let unmapped: Vec<String> = present
            .difference(&mapped)
            .map(|m| format!("/dev/nvidia{m}"))
            .collect();
        if !unmapped.is_empty() && self.filtered_dev {
            self.findings.push(format!(
                "{} present but no GPU here has that minor number (minors come from NVML or /proc/driver/nvidia/gpus/*/information)",
                unmapped.join(", ")
            ));
        }
        let bind_mounted: BTreeSet<String> = p
            .device_mounts
            .iter()
            .map(|m| m.mount_point.clone())
            .collect();
        for (addr, t) in tallies.iter_mut() {
            let Some((minor, origin)) = minors.get(addr).copied() else {
                // Without its minor a GPU can still be ruled out: when every node
                // present is another GPU's, none is this one's.
                let (vote, value) = if present.is_empty() {
                    (Vote::Against, "no /dev/nvidia<N> node at all")
                } else if unmapped.is_empty() {
                    (
                        Vote::Against,
                        "minor number unknown, and every /dev/nvidia<N> present is another GPU's",
                    )
                } else {
                    (
                        Vote::Note,
                        "minor number unknown (no NVML, no /proc/driver/nvidia/gpus/*/information): cannot tell which /dev/nvidia<N> is this GPU",
                    )
                };
                let vote = if self.filtered_dev { vote } else { Vote::Note };
                t.add(vote, "/dev", value);
                continue;
            };
            let path = format!("/dev/nvidia{minor}");
            let from = match origin {
                "NVML" => "minor from NVML",
                _ => "minor from /proc/driver/nvidia/gpus/*/information",
            };
            if bind_mounted.contains(&path) {
                t.add(
                    Vote::For,
                    path,
                    format!("bind-mounted by the NVIDIA container runtime ({from})"),
                );
            } else if present.contains(&minor) && self.nvml_refuses(*addr) {
                t.add(
                    Vote::Note,
                    path,
                    format!(
                        "present ({from}), but NVML here does not list it: a node made inside the container, which may not open it"
                    ),
                );
            } else if present.contains(&minor) {
                let vote = if self.filtered_dev {
                    Vote::For
                } else {
                    Vote::Note
                };
                t.add(vote, path, format!("present ({from})"));
            } else {
                let vote = if self.filtered_dev {
                    Vote::Against
                } else {
                    Vote::Note
                };
                t.add(vote, path, format!("absent ({from})"));
            }
        }
    }

    /// `NVIDIA_VISIBLE_DEVICES`: what the NVIDIA container runtime was asked to give.
    /// Indices are the host's NVML indices, which follow PCI order, as `Gpu::index`.
    fn vote_nvidia_visible_devices(&mut self, tallies: &mut BTreeMap<PciAddr, Tally>) {
        const VAR: &str = "NVIDIA_VISIBLE_DEVICES";
        let Some(value) = self.topo.process.env.get(VAR).cloned() else {
            return;
        };
        if !self.context.is_container() {
            return;
        }
        let trimmed = value.trim();
        match trimmed {
            "" | "void" => {
                for t in tallies.values_mut() {
                    t.add(
                        Vote::Note,
                        VAR,
                        format!("{trimmed:?}: the NVIDIA runtime was told to change nothing"),
                    );
                }
                return;
            }
            "none" => {
                for t in tallies.values_mut() {
                    t.add(Vote::Against, VAR, "none: the NVIDIA runtime gives no GPU");
                }
                return;
            }
            "all" => {
                let runtime = !nvidia_runtime_mounts(self.topo).is_empty();
                for t in tallies.values_mut() {
                    if runtime {
                        t.add(
                            Vote::For,
                            VAR,
                            "all, and the NVIDIA runtime's mounts are present",
                        );
                    } else {
                        t.add(
                            Vote::Note,
                            VAR,
                            "all, but no NVIDIA runtime mount in /proc/self/mountinfo (CUDA images set it whatever the runtime does)",
                        );
                    }
                }
                return;
            }
            _ => {}
        }
        let (tokens, source): (Vec<String>, String) = if trimmed.starts_with('/') {
            let list = &self.topo.process.nvidia_container_devices;
            if trimmed.trim_end_matches('/') != "/var/run/nvidia-container-devices" {
                self.findings
                    .push(format!("{VAR}={trimmed}: not a form rdmatopo reads"));
                return;
            }
            if list.is_empty() {
                self.findings.push(format!(
                    "{VAR}={trimmed}, but that directory lists no device"
                ));
                return;
            }
            (list.clone(), format!("{VAR} ({trimmed})"))
        } else {
            (
                trimmed
                    .split(',')
                    .map(|s| s.trim().to_string())
                    .filter(|s| !s.is_empty())
                    .collect(),
                VAR.to_string(),
            )
        };
        let mut named: BTreeMap<PciAddr, String> = BTreeMap::new();
        let mut unresolved = false;
        for token in &tokens {
            match self.resolve_gpu_token(token) {
                Ok((addr, how)) => {
                    named.insert(addr, how);
                }
                Err(why) => {
                    unresolved = true;
                    self.findings.push(format!("{source}: {token}: {why}"));
                }
            }
        }
        for (addr, t) in tallies.iter_mut() {
            match named.get(addr) {
                Some(how) => t.add(Vote::For, source.clone(), format!("names it: {how}")),
                // An entry that could not be resolved may be this very GPU.
                None if unresolved => t.add(
                    Vote::Note,
                    source.clone(),
                    "does not name it by index or UUID",
                ),
                None => t.add(Vote::Against, source.clone(), "does not name it"),
            }
        }
    }

    /// One entry of `NVIDIA_VISIBLE_DEVICES`: an index, `<gpu>:<mig>`, a UUID or a
    /// unique UUID prefix.
    fn resolve_gpu_token(&self, token: &str) -> Result<(PciAddr, String), String> {
        let gpus = &self.topo.gpus;
        let by_index = |i: u32| gpus.iter().find(|g| g.index == i).map(|g| g.pci);
        if let Ok(i) = token.parse::<u32>() {
            return by_index(i)
                .map(|a| (a, format!("index {i}")))
                .ok_or_else(|| format!("index {i}, but there are {} GPUs", gpus.len()));
        }
        if let Some((gpu, mig)) = token.split_once(':')
            && let (Ok(i), Ok(_)) = (gpu.parse::<u32>(), mig.parse::<u32>())
        {
            return by_index(i)
                .map(|a| (a, format!("{token} (a MIG device of GPU {i})")))
                .ok_or_else(|| format!("GPU index {i}, but there are {} GPUs", gpus.len()));
        }
        if token.starts_with("MIG-") {
            return Err(
                "a MIG device UUID: which GPU holds it needs NVML's MIG listing".to_string(),
            );
        }
        if token.starts_with("GPU-") {
            let known: Vec<(PciAddr, String)> = gpus
                .iter()
                .filter_map(|g| Some((g.pci, self.gpu_uuid(g)?)))
                .collect();
            let hits: Vec<&(PciAddr, String)> = known
                .iter()
                .filter(|(_, u)| u.eq_ignore_ascii_case(token) || starts_with_ci(u, token))
                .collect();
            return match hits.as_slice() {
                [(a, u)] if u.eq_ignore_ascii_case(token) => Ok((*a, format!("UUID {u}"))),
                [(a, u)] => Ok((*a, format!("UUID prefix of {u}"))),
                [] => Err(format!(
                    "matches no GPU UUID known here (UUIDs known for {} of {} GPUs)",
                    known.len(),
                    gpus.len()
                )),
                many => Err(format!("a UUID prefix matching {} GPUs", many.len())),
            };
        }
        Err("not an index, a GPU UUID, all, none or void".to_string())
    }

    /// The GPUs CUDA will enumerate, and a note per GPU. Entries are resolved against
    /// the GPUs this process can open (owned, or unknown), in PCI order; an invalid
    /// entry hides itself and every entry after it, as CUDA does.
    #[allow(clippy::type_complexity)]
    fn cuda_visible(
        &mut self,
        gpus: &[Owned<PciAddr>],
    ) -> (Option<Vec<PciAddr>>, Option<BTreeMap<PciAddr, Evidence>>) {
        const VAR: &str = "CUDA_VISIBLE_DEVICES";
        let Some(value) = self.topo.process.env.get(VAR).cloned() else {
            return (None, None);
        };
        let openable: Vec<PciAddr> = gpus
            .iter()
            .filter(|g| g.state != Ownership::Visible)
            .map(|g| g.key)
            .collect();
        let mut out: Vec<PciAddr> = Vec::new();
        let mut notes = BTreeMap::new();
        let mut used_index = false;
        let tokens: Vec<&str> = value.split(',').map(str::trim).collect();
        for (pos, token) in tokens.iter().enumerate() {
            let rest = if pos + 1 < tokens.len() {
                " and every entry after it"
            } else {
                ""
            };
            let resolved: Result<PciAddr, String> = if let Ok(i) = token.parse::<usize>() {
                used_index = true;
                openable.get(i).copied().ok_or_else(|| {
                    format!(
                        "index {i}, but this process can open {} GPU{}",
                        openable.len(),
                        if openable.len() == 1 { "" } else { "s" }
                    )
                })
            } else if token.starts_with("GPU-") {
                match self.resolve_gpu_token(token) {
                    Ok((a, _)) if openable.contains(&a) => Ok(a),
                    Ok((a, _)) => Err(format!("GPU {a}, which this container was not given")),
                    Err(why) => Err(why),
                }
            } else if token.is_empty() && tokens.len() == 1 {
                if !openable.is_empty() {
                    self.findings.push(format!(
                        "{VAR} is empty: CUDA sees none of the {} GPU{} this process can open",
                        openable.len(),
                        if openable.len() == 1 { "" } else { "s" }
                    ));
                }
                break;
            } else {
                Err("not an index or a GPU UUID".to_string())
            };
            match resolved {
                Ok(a) if out.contains(&a) => {
                    self.findings.push(format!(
                        "{VAR}={value}: {token} names GPU {a} twice; CUDA hides it{rest}"
                    ));
                    break;
                }
                Ok(a) => {
                    notes.insert(
                        a,
                        Evidence::new(VAR, format!("CUDA device {} ({token})", out.len())),
                    );
                    out.push(a);
                }
                Err(why) => {
                    self.findings.push(format!(
                        "{VAR}={value}: {token}: {why}; CUDA hides it{rest}"
                    ));
                    break;
                }
            }
        }
        if used_index {
            let order = self.topo.process.env.get("CUDA_DEVICE_ORDER");
            let models: BTreeSet<Option<&str>> = self
                .topo
                .gpus
                .iter()
                .filter(|g| openable.contains(&g.pci))
                .map(|g| g.name.as_deref())
                .collect();
            if order.map(String::as_str) != Some("PCI_BUS_ID") && models.len() > 1 {
                self.findings.push(format!(
                    "{VAR} uses indices, CUDA_DEVICE_ORDER is not PCI_BUS_ID and the GPUs differ: CUDA numbers the fastest first, so the indices were read in PCI order as an assumption"
                ));
            }
        }
        (Some(out), Some(notes))
    }

    // -----------------------------------------------------------------------------
    // RDMA devices
    // -----------------------------------------------------------------------------

    fn rdma(&mut self) -> Vec<Owned<String>> {
        let topo = self.topo;
        let p = &topo.process;
        let mut tallies: Vec<Tally> = topo.rdma_devices.iter().map(|_| Tally::default()).collect();
        let present: BTreeSet<&str> = p
            .dev_infiniband
            .iter()
            .map(String::as_str)
            .filter(|n| n.starts_with("uverbs"))
            .collect();
        let own_netns = self.context.is_container() && !self.host_network;
        let exclusive = topo.host.rdma_netns_mode == Some(NetnsMode::Exclusive);
        let given_vfs = self
            .pcidevice
            .keys()
            .any(|a| topo.pci_function(*a).is_some_and(|f| f.is_vf));
        for (d, t) in topo.rdma_devices.iter().zip(tallies.iter_mut()) {
            // The char device that libibverbs opens.
            match &d.uverbs {
                Some(u) if p.dev_listed => {
                    let path = format!("/dev/infiniband/{u}");
                    let value = format!("/sys/class/infiniband_verbs/{u}/ibdev = {}", d.name);
                    if present.contains(u.as_str()) {
                        let vote = if self.filtered_dev {
                            Vote::For
                        } else {
                            Vote::Note
                        };
                        t.add(vote, path, format!("present ({value})"));
                    } else {
                        t.add(
                            Vote::Against,
                            path,
                            format!("absent ({value}): cannot be opened"),
                        );
                    }
                }
                Some(_) => {}
                // An owned view's outline of another container's device: every uverbs
                // node in /dev/infiniband was traced to a device, and none to this one.
                None if p.dev_listed && !topo.holds_rdma_details(&d.name) => t.add(
                    Vote::Against,
                    "/dev/infiniband",
                    format!(
                        "no uverbs node of {} is here (another container's device, read in outline)",
                        d.name
                    ),
                ),
                None => t.add(
                    Vote::Note,
                    "/sys/class/infiniband_verbs",
                    format!("no uverbs<N> names {}", d.name),
                ),
            }
            // Device-plugin variables name the VFs given.
            if let Some(addr) = d.pci {
                let is_vf = topo.pci_function(addr).is_some_and(|f| f.is_vf);
                match self.pcidevice.get(&addr) {
                    Some(var) => t.add(Vote::For, var.clone(), format!("names {addr}")),
                    None if is_vf && given_vfs => t.add(
                        Vote::Against,
                        "PCIDEVICE_*",
                        format!("the device plugin gave other VFs, not {addr}"),
                    ),
                    None => {}
                }
            }
            if own_netns {
                if exclusive {
                    t.add(
                        Vote::For,
                        "/sys/module/ib_core/parameters/netns_mode",
                        "N (exclusive): only this network namespace's RDMA devices are listed",
                    );
                }
                for n in self.netdevs_of(d) {
                    if n.kind == NetdevKind::Loopback {
                        continue;
                    }
                    t.add(
                        Vote::For,
                        format!("/sys/class/net/{}", n.name),
                        format!(
                            "its netdev {} ({}) is in this network namespace",
                            n.name,
                            describe_netdev(n)
                        ),
                    );
                }
            }
        }
        self.pcidevice_without_netdev(own_netns);
        let context = self.context;
        if context.is_container() && !tallies.is_empty() && !tallies.iter().any(Tally::voted) {
            self.findings.push(format!(
                "no source narrows the {} RDMA devices down to this container's (no /dev/infiniband/uverbs<N> missing, no PCIDEVICE_* variable, no RDMA netdev in this network namespace): a privileged container, a shared device plugin that gave them all, or a capture without /dev",
                tallies.len()
            ));
        }
        topo.rdma_devices
            .iter()
            .zip(tallies)
            .map(|(d, t)| {
                let (state, evidence) = t.decide(
                    &format!("RDMA device {}", d.name),
                    context,
                    &mut self.findings,
                );
                Owned {
                    key: d.name.clone(),
                    state,
                    evidence,
                }
            })
            .collect()
    }

    /// A RoCE VF given to a pod with its own network namespace should bring its netdev.
    fn pcidevice_without_netdev(&mut self, own_netns: bool) {
        if !own_netns {
            return;
        }
        for (addr, var) in &self.pcidevice {
            let Some(d) = self.topo.rdma_devices.iter().find(|d| d.pci == Some(*addr)) else {
                continue;
            };
            let roce = d
                .ports
                .iter()
                .any(|p| p.link_layer == Some(crate::parse::LinkLayer::Ethernet));
            if roce && self.netdevs_of(d).is_empty() {
                self.findings.push(format!(
                    "{var} gives {addr} ({}), but no netdev of it is in this network namespace: the SR-IOV CNI did not move it in, so RoCE has no GID to use",
                    d.name
                ));
            }
        }
    }

    // -----------------------------------------------------------------------------
    // Netdevs
    // -----------------------------------------------------------------------------

    fn netdevs(&self, rdma: &[Owned<String>]) -> Vec<Owned<String>> {
        let topo = self.topo;
        topo.netdevs
            .iter()
            .map(|n| {
                let (state, mut evidence) = self.netdev_state(n, rdma, true);
                if self.context.is_container() && !self.host_network {
                    for d in self.rdma_behind(n) {
                        evidence.push(Evidence::new(
                            format!("RDMA device {}", d.name),
                            format!("{} (its netdev is {})", state_of(rdma, &d.name), n.name),
                        ));
                    }
                }
                Owned {
                    key: n.name.clone(),
                    state,
                    evidence,
                }
            })
            .collect()
    }

    fn netdev_state(
        &self,
        n: &Netdev,
        rdma: &[Owned<String>],
        follow_slaves: bool,
    ) -> (Ownership, Vec<Evidence>) {
        let topo = self.topo;
        let path = format!("/sys/class/net/{}", n.name);
        let one =
            |state, source: String, value: String| (state, vec![Evidence::new(source, value)]);
        if !self.context.is_container() {
            return one(
                Ownership::Owned,
                path,
                "in the host's network namespace".into(),
            );
        }
        if !self.host_network {
            return one(
                Ownership::Owned,
                path,
                format!(
                    "in this container's own network namespace ({})",
                    describe_netdev(n)
                ),
            );
        }
        let behind = self.rdma_behind(n);
        if !behind.is_empty() {
            let states: Vec<Ownership> = behind.iter().map(|d| state_of(rdma, &d.name)).collect();
            let evidence = behind
                .iter()
                .zip(&states)
                .map(|(d, s)| {
                    Evidence::new(
                        format!("RDMA device {}", d.name),
                        format!("{s}; this is its netdev in the host's network namespace"),
                    )
                })
                .collect();
            return (combine(&states), evidence);
        }
        if let Some(var) = n.pci.and_then(|a| self.pcidevice.get(&a)) {
            return one(
                Ownership::Owned,
                var.clone(),
                format!("names {}", opt_pci(n)),
            );
        }
        match n.kind {
            NetdevKind::VirtualFunction => one(
                Ownership::Visible,
                path,
                "a VF netdev in the host's network namespace that no device-plugin variable names"
                    .into(),
            ),
            NetdevKind::Bond if follow_slaves => {
                let states: Vec<Ownership> = n
                    .bond
                    .iter()
                    .flat_map(|b| &b.slaves)
                    .filter_map(|s| topo.netdev(s))
                    .map(|s| self.netdev_state(s, rdma, false).0)
                    .collect();
                if states.is_empty() {
                    one(
                        Ownership::Owned,
                        path,
                        "a bond without slaves here, shared with this container".into(),
                    )
                } else {
                    one(
                        combine(&states),
                        format!("{path}/bonding/slaves"),
                        "follows its slaves".into(),
                    )
                }
            }
            _ if is_stacked(n) => one(
                Ownership::Visible,
                path,
                "the host end of another network namespace's veth".into(),
            ),
            _ => one(
                Ownership::Owned,
                path,
                "in the host's network namespace, shared with this container".into(),
            ),
        }
    }

    // -----------------------------------------------------------------------------
    // CPUs
    // -----------------------------------------------------------------------------

    fn cpus(&mut self) -> (Option<CpuSet>, Vec<Evidence>) {
        let p = &self.topo.process;
        let mut evidence = Vec::new();
        if let Some(a) = &p.cpus_allowed {
            evidence.push(Evidence::new(
                "/proc/self/status",
                format!("Cpus_allowed_list {a}"),
            ));
        }
        if let Some(c) = &p.cgroup_cpuset {
            evidence.push(Evidence::new(
                "cgroup cpuset",
                format!("effective cpus {c}"),
            ));
        }
        if let (Some(a), Some(c)) = (&p.cpus_allowed, &p.cgroup_cpuset)
            && !a.is_subset(c)
        {
            self.findings.push(format!(
                "Cpus_allowed_list {a} has CPUs outside the cgroup cpuset {c}: the cpuset read may belong to another cgroup; using the CPUs in both"
            ));
        }
        (p.usable_cpus(), evidence)
    }
}

/// Owned if any is, else unknown if any is, else visible.
fn combine(states: &[Ownership]) -> Ownership {
    if states.contains(&Ownership::Owned) {
        Ownership::Owned
    } else if states.contains(&Ownership::Unknown) || states.is_empty() {
        Ownership::Unknown
    } else {
        Ownership::Visible
    }
}

fn opt_pci(n: &Netdev) -> String {
    n.pci.map_or_else(|| n.name.clone(), |a| a.to_string())
}

fn starts_with_ci(s: &str, prefix: &str) -> bool {
    s.len() >= prefix.len()
        && s.is_char_boundary(prefix.len())
        && s[..prefix.len()].eq_ignore_ascii_case(prefix)
}

#[cfg(test)]
#[path = "container_tests.rs"]
mod tests;
