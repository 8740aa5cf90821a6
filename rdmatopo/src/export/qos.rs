//! The RoCE QoS report (`rdmatopo qos`, schema `rdmatopo.qos/1`): every RDMA port's
//! QoS facts ([`crate::view::qos`]) and the NCCL variables for the ports the NCCL plan
//! selects, as JSON data or as a table.

use crate::model::Topology;
use crate::view::container::DisplayedDevices;
use crate::view::plan::{Plan, PlanOptions};
use crate::view::qos::{NOT_IN_SYSFS, PortView, QosView, SCHEMA, nccl_env, port_view, prios};
use std::fmt::Write;

/// The QoS view of every RDMA port, and the NCCL variables for the plan's ports.
pub fn report(topo: &Topology) -> QosView {
    report_shown(topo, &DisplayedDevices::of(topo, true))
}

/// [`report`] of the ports of the devices `shown` (inside a container, its own), with
/// a note naming those left out.
pub fn report_shown(topo: &Topology, shown: &DisplayedDevices) -> QosView {
    let ports: Vec<PortView> = topo
        .rdma_devices
        .iter()
        .filter(|d| shown.shows(&d.name))
        .flat_map(|d| d.ports.iter().map(move |p| port_view(topo, d, p)))
        .collect();
    let plan = Plan::compute(topo, &PlanOptions::default()).ok();
    let selected: Vec<(&str, u32)> = match plan
        .as_ref()
        .and_then(|p| p.env.get("NCCL_IB_HCA"))
        .and_then(|v| crate::parse::parse_nccl_ib_hca(v).ok())
    {
        Some(filter) => ports
            .iter()
            .filter(|p| filter.selects(&p.device, p.port))
            .map(|p| (p.device.as_str(), p.port))
            .collect(),
        None => Vec::new(),
    };
    let mut nccl = nccl_env(topo, &selected);
    let mut notes = Vec::new();
    if ports.iter().any(PortView::is_roce) {
        let roce_selected = selected.iter().any(|(d, n)| {
            ports
                .iter()
                .any(|p| p.device == *d && p.port == *n && p.is_roce())
        });
        if roce_selected && !nccl.env.contains_key("NCCL_IB_TC") && nccl.notes.is_empty() {
            nccl.notes.push(
                "NCCL_IB_TC is not set: sysfs shows no RoCE QoS setting for the ports in NCCL_IB_HCA"
                    .to_string(),
            );
        }
        notes.push(format!("not in sysfs: {NOT_IN_SYSFS}"));
        if ports.iter().any(|p| p.traffic_class.is_some()) {
            notes.push("priorities derived from a traffic class assume trust dscp with the default DSCP map (DSCP / 8)".to_string());
        }
    }
    let ib: Vec<(&str, u32)> = selected
        .iter()
        .filter(|(d, p)| {
            ports
                .iter()
                .any(|v| v.device == *d && v.port == *p && v.link_layer == "InfiniBand")
        })
        .copied()
        .collect();
    if !ib.is_empty() {
        nccl.notes.push(
            "NCCL_IB_SL is not set: no sysfs fact gives the service level the subnet manager's QoS policy assigns to compute traffic (opensm `qos_policy_file`, UFM); NCCL uses SL 0 unless told".to_string(),
        );
    }
    notes.extend(shown.note());
    QosView {
        schema: SCHEMA.to_string(),
        ports,
        nccl,
        notes,
    }
}

fn tc(p: &PortView) -> String {
    match (p.traffic_class, &p.traffic_class_file) {
        (Some(t), _) => t.to_string(),
        (None, Some(f)) if !f.rules.is_empty() => format!("rules({})", f.rules.len()),
        (None, _) if p.traffic_class_exposed || p.rdma_cm_tos.is_some() => {
            match p.pf_traffic_class {
                Some(pf) => format!("unset (PF {pf})"),
                None => "unset".to_string(),
            }
        }
        (None, _) => "n/a".to_string(),
    }
}

fn opt_prios(p: Option<&Vec<u8>>) -> String {
    p.map_or("n/a".to_string(), |v| prios(v))
}

/// The report as `rdmatopo qos` prints it: one row per port, then the notes.
pub fn table(root: &str, v: &QosView) -> String {
    let mut s = String::new();
    if v.ports.is_empty() {
        let _ = writeln!(s, "no RDMA device under {root}");
        return s;
    }
    let rows: Vec<[String; 9]> = v
        .ports
        .iter()
        .map(|p| {
            let port = format!("{}:{}{}", p.device, p.port, if p.vf { " (VF)" } else { "" });
            if !p.is_roce() {
                let dash = || "-".to_string();
                return [
                    port,
                    p.link_layer.clone(),
                    p.netdev.clone().unwrap_or_else(dash),
                    dash(),
                    dash(),
                    dash(),
                    dash(),
                    dash(),
                    "service levels (subnet manager)".to_string(),
                ];
            }
            [
                port,
                p.link_layer.clone(),
                p.netdev.clone().unwrap_or_else(|| "-".into()),
                tc(p),
                p.priority.map_or("-".to_string(), |x| x.to_string()),
                opt_prios(p.ecn_np.as_ref()),
                opt_prios(p.ecn_rp.as_ref()),
                opt_prios(p.lossless.as_ref()),
                match (&p.qos_netdev, &p.qos_netdev_note) {
                    (Some(n), _) if p.netdev.as_ref() != Some(n) => n.clone(),
                    (Some(_), _) => "own".to_string(),
                    (None, Some(_)) if p.vf => "PF (not visible)".to_string(),
                    (None, _) => "-".to_string(),
                },
            ]
        })
        .collect();
    let head = [
        "PORT",
        "LINK",
        "NETDEV",
        "TC",
        "PRIO",
        "ECN NP",
        "ECN RP",
        "LOSSLESS",
        "ECN/PFC OF",
    ];
    let mut widths: Vec<usize> = head.iter().map(|h| h.len()).collect();
    for r in &rows {
        for (w, c) in widths.iter_mut().zip(r.iter()) {
            *w = (*w).max(c.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let mut l = String::new();
        for (i, (c, w)) in cells.iter().zip(&widths).enumerate() {
            if i + 1 == cells.len() {
                l.push_str(c);
            } else {
                let _ = write!(l, "{c:<w$}  ");
            }
        }
        l.trim_end().to_string()
    };
    let _ = writeln!(s, "{}", line(head.to_vec()));
    for r in &rows {
        let _ = writeln!(s, "{}", line(r.iter().map(String::as_str).collect()));
    }
    s.push_str(
        "(TC: the traffic class QPs send with; n/a: not in sysfs here; PRIO: the RoCE priority)\n",
    );
    // Ports per way their priority was found, in port order.
    let mut sources: Vec<(&str, Vec<String>)> = Vec::new();
    for p in &v.ports {
        let Some(src) = p.priority_source.as_deref() else {
            continue;
        };
        let label = format!("{}:{}", p.device, p.port);
        match sources.iter_mut().find(|(s, _)| *s == src) {
            Some((_, ports)) => ports.push(label),
            None => sources.push((src, vec![label])),
        }
    }
    if !sources.is_empty() {
        s.push_str("\nPriority from:\n");
        for (src, ports) in &sources {
            let _ = writeln!(s, "  {}: {src}", short(ports));
        }
    }
    let vfs: Vec<&PortView> = v.ports.iter().filter(|p| p.vf_config.is_some()).collect();
    if !vfs.is_empty() {
        s.push_str("\nVFs (as the PF publishes them in sriov/<n>/config):\n");
        let label = |p: &PortView| format!("{}:{}", p.device, p.port);
        let pf = |p: &PortView| format!("PF {}", p.pf_device.as_deref().unwrap_or("?"));
        let lw = vfs.iter().map(|p| label(p).len()).max().unwrap_or(0);
        let pw = vfs.iter().map(|p| pf(p).len()).max().unwrap_or(0);
        let flag = |b: Option<bool>| match b {
            Some(true) => "on",
            Some(false) => "off",
            None => "?",
        };
        let num = |n: Option<u32>| n.map_or("?".to_string(), |x| x.to_string());
        for p in vfs {
            let Some(c) = &p.vf_config else { continue };
            let rate = match c.max_tx_rate {
                Some(0) => "none".to_string(),
                Some(x) => format!("{x} Mb/s"),
                None => "?".to_string(),
            };
            let _ = writeln!(
                s,
                "  {:<lw$}  {:<pw$}  trust {:<3}  spoofchk {:<3}  VLAN {} QoS {}  link {}  max rate {rate}",
                label(p),
                pf(p),
                flag(c.trust),
                flag(c.spoofcheck),
                num(c.vlan.map(u32::from)),
                num(c.vlan_qos.map(u32::from)),
                c.link_state.as_deref().unwrap_or("?"),
            );
        }
    }
    s.push_str("\nNCCL:\n");
    for (k, val) in &v.nccl.env {
        let _ = writeln!(s, "  {k}={val}");
        if let Some(r) = v.nccl.reasons.get(k) {
            let _ = writeln!(s, "    {r}");
        }
    }
    for n in &v.nccl.notes {
        let _ = writeln!(s, "  {n}");
    }
    if v.nccl.env.is_empty() && v.nccl.notes.is_empty() {
        s.push_str("  nothing to set from QoS facts\n");
    }
    if !v.notes.is_empty() {
        s.push_str("\nNotes:\n");
        for n in &v.notes {
            let _ = writeln!(s, "  {n}");
        }
    }
    s
}

/// Up to four names, then how many there are.
fn short(names: &[String]) -> String {
    if names.len() <= 4 {
        names.join(", ")
    } else {
        format!("{}, … ({} ports)", names[..4].join(", "), names.len())
    }
}
