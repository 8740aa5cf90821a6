//! Network-side checks: MTU (4), network namespace and GID index (5), netfilter on
//! RoCE (8) and the RoCE v2 IPv4 GID (8).

use super::report::Sink;
use super::words::{list, port_dir, port_name, short_list};
use crate::model::{Gid, Netdev, NetdevKind, NetnsMode, Port, RdmaDevice};
use crate::parse::{GidType, LinkLayer};
use crate::view::gid::{NcclGidEnv, best_gid, nccl_gid_index, of_other_namespace};
use crate::view::scope::{Context, Scope};
use std::collections::{BTreeMap, BTreeSet};

/// Bytes of RoCE headers the kernel takes off the netdev MTU (`iboe_get_mtu`: GRH 40 +
/// UDP 8 + BTH 12 + XRC 4 + AtomicETH 28 + ICRC 4).
const ROCE_HEADER_BYTES: u32 = 96;

/// The IB MTU the kernel derives from a netdev MTU (`iboe_get_mtu`): 1500 → 1024,
/// 4200 → 4096, 9000 → 4096.
pub fn roce_mtu(netdev_mtu: u32) -> Option<u32> {
    let payload = netdev_mtu.checked_sub(ROCE_HEADER_BYTES)?;
    [4096, 2048, 1024, 512, 256]
        .into_iter()
        .find(|m| payload >= *m)
}

fn netdev_mtu_path(n: &str) -> String {
    format!("/sys/class/net/{n}/mtu")
}

/// The netdev whose MTU sets the port's active MTU: the netdev on the device's own PCI
/// function (PF or VF), or its bond master under RoCE LAG.
pub(crate) fn uplink<'a>(scope: &Scope<'a>, dev: &RdmaDevice, port: &Port) -> Option<&'a Netdev> {
    let topo = scope.topo;
    if let Some(n) = port.netdev.as_deref().and_then(|n| topo.netdev(n))
        && matches!(n.kind, NetdevKind::Bond)
    {
        return Some(n);
    }
    let own = topo.netdevs.iter().find(|n| {
        n.pci.is_some()
            && n.pci == dev.pci
            && matches!(n.kind, NetdevKind::Physical | NetdevKind::VirtualFunction)
    })?;
    match own.master.as_deref().and_then(|m| topo.netdev(m)) {
        Some(bond) if matches!(bond.kind, NetdevKind::Bond) => Some(bond),
        _ => Some(own),
    }
}

/// Active MTU of a port: verbs' `active_mtu` when known, else derived from the uplink.
pub(crate) fn active_mtu(
    scope: &Scope,
    dev: &RdmaDevice,
    port: &Port,
) -> Option<(u32, String, String)> {
    if let Some(m) = scope
        .topo
        .verbs
        .as_ref()
        .and_then(|v| v.devices.iter().find(|d| d.name == dev.name))
        .and_then(|d| d.ports.iter().find(|p| p.port == port.number))
        .and_then(|p| p.active_mtu)
    {
        return Some((
            m,
            format!("verbs: {} port {} active_mtu", dev.name, port.number),
            m.to_string(),
        ));
    }
    if port.link_layer != Some(LinkLayer::Ethernet) {
        return None;
    }
    let up = uplink(scope, dev, port)?;
    let m = roce_mtu(up.mtu?)?;
    Some((m, netdev_mtu_path(&up.name), up.mtu?.to_string()))
}

/// The port's active MTU as far as an upper device in this namespace carrying its GIDs
/// (a pod's macvlan) shows it, when the netdev behind the port is not visible: such a
/// device's MTU never exceeds its lower device's (`macvlan_change_mtu` refuses more and
/// `macvlan_device_event` lowers it with the lower device; `vlan_dev_change_mtu` the
/// same), so the port runs at least at the IB MTU that MTU gives. Only 4096, the
/// largest, settles it: the lower bound, the upper device's name and its MTU.
fn active_mtu_through_upper<'a>(scope: &Scope<'a>, port: &'a Port) -> Option<(u32, &'a str, u32)> {
    port.gids
        .iter()
        .filter_map(|g| g.netdev.as_deref())
        .filter_map(|nd| {
            let n = scope.topo.netdev(nd)?;
            if !matches!(n.kind, NetdevKind::Virtual) {
                return None;
            }
            let mtu = n.mtu?;
            Some((roce_mtu(mtu)?, nd, mtu))
        })
        .max_by_key(|(floor, _, _)| *floor)
        .filter(|(floor, _, _)| *floor >= 4096)
}

/// Ports to judge: the active ports of the compute fabric (all of its ports when
/// none is active).
fn judged_ports<'a>(scope: &Scope<'a>) -> Vec<(&'a RdmaDevice, &'a Port)> {
    let fabric = scope.fabric_ports();
    let active: Vec<_> = fabric
        .iter()
        .copied()
        .filter(|(_, p)| p.is_active())
        .collect();
    if active.is_empty() { fabric } else { active }
}

pub(super) fn mtu(scope: &Scope, out: &mut Sink) {
    let ports = judged_ports(scope);
    if ports.is_empty() {
        out.not_applicable("no RDMA port in use");
        return;
    }
    let mut mtus: BTreeMap<u32, Vec<String>> = BTreeMap::new();
    let mut unknown = Vec::new();
    let mut through_upper = Vec::new();
    for (dev, port) in &ports {
        let name = port_name(dev, port.number);
        match active_mtu(scope, dev, port) {
            Some((m, path, value)) => {
                mtus.entry(m).or_default().push(name.clone());
                if m < 4096 {
                    let up = uplink(scope, dev, port);
                    let from = match (&up, path.starts_with("verbs")) {
                        (Some(u), false) => format!(" (from {} MTU {value})", u.name),
                        _ => String::new(),
                    };
                    out.push(
                        out.warning(format!("{name} runs at active MTU {m}{from}, not 4096"))
                            .with(path, value)
                            .why("NCCL uses the smaller active MTU of the two ends; each packet carries at most that payload plus ~96 bytes of RoCE headers, so 1024 means 4x the packets of 4096 and at 200-400 Gb/s the NIC's packet rate, not the link, limits bandwidth")
                            .fix(mtu_fix(scope, up, port)),
                    );
                }
            }
            None if port.link_layer == Some(LinkLayer::Ethernet) => {
                match active_mtu_through_upper(scope, port) {
                    Some((m, nd, nm)) => {
                        mtus.entry(m).or_default().push(name.clone());
                        through_upper.push(format!("{name} from {nd} MTU {nm}"));
                    }
                    None => unknown.push(name.clone()),
                }
            }
            None => {}
        }
        // Netdevs carrying this port's GIDs in our namespace (macvlan/ipvlan in a pod).
        let up = uplink(scope, dev, port);
        let mut seen: Vec<&str> = Vec::new();
        for g in &port.gids {
            let Some(nd) = g.netdev.as_deref() else {
                continue;
            };
            if seen.contains(&nd) || up.is_some_and(|u| u.name == nd) {
                continue;
            }
            seen.push(nd);
            let Some(n) = scope.topo.netdev(nd) else {
                continue;
            };
            let Some(nm) = n.mtu else { continue };
            let cap = roce_mtu(nm).unwrap_or(0);
            let below_uplink = up.and_then(|u| u.mtu).is_some_and(|um| nm < um);
            if cap >= 4096 && !below_uplink {
                continue;
            }
            let mut f = out
                .warning(format!(
                    "{nd} (carrying {name}'s GIDs here) has MTU {nm}{}: RDMA CM connections over it use IB MTU {cap}",
                    match up.and_then(|u| u.mtu.map(|m| (u, m))) {
                        Some((u, um)) if nm < um => format!(", below {} MTU {um}", u.name),
                        _ => String::new(),
                    }
                ))
                .with(netdev_mtu_path(nd), nm);
            if let Some(u) = up
                && let Some(um) = u.mtu
            {
                f = f.with(netdev_mtu_path(&u.name), um);
            }
            out.push(f
                .why("CNI plugins default secondary interfaces to 1500 (overlays 1450); rdma_cm derives the path MTU from the bound netdev, so UCX (rdmacm), perftest -R and NVMe-oF drop to 1024-byte packets, and IP traffic on that interface fragments")
                .fix(format!("set \"mtu\": 9000 (at least 4200, not above the PF's) in the NetworkAttachmentDefinition of {nd} (macvlan/ipvlan/sriov CNI), or in the SriovNetworkNodePolicy")));
        }
    }
    if mtus.len() > 1 {
        let parts: Vec<String> = mtus
            .iter()
            .map(|(m, names)| format!("{m} on {}", list(names)))
            .collect();
        out.push(
            out.warning(format!(
                "the NICs in use run at different active MTUs: {}",
                parts.join("; ")
            ))
            .why("NCCL stripes channels over all rails; the rails with the small MTU finish last and set the collective's pace")
            .fix("give every rail the same netdev MTU (4200 or 9000) end to end, including the switch ports"),
        );
    }
    if !unknown.is_empty() {
        out.skip(
            format!(
                "the active MTU of {} is unknown",
                short_list(&unknown, 8)
            ),
            "the netdev behind the port is in another network namespace and there are no libibverbs facts",
            "build with `--features verbs` and run on the node, or `ibv_devinfo -d <dev> | grep active_mtu`",
        );
    }
    if mtus.is_empty() && unknown.is_empty() {
        out.not_applicable("InfiniBand only: the MTU comes from the subnet manager, not from netdevs (libibverbs facts show active_mtu)");
        return;
    }
    if out.findings.is_empty() {
        let parts: Vec<String> = mtus
            .iter()
            .map(|(m, names)| format!("active MTU {m} on {}", list(names)))
            .collect();
        let mut note = parts.join("; ");
        if !through_upper.is_empty() {
            note.push_str(&format!(
                " ({}: the netdev behind the port is in another namespace, and a macvlan's MTU never exceeds its lower device's)",
                through_upper.join(", ")
            ));
        }
        out.note(note);
    }
}

fn mtu_fix(scope: &Scope, uplink: Option<&Netdev>, port: &Port) -> String {
    if port.link_layer == Some(LinkLayer::InfiniBand) {
        return "InfiniBand MTU comes from the subnet manager's partition config: set mtu=4096 (mtu=5) for the partition in opensm's partitions.conf / UFM".into();
    }
    let n = uplink.map_or("<pf-netdev>", |u| u.name.as_str());
    match uplink.map(|u| u.kind) {
        Some(NetdevKind::VirtualFunction) if scope.context.is_container() => format!(
            "raise the MTU of the SR-IOV network that created {n}: \"mtu\": 9000 in its NetworkAttachmentDefinition (sriov-cni) or mtu in the SriovNetworkNodePolicy; the PF's MTU on the host must be at least as large"
        ),
        _ if scope.context.is_container() => format!(
            "on the host: `ip link set {n} mtu 4200` (9000 is common; the switch ports must allow it); with the NVIDIA Network Operator set mtu in the NicClusterPolicy/SriovNetworkNodePolicy"
        ),
        _ => format!(
            "`ip link set {n} mtu 4200` (or 9000; the switch ports must allow it) and persist it in netplan/NetworkManager"
        ),
    }
}

pub(super) fn netns(scope: &Scope, out: &mut Sink) {
    let topo = scope.topo;
    let mode = topo.host.rdma_netns_mode;
    let mode_text = match mode {
        Some(NetnsMode::Shared) => "shared",
        Some(NetnsMode::Exclusive) => "exclusive",
        None => "unknown",
    };
    let roce = scope.roce_ports();
    // A forced GID index must exist on every RoCE port that NCCL would use.
    if let Some(forced) = topo.process.env.get("NCCL_IB_GID_INDEX")
        && let Ok(idx) = forced.trim().parse::<i64>()
        && idx >= 0
    {
        for (dev, port) in roce.iter().filter(|(_, p)| p.is_active()) {
            let at = port.gids.iter().find(|g| i64::from(g.index) == idx);
            // Another namespace's GID (the upstream kernel shows it) is no GID of ours.
            let foreign = at.filter(|g| of_other_namespace(topo, g));
            let here = at.filter(|g| !of_other_namespace(topo, g));
            let right = best_gid(topo, port);
            let name = port_name(dev, port.number);
            match here {
                None => out.push(
                    out.error(format!(
                        "NCCL_IB_GID_INDEX={idx} but {name} has no GID at index {idx} in this namespace{}{}",
                        foreign.map_or(String::new(), |g| format!(
                            " ({} there is {}'s, a netdev of another namespace)",
                            g.ipv4.as_deref().unwrap_or(&g.gid),
                            g.netdev.as_deref().unwrap_or("?")
                        )),
                        right.map_or(String::new(), |g| format!(" (the right one here is {})", g.index))
                    ))
                    .with("/proc/self/environ", format!("NCCL_IB_GID_INDEX={idx}"))
                    .with(
                        format!("{}/gids/{idx}", port_dir(&dev.name, port.number)),
                        foreign.map_or_else(
                            || "0000:0000:0000:0000:0000:0000:0000:0000 or absent".to_string(),
                            |g| format!("{} (gid_attrs/ndevs/{idx}: {})", g.gid, g.netdev.as_deref().unwrap_or("?")),
                        ),
                    )
                    .why("in a pod only the GIDs of this namespace's netdevs are usable, at indices that differ from pod to pod (MLNX_OFED reads the others as zero, the upstream kernel shows them with the host's netdev names); a fixed index fails QP setup (ibv_modify_qp: Invalid argument / No such device, NVIDIA/nccl#718) or sends with another namespace's address")
                    .fix("unset NCCL_IB_GID_INDEX (NCCL >= 2.21 picks the RoCE v2 IPv4 GID itself), or set NCCL_IB_ADDR_FAMILY/NCCL_IB_ADDR_RANGE to steer the choice"),
                ),
                Some(g) if right.is_some_and(|r| r.index != g.index) => out.push(
                    out.warning(format!(
                        "NCCL_IB_GID_INDEX={idx} on {name} is {} {}, not the RoCE v2 IPv4 GID at index {}",
                        g.gid_type.map_or("untyped", |t| t.short()),
                        g.ipv4.as_deref().unwrap_or(&g.gid),
                        right.map_or(0, |r| r.index)
                    ))
                    .with("/proc/self/environ", format!("NCCL_IB_GID_INDEX={idx}"))
                    .with(format!("{}/gids/{idx}", port_dir(&dev.name, port.number)), g.gid.clone())
                    .why("a RoCE v1 or link-local GID is not routable across subnets and uses no UDP/IP ECN, so congestion control and multi-subnet fabrics break")
                    .fix("unset NCCL_IB_GID_INDEX and let NCCL pick (>= 2.21), or set it per pod to the index rdmatopo reports"),
                ),
                _ => {}
            }
        }
    }
    if !scope.context.is_container() {
        out.not_applicable("not in a container");
        return;
    }
    if scope.hcas.is_empty() {
        out.not_applicable("no RDMA device in this container");
        return;
    }
    if scope.host_network {
        if out.findings.is_empty() {
            out.note(format!(
                "host network namespace (hostNetwork): every netdev and GID is visible; RDMA netns mode {mode_text}"
            ));
        }
        return;
    }
    let mut f = out.info(format!(
        "this {} has its own network namespace{}; RDMA netns mode is {mode_text}",
        if scope.context == Context::Pod {
            "pod"
        } else {
            "container"
        },
        if scope.context == Context::Pod {
            " (not hostNetwork)"
        } else {
            ""
        }
    ));
    if mode.is_some() {
        f = f.with(
            "/sys/module/ib_core/parameters/netns_mode",
            if mode == Some(NetnsMode::Shared) {
                "Y"
            } else {
                "N"
            },
        );
    }
    let visible: Vec<String> = topo.netdevs.iter().map(|n| n.name.clone()).collect();
    f = f.with("/sys/class/net", visible.join(" "));
    let mut lines = Vec::new();
    // An InfiniBand port's netdev is IPoIB, which RDMA traffic does not use.
    let (hidden_ib, hidden): (Vec<&RdmaDevice>, Vec<&RdmaDevice>) = scope
        .hcas
        .iter()
        .copied()
        .filter(|d| d.ports.iter().all(|p| p.netdev.is_none()))
        .partition(|d| {
            d.ports
                .iter()
                .all(|p| p.link_layer == Some(LinkLayer::InfiniBand))
        });
    let names = |devs: &[&RdmaDevice]| devs.iter().map(|d| d.name.clone()).collect::<Vec<_>>();
    if !hidden.is_empty() {
        lines.push(format!(
            "the netdevs of {} are in the host namespace, invisible here (their MTU and carrier cannot be read)",
            short_list(&names(&hidden), 8)
        ));
    }
    if !hidden_ib.is_empty() {
        lines.push(format!(
            "the IPoIB netdevs of {} stay in the host namespace, which RDMA over InfiniBand does not need",
            short_list(&names(&hidden_ib), 8)
        ));
    }
    let (mut chosen, mut none, mut foreign) = (Vec::new(), Vec::new(), Vec::new());
    for (dev, port) in &roce {
        let name = port_name(dev, port.number);
        // The upstream kernel also lists other namespaces' GIDs, with their netdevs'
        // names; MLNX_OFED reads those slots as zero, so there are none to name.
        let others: Vec<&Gid> = port
            .gids
            .iter()
            .filter(|g| of_other_namespace(topo, g))
            .collect();
        if !others.is_empty() {
            let netdevs: BTreeSet<String> =
                others.iter().filter_map(|g| g.netdev.clone()).collect();
            let netdevs: Vec<String> = netdevs.into_iter().collect();
            let n = others.len();
            foreign.push(format!(
                "{name} also lists {n} GID{} of {}",
                if n == 1 { "" } else { "s" },
                list(&netdevs)
            ));
        }
        match best_gid(topo, port) {
            Some(g) => {
                chosen.push(format!(
                    "{name} -> {} ({}{})",
                    g.index,
                    g.ipv4.as_deref().unwrap_or(&g.gid),
                    g.netdev
                        .as_deref()
                        .map_or(String::new(), |n| format!(" on {n}"))
                ));
                f = f.with(
                    format!("{}/gids/{}", port_dir(&dev.name, port.number), g.index),
                    g.gid.clone(),
                );
            }
            None => none.push(name),
        }
    }
    if !foreign.is_empty() {
        lines.push(format!(
            "{} (netdevs outside this namespace: unusable here)",
            short_list(&foreign, 4)
        ));
    }
    if !chosen.is_empty() {
        lines.push(format!("GID index right here: {}", short_list(&chosen, 8)));
    }
    if !none.is_empty() {
        lines.push(format!(
            "no GID of this namespace on {}",
            short_list(&none, 8)
        ));
    }
    let indices: BTreeSet<u32> = roce
        .iter()
        .filter_map(|(_, p)| best_gid(topo, p).map(|g| g.index))
        .collect();
    let why = match mode {
        Some(NetnsMode::Shared) if roce.is_empty() => {
            "in shared mode every HCA is visible and usable from every namespace; an InfiniBand port is addressed by its LID and port GIDs, which belong to no network namespace, so this pod's own namespace takes nothing from it"
        }
        Some(NetnsMode::Shared) => {
            "in shared mode every HCA is visible and usable from every namespace, but only the GIDs of netdevs in this namespace (macvlan/ipvlan/VF) are this pod's addresses, at indices that differ from pod to pod; MLNX_OFED reads the other namespaces' slots as zero, the upstream kernel lists them with their netdev names"
        }
        Some(NetnsMode::Exclusive) => {
            "in exclusive mode only the RDMA devices moved into this namespace are visible (rdma-cni), with the GIDs of this namespace's netdevs"
        }
        None => {
            "the RDMA netns mode decides whether all HCAs (shared) or only the assigned ones (exclusive) are visible; only the GIDs of this namespace's netdevs are its addresses"
        }
    };
    // Where NCCL's own scan (ncclIbGetGidIndex, under this process's NCCL_IB_ADDR_*
    // variables) lands on another GID than the right one: the upstream kernel lists
    // the host's GIDs first.
    let mut nccl_env = NcclGidEnv::from_env(&topo.process.env);
    nccl_env.gid_index = -1;
    let astray: Vec<String> = roce
        .iter()
        .filter_map(|(d, p)| {
            let right = best_gid(topo, p)?.index;
            let nccl = nccl_gid_index(p, &nccl_env)?;
            (nccl != right).then(|| format!("{} -> {nccl}", port_name(d, p.number)))
        })
        .collect();
    let fix = if roce.is_empty() {
        "nothing to change".to_string()
    } else if !astray.is_empty() {
        let set = match indices.iter().collect::<Vec<_>>().as_slice() {
            [only] => format!("set NCCL_IB_GID_INDEX={only}"),
            _ => "set NCCL_IB_ADDR_RANGE to this pod's subnet".to_string(),
        };
        format!(
            "{set}: NCCL's own GID choice would take another namespace's GID here ({})",
            short_list(&astray, 4)
        )
    } else if indices.len() > 1 {
        "leave NCCL_IB_GID_INDEX unset: the right index differs between devices here, and NCCL (>= 2.21) picks per device".to_string()
    } else {
        "nothing to change if NCCL_IB_GID_INDEX is unset (NCCL >= 2.21 finds the index); use hostNetwork: true only if the pod must see the host's netdevs".to_string()
    };
    if !lines.is_empty() {
        f.summary = format!("{}: {}", f.summary, lines.join("; "));
    }
    out.push(f.why(why).fix(fix));
}

pub(super) fn netfilter(scope: &Scope, out: &mut Sink) {
    let soft: Vec<&RdmaDevice> = scope
        .hcas
        .iter()
        .copied()
        .filter(|d| d.pci.is_none())
        .collect();
    let roce = scope.roce_ports();
    if soft.is_empty() && roce.is_empty() {
        out.not_applicable("no RoCE port in use");
        return;
    }
    for d in &soft {
        out.push(
            out.warning(format!(
                "{} is a software RDMA device (soft-RoCE/iWARP): its RoCE v2 packets (UDP 4791) go through the kernel's IP stack, netfilter and conntrack",
                d.name
            ))
            .with(format!("/sys/class/infiniband/{}/device", d.name), "not a PCI device")
            .why("every packet is built by the CPU and passes iptables/nftables; a DROP rule or a full conntrack table silently stalls connections, and throughput is a fraction of a hardware NIC's")
            .fix("use a hardware RDMA NIC for training traffic; if soft-RoCE is intended, allow UDP 4791 (`iptables -I INPUT -p udp --dport 4791 -j ACCEPT`) and exempt it from conntrack (`iptables -t raw -I PREROUTING -p udp --dport 4791 -j NOTRACK`)"),
        );
    }
    if out.findings.is_empty() {
        out.note("hardware RoCE: RDMA packets bypass the kernel, so netfilter/conntrack rules on UDP 4791 do not see them (the kernel's netfilter tables are not read)");
    }
}

pub(super) fn roce_gid(scope: &Scope, out: &mut Sink) {
    let roce: Vec<(&RdmaDevice, &Port)> = scope
        .rails()
        .into_iter()
        .filter(|(_, p)| p.link_layer == Some(LinkLayer::Ethernet))
        .collect();
    if roce.is_empty() {
        out.not_applicable("no active RoCE rail in use");
        return;
    }
    let mut ok = Vec::new();
    let mut missing: Vec<(&RdmaDevice, &Port)> = Vec::new();
    let mut untyped = Vec::new();
    for (dev, port) in roce {
        let name = port_name(dev, port.number);
        // The GID every command chooses (this namespace's only), when it is v2 IPv4.
        let v2_ipv4 = best_gid(scope.topo, port)
            .filter(|g| g.ipv4.is_some() && g.gid_type == Some(GidType::RoceV2));
        match v2_ipv4 {
            Some(g) => ok.push(format!(
                "{name}: {} ({})",
                g.index,
                g.ipv4.as_deref().unwrap_or("")
            )),
            None if !port.gids.is_empty() && port.gids.iter().all(|g| g.gid_type.is_none()) => {
                untyped.push(name)
            }
            None => missing.push((dev, port)),
        }
    }
    if !untyped.is_empty() {
        out.skip(
            format!("the GID types of {} are unreadable", list(&untyped)),
            "gid_attrs/types/<i> could not be read, so RoCE v1 and v2 GIDs cannot be told apart",
            "run `show_gids` on the host",
        );
    }
    if !missing.is_empty() {
        let picks: Vec<String> = missing
            .iter()
            .map(|(d, p)| {
                // Without a usable GID NCCL stays at index 0.
                let what = match best_gid(scope.topo, p)
                    .or_else(|| p.gids.iter().find(|g| g.index == 0))
                {
                    Some(g) => format!(
                        "index {} ({} {})",
                        g.index,
                        g.gid_type.map_or("untyped", |t| t.short()),
                        g.ipv4.as_deref().unwrap_or(&g.gid)
                    ),
                    None => "index 0, which is empty".to_string(),
                };
                format!("{}: {what}", port_name(d, p.number))
            })
            .collect();
        let names: Vec<String> = missing
            .iter()
            .map(|(d, p)| port_name(d, p.number))
            .collect();
        let summary = if missing.len() == 1 {
            format!(
                "{} has no RoCE v2 IPv4 GID{}: NCCL would use {}",
                names[0],
                here(scope),
                picks[0].split_once(": ").map_or("", |(_, w)| w)
            )
        } else {
            format!(
                "{} RoCE rails have no RoCE v2 IPv4 GID{}: {}; NCCL would use {}",
                missing.len(),
                here(scope),
                short_list(&names, 8),
                short_list(&picks, 4)
            )
        };
        let mut f = out.error(summary);
        for (d, p) in missing.iter().take(2) {
            let dir = port_dir(&d.name, p.number);
            let ours: Vec<_> = p
                .gids
                .iter()
                .filter(|g| !of_other_namespace(scope.topo, g))
                .collect();
            f = f.with(
                format!("{dir}/gids"),
                format!("{} valid GID(s)", ours.len()),
            );
            for g in ours.iter().take(2) {
                f = f.with(format!("{dir}/gids/{}", g.index), g.gid.clone());
            }
        }
        out.push(f
            .why("RoCE v2 IPv4 GIDs are what routed lossless fabrics carry (UDP/IP, ECN for congestion control); a link-local or RoCE v1 GID is not routable and connections across subnets fail, and an empty slot fails QP setup")
            .fix(if scope.context.is_container() {
                "give the pod's RDMA interface an IPv4 address (IPAM in its NetworkAttachmentDefinition: whereabouts or host-local); the kernel then adds the v1/v2 GID pair for it"
            } else {
                "assign an IPv4 address to the port's netdev (`ip addr add <ip>/<len> dev <netdev>`); the kernel adds the RoCE v2 GID for it. Ports that carry no compute traffic belong outside NCCL_IB_HCA"
            }));
    }
    if out.findings.is_empty() {
        out.note(format!("RoCE v2 IPv4 GID per port: {}", ok.join(", ")));
    }
}

fn here(scope: &Scope) -> &'static str {
    if scope.context.is_container() && !scope.host_network {
        " in this namespace"
    } else {
        ""
    }
}
