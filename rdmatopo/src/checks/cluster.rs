//! The fleet check: do the rails of many nodes line up? For each fact the value most
//! nodes share is the reference, and every node that differs is odd, with the fact,
//! its value and the reference:
//!
//! - the number of compute rails, and which ports they are (a missing rail says why
//!   the plan left that port out: down, no GID, …);
//! - per rail: link layer, speed, netdev MTU, active MTU (when a verbs source was
//!   there), RoCE GID index, and the IPv4 subnet of its addresses (one subnet per rail
//!   across the fleet; an address on two nodes is a conflict);
//! - the NCCL variables the plan recommends.
//!
//! Rails are matched by their port name (`mlx5_3:1`): identical machines name their
//! HCAs the same, and `NCCL_IB_HCA` must agree across nodes anyway.

use crate::view::rails::{NodeRails, Rail};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;

/// Schema tag of [`FleetReport`]'s JSON.
pub const CLUSTER_SCHEMA: &str = "rdmatopo.cluster/1";

/// A value and how many nodes have it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Agreed {
    pub value: String,
    pub nodes: usize,
}

/// What most nodes say about one rail.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RailReference {
    /// `mlx5_0:1`.
    pub rail: String,
    /// Nodes where this port is a rail.
    pub nodes: usize,
    /// Fact name (`link-layer`, `speed-gbps`, `mtu`, `active-mtu`, `gid-index`,
    /// `subnet`) → the value most of those nodes share.
    pub facts: BTreeMap<String, Agreed>,
}

/// The fleet's majority view.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reference {
    /// Number of compute rails.
    pub rails: Agreed,
    pub per_rail: Vec<RailReference>,
    /// NCCL variable → the value most nodes get (`(unset)` when most set none).
    pub nccl_env: BTreeMap<String, Agreed>,
}

/// One way a node differs from the reference.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    /// `rail-count`, `missing-rail`, `extra-rail`, `link-layer`, `speed-gbps`, `mtu`,
    /// `active-mtu`, `gid-index`, `subnet`, `duplicate-address` or `nccl-env`.
    pub check: String,
    /// The rail (`mlx5_3:1`) or NCCL variable concerned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    /// This node's value (for a missing rail: why the plan left the port out).
    pub value: String,
    /// The reference value.
    pub expected: String,
    /// How many nodes have the reference value.
    pub expected_nodes: usize,
}

/// A node that differs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OddNode {
    pub node: String,
    pub findings: Vec<Finding>,
}

/// An input that could not be read as a node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Unreadable {
    pub node: String,
    pub error: String,
}

/// The fleet check's result (`rdmatopo.cluster/1`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FleetReport {
    pub schema: String,
    /// Nodes compared.
    pub nodes: usize,
    /// Nodes with no finding.
    pub agreeing: usize,
    pub reference: Reference,
    /// Nodes that differ, in input order.
    pub odd: Vec<OddNode>,
    /// Inputs that could not be read (filled in by the caller).
    #[serde(default)]
    pub unreadable: Vec<Unreadable>,
    /// Containers that `k8s audit` reports (`rdmatopo.audit/1`) among the inputs
    /// found misplaced ([`misaligned_pods`], filled in by the caller).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub misaligned_pods: Vec<MisalignedPod>,
}

/// A container of some node that its `k8s audit` report gave warnings or errors.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MisalignedPod {
    pub node: String,
    pub namespace: String,
    pub pod: String,
    pub container: String,
    /// The worst GPU-NIC class in the container (`SYS`), when it has both.
    pub worst_path: Option<String>,
    pub numa_misaligned: bool,
    pub severity: crate::model::Severity,
    /// The checks that found something, in report order.
    pub checks: Vec<String>,
}

/// Every container with a warning or error in the audit reports of `nodes` (name,
/// report), worst first, then in input order.
pub fn misaligned_pods(
    nodes: &[(String, crate::checks::audit::AuditReport)],
) -> Vec<MisalignedPod> {
    let mut out = Vec::new();
    for (node, report) in nodes {
        for pod in &report.pods {
            for c in &pod.containers {
                let real: Vec<_> = c.findings.iter().filter(|f| !f.skipped).collect();
                let Some(severity) = real.iter().map(|f| f.severity).max() else {
                    continue;
                };
                if severity == crate::model::Severity::Info {
                    continue;
                }
                let mut checks: Vec<String> = Vec::new();
                for f in &real {
                    if !checks.contains(&f.check) {
                        checks.push(f.check.clone());
                    }
                }
                out.push(MisalignedPod {
                    node: report.node.clone().unwrap_or_else(|| node.clone()),
                    namespace: pod.namespace.clone(),
                    pod: pod.name.clone(),
                    container: c.name.clone(),
                    worst_path: c.worst_path.clone(),
                    numa_misaligned: c.numa_misaligned,
                    severity,
                    checks,
                });
            }
        }
    }
    out.sort_by_key(|m| std::cmp::Reverse(m.severity));
    out
}

/// The most common value, ties going to the one seen first.
fn mode<'a>(values: impl IntoIterator<Item = &'a str>) -> Option<Agreed> {
    let mut counts: Vec<(&str, usize)> = Vec::new();
    let mut index: BTreeMap<&str, usize> = BTreeMap::new();
    for v in values {
        match index.get(v) {
            Some(i) => counts[*i].1 += 1,
            None => {
                index.insert(v, counts.len());
                counts.push((v, 1));
            }
        }
    }
    let best = counts.iter().map(|(_, n)| *n).max()?;
    counts
        .into_iter()
        .find(|(_, n)| *n == best)
        .map(|(v, n)| Agreed {
            value: v.to_string(),
            nodes: n,
        })
}

const UNKNOWN: &str = "unknown";
const NONE: &str = "none";

/// The network of `a.b.c.d/len` (`/32` when no length is given).
fn subnet(addr: &str) -> Option<String> {
    let (ip, len) = match addr.split_once('/') {
        Some((ip, len)) => (ip, len.parse::<u32>().ok()?),
        None => (addr, 32),
    };
    let ip: Ipv4Addr = ip.parse().ok()?;
    if len > 32 {
        return None;
    }
    let mask = if len == 0 { 0 } else { u32::MAX << (32 - len) };
    Some(format!("{}/{len}", Ipv4Addr::from(u32::from(ip) & mask)))
}

/// A fact's name and a node's value; `None` when the node cannot know it.
type Facts = Vec<(&'static str, Option<String>)>;

/// The facts compared per rail; `None` for one a node cannot know (no verbs source).
fn rail_facts(r: &Rail) -> Facts {
    let p = &r.port;
    let subnets: BTreeSet<String> = p.ipv4.iter().filter_map(|a| subnet(a)).collect();
    let opt = |v: Option<u32>, missing: &str| v.map_or(missing.to_string(), |v| v.to_string());
    vec![
        (
            "link-layer",
            Some(
                p.link_layer
                    .map_or(UNKNOWN.to_string(), |l| l.as_str().to_string()),
            ),
        ),
        (
            "speed-gbps",
            Some(p.rate_gbps.map_or(UNKNOWN.to_string(), |g| format!("{g}"))),
        ),
        ("mtu", Some(opt(p.netdev_mtu, UNKNOWN))),
        ("active-mtu", p.active_mtu.map(|m| m.to_string())),
        ("gid-index", Some(opt(p.gid_index, NONE))),
        (
            "subnet",
            Some(if subnets.is_empty() {
                NONE.to_string()
            } else {
                subnets.into_iter().collect::<Vec<_>>().join(",")
            }),
        ),
    ]
}

/// Compare the rails of `nodes` (name, rails), in the order given.
pub fn check(nodes: &[(String, NodeRails)]) -> FleetReport {
    let mut findings: Vec<Vec<Finding>> = vec![Vec::new(); nodes.len()];
    let n = nodes.len();

    // Rail count.
    let counts: Vec<String> = nodes
        .iter()
        .map(|(_, r)| r.rails.len().to_string())
        .collect();
    let rails_ref = mode(counts.iter().map(String::as_str)).unwrap_or(Agreed {
        value: "0".into(),
        nodes: 0,
    });
    for (i, c) in counts.iter().enumerate() {
        if *c != rails_ref.value {
            findings[i].push(Finding {
                check: "rail-count".into(),
                subject: None,
                value: c.clone(),
                expected: rails_ref.value.clone(),
                expected_nodes: rails_ref.nodes,
            });
        }
    }

    // Which ports are rails: those that are rails on more than half the nodes.
    let by_label: Vec<BTreeMap<&str, &Rail>> = nodes
        .iter()
        .map(|(_, r)| r.rails.iter().map(|x| (x.port.label.as_str(), x)).collect())
        .collect();
    // In rail order (by GPU), as the first node that has the rail lists it.
    let mut label_nodes: BTreeMap<&str, usize> = BTreeMap::new();
    let mut label_order: Vec<&str> = Vec::new();
    for (_, rails) in nodes {
        for r in &rails.rails {
            let c = label_nodes.entry(r.port.label.as_str()).or_default();
            if *c == 0 {
                label_order.push(&r.port.label);
            }
            *c += 1;
        }
    }
    let expected: Vec<&str> = label_order
        .iter()
        .copied()
        .filter(|l| label_nodes[l] * 2 > n)
        .collect();
    for (i, (_, rails)) in nodes.iter().enumerate() {
        for l in &expected {
            if by_label[i].contains_key(l) {
                continue;
            }
            let why = rails
                .left_out
                .iter()
                .find(|o| o.port.label == *l)
                .map_or_else(|| "no such port".to_string(), |o| o.reason.clone());
            findings[i].push(Finding {
                check: "missing-rail".into(),
                subject: Some(l.to_string()),
                value: why,
                expected: "a compute rail".into(),
                expected_nodes: label_nodes[l],
            });
        }
        for l in by_label[i].keys() {
            if !expected.contains(l) {
                findings[i].push(Finding {
                    check: "extra-rail".into(),
                    subject: Some(l.to_string()),
                    value: "a compute rail".into(),
                    expected: "not a rail".into(),
                    expected_nodes: n - label_nodes[l],
                });
            }
        }
    }

    // Per-rail facts.
    let mut per_rail = Vec::new();
    for l in &expected {
        let facts: Vec<(usize, Facts)> = by_label
            .iter()
            .enumerate()
            .filter_map(|(i, m)| m.get(l).map(|r| (i, rail_facts(r))))
            .collect();
        let mut refs = BTreeMap::new();
        let names: Vec<&'static str> = facts
            .first()
            .map(|(_, f)| f.iter().map(|(k, _)| *k).collect())
            .unwrap_or_default();
        for (k, name) in names.iter().enumerate() {
            let Some(reference) = mode(facts.iter().filter_map(|(_, f)| f[k].1.as_deref())) else {
                continue;
            };
            for (i, f) in &facts {
                if let Some(v) = &f[k].1
                    && *v != reference.value
                {
                    findings[*i].push(Finding {
                        check: name.to_string(),
                        subject: Some(l.to_string()),
                        value: v.clone(),
                        expected: reference.value.clone(),
                        expected_nodes: reference.nodes,
                    });
                }
            }
            refs.insert(name.to_string(), reference);
        }
        per_rail.push(RailReference {
            rail: l.to_string(),
            nodes: label_nodes[l],
            facts: refs,
        });
    }

    // An address on two nodes.
    let mut holders: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (i, (_, rails)) in nodes.iter().enumerate() {
        for r in &rails.rails {
            for a in &r.port.ipv4 {
                let ip = a.split('/').next().unwrap_or(a);
                let v = holders.entry(ip).or_default();
                if v.last() != Some(&i) {
                    v.push(i);
                }
            }
        }
    }
    for (ip, owners) in &holders {
        if owners.len() < 2 {
            continue;
        }
        for i in owners {
            let others: Vec<&str> = owners
                .iter()
                .filter(|j| *j != i)
                .map(|j| nodes[*j].0.as_str())
                .collect();
            let rail = nodes[*i]
                .1
                .rails
                .iter()
                .find(|r| r.port.ipv4.iter().any(|a| a.split('/').next() == Some(ip)))
                .map(|r| r.port.label.clone());
            findings[*i].push(Finding {
                check: "duplicate-address".into(),
                subject: rail,
                value: ip.to_string(),
                expected: format!("an address no other node has (also on {})", list(&others)),
                expected_nodes: n - owners.len(),
            });
        }
    }

    // NCCL variables.
    let vars: BTreeSet<&str> = nodes
        .iter()
        .flat_map(|(_, r)| r.nccl_env.keys().map(String::as_str))
        .collect();
    let mut nccl_env = BTreeMap::new();
    for var in vars {
        let values: Vec<&str> = nodes
            .iter()
            .map(|(_, r)| r.nccl_env.get(var).map_or("(unset)", String::as_str))
            .collect();
        let Some(reference) = mode(values.iter().copied()) else {
            continue;
        };
        for (i, v) in values.iter().enumerate() {
            if *v != reference.value {
                findings[i].push(Finding {
                    check: "nccl-env".into(),
                    subject: Some(var.to_string()),
                    value: v.to_string(),
                    expected: reference.value.clone(),
                    expected_nodes: reference.nodes,
                });
            }
        }
        nccl_env.insert(var.to_string(), reference);
    }

    let odd: Vec<OddNode> = nodes
        .iter()
        .zip(findings)
        .filter(|(_, f)| !f.is_empty())
        .map(|((name, _), findings)| OddNode {
            node: name.clone(),
            findings,
        })
        .collect();
    FleetReport {
        schema: CLUSTER_SCHEMA.into(),
        nodes: n,
        agreeing: n - odd.len(),
        reference: Reference {
            rails: rails_ref,
            per_rail,
            nccl_env,
        },
        odd,
        unreadable: Vec::new(),
        misaligned_pods: Vec::new(),
    }
}

/// `a, b, c` or `a, b, c, … (n in all)`.
fn list(names: &[&str]) -> String {
    if names.len() <= 3 {
        names.join(", ")
    } else {
        format!("{}, … ({} in all)", names[..3].join(", "), names.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::PortState;
    use crate::view::plan::testkit::dgx_like;

    fn node(name: &str, t: &crate::Topology) -> (String, NodeRails) {
        (name.to_string(), NodeRails::of(t).unwrap())
    }

    #[test]
    fn identical_nodes_agree() {
        let t = dgx_like();
        let nodes: Vec<_> = (0..5).map(|i| node(&format!("n{i}"), &t)).collect();
        let r = check(&nodes);
        assert_eq!(r.agreeing, 5);
        assert!(r.odd.is_empty());
        assert_eq!(r.reference.rails.value, "8");
        let order: Vec<&str> = r
            .reference
            .per_rail
            .iter()
            .map(|x| x.rail.as_str())
            .collect();
        let rails: Vec<&str> = nodes[0]
            .1
            .rails
            .iter()
            .map(|x| x.port.label.as_str())
            .collect();
        assert_eq!(order, rails);
        assert_eq!(order[..3], ["mlx5_0:1", "mlx5_1:1", "mlx5_2:1"]);
    }

    #[test]
    fn a_down_rail_is_missing_with_the_reason() {
        let t = dgx_like();
        let mut bad = t.clone();
        bad.rdma_devices[2].ports[0].state = Some(PortState::Down);
        let nodes = vec![node("a", &t), node("b", &bad), node("c", &t)];
        let r = check(&nodes);
        assert_eq!(r.odd.len(), 1);
        let odd = &r.odd[0];
        assert_eq!(odd.node, "b");
        let checks: Vec<&str> = odd.findings.iter().map(|f| f.check.as_str()).collect();
        assert!(checks.contains(&"rail-count"), "{checks:?}");
        let missing = odd
            .findings
            .iter()
            .find(|f| f.check == "missing-rail")
            .unwrap();
        assert_eq!(missing.subject.as_deref(), Some("mlx5_2:1"));
        assert!(missing.value.contains("not ACTIVE"), "{}", missing.value);
        assert!(checks.contains(&"nccl-env"), "{checks:?}");
    }

    #[test]
    fn mtu_speed_and_subnet_differences_are_named() {
        let t = dgx_like();
        let mut bad = t.clone();
        // Give every rail an address, then move one to another subnet.
        let mut good = t.clone();
        for (topo, host) in [(&mut good, 1), (&mut bad, 2)] {
            for (i, d) in topo.rdma_devices.iter_mut().enumerate().take(8) {
                let nd = format!("ib{i}");
                d.ports[0].netdev = Some(nd.clone());
                let mut dev = crate::view::plan::testkit::netdev(&nd, d.pci);
                dev.ipv4 = vec![format!("10.{i}.0.{host}/24")];
                topo.netdevs.push(dev);
            }
        }
        bad.netdevs
            .iter_mut()
            .find(|n| n.name == "ib3")
            .unwrap()
            .ipv4 = vec!["10.99.0.2/24".into()];
        bad.netdevs
            .iter_mut()
            .find(|n| n.name == "ib4")
            .unwrap()
            .mtu = Some(1500);
        bad.rdma_devices[5].ports[0].rate = Some(crate::parse::Rate {
            gbps: 200.0,
            lanes: 4,
            speed: "HDR".into(),
        });
        let mut twin = good.clone();
        for n in twin.netdevs.iter_mut() {
            n.ipv4 = n.ipv4.iter().map(|a| a.replace(".1/24", ".3/24")).collect();
        }
        let r = check(&[node("a", &good), node("b", &bad), node("c", &twin)]);
        assert_eq!(r.odd.len(), 1, "{:#?}", r.odd);
        let f: Vec<(String, Option<String>, String)> = r.odd[0]
            .findings
            .iter()
            .map(|f| (f.check.clone(), f.subject.clone(), f.value.clone()))
            .collect();
        assert!(
            f.contains(&(
                "subnet".into(),
                Some("mlx5_3:1".into()),
                "10.99.0.0/24".into()
            )),
            "{f:?}"
        );
        assert!(
            f.contains(&("mtu".into(), Some("mlx5_4:1".into()), "1500".into())),
            "{f:?}"
        );
        assert!(
            f.contains(&("speed-gbps".into(), Some("mlx5_5:1".into()), "200".into())),
            "{f:?}"
        );
        assert_eq!(f.len(), 3, "{f:?}");
    }

    #[test]
    fn an_address_on_two_nodes_is_a_conflict() {
        let mut t = dgx_like();
        let d = &mut t.rdma_devices[0];
        d.ports[0].netdev = Some("ib0".into());
        let mut dev = crate::view::plan::testkit::netdev("ib0", d.pci);
        dev.ipv4 = vec!["10.0.0.1/24".into()];
        t.netdevs.push(dev);
        let r = check(&[node("a", &t), node("b", &t)]);
        assert_eq!(r.odd.len(), 2);
        assert!(
            r.odd
                .iter()
                .all(|o| o.findings[0].check == "duplicate-address")
        );
    }

    #[test]
    fn subnets() {
        assert_eq!(subnet("10.1.2.3/24").as_deref(), Some("10.1.2.0/24"));
        assert_eq!(subnet("10.1.2.3").as_deref(), Some("10.1.2.3/32"));
        assert_eq!(subnet("10.1.2.3/0").as_deref(), Some("0.0.0.0/0"));
        assert_eq!(subnet("10.1.2.3/33"), None);
        assert_eq!(subnet("x/24"), None);
    }

    #[test]
    fn ties_go_to_the_first_value_seen() {
        let m = mode(["b", "a", "a", "b"]).unwrap();
        assert_eq!((m.value.as_str(), m.nodes), ("b", 2));
        assert!(mode(std::iter::empty()).is_none());
    }
}
