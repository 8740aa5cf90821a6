//! Whether this process runs on a host or in a container (its cgroup, the runtimes'
//! marks, a privileged container's capabilities), and whether the netdevs it sees are
//! the host's (a host-network pod) or its own namespace's.

use super::ownership::Evidence;
use crate::model::{Netdev, NetdevKind, Topology};
use serde::{Deserialize, Serialize};
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
    /// The context `topo`'s process view shows, as
    /// [`ContainerView::of`](super::ContainerView::of) decides it, without working out
    /// which devices are whose.
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
pub(super) const PRIVILEGED_CAPS: u64 = (1 << 16) | (1 << 17) | (1 << 21);

/// Whether the NVIDIA container runtime set up this mount namespace: its tmpfs over
/// `/proc/driver/nvidia`, or its bind mounts of GPU procfs entries and device nodes.
pub(super) fn nvidia_runtime_mounts(topo: &Topology) -> Vec<String> {
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

pub(super) fn detect_context(topo: &Topology) -> (Context, Vec<Evidence>, bool) {
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

pub(super) fn is_stacked(n: &Netdev) -> bool {
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

pub(super) fn describe_netdev(n: &Netdev) -> String {
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
