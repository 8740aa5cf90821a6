//! The RoCE QoS view: per RDMA port the traffic class it is configured to send with,
//! the priority that class lands on, the ECN (DCQCN) enables and lossless priorities of
//! the port it leaves through, and for a VF what its PF publishes about it; and the
//! `NCCL_IB_TC` these facts support.
//!
//! RoCE v2 packets carry the QP's traffic class as the IP ToS byte (DSCP << 2 | ECN).
//! NCCL creates its QPs with verbs, not rdma_cm, and sets the class from `NCCL_IB_TC`
//! (default 0: DSCP 0, priority 0, usually the lossy class); MLNX_OFED's per-port
//! `tc/<port>/traffic_class` overrides it for every QP of the port. The priority a DSCP
//! maps to depends on the trust mode and the DSCP map, which sysfs does not show: the
//! priority derived from a class assumes `trust dscp` with the default map (DSCP / 8),
//! and says so.

use crate::model::{EcnPoint, NetdevQos, Port, RdmaDevice, Topology};
use crate::parse::{TrafficClass, VfConfig};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// Schema tag of [`QosView`]'s JSON.
pub const SCHEMA: &str = "rdmatopo.qos/1";

/// What sysfs cannot say about QoS on any mlx5 driver.
pub const NOT_IN_SYSFS: &str = "trust mode, PFC enables and the DSCP-to-priority map are in DCB netlink only (`mlnx_qos -i <if>`, `dcb pfc show dev <if>`); pause-frame counters are in `ethtool -S <if>` only (`rx_prio3_pause`, …), not in `statistics/`";

/// `/sys/class/infiniband/<dev>/tc/<port>/traffic_class`.
pub fn tc_path(dev: &str, port: u32) -> String {
    format!("/sys/class/infiniband/{dev}/tc/{port}/traffic_class")
}

/// `/sys/kernel/config/rdma_cm/<dev>/ports/<port>/default_roce_tos`.
pub fn cm_tos_path(dev: &str, port: u32) -> String {
    format!("/sys/kernel/config/rdma_cm/{dev}/ports/{port}/default_roce_tos")
}

/// The QoS of one RDMA port, as far as sysfs shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortView {
    pub device: String,
    pub port: u32,
    /// `Ethernet`, `InfiniBand` or `unknown`.
    pub link_layer: String,
    /// The port's netdev (ibdev2netdev).
    pub netdev: Option<String>,
    /// The port belongs to an SR-IOV virtual function.
    pub vf: bool,
    /// For a VF: the RDMA device of its PF, when visible.
    pub pf_device: Option<String>,
    /// Types of the valid GIDs (`RoCE v2`, …).
    pub gid_types: Vec<String>,
    /// `tc/<port>/traffic_class` exists.
    pub traffic_class_exposed: bool,
    /// Its content (global class and per-destination rules).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traffic_class_file: Option<TrafficClass>,
    /// rdma_cm's `default_roce_tos`, when its configfs group exists.
    pub rdma_cm_tos: Option<u8>,
    /// The class QPs on this port send with, when configured: the global class of
    /// `tc/<port>/traffic_class`, else a non-zero rdma_cm ToS.
    pub traffic_class: Option<u8>,
    /// The file `traffic_class` comes from.
    pub traffic_class_source: Option<String>,
    /// For a VF: the class its PF is configured with (the same physical port).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pf_traffic_class: Option<u8>,
    /// The RoCE priority, and how it was found.
    pub priority: Option<u8>,
    pub priority_source: Option<String>,
    /// The netdev whose ECN and buffers govern the port (its own; a VF's PF; a bond's
    /// first slave), when visible here.
    pub qos_netdev: Option<String>,
    /// Why no such netdev is visible.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qos_netdev_note: Option<String>,
    /// Priorities with `ecn/roce_np/enable/<p>` = 1, `None` when not exposed.
    pub ecn_np: Option<Vec<u8>>,
    /// Priorities with `ecn/roce_rp/enable/<p>` = 1, `None` when not exposed.
    pub ecn_rp: Option<Vec<u8>>,
    /// Priorities on a lossless buffer (`qos/prio2buffer` + `qos/buffer_size`), `None`
    /// when not exposed.
    pub lossless: Option<Vec<u8>>,
    /// For a VF: what its PF publishes in `sriov/<n>/config`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vf_config: Option<VfConfig>,
}

impl PortView {
    pub fn is_roce(&self) -> bool {
        self.link_layer == "Ethernet"
    }

    /// `mlx5_0` or `mlx5_0:2`, as a label among ports.
    pub fn label(&self, multi_port: bool) -> String {
        if multi_port {
            format!("{}:{}", self.device, self.port)
        } else {
            self.device.clone()
        }
    }

    /// Whether sysfs shows anything about this port's QoS.
    pub fn anything_exposed(&self) -> bool {
        self.traffic_class_exposed
            || self.rdma_cm_tos.is_some()
            || self.ecn_np.is_some()
            || self.ecn_rp.is_some()
            || self.lossless.is_some()
            || self.vf_config.is_some()
    }

    /// One line: `tc 106, prio 3, ECN 3, lossless 3` (`n/a`: not in sysfs here).
    pub fn summary(&self) -> String {
        if !self.is_roce() {
            return format!("{}: QoS by service level", self.link_layer);
        }
        let tc = match (self.traffic_class, &self.traffic_class_file) {
            (Some(v), _) => format!("tc {v}"),
            (None, Some(f)) if !f.rules.is_empty() => {
                format!("tc per destination ({} rules)", f.rules.len())
            }
            (None, Some(_)) => "tc unset".to_string(),
            (None, None) if self.rdma_cm_tos.is_some() => "tc unset".to_string(),
            (None, None) => "tc n/a".to_string(),
        };
        let prio = self
            .priority
            .map_or(String::new(), |p| format!(", prio {p}"));
        let ecn = match (&self.ecn_np, &self.ecn_rp) {
            (Some(np), Some(rp)) if np == rp => format!("ECN {}", prios(np)),
            (Some(np), Some(rp)) => format!("ECN np {} rp {}", prios(np), prios(rp)),
            _ if self.qos_netdev.is_none() && self.vf => "ECN on the PF (not visible)".into(),
            _ => "ECN n/a".to_string(),
        };
        let pfc = match &self.lossless {
            Some(l) => format!("lossless {}", prios(l)),
            None => "PFC n/a".to_string(),
        };
        let vf = self.vf_config.as_ref().map_or(String::new(), |c| {
            format!(
                ", VF trust {} spoofchk {}",
                on_off(c.trust),
                on_off(c.spoofcheck)
            )
        });
        format!("{tc}{prio}, {ecn}, {pfc}{vf}")
    }
}

fn on_off(v: Option<bool>) -> &'static str {
    match v {
        Some(true) => "on",
        Some(false) => "off",
        None => "?",
    }
}

/// `3`, `3,4`, or `none`.
pub fn prios(p: &[u8]) -> String {
    if p.is_empty() {
        "none".to_string()
    } else {
        p.iter().map(u8::to_string).collect::<Vec<_>>().join(",")
    }
}

/// The NCCL variables the QoS facts support, with their reasons.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NcclQos {
    pub env: BTreeMap<String, String>,
    pub reasons: BTreeMap<String, String>,
    /// Why a variable is not set.
    pub notes: Vec<String>,
}

/// The QoS view of a machine (`rdmatopo.qos/1`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QosView {
    pub schema: String,
    pub ports: Vec<PortView>,
    /// For the ports `rdmatopo plan` puts in `NCCL_IB_HCA`.
    pub nccl: NcclQos,
    pub notes: Vec<String>,
}

/// The netdev whose QoS governs a port, or why none is visible.
fn qos_netdev<'t>(
    topo: &'t Topology,
    dev: &RdmaDevice,
    port: &Port,
) -> (Option<&'t NetdevQos>, Option<String>) {
    let func = dev.pci.and_then(|a| topo.pci_function(a));
    if let Some(pf) = func.and_then(|f| f.physfn) {
        let found = topo
            .netdevs
            .iter()
            .filter(|n| n.pci == Some(pf))
            .find_map(|n| topo.qos.netdev(&n.name));
        // MLNX_OFED 4.x also gives a VF's own netdev `ecn/` (read-only there: the state
        // the VF's traffic gets); current MLNX_OFED and the inbox driver do not.
        let own = port
            .netdev
            .as_deref()
            .and_then(|n| topo.qos.netdev(n))
            .filter(|q| q.ecn.is_some());
        return match (found, own) {
            (Some(q), _) => (Some(q), None),
            (None, _) if topo.netdevs.iter().any(|n| n.pci == Some(pf)) => (None, None),
            (None, Some(q)) => (
                Some(q),
                Some(format!(
                    "ECN is {}'s own; buffers are the PF's ({pf}), whose netdev is not in this network namespace",
                    q.netdev
                )),
            ),
            (None, None) => (
                None,
                Some(format!(
                    "ECN and buffers are the PF's ({pf}), whose netdev is not in this network namespace"
                )),
            ),
        };
    }
    let Some(name) = &port.netdev else {
        return (None, Some("no netdev".to_string()));
    };
    if let Some(bond) = topo.netdev(name).and_then(|n| n.bond.as_ref()) {
        return (
            bond.slaves.iter().find_map(|s| topo.qos.netdev(s)),
            Some(format!(
                "{name} is a bond; its first slave's settings are shown"
            )),
        );
    }
    match topo.qos.netdev(name) {
        Some(q) => (Some(q), None),
        None if topo.netdev(name).is_none() => (
            None,
            Some(format!("{name} is not in this network namespace")),
        ),
        None => (None, None),
    }
}

/// The priority of a port: from its class (default DSCP map), else the only lossless
/// priority, else the only priority with ECN on both sides.
fn priority(
    tclass: Option<u8>,
    lossless: Option<&Vec<u8>>,
    np: Option<&Vec<u8>>,
    rp: Option<&Vec<u8>>,
) -> (Option<u8>, Option<String>) {
    if let Some(t) = tclass {
        return (
            Some(t >> 5),
            Some(format!(
                "traffic class {t} = DSCP {}, priority {} under trust dscp with the default DSCP map (DSCP / 8)",
                t >> 2,
                t >> 5
            )),
        );
    }
    if let Some([only]) = lossless.map(Vec::as_slice) {
        return (
            Some(*only),
            Some("the only priority on a lossless buffer".to_string()),
        );
    }
    if let (Some(np), Some(rp)) = (np, rp) {
        let both: Vec<u8> = np.iter().filter(|p| rp.contains(p)).copied().collect();
        if let [only] = both.as_slice()
            && np.len() == 1
            && rp.len() == 1
        {
            return (
                Some(*only),
                Some("the only priority with ECN enabled".to_string()),
            );
        }
    }
    (None, None)
}

/// The class a port's QPs are configured with, and the file it comes from: the global
/// class of `tc/<port>/traffic_class`, else a non-zero rdma_cm ToS.
fn configured_class(
    dev: &str,
    port: u32,
    file: Option<&TrafficClass>,
    cm: Option<u8>,
) -> (Option<u8>, Option<String>) {
    match (file.and_then(|f| f.global), cm) {
        (Some(g), _) => (Some(g), Some(tc_path(dev, port))),
        (None, Some(t)) if t != 0 => (Some(t), Some(cm_tos_path(dev, port))),
        _ => (None, None),
    }
}

/// The QoS view of one port.
pub fn port_view(topo: &Topology, dev: &RdmaDevice, port: &Port) -> PortView {
    let facts = topo.qos.port(&dev.name, port.number);
    let func = dev.pci.and_then(|a| topo.pci_function(a));
    let vf = func.is_some_and(|f| f.is_vf);
    let pf_device = func
        .and_then(|f| f.physfn)
        .and_then(|pf| topo.rdma_devices.iter().find(|d| d.pci == Some(pf)))
        .map(|d| d.name.clone());
    let file = facts.and_then(|f| f.traffic_class.clone());
    let cm = facts.and_then(|f| f.rdma_cm_tos);
    let (traffic_class, source) = configured_class(&dev.name, port.number, file.as_ref(), cm);
    let pf_traffic_class = pf_device.as_deref().and_then(|pf| {
        let q = topo.qos.port(pf, port.number)?;
        configured_class(pf, port.number, q.traffic_class.as_ref(), q.rdma_cm_tos).0
    });
    let (q, note) = qos_netdev(topo, dev, port);
    let ecn = q.and_then(|q| q.ecn.as_ref());
    let ecn_np = ecn
        .and_then(|e| e.roce_np.as_ref())
        .and_then(EcnPoint::known_enabled);
    let ecn_rp = ecn
        .and_then(|e| e.roce_rp.as_ref())
        .and_then(EcnPoint::known_enabled);
    let lossless = q.and_then(NetdevQos::lossless_priorities);
    let (prio, prio_source) = priority(
        traffic_class,
        lossless.as_ref(),
        ecn_np.as_ref(),
        ecn_rp.as_ref(),
    );
    let mut gid_types: Vec<String> = port
        .gids
        .iter()
        .filter_map(|g| g.gid_type.map(|t| t.as_str().to_string()))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    gid_types.sort();
    PortView {
        device: dev.name.clone(),
        port: port.number,
        link_layer: port
            .link_layer
            .map_or("unknown", |l| l.as_str())
            .to_string(),
        netdev: port.netdev.clone(),
        vf,
        pf_device,
        gid_types,
        traffic_class_exposed: file.is_some(),
        traffic_class_file: file,
        rdma_cm_tos: cm,
        traffic_class,
        traffic_class_source: source,
        pf_traffic_class,
        priority: prio,
        priority_source: prio_source,
        qos_netdev: q.map(|q| q.netdev.clone()),
        qos_netdev_note: note,
        ecn_np,
        ecn_rp,
        lossless,
        vf_config: func
            .filter(|f| f.is_vf)
            .and_then(|f| topo.qos.vf(f.address))
            .map(|v| v.config.clone()),
    }
}

/// `NCCL_IB_TC` for the given ports (those in `NCCL_IB_HCA`): set only when every RoCE
/// port among them is configured with the same class. `notes` says why it is not set
/// when the facts are there but do not support one value; nothing is said when sysfs
/// shows no QoS at all.
pub fn nccl_env(topo: &Topology, ports: &[(&str, u32)]) -> NcclQos {
    let mut out = NcclQos::default();
    let views: Vec<PortView> = ports
        .iter()
        .filter_map(|(d, p)| {
            let dev = topo.rdma_device(d)?;
            let port = dev.ports.iter().find(|x| x.number == *p)?;
            Some(port_view(topo, dev, port))
        })
        .filter(PortView::is_roce)
        .collect();
    if views.is_empty() {
        return out;
    }
    let label = |v: &PortView| format!("{}:{}", v.device, v.port);
    // A VF without a class of its own sends through its PF's port: the PF's class is
    // the one that port's PFC and ECN are configured for.
    let class = |v: &PortView| v.traffic_class.or(v.pf_traffic_class);
    let classes: BTreeSet<Option<u8>> = views.iter().map(class).collect();
    match classes.iter().collect::<Vec<_>>().as_slice() {
        [Some(tc)] => {
            let per: Vec<String> = views
                .iter()
                .map(|v| match (&v.traffic_class_source, &v.pf_device) {
                    (Some(src), _) => format!("{}={tc} ({src})", label(v)),
                    (None, Some(pf)) => format!(
                        "{}={tc} (unset on the VF, whose traffic leaves through its PF {pf}, configured with {tc})",
                        label(v)
                    ),
                    (None, None) => format!("{}={tc}", label(v)),
                })
                .collect();
            out.env.insert("NCCL_IB_TC".into(), tc.to_string());
            out.reasons.insert(
                "NCCL_IB_TC".into(),
                format!(
                    "every RoCE port in NCCL_IB_HCA is configured with traffic class {tc} (DSCP {}, ECN field {}): {}; NCCL creates its QPs with verbs, not rdma_cm, and advertises this class to its peers, which program their QPs with it",
                    tc >> 2,
                    ["Not-ECT", "ECT(1)", "ECT(0)", "CE"][usize::from(tc & 3)],
                    per.join(", ")
                ),
            );
        }
        [None] => {
            if views.iter().any(PortView::anything_exposed) {
                let lossless: BTreeSet<Option<Vec<u8>>> =
                    views.iter().map(|v| v.lossless.clone()).collect();
                let hint = match lossless.iter().collect::<Vec<_>>().as_slice() {
                    [Some(l)] if l.len() == 1 => format!(
                        "; priority {} is lossless on every port, but which DSCP reaches it depends on the trust mode and DSCP map, which sysfs does not show (`mlnx_qos -i <if>`)",
                        l[0]
                    ),
                    _ => String::new(),
                };
                out.notes.push(format!(
                    "NCCL_IB_TC is not set: no RoCE traffic class is configured on the ports in NCCL_IB_HCA (tc/<port>/traffic_class and rdma_cm's default_roce_tos are unset or absent){hint}"
                ));
            }
        }
        _ => {
            let per: Vec<String> = views
                .iter()
                .map(|v| {
                    format!(
                        "{}={}",
                        label(v),
                        class(v).map_or("unset".to_string(), |t| t.to_string())
                    )
                })
                .collect();
            out.notes.push(format!(
                "NCCL_IB_TC is not set: the RoCE ports in NCCL_IB_HCA are configured with different traffic classes ({}); see `rdmatopo doctor`",
                per.join(", ")
            ));
        }
    }
    out
}

/// Merge [`nccl_env`] into a plan's variables, reasons and notes (`Plan::compute`).
pub(crate) fn merge_into_plan(
    topo: &Topology,
    ports: &[(&str, u32)],
    env: &mut BTreeMap<String, String>,
    reasons: &mut BTreeMap<String, String>,
    notes: &mut Vec<String>,
) {
    let q = nccl_env(topo, ports);
    env.extend(q.env);
    reasons.extend(q.reasons);
    notes.extend(q.notes);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Ecn, PortQos};
    use crate::parse::{PortBuffer, PortBuffers};

    /// One RoCE NIC per entry, each on its own root port, configured with that class.
    fn topo(classes: &[Option<u8>]) -> Topology {
        use crate::view::plan::testkit::{Builder, NicSpec};
        let mut b = Builder::new(&["0-7"]);
        b.host_bridge("pci0000:00", Some(0));
        for i in 0..classes.len() {
            let rp = format!("0000:00:{:02x}.0", i + 1);
            b.bridge(&rp, "pci0000:00", None);
            b.nic(
                NicSpec::new(
                    &format!("mlx5_{i}"),
                    &format!("0000:{:02x}:00.0", i + 1),
                    Some(&rp),
                    "pci0000:00",
                )
                .roce(&format!("ens{i}"), &format!("192.168.{i}.1")),
            );
        }
        let mut t = b.build();
        for (i, c) in classes.iter().enumerate() {
            t.qos.ports.push(PortQos {
                device: format!("mlx5_{i}"),
                port: 1,
                traffic_class: Some(TrafficClass {
                    global: *c,
                    rules: Vec::new(),
                }),
                rdma_cm_tos: None,
                rdma_cm_roce_mode: None,
            });
        }
        t
    }

    fn ports(n: usize) -> Vec<(String, u32)> {
        (0..n).map(|i| (format!("mlx5_{i}"), 1)).collect()
    }

    fn env(t: &Topology, n: usize) -> NcclQos {
        let p = ports(n);
        let refs: Vec<(&str, u32)> = p.iter().map(|(d, n)| (d.as_str(), *n)).collect();
        nccl_env(t, &refs)
    }

    #[test]
    fn one_class_everywhere_sets_nccl_ib_tc() {
        let q = env(&topo(&[Some(106), Some(106)]), 2);
        assert_eq!(q.env.get("NCCL_IB_TC").map(String::as_str), Some("106"));
        let why = &q.reasons["NCCL_IB_TC"];
        assert!(why.contains("DSCP 26"), "{why}");
        assert!(why.contains("mlx5_1:1=106"), "{why}");
        assert!(q.notes.is_empty());
    }

    #[test]
    fn different_classes_set_nothing_and_say_why() {
        let q = env(&topo(&[Some(106), None]), 2);
        assert!(q.env.is_empty());
        assert!(
            q.notes[0].contains("mlx5_0:1=106, mlx5_1:1=unset"),
            "{:?}",
            q.notes
        );
        let q = env(&topo(&[Some(106), Some(104)]), 2);
        assert!(q.env.is_empty());
    }

    #[test]
    fn unset_everywhere_sets_nothing() {
        let q = env(&topo(&[None, None]), 2);
        assert!(q.env.is_empty());
        assert!(q.notes[0].contains("no RoCE traffic class is configured"));
        // Nothing exposed at all: silent (the doctor and `rdmatopo qos` say it).
        let mut t = topo(&[None, None]);
        t.qos.ports.clear();
        assert_eq!(env(&t, 2), NcclQos::default());
    }

    #[test]
    fn rdma_cm_tos_counts_when_not_zero() {
        let mut t = topo(&[None]);
        t.qos.ports[0].traffic_class = None;
        t.qos.ports[0].rdma_cm_tos = Some(106);
        let q = env(&t, 1);
        assert_eq!(q.env.get("NCCL_IB_TC").map(String::as_str), Some("106"));
        assert!(q.reasons["NCCL_IB_TC"].contains("default_roce_tos"));
        t.qos.ports[0].rdma_cm_tos = Some(0);
        assert!(env(&t, 1).env.is_empty());
    }

    #[test]
    fn priority_comes_from_class_then_buffers_then_ecn() {
        let three = vec![3u8];
        let (p, why) = priority(Some(106), None, None, None);
        assert_eq!(p, Some(3));
        assert!(why.unwrap().contains("DSCP 26"));
        assert_eq!(priority(None, Some(&three), None, None).0, Some(3));
        assert_eq!(priority(None, None, Some(&three), Some(&three)).0, Some(3));
        assert_eq!(priority(None, Some(&vec![3, 4]), None, None).0, None);
        assert_eq!(
            priority(None, None, Some(&vec![3, 4]), Some(&three)).0,
            None
        );
    }

    #[test]
    fn view_reads_ecn_and_buffers_of_the_ports_netdev() {
        let mut t = topo(&[Some(106)]);
        let nd = t.rdma_devices[0].ports[0].netdev.clone().unwrap();
        t.qos.netdevs.push(NetdevQos {
            netdev: nd,
            pci: t.rdma_devices[0].pci,
            ecn: Some(Ecn {
                roce_np: Some(EcnPoint {
                    enabled: vec![3],
                    ..EcnPoint::default()
                }),
                roce_rp: Some(EcnPoint {
                    enabled: vec![3],
                    ..EcnPoint::default()
                }),
            }),
            tc_num: None,
            maxrate_kbps: None,
            prio2buffer: Some(vec![0, 0, 0, 1, 0, 0, 0, 0]),
            buffers: Some(PortBuffers {
                port_buffer_size: None,
                spare_buffer_size: None,
                buffers: vec![
                    PortBuffer {
                        index: 0,
                        size: 1,
                        xoff: 0,
                        xon: 0,
                    },
                    PortBuffer {
                        index: 1,
                        size: 2,
                        xoff: 1,
                        xon: 1,
                    },
                ],
            }),
        });
        let d = &t.rdma_devices[0];
        let v = port_view(&t, d, &d.ports[0]);
        assert_eq!(v.summary(), "tc 106, prio 3, ECN 3, lossless 3");
        let mut t2 = t.clone();
        t2.qos.netdevs.clear();
        t2.qos.ports.clear();
        let d = &t2.rdma_devices[0];
        assert_eq!(
            port_view(&t2, d, &d.ports[0]).summary(),
            "tc n/a, ECN n/a, PFC n/a"
        );
    }
}
