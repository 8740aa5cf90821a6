//! Check: RoCE QoS. The RoCE rails should send on one traffic class, whose priority is
//! lossless (PFC) where the fabric is built lossless and has ECN (DCQCN) enabled on
//! both the notification and the reaction point; every rail, and a VF and its PF, the
//! same. Judges what sysfs shows (see [`crate::view::qos`]); says what it cannot.

use super::report::Sink;
use super::words::list;
use crate::model::{Port, RdmaDevice};
use crate::parse::LinkLayer;
use crate::view::qos::{PortView, cm_tos_path, port_view, prios, tc_path};
use crate::view::scope::Scope;
use std::collections::BTreeMap;

const ECN_WHY: &str = "DCQCN slows a sender down when switches mark its packets (ECN) and the receiver returns CNPs; a priority where the notification point (roce_np) or the reaction point (roce_rp) is off never slows down, so congestion grows into PFC pauses (head-of-line blocking, pause storms) or drops, and one such rail stalls every collective striped over it";

const PFC_WHY: &str = "RoCE's go-back-N recovery turns every dropped packet into a retransmission of the whole window: on a fabric built lossless, traffic on a priority without PFC is dropped under congestion instead of paused, and collectives slow down by orders of magnitude";

const TC_WHY: &str = "the traffic class is the ToS byte of every RoCE packet (DSCP << 2 | ECN): switches classify on it, so rails or functions sending with different classes land in different switch queues (one of them typically lossy and without ECN marking) and the slowest rail sets the pace of every collective";

/// `/sys/class/net/<if>/ecn/<point>/enable/<prio>`.
fn ecn_path(netdev: &str, point: &str, prio: u8) -> String {
    format!("/sys/class/net/{netdev}/ecn/{point}/enable/{prio}")
}

/// The mlnx_qos command that makes `prio` the only lossless priority of `netdev`.
fn mlnx_qos(netdev: &str, prio: u8) -> String {
    let pfc: Vec<&str> = (0..8u8)
        .map(|p| if p == prio { "1" } else { "0" })
        .collect();
    format!("mlnx_qos -i {netdev} --trust dscp --pfc {}", pfc.join(","))
}

/// The Kubernetes equivalent (NVIDIA NIC Configuration Operator).
fn operator_pfc(prio: u8) -> String {
    let pfc: Vec<&str> = (0..8u8)
        .map(|p| if p == prio { "1" } else { "0" })
        .collect();
    format!(
        "on Kubernetes, the NVIDIA NIC Configuration Operator's NicConfigurationTemplate `roceOptimized: {{enabled: true, qos: {{trust: dscp, pfc: \"{}\"}}}}`",
        pfc.join(",")
    )
}

fn name(v: &PortView, multi: &BTreeMap<String, bool>) -> String {
    v.label(multi.get(&v.device).copied().unwrap_or(false))
}

pub(super) fn check(scope: &Scope, out: &mut Sink) {
    let rails = scope.rails();
    let roce: Vec<(&RdmaDevice, &Port)> = rails
        .iter()
        .copied()
        .filter(|(_, p)| p.link_layer == Some(LinkLayer::Ethernet))
        .collect();
    if roce.is_empty() {
        out.not_applicable(if rails.is_empty() {
            "no rail in use"
        } else {
            "no RoCE rail in use: InfiniBand QoS is the subnet manager's (service levels, NCCL_IB_SL)"
        });
        return;
    }
    let multi: BTreeMap<String, bool> = roce
        .iter()
        .map(|(d, _)| (d.name.clone(), d.ports.len() > 1))
        .collect();
    let views: Vec<PortView> = roce
        .iter()
        .map(|(d, p)| port_view(scope.topo, d, p))
        .collect();
    let pf_views: Vec<PortView> = views
        .iter()
        .filter_map(|v| {
            let pf = scope.topo.rdma_device(v.pf_device.as_deref()?)?;
            let port = pf.ports.iter().find(|p| p.number == v.port)?;
            Some(port_view(scope.topo, pf, port))
        })
        .collect();
    if !views
        .iter()
        .chain(&pf_views)
        .any(PortView::anything_exposed)
    {
        // A VF's QoS is its PF's: name the PF, whose netdev is the host's.
        let first = &views[0];
        let pf_netdev = |pf: &str| {
            let dev = scope.topo.rdma_device(pf)?;
            let n = dev.ports.iter().find_map(|p| p.netdev.clone())?;
            scope.topo.netdev(&n).map(|_| n)
        };
        let (nd, dev) = match (&first.pf_device, &first.netdev) {
            (Some(pf), _) if first.vf => (
                pf_netdev(pf).unwrap_or_else(|| format!("<netdev of {pf}>")),
                pf.clone(),
            ),
            (_, Some(n)) => (n.clone(), first.device.clone()),
            (_, None) => ("<if>".to_string(), first.device.clone()),
        };
        out.skip(
            format!(
                "no RoCE QoS setting of the {} RoCE rail(s) is visible in sysfs",
                views.len()
            ),
            "this driver publishes neither the port's traffic class (tc/<port>/traffic_class), the DCQCN enables (ecn/roce_np, ecn/roce_rp) nor the port buffers (qos/prio2buffer): MLNX_OFED's mlx5 does, the inbox driver does not; the trust mode and PFC are in DCB netlink only",
            format!(
                "check on the host: `mlnx_qos -i {nd}` (trust, PFC), `ethtool -S {nd} | grep prio` (pause counters), `cma_roce_tos -d {dev}`; then set NCCL_IB_TC to the class the fabric treats as lossless (for example 106: DSCP 26, priority 3)"
            ),
        );
        return;
    }
    // A VF without a class of its own sends with its PF's once NCCL_IB_TC says so (the
    // plan does, and the class warning tells how): that is the priority to judge.
    let prio = consensus(
        views
            .iter()
            .map(|v| v.priority.or(v.pf_traffic_class.map(|t| t >> 5))),
    );
    traffic_classes(scope, out, &views, &multi);
    // ECN is judged on the priority the class (or the PFC buffers) puts RoCE on, not on
    // one inferred from the ECN enables themselves, which would judge them by themselves.
    let ecn_prio = consensus(views.iter().map(|v| {
        v.traffic_class
            .or(v.pf_traffic_class)
            .map(|t| t >> 5)
            .or(match v.lossless.as_deref() {
                Some([p]) => Some(*p),
                _ => None,
            })
    }));
    ecn(scope, out, &views, ecn_prio, &multi);
    lossless(out, &views, prio, &multi);
    pf_vf(scope, out, &views, &pf_views, &multi);
    env(scope, out, &views);
    if out.findings.is_empty() {
        let first = &views[0];
        let mut hidden = Vec::new();
        if views.iter().all(|v| v.ecn_np.is_none()) {
            hidden.push("ECN");
        }
        if views.iter().all(|v| v.lossless.is_none()) {
            hidden.push("PFC buffers");
        }
        if views
            .iter()
            .all(|v| !v.traffic_class_exposed && v.rdma_cm_tos.is_none())
        {
            hidden.push("traffic class");
        }
        out.note(format!(
            "{} RoCE rail(s) agree: {}{}",
            views.len(),
            first.summary(),
            if hidden.is_empty() {
                String::new()
            } else {
                format!(" ({} not visible here)", hidden.join(", "))
            }
        ));
    }
}

/// The one value every known entry has, when they agree.
fn consensus(values: impl Iterator<Item = Option<u8>>) -> Option<u8> {
    let known: Vec<u8> = values.flatten().collect();
    match known.split_first() {
        Some((first, rest)) if rest.iter().all(|v| v == first) => Some(*first),
        _ => None,
    }
}

fn class_text(v: Option<u8>) -> String {
    v.map_or("unset".to_string(), |t| t.to_string())
}

/// Evidence of a port's class: the tc file, else rdma_cm's ToS.
fn class_evidence(v: &PortView) -> (String, String) {
    if let Some(f) = &v.traffic_class_file {
        let text = match f.global {
            Some(g) => format!("Global tclass={g}"),
            None if !f.rules.is_empty() => format!("{} per-destination rule(s)", f.rules.len()),
            None => "(empty: unset)".to_string(),
        };
        return (tc_path(&v.device, v.port), text);
    }
    match v.rdma_cm_tos {
        Some(t) => (cm_tos_path(&v.device, v.port), t.to_string()),
        None => (tc_path(&v.device, v.port), "absent".to_string()),
    }
}

fn set_class(v: &PortView, tc: u8) -> String {
    if v.traffic_class_exposed {
        format!("echo {tc} > {}", tc_path(&v.device, v.port))
    } else {
        format!("cma_roce_tos -d {} -t {tc}", v.device)
    }
}

/// Rails configured with different classes (rails with no visible class left out).
fn traffic_classes(
    scope: &Scope,
    out: &mut Sink,
    views: &[PortView],
    multi: &BTreeMap<String, bool>,
) {
    let known: Vec<&PortView> = views
        .iter()
        .filter(|v| v.traffic_class_exposed || v.rdma_cm_tos.is_some())
        .collect();
    let mut by_class: BTreeMap<Option<u8>, Vec<String>> = BTreeMap::new();
    for v in &known {
        by_class
            .entry(v.traffic_class)
            .or_default()
            .push(name(v, multi));
    }
    if by_class.len() < 2 {
        return;
    }
    let target = by_class
        .iter()
        .filter(|(c, _)| c.is_some())
        .max_by_key(|(_, n)| n.len())
        .and_then(|(c, _)| *c);
    let parts: Vec<String> = by_class
        .iter()
        .map(|(c, n)| format!("{} on {}", class_text(*c), list(n)))
        .collect();
    let mut f = out.warning(format!(
        "RoCE rails send with different traffic classes: {}",
        parts.join("; ")
    ));
    for v in &known {
        let (p, val) = class_evidence(v);
        f = f.with(p, val);
    }
    let fix = match target {
        Some(tc) => {
            let cmds: Vec<String> = known
                .iter()
                .filter(|v| v.traffic_class != Some(tc))
                .map(|v| set_class(v, tc))
                .collect();
            format!(
                "give every rail the same class on the host: {}{}",
                cmds.join("; "),
                if scope.context.is_container() {
                    format!(" (or set NCCL_IB_TC={tc} in the pod spec's env, which sets it for NCCL's QPs where no port-wide class overrides it)")
                } else {
                    String::new()
                }
            )
        }
        None => "give every rail the same class (`echo <tos> > /sys/class/infiniband/<dev>/tc/<port>/traffic_class`)".to_string(),
    };
    out.push(f.why(TC_WHY).fix(fix));
}

/// ECN on the RoCE priority of every rail, or (priority unknown) the same ECN settings
/// on every rail and on both points of each, and on every priority RoCE may use.
fn ecn(
    scope: &Scope,
    out: &mut Sink,
    views: &[PortView],
    prio: Option<u8>,
    multi: &BTreeMap<String, bool>,
) {
    let known: Vec<&PortView> = views.iter().filter(|v| v.ecn_np.is_some()).collect();
    if known.is_empty() {
        return;
    }
    let np_rp = |v: &PortView| {
        (
            v.ecn_np.clone().unwrap_or_default(),
            v.ecn_rp.clone().unwrap_or_default(),
        )
    };
    if let Some(p) = prio {
        let (off, on): (Vec<&PortView>, Vec<&PortView>) = known.iter().partition(|v| {
            let (np, rp) = np_rp(v);
            !np.contains(&p) || !rp.contains(&p)
        });
        if off.is_empty() {
            return;
        }
        let names: Vec<String> = off.iter().map(|v| name(v, multi)).collect();
        let others: Vec<String> = on.iter().map(|v| name(v, multi)).collect();
        let mut f = out.warning(format!(
            "ECN (DCQCN) is off for the RoCE priority {p} on {}{}",
            list(&names),
            if others.is_empty() {
                String::new()
            } else {
                format!(", while on for {}", list(&others))
            }
        ));
        let mut fix = Vec::new();
        for v in &off {
            let nd = v.qos_netdev.as_deref().unwrap_or("?");
            // A VF's own `ecn/` (MLNX_OFED 4.x) is read-only: its PF's is set.
            let set_on = match (&v.pf_device, v.vf) {
                (Some(pf), true) => format!("<netdev of {pf}>"),
                _ => nd.to_string(),
            };
            let (np, rp) = np_rp(v);
            for (point, set) in [("roce_np", &np), ("roce_rp", &rp)] {
                let on = set.contains(&p);
                f = f.with(ecn_path(nd, point, p), u8::from(on));
                if !on {
                    fix.push(format!("echo 1 > {}", ecn_path(&set_on, point, p)));
                }
            }
        }
        out.push(
            f.why(ECN_WHY)
                .fix(format!(
                    "on the host: {} (not persistent: put it in the boot-time QoS script, or let the NVIDIA NIC Configuration Operator's roceOptimized template set it)",
                    fix.join("; ")
                )),
        );
        return;
    }
    let mut groups: BTreeMap<(Vec<u8>, Vec<u8>), Vec<String>> = BTreeMap::new();
    for v in &known {
        groups.entry(np_rp(v)).or_default().push(name(v, multi));
    }
    if groups.len() > 1 {
        let parts: Vec<String> = groups
            .iter()
            .map(|((np, rp), n)| format!("np {} rp {} on {}", prios(np), prios(rp), list(n)))
            .collect();
        let mut f = out.warning(format!(
            "ECN (DCQCN) priorities differ between RoCE rails: {}",
            parts.join("; ")
        ));
        for v in &known {
            let nd = v.qos_netdev.as_deref().unwrap_or("?");
            let (np, rp) = np_rp(v);
            f = f
                .with(
                    format!("/sys/class/net/{nd}/ecn/roce_np/enable"),
                    format!("on for {}", prios(&np)),
                )
                .with(
                    format!("/sys/class/net/{nd}/ecn/roce_rp/enable"),
                    format!("on for {}", prios(&rp)),
                );
        }
        out.push(f.why(ECN_WHY).fix(
            "enable ECN on the same priorities of every rail, on both points: `echo 1 > /sys/class/net/<if>/ecn/roce_np/enable/<prio>` and `.../roce_rp/enable/<prio>` for the RoCE priority",
        ));
        return;
    }
    let mut mixed = false;
    for v in &known {
        let (np, rp) = np_rp(v);
        if np == rp {
            continue;
        }
        mixed = true;
        let nd = v.qos_netdev.as_deref().unwrap_or("?");
        out.push(
            out.warning(format!(
                "{} ({nd}) enables ECN on different priorities as notification point ({}) and reaction point ({})",
                name(v, multi),
                prios(&np),
                prios(&rp)
            ))
            .with(format!("/sys/class/net/{nd}/ecn/roce_np/enable"), format!("on for {}", prios(&np)))
            .with(format!("/sys/class/net/{nd}/ecn/roce_rp/enable"), format!("on for {}", prios(&rp)))
            .why(ECN_WHY)
            .fix(format!(
                "enable both points on the RoCE priority: `echo 1 > /sys/class/net/{nd}/ecn/roce_np/enable/<prio>` and `.../roce_rp/enable/<prio>`"
            )),
        );
    }
    if !mixed {
        ecn_unknown_priority(scope, out, &known, multi);
    }
}

/// The priority that no ToS selects (ToS 0: DSCP 0, PCP 0), where RoCE runs when neither
/// the port, rdma_cm nor `NCCL_IB_TC` sets a class.
const DEFAULT_PRIO: u8 = 0;

/// Every rail with the same ECN priorities on both points, but not on all eight (the mlx5
/// default), while no class says which priority RoCE uses: traffic on a priority that is
/// off gets no congestion control. Named with the priorities off and the host's fix.
fn ecn_unknown_priority(
    scope: &Scope,
    out: &mut Sink,
    known: &[&PortView],
    multi: &BTreeMap<String, bool>,
) {
    let Some(first) = known.first() else { return };
    let on = first.ecn_np.clone().unwrap_or_default();
    let off: Vec<u8> = (0..8u8).filter(|p| !on.contains(p)).collect();
    if off.is_empty() {
        return;
    }
    let names: Vec<String> = known.iter().map(|v| name(v, multi)).collect();
    let summary = if on.is_empty() {
        format!(
            "ECN (DCQCN) is off on every priority of {}, and the RoCE priority is not visible here",
            list(&names)
        )
    } else {
        format!(
            "ECN (DCQCN) is on only for priority {} and off for {} on {}, and the RoCE priority is not visible here",
            prios(&on),
            prios(&off),
            list(&names)
        )
    };
    let mut f = out.warning(summary);
    let mut fix = Vec::new();
    for v in known {
        let nd = v.qos_netdev.as_deref().unwrap_or("?");
        let (p, val) = class_evidence(v);
        f = f
            .with(p, val)
            .with(
                format!("/sys/class/net/{nd}/ecn/roce_np/enable"),
                format!("on for {}", prios(&on)),
            )
            .with(
                format!("/sys/class/net/{nd}/ecn/roce_rp/enable"),
                format!("on for {}", prios(&on)),
            );
        if v.vf
            && let Some(c) = v.pf_traffic_class
        {
            f = f.with(
                format!(
                    "traffic class of {}",
                    v.pf_device.as_deref().unwrap_or("the PF")
                ),
                c,
            );
        }
        // A VF's `ecn/` (MLNX_OFED 4.x) is read-only: the PF's netdev on the host is set.
        let host = if v.vf {
            pf_netdev(scope, v)
        } else {
            nd.to_string()
        };
        let cmd = format!(
            "for p in {}; do echo 1 > {}; echo 1 > {}; done",
            off.iter().map(u8::to_string).collect::<Vec<_>>().join(" "),
            ecn_path(&host, "roce_np", 0).replace("/enable/0", "/enable/$p"),
            ecn_path(&host, "roce_rp", 0).replace("/enable/0", "/enable/$p"),
        );
        if !fix.contains(&cmd) {
            fix.push(cmd);
        }
    }
    let why = format!(
        "{ECN_WHY}. Which priority RoCE uses follows from the traffic class (DSCP / 8 under trust dscp), not from where ECN is on; no class is set on the port or in rdma_cm (or, in a pod, visible), so NCCL sends with its NCCL_IB_TC, or with class 0 on priority {DEFAULT_PRIO} when that is unset{}",
        if off.contains(&DEFAULT_PRIO) {
            ", which is off here"
        } else {
            ""
        }
    );
    // DSCP 8p+2 (26 for priority 3) with ECT(0): the class NVIDIA's RoCE guides use.
    let class_fix = match on.as_slice() {
        [p] => {
            let dscp = 8 * p + 2;
            let tc = (dscp << 2) | 2;
            format!(
                "send RoCE on priority {p}: NCCL_IB_TC={tc} (DSCP {dscp}), or that class on the host's ports (`echo {tc} > /sys/class/infiniband/<dev>/tc/1/traffic_class`); or "
            )
        }
        _ => String::new(),
    };
    out.push(f.why(why).fix(format!(
        "{class_fix}enable ECN on the priorities that are off, on both points, on the host: `{}` (mlnx_qos sets trust and PFC, not DCQCN; not persistent: put it in the boot-time QoS script, or let the NVIDIA NIC Configuration Operator's roceOptimized template set it)",
        fix.join("`; `")
    )));
}

/// The host netdev of a VF's PF (whose `ecn/` governs it), or a placeholder naming the PF.
fn pf_netdev(scope: &Scope, v: &PortView) -> String {
    let Some(pf) = v.pf_device.as_deref() else {
        return "<netdev of the PF>".to_string();
    };
    scope
        .topo
        .rdma_device(pf)
        .and_then(|d| d.ports.iter().find(|p| p.number == v.port))
        .and_then(|p| p.netdev.clone())
        .unwrap_or_else(|| format!("<netdev of {pf}>"))
}

/// PFC on the RoCE priority, as the port buffers show it; or (priority unknown) the
/// same lossless priorities on every rail.
fn lossless(out: &mut Sink, views: &[PortView], prio: Option<u8>, multi: &BTreeMap<String, bool>) {
    let known: Vec<&PortView> = views.iter().filter(|v| v.lossless.is_some()).collect();
    if known.is_empty() {
        return;
    }
    let set = |v: &PortView| v.lossless.clone().unwrap_or_default();
    let evidence = |f: super::report::Finding, v: &PortView| {
        let nd = v.qos_netdev.as_deref().unwrap_or("?");
        f.with(
            format!("/sys/class/net/{nd}/qos/prio2buffer"),
            format!("lossless priorities: {}", prios(&set(v))),
        )
    };
    if let Some(p) = prio {
        let lossy: Vec<&PortView> = known
            .iter()
            .copied()
            .filter(|v| !set(v).contains(&p))
            .collect();
        if lossy.is_empty() {
            return;
        }
        let everywhere_none = known.iter().all(|v| set(v).is_empty());
        let names: Vec<String> = lossy.iter().map(|v| name(v, multi)).collect();
        let elsewhere: Vec<String> = lossy
            .iter()
            .filter(|v| !set(v).is_empty())
            .map(|v| format!("{} on {}", prios(&set(v)), name(v, multi)))
            .collect();
        let summary = if everywhere_none {
            format!(
                "RoCE runs lossy: no priority has PFC (no buffer with a pause threshold) on {}",
                list(&names)
            )
        } else {
            format!(
                "the RoCE priority {p} has no PFC on {}{}",
                list(&names),
                if elsewhere.is_empty() {
                    String::new()
                } else {
                    format!(" (lossless there: {})", elsewhere.join(", "))
                }
            )
        };
        let mut f = if everywhere_none {
            out.info(summary)
        } else {
            out.warning(summary)
        };
        let mut cmds = Vec::new();
        for v in &lossy {
            f = evidence(f, v);
            if let Some(nd) = &v.qos_netdev {
                cmds.push(mlnx_qos(nd, p));
            }
        }
        let source = views
            .iter()
            .find_map(|v| v.priority_source.clone())
            .unwrap_or_default();
        out.push(
            f.why(format!(
                "{PFC_WHY} (priority {p}: {source}; if the switches run PFC on another priority, the traffic class is what is wrong)"
            ))
            .fix(format!(
                "if the fabric is lossless on priority {p}: {}, or {}; confirm with `ethtool -S <if> | grep prio{p}_pause` (pause counters are not in sysfs)",
                cmds.join("; "),
                operator_pfc(p)
            )),
        );
        return;
    }
    let mut groups: BTreeMap<Vec<u8>, Vec<String>> = BTreeMap::new();
    for v in &known {
        groups.entry(set(v)).or_default().push(name(v, multi));
    }
    if groups.len() < 2 {
        return;
    }
    let parts: Vec<String> = groups
        .iter()
        .map(|(s, n)| format!("{} on {}", prios(s), list(n)))
        .collect();
    let mut f = out.warning(format!(
        "lossless (PFC) priorities differ between RoCE rails: {}",
        parts.join("; ")
    ));
    for v in &known {
        f = evidence(f, v);
    }
    out.push(f.why(PFC_WHY).fix(
        "configure the same PFC priority on every rail: `mlnx_qos -i <if> --trust dscp --pfc 0,0,0,1,0,0,0,0` (priority 3) on each",
    ));
}

/// A VF configured with another class than its PF.
fn pf_vf(
    scope: &Scope,
    out: &mut Sink,
    views: &[PortView],
    pf_views: &[PortView],
    multi: &BTreeMap<String, bool>,
) {
    for v in views.iter().filter(|v| v.vf) {
        let Some(pf) = pf_views
            .iter()
            .find(|p| Some(&p.device) == v.pf_device.as_ref() && p.port == v.port)
        else {
            continue;
        };
        let visible = |x: &PortView| x.traffic_class_exposed || x.rdma_cm_tos.is_some();
        if !visible(v) || !visible(pf) || v.traffic_class == pf.traffic_class {
            continue;
        }
        let (vp, vv) = class_evidence(v);
        let (pp, pv) = class_evidence(pf);
        // NCCL_IB_TC gives NCCL's QPs the PF's class where the VF has none of its own.
        let user = scope.topo.process.env.get("NCCL_IB_TC");
        if v.traffic_class.is_none()
            && pf
                .traffic_class
                .is_some_and(|tc| user.is_some_and(|u| u.trim() == tc.to_string()))
        {
            out.push(
                out.info(format!(
                    "VF {} has no traffic class of its own (its PF {} uses {}); NCCL_IB_TC sets it for NCCL",
                    name(v, multi),
                    pf.device,
                    class_text(pf.traffic_class)
                ))
                .with(vp, vv)
                .with("/proc/self/environ", format!("NCCL_IB_TC={}", user.map_or("", |u| u.as_str())))
                .why("other RDMA applications in this pod (rdma_cm or verbs without a class) still send on class 0")
                .fix(format!("to cover every application, set the VF's class on the host: {}", set_class(v, pf.traffic_class.unwrap_or_default()))),
            );
            continue;
        }
        let fix = match pf.traffic_class {
            Some(tc) => format!(
                "on the host: {} (the VF's own RDMA device), or set NCCL_IB_TC={tc} in the pod spec's env",
                set_class(v, tc)
            ),
            None => format!(
                "give the VF and its PF the same class on the host (`echo <tos> > {}`)",
                tc_path(&v.device, v.port)
            ),
        };
        out.push(
            out.warning(format!(
                "VF {} sends with traffic class {} while its PF {} uses {}",
                name(v, multi),
                class_text(v.traffic_class),
                pf.device,
                class_text(pf.traffic_class)
            ))
            .with(vp, vv)
            .with(pp, pv)
            .why(format!(
                "{TC_WHY}; mlx5's per-port class is set per RDMA device, so a VF does not inherit its PF's, while the VF's traffic still leaves through the PF's port and its PFC/ECN priorities"
            ))
            .fix(fix),
        );
    }
}

/// This process's `NCCL_IB_TC` against the class the rails are configured with.
fn env(scope: &Scope, out: &mut Sink, views: &[PortView]) {
    let Some(user) = scope.topo.process.env.get("NCCL_IB_TC") else {
        return;
    };
    let Some(tc) = consensus(views.iter().map(|v| v.traffic_class)) else {
        return;
    };
    if views.iter().any(|v| v.traffic_class.is_none()) || user.trim() == tc.to_string() {
        return;
    }
    let overridden = views.iter().all(|v| {
        v.traffic_class_file
            .as_ref()
            .is_some_and(|f| f.global.is_some())
    });
    out.push(
        out.warning(format!(
            "NCCL_IB_TC={user} differs from the traffic class the RoCE rails are configured with ({tc})"
        ))
        .with("/proc/self/environ", format!("NCCL_IB_TC={user}"))
        .with(
            views[0].traffic_class_source.clone().unwrap_or_default(),
            tc.to_string(),
        )
        .why(format!(
            "NCCL advertises its NCCL_IB_TC to each peer, which programs its QPs with it: peers send to this node with class {user}{}",
            if overridden {
                " unless their own port-wide class overrides it (this node's does)"
            } else {
                ""
            }
        ))
        .fix(format!("set NCCL_IB_TC={tc}, or unset it and let `rdmatopo nccl-env` set it")),
    );
}

#[cfg(test)]
mod tests {
    use super::super::{Outcome, Report, run};
    use crate::Topology;
    use crate::model::Severity;

    fn fixture(name: &str) -> Topology {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../fixtures")
            .join(name)
            .join("root.tar.gz");
        crate::discover(Some(&root)).unwrap()
    }

    fn qos(r: &Report) -> (Outcome, Vec<(Severity, String)>) {
        let c = r.checks.iter().find(|c| c.check == "roce-qos").unwrap();
        let f = r
            .findings
            .iter()
            .filter(|f| f.check == "roce-qos" && !f.skipped)
            .map(|f| (f.severity, f.summary.clone()))
            .collect();
        (c.outcome, f)
    }

    #[test]
    fn a_lossless_consistent_host_is_ok() {
        let (o, f) = qos(&run(&fixture("roce-qos-lossless")));
        assert_eq!(o, Outcome::Ok, "{f:#?}");
    }

    #[test]
    fn a_rail_without_ecn_on_the_roce_priority() {
        let r = run(&fixture("roce-qos-ecn-gap"));
        let (o, f) = qos(&r);
        assert_eq!(o, Outcome::Warning);
        assert_eq!(
            f,
            vec![(
                Severity::Warning,
                "ECN (DCQCN) is off for the RoCE priority 3 on mlx5_3, while on for mlx5_0, mlx5_1 and mlx5_2".to_string()
            )]
        );
        let finding = r.findings.iter().find(|f| f.check == "roce-qos").unwrap();
        assert!(finding.evidence.iter().any(|e| e.path
            == "/sys/class/net/enp184s0f1np1/ecn/roce_rp/enable/3"
            && e.value == "0"));
        assert!(
            finding
                .fix
                .contains("echo 1 > /sys/class/net/enp184s0f1np1/ecn/roce_np/enable/3")
        );
    }

    #[test]
    fn ecn_on_different_priorities_when_the_priority_is_unknown() {
        // No traffic class, no buffers, ECN on two priorities: no RoCE priority can be
        // told, so the rails are compared with each other.
        let mut t = fixture("roce-qos-ecn-gap");
        t.qos.ports.clear();
        for n in &mut t.qos.netdevs {
            n.prio2buffer = None;
            if let Some(e) = n.ecn.as_mut()
                && let (Some(np), Some(rp)) = (e.roce_np.as_mut(), e.roce_rp.as_mut())
                && !np.enabled.is_empty()
            {
                np.enabled = vec![3, 4];
                rp.enabled = vec![3, 4];
            }
        }
        let (o, f) = qos(&run(&t));
        assert_eq!(o, Outcome::Warning);
        assert!(
            f[0].1.starts_with("ECN (DCQCN) priorities differ between RoCE rails: np none rp none on mlx5_3; np 3,4 rp 3,4 on mlx5_0, mlx5_1 and mlx5_2"),
            "{f:#?}"
        );
        // And a rail whose two points disagree.
        let mut t = fixture("roce-qos-lossless");
        t.qos.ports.clear();
        for n in &mut t.qos.netdevs {
            n.prio2buffer = None;
            if let Some(rp) = n.ecn.as_mut().and_then(|e| e.roce_rp.as_mut()) {
                rp.enabled = vec![3, 4];
            }
        }
        let (_, f) = qos(&run(&t));
        assert!(
            f[0].1.contains(
                "different priorities as notification point (3) and reaction point (3,4)"
            ),
            "{f:#?}"
        );
    }

    #[test]
    fn the_roce_priority_without_pfc() {
        // mlx5_1 maps every priority to lossy buffer 0.
        let mut t = fixture("roce-qos-lossless");
        let nd = t
            .qos
            .netdevs
            .iter_mut()
            .find(|n| n.netdev == "enp56s0f1np1")
            .unwrap();
        nd.prio2buffer = Some(vec![0; 8]);
        let (o, f) = qos(&run(&t));
        assert_eq!(o, Outcome::Warning);
        assert_eq!(f[0].1, "the RoCE priority 3 has no PFC on mlx5_1");
        // PFC on priority 4 instead of the class's 3.
        let nd = t
            .qos
            .netdevs
            .iter_mut()
            .find(|n| n.netdev == "enp56s0f1np1")
            .unwrap();
        nd.prio2buffer = Some(vec![0, 0, 0, 0, 1, 0, 0, 0]);
        let (_, f) = qos(&run(&t));
        assert_eq!(
            f[0].1,
            "the RoCE priority 3 has no PFC on mlx5_1 (lossless there: 4 on mlx5_1)"
        );
        // No PFC anywhere: lossy RoCE, said as information.
        for n in &mut t.qos.netdevs {
            n.prio2buffer = Some(vec![0; 8]);
        }
        let (o, f) = qos(&run(&t));
        assert_eq!(o, Outcome::Info);
        assert!(f[0].1.starts_with("RoCE runs lossy"), "{f:#?}");
    }

    #[test]
    fn rails_with_different_traffic_classes() {
        let mut t = fixture("roce-qos-lossless");
        let p = t
            .qos
            .ports
            .iter_mut()
            .find(|p| p.device == "mlx5_2")
            .unwrap();
        p.traffic_class = Some(crate::parse::TrafficClass::default());
        p.rdma_cm_tos = None;
        let r = run(&t);
        let (o, f) = qos(&r);
        assert_eq!(o, Outcome::Warning);
        assert_eq!(
            f[0].1,
            "RoCE rails send with different traffic classes: unset on mlx5_2; 106 on mlx5_0, mlx5_1 and mlx5_3"
        );
        let finding = r.findings.iter().find(|f| f.check == "roce-qos").unwrap();
        assert!(
            finding
                .fix
                .contains("echo 106 > /sys/class/infiniband/mlx5_2/tc/1/traffic_class")
        );
    }

    #[test]
    fn a_vf_with_another_class_than_its_pf() {
        let (o, f) = qos(&run(&fixture("pod-vf-qos-mismatch")));
        assert_eq!(o, Outcome::Warning);
        assert_eq!(
            f,
            vec![(
                Severity::Warning,
                "VF mlx5_22 sends with traffic class unset while its PF mlx5_9 uses 106"
                    .to_string()
            )]
        );
        // The pod that sets NCCL_IB_TC to the PF's class is covered for NCCL.
        let mut t = fixture("pod-vf-qos-mismatch");
        t.process.env.insert("NCCL_IB_TC".into(), "106".into());
        let (o, f) = qos(&run(&t));
        assert_eq!(o, Outcome::Info, "{f:#?}");
        assert!(f[0].1.ends_with("NCCL_IB_TC sets it for NCCL"), "{f:#?}");
        // Without any QoS file (the inbox driver) the check says it cannot judge.
        let r = run(&fixture("pod-h100-1gpu-1vf"));
        let (o, f) = qos(&r);
        assert_eq!(o, Outcome::Skipped);
        assert!(f.is_empty());
        let skipped = r.findings.iter().find(|f| f.check == "roce-qos").unwrap();
        assert!(
            skipped.fix.contains("cma_roce_tos -d mlx5_9"),
            "{}",
            skipped.fix
        );
    }

    #[test]
    fn nccl_ib_tc_in_the_environment_against_the_rails() {
        let mut t = fixture("roce-qos-lossless");
        t.process.env.insert("NCCL_IB_TC".into(), "0".into());
        let (o, f) = qos(&run(&t));
        assert_eq!(o, Outcome::Warning);
        assert_eq!(
            f[0].1,
            "NCCL_IB_TC=0 differs from the traffic class the RoCE rails are configured with (106)"
        );
        t.process.env.insert("NCCL_IB_TC".into(), "106".into());
        assert_eq!(qos(&run(&t)).0, Outcome::Ok);
    }

    #[test]
    fn infiniband_only_is_not_applicable() {
        assert_eq!(qos(&run(&fixture("h100-dgx"))).0, Outcome::NotApplicable);
    }
}
