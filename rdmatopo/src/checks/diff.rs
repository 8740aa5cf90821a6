//! `rdmatopo diff A B`: what changed between two views of a machine (typically the
//! host and a pod on it), in the terms of the doctor's checks: the CPUs and their NUMA
//! nodes, the GPUs and NICs (VFs) seen and the distance from each GPU to its NIC, the
//! MTUs, the GID indices, the rails, the RDMA limits; then each check's outcome on
//! both sides and the findings that appear or disappear.
//!
//! Devices are matched by PCI address (GPUs) and by name (RDMA devices): a container
//! sees the host's addresses and, in either RDMA netns mode, the host's device names.

use super::doctor::{self, Outcome, Report, active_mtu};
use crate::model::{Severity, Topology};
use crate::parse::natural_cmp;
use crate::parse::{CpuSet, RdmaLimitValue};
use crate::view::gid::best_gid;
use crate::view::scope::{Context, Scope};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// Schema tag of the diff's JSON.
pub const SCHEMA: &str = "rdmatopo.diff/1";

/// One side of the comparison.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Side {
    /// The root it was read from.
    pub root: String,
    /// `host`, `pod`, `pod-host-network` or `container`.
    pub context: Context,
}

/// One fact on both sides.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fact {
    /// What is compared (`cpus`, `nic GPU0`, `mtu mlx5_0`, …).
    pub topic: String,
    /// Its value in A, `-` when A does not have it.
    pub a: String,
    pub b: String,
    pub changed: bool,
}

/// One check on both sides.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckDiff {
    pub check: String,
    pub a: Outcome,
    pub b: Outcome,
    /// Summaries of B's findings that A does not have.
    pub only_in_b: Vec<String>,
    /// Summaries of A's findings that B does not have.
    pub only_in_a: Vec<String>,
}

/// The comparison (`rdmatopo.diff/1`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Diff {
    pub schema: String,
    pub a: Side,
    pub b: Side,
    pub facts: Vec<Fact>,
    /// Only the checks whose outcome or findings differ.
    pub checks: Vec<CheckDiff>,
}

impl Diff {
    /// Whether anything differs.
    pub fn differs(&self) -> bool {
        self.facts.iter().any(|f| f.changed) || !self.checks.is_empty()
    }
}

/// Compare two models.
pub fn diff(a: &Topology, b: &Topology) -> Diff {
    let (sa, sb) = (Scope::of(a), Scope::of(b));
    let (fa, fb) = (facts(&sa), facts(&sb));
    let topics: Vec<String> = {
        let mut seen = BTreeSet::new();
        fa.iter()
            .chain(fb.iter())
            .map(|(t, _)| t.clone())
            .filter(|t| seen.insert(t.clone()))
            .collect()
    };
    // Host against container: per-device facts only for what the container has (and
    // the PFs of its VFs), not for every device of the host.
    let focus = match (sa.context.is_container(), sb.context.is_container()) {
        (false, true) => Some(focus_of(&sb)),
        (true, false) => Some(focus_of(&sa)),
        _ => None,
    };
    let topics: Vec<String> = topics
        .into_iter()
        .filter(|t| focus.as_ref().is_none_or(|f| in_focus(f, t)))
        .collect();
    let get = |f: &[(String, String)], t: &str| {
        f.iter()
            .find(|(k, _)| k == t)
            .map_or("-".to_string(), |(_, v)| v.clone())
    };
    let mut ordered = topics;
    ordered.sort_by(|x, y| {
        let (rx, ry) = (topic_rank(x), topic_rank(y));
        rx.0.cmp(&ry.0).then_with(|| natural_cmp(&rx.1, &ry.1))
    });
    let facts = ordered
        .into_iter()
        .map(|t| {
            let (va, vb) = (get(&fa, &t), get(&fb, &t));
            Fact {
                changed: va != vb,
                a: va,
                b: vb,
                topic: t,
            }
        })
        .collect();
    let (ra, rb) = (doctor::run(a), doctor::run(b));
    Diff {
        schema: SCHEMA.to_string(),
        a: Side {
            root: a.root.clone(),
            context: sa.context,
        },
        b: Side {
            root: b.root.clone(),
            context: sb.context,
        },
        facts,
        checks: check_diffs(&ra, &rb),
    }
}

/// The devices a container judges: its GPUs, its RDMA devices and the RDMA devices
/// of the PFs behind its VFs.
fn focus_of(scope: &Scope) -> BTreeSet<String> {
    let mut out: BTreeSet<String> = scope.gpus.iter().map(|g| g.pci.to_string()).collect();
    for d in &scope.hcas {
        out.insert(d.name.clone());
        let pf = d.pci.and_then(|a| scope.function(a)).and_then(|f| f.physfn);
        if let Some(pf) = pf {
            for p in scope.topo.rdma_devices.iter().filter(|p| p.pci == Some(pf)) {
                out.insert(p.name.clone());
            }
        }
    }
    out
}

/// Whether a per-device topic (`nic <pci>`, `mtu <dev>[:port]`, `gid …`, `rdma.max …`)
/// is about a focused device; other topics always are.
fn in_focus(focus: &BTreeSet<String>, topic: &str) -> bool {
    let mut words = topic.split(' ');
    let group = words.next().unwrap_or_default();
    if !matches!(
        group,
        "nic" | "mtu" | "gid" | "rdma.max" | "rdma.current" | "qos"
    ) {
        return true;
    }
    match words.next() {
        Some(key) => focus.contains(key.split(':').next().unwrap_or(key)) || focus.contains(key),
        None => true,
    }
}

/// Order of topics in the output: the order of the doctor's checks.
fn topic_rank(topic: &str) -> (u32, String) {
    let group = topic.split(' ').next().unwrap_or_default();
    let rank = [
        "context",
        "netns",
        "cpus",
        "gpus",
        "rdma",
        "nic",
        "vf",
        "mtu",
        "gid",
        "rails",
        "rdma.max",
        "rdma.current",
        "memlock",
        "uverbs",
        "qos",
    ]
    .iter()
    .position(|g| *g == group)
    .unwrap_or(99) as u32;
    (rank, topic.to_string())
}

fn cpus_text(scope: &Scope, cpus: &CpuSet) -> String {
    let nodes: Vec<String> = scope
        .topo
        .numa_nodes
        .iter()
        .filter(|n| !n.cpus.intersection(cpus).is_empty())
        .map(|n| n.id.to_string())
        .collect();
    let local = scope
        .gpus
        .iter()
        .filter_map(|g| scope.function(g.pci))
        .filter_map(|f| crate::view::affinity::local_cpus(scope.topo, f))
        .fold(CpuSet::new(), |acc, l| acc.union(&l));
    let local_part = if scope.gpus.is_empty() || local.is_empty() {
        String::new()
    } else {
        format!(
            ", {} local to the GPUs in use",
            cpus.intersection(&local).len()
        )
    };
    format!(
        "{} CPUs {cpus} on NUMA {}{local_part}",
        cpus.len(),
        if nodes.is_empty() {
            "?".to_string()
        } else {
            nodes.join(",")
        }
    )
}

fn limit(v: Option<RdmaLimitValue>) -> String {
    match v {
        Some(RdmaLimitValue::Max) => "max".into(),
        Some(RdmaLimitValue::Count(n)) => n.to_string(),
        None => "-".into(),
    }
}

/// Every fact of one side, as (topic, value).
fn facts(scope: &Scope) -> Vec<(String, String)> {
    let topo = scope.topo;
    let p = &topo.process;
    let mut out: Vec<(String, String)> = Vec::new();
    let mut push = |t: &str, v: String| out.push((t.to_string(), v));
    push("context", scope.context.describe().to_string());
    push(
        "netns",
        format!(
            "{}; RDMA netns mode {}",
            if scope.host_network {
                "host network namespace"
            } else {
                "own network namespace"
            },
            match topo.host.rdma_netns_mode {
                Some(crate::model::NetnsMode::Shared) => "shared",
                Some(crate::model::NetnsMode::Exclusive) => "exclusive",
                None => "unknown",
            }
        ),
    );
    push(
        "cpus",
        p.usable_cpus()
            .map_or("unknown".to_string(), |c| cpus_text(scope, &c)),
    );
    push(
        "gpus",
        format!(
            "{}: {}",
            scope.gpus.len(),
            scope
                .gpus
                .iter()
                .map(|g| g.pci.to_string())
                .collect::<Vec<_>>()
                .join(" ")
        ),
    );
    push(
        "rdma devices",
        format!(
            "{}: {}",
            scope.hcas.len(),
            scope
                .hcas
                .iter()
                .map(|d| {
                    if scope.is_vf(d) {
                        format!("{} (VF)", d.name)
                    } else {
                        d.name.clone()
                    }
                })
                .collect::<Vec<_>>()
                .join(" ")
        ),
    );
    for gn in &scope.gpu_nics {
        let nics: Vec<String> = gn
            .nics
            .iter()
            .map(|d| {
                if scope.is_vf(d) {
                    format!("{} (VF)", d.name)
                } else {
                    d.name.clone()
                }
            })
            .collect();
        push(
            &format!("nic {}", gn.gpu.pci),
            format!("{} at {}", nics.join("+"), gn.class),
        );
    }
    for (dev, port) in scope.fabric_ports() {
        let label = if dev.ports.len() > 1 {
            format!("{}:{}", dev.name, port.number)
        } else {
            dev.name.clone()
        };
        if let Some((m, _, _)) = active_mtu(scope, dev, port) {
            let netdev = doctor::uplink(scope, dev, port)
                .and_then(|n| Some(format!(" ({} MTU {})", n.name, n.mtu?)))
                .unwrap_or_default();
            push(&format!("mtu {label}"), format!("active {m}{netdev}"));
        }
        for g in &port.gids {
            let Some(nd) = &g.netdev else { continue };
            if let Some(m) = topo.netdev(nd).and_then(|n| n.mtu)
                && doctor::uplink(scope, dev, port).is_none_or(|u| u.name != *nd)
            {
                push(&format!("mtu {label} via {nd}"), format!("netdev MTU {m}"));
            }
        }
        if port.link_layer == Some(crate::parse::LinkLayer::Ethernet) {
            push(
                &format!("gid {label}"),
                best_gid(topo, port).map_or("none".to_string(), |g| {
                    format!(
                        "index {} ({}{})",
                        g.index,
                        g.ipv4.as_deref().unwrap_or(&g.gid),
                        g.netdev
                            .as_deref()
                            .map_or(String::new(), |n| format!(" on {n}"))
                    )
                }),
            );
        }
    }
    let rails = scope.rails();
    let mut kinds: BTreeMap<String, usize> = BTreeMap::new();
    for (_, port) in &rails {
        let k = format!(
            "{} {}",
            port.link_layer.map_or("unknown", |l| l.as_str()),
            port.rate
                .as_ref()
                .map_or("?".to_string(), |r| format!("{} Gb/s", r.gbps))
        );
        *kinds.entry(k).or_default() += 1;
    }
    push(
        "rails",
        format!(
            "{}{}",
            rails.len(),
            if kinds.is_empty() {
                String::new()
            } else {
                format!(
                    ": {}",
                    kinds
                        .iter()
                        .map(|(k, n)| format!("{n}x {k}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            }
        ),
    );
    let owned: BTreeSet<&str> = scope.hcas.iter().map(|d| d.name.as_str()).collect();
    match &p.rdma_max {
        None => push("rdma.max", "no rdma cgroup limit".to_string()),
        Some(lines) => {
            for l in lines.iter().filter(|l| owned.contains(l.device.as_str())) {
                push(
                    &format!("rdma.max {}", l.device),
                    format!(
                        "hca_handle={} hca_object={}",
                        limit(l.hca_handle),
                        limit(l.hca_object)
                    ),
                );
            }
        }
    }
    if let Some(lines) = &p.rdma_current {
        for l in lines.iter().filter(|l| owned.contains(l.device.as_str())) {
            push(
                &format!("rdma.current {}", l.device),
                format!(
                    "hca_handle={} hca_object={}",
                    limit(l.hca_handle),
                    limit(l.hca_object)
                ),
            );
        }
    }
    push(
        "memlock",
        match p.memlock {
            None => "unknown".to_string(),
            Some(crate::parse::MemlockLimit::Unlimited) => "unlimited".to_string(),
            Some(crate::parse::MemlockLimit::Bytes(b)) => format!("{b} bytes"),
        },
    );
    let uverbs: Vec<&str> = p
        .dev_infiniband
        .iter()
        .map(String::as_str)
        .filter(|n| n.starts_with("uverbs") || *n == "rdma_cm")
        .collect();
    push(
        "uverbs",
        if uverbs.is_empty() {
            "none".to_string()
        } else {
            uverbs.join(" ")
        },
    );
    out.extend(qos_facts(scope));
    out
}

fn check_diffs(a: &Report, b: &Report) -> Vec<CheckDiff> {
    let summaries = |r: &Report, check: &str| -> Vec<String> {
        r.findings
            .iter()
            .filter(|f| f.check == check)
            .map(|f| {
                let sev = if f.skipped {
                    "skipped"
                } else {
                    match f.severity {
                        Severity::Error => "error",
                        Severity::Warning => "warning",
                        Severity::Info => "info",
                    }
                };
                format!("{sev}: {}", f.summary)
            })
            .collect()
    };
    let mut out = Vec::new();
    for (ca, cb) in a.checks.iter().zip(&b.checks) {
        let (fa, fb) = (summaries(a, &ca.check), summaries(b, &cb.check));
        let only_in_b: Vec<String> = fb.iter().filter(|s| !fa.contains(s)).cloned().collect();
        let only_in_a: Vec<String> = fa.iter().filter(|s| !fb.contains(s)).cloned().collect();
        if ca.outcome == cb.outcome && only_in_a.is_empty() && only_in_b.is_empty() {
            continue;
        }
        out.push(CheckDiff {
            check: ca.check.clone(),
            a: ca.outcome,
            b: cb.outcome,
            only_in_b,
            only_in_a,
        });
    }
    out
}

/// `rdmatopo diff` facts: one `qos <port>` line per RoCE port of the compute fabric.
fn qos_facts(scope: &Scope) -> Vec<(String, String)> {
    scope
        .roce_ports()
        .into_iter()
        .map(|(dev, port)| {
            let v = crate::view::qos::port_view(scope.topo, dev, port);
            (format!("qos {}", v.label(dev.ports.len() > 1)), v.summary())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sysfs::{MemTree, Sysfs};

    /// A host with one GPU and one RoCE NIC under a switch; `pod` gives the same
    /// machine seen from a pod with a macvlan (MTU `mtu`) and restricted CPUs.
    fn view(pod: bool, mtu: &str) -> Topology {
        let mut t = MemTree::new();
        t.file("/sys/devices/system/node/node0/cpulist", "0-3\n");
        t.file("/sys/devices/system/node/node1/cpulist", "4-7\n");
        let rp = "/sys/devices/pci0000:00/0000:00:01.0";
        for (b, class, ven, dev) in [
            (rp.to_string(), "0x060400", "0x1000", "0xc030"),
            (format!("{rp}/0000:01:00.0"), "0x030200", "0x10de", "0x2330"),
            (format!("{rp}/0000:01:00.1"), "0x020000", "0x15b3", "0x1021"),
        ] {
            t.file(&format!("{b}/class"), &format!("{class}\n"));
            t.file(&format!("{b}/vendor"), &format!("{ven}\n"));
            t.file(&format!("{b}/device"), &format!("{dev}\n"));
            t.file(&format!("{b}/numa_node"), "0\n");
            let bdf = b.rsplit('/').next().unwrap_or_default().to_string();
            t.link(
                &format!("/sys/bus/pci/devices/{bdf}"),
                &format!("../../../{}", b.trim_start_matches("/sys/")),
            );
        }
        let nic = format!("{rp}/0000:01:00.1");
        let ib = format!("{nic}/infiniband/mlx5_0");
        t.link(
            "/sys/class/infiniband/mlx5_0",
            &format!("../../{}", ib.trim_start_matches("/sys/")),
        );
        t.link(&format!("{ib}/device"), "../../../0000:01:00.1");
        t.file(&format!("{ib}/ports/1/state"), "4: ACTIVE\n");
        t.file(&format!("{ib}/ports/1/link_layer"), "Ethernet\n");
        t.file("/sys/class/infiniband_verbs/uverbs0/ibdev", "mlx5_0\n");
        t.file("/dev/nvidia0", "");
        t.file(
            "/proc/driver/nvidia/gpus/0000:01:00.0/information",
            "Model: \t\t NVIDIA H100\nDevice Minor: \t 0\n",
        );
        t.file("/dev/infiniband/uverbs0", "");
        let (slot, ndev) = if pod { (5, "net1") } else { (3, "ens1") };
        // A whole table, as the kernel makes it: the other slots empty.
        for other in 0..8 {
            t.file(
                &format!("{ib}/ports/1/gids/{other}"),
                "0000:0000:0000:0000:0000:0000:0000:0000\n",
            );
        }
        t.file(
            &format!("{ib}/ports/1/gids/{slot}"),
            "0000:0000:0000:0000:0000:ffff:0a00:0005\n",
        );
        t.file(&format!("{ib}/ports/1/gid_attrs/types/{slot}"), "RoCE v2\n");
        t.file(
            &format!("{ib}/ports/1/gid_attrs/ndevs/{slot}"),
            &format!("{ndev}\n"),
        );
        if pod {
            t.file("/proc/self/environ", "KUBERNETES_SERVICE_HOST=10.96.0.1\0");
            t.file("/proc/self/status", "Cpus_allowed_list:\t4-5\n");
            t.link("/sys/class/net/net1", "../../devices/virtual/net/net1");
            t.file("/sys/devices/virtual/net/net1/mtu", &format!("{mtu}\n"));
            t.file("/sys/devices/virtual/net/net1/type", "1\n");
        } else {
            t.file("/proc/self/status", "Cpus_allowed_list:\t0-7\n");
            let nd = format!("{nic}/net/ens1");
            t.link(
                "/sys/class/net/ens1",
                &format!("../../{}", nd.trim_start_matches("/sys/")),
            );
            t.file(&format!("{nd}/mtu"), "9000\n");
            t.file(&format!("{nd}/type"), "1\n");
        }
        let fs = Sysfs::memory(t, if pod { "pod" } else { "host" });
        crate::discover_fs(&fs).unwrap()
    }

    fn fact<'a>(d: &'a Diff, topic: &str) -> &'a Fact {
        d.facts
            .iter()
            .find(|f| f.topic == topic)
            .unwrap_or_else(|| panic!("no fact {topic}: {:#?}", d.facts))
    }

    #[test]
    fn host_vs_pod() {
        let d = diff(&view(false, "9000"), &view(true, "1450"));
        assert!(d.differs());
        assert_eq!(fact(&d, "context").b, "pod");
        let cpus = fact(&d, "cpus");
        assert_eq!(cpus.a, "8 CPUs 0-7 on NUMA 0,1, 4 local to the GPUs in use");
        assert_eq!(cpus.b, "2 CPUs 4-5 on NUMA 1, 0 local to the GPUs in use");
        let gid = fact(&d, "gid mlx5_0");
        assert_eq!(gid.a, "index 3 (10.0.0.5 on ens1)");
        assert_eq!(gid.b, "index 5 (10.0.0.5 on net1)");
        assert_eq!(fact(&d, "mtu mlx5_0").a, "active 4096 (ens1 MTU 9000)");
        assert_eq!(fact(&d, "mtu mlx5_0").b, "-");
        assert_eq!(fact(&d, "mtu mlx5_0 via net1").b, "netdev MTU 1450");
        assert!(!fact(&d, "nic 0000:01:00.0").changed);
        // In the terms of the checks: the pod's CPUs are remote, its MTU is low.
        let numa = d
            .checks
            .iter()
            .find(|c| c.check == "numa-affinity")
            .unwrap();
        assert_eq!((numa.a, numa.b), (Outcome::Ok, Outcome::Error));
        assert!(d.checks.iter().any(|c| c.check == "mtu"));
    }

    #[test]
    fn same_view_has_no_difference() {
        let d = diff(&view(true, "9000"), &view(true, "9000"));
        assert!(!d.differs(), "{:#?}", d);
    }
}
