//! Check 7: multi-rail. Usable rails against GPUs, GPUs forced onto one rail, rails of
//! different speed or link layer, rail ports not ACTIVE, NCCL variables that leave every
//! rail unused (`NCCL_IB_DISABLE`, `NCCL_NET=Socket`, an `NCCL_IB_HCA` that selects no
//! ACTIVE port, an `NCCL_SOCKET_IFNAME` that names no interface), and ports NCCL would
//! open beside the compute rails when `NCCL_IB_HCA` is unset.

use super::report::Sink;
use super::words::{list, port_dir, port_name, short_list, state_text};
use crate::model::{Port, RdmaDevice, Severity};
use crate::parse::{LinkLayer, parse_nccl_ib_hca, parse_nccl_int};
use crate::view::affinity::{PathClass, path_class};
use crate::view::scope::Scope;
use std::collections::{BTreeMap, BTreeSet};

fn speed(port: &Port) -> String {
    port.rate
        .as_ref()
        .map_or("unknown speed".into(), |r| format!("{} Gb/s", r.gbps))
}

fn layer(port: &Port) -> &'static str {
    port.link_layer.map_or("unknown", |l| l.as_str())
}

pub(super) fn check(scope: &Scope, out: &mut Sink) {
    if scope.topo.rdma_devices.is_empty() {
        out.not_applicable(if scope.gpus.is_empty() {
            "no GPU and no RDMA device"
        } else {
            "no RDMA device on this machine: NCCL uses TCP sockets between nodes"
        });
        return;
    }
    if scope.hcas.is_empty() {
        out.not_applicable("no RDMA device assigned to this container");
        return;
    }
    socket_interface(scope, out);
    if ib_transport_off(scope, out) {
        return;
    }
    let rails = scope.rails();
    down_ports(scope, out);
    let gpus = scope.gpus.len();
    let nrails = rails.len();
    if nrails == 0 {
        selects_nothing(scope, out);
        if out.findings.is_empty() {
            out.not_applicable("no rail in use");
        }
        return;
    }
    if gpus > nrails {
        let names: Vec<String> = rails.iter().map(|(d, p)| port_name(d, p.number)).collect();
        out.push(
            out.warning(format!(
                "{gpus} GPUs share {nrails} usable rail(s) ({})",
                list(&names)
            ))
            .why("each rail's bandwidth is divided among the GPUs that use it: with fewer rails than GPUs, inter-node collectives run at a fraction of what the node can do")
            .fix(if scope.context.is_container() {
                "request one RDMA NIC (or VF) per GPU, each on the GPU's PCIe switch; check that every rail is ACTIVE"
            } else {
                "bring the missing rails up, or run fewer GPUs per node for network-bound jobs"
            }),
        );
    }
    forced_sharing(scope, out, &rails);
    mixed(scope, out, &rails);
    unplanned(scope, out);
    if out.findings.is_empty() {
        let mut speeds: BTreeMap<String, usize> = BTreeMap::new();
        for (_, p) in &rails {
            *speeds.entry(speed(p)).or_default() += 1;
        }
        let layers: BTreeSet<&str> = rails.iter().map(|(_, p)| layer(p)).collect();
        let parts: Vec<String> = speeds.iter().map(|(s, n)| format!("{n} at {s}")).collect();
        out.note(format!(
            "{gpus} GPU(s), {nrails} usable rail(s) ({}, {})",
            parts.join(", "),
            layers.into_iter().collect::<Vec<_>>().join("/")
        ));
    }
}

/// This process's `NCCL_SOCKET_IFNAME` names no network interface here. NCCL takes a
/// value of two characters or more as the only interfaces it may use
/// (`ncclFindInterfaces`, nccl `src/misc/socket.cc`): with none, bootstrap stops
/// (`Bootstrap : no socket interface found`, `src/bootstrap.cc`) and the IB transport
/// finds no IP interface either (`src/transport/net_ib/init.cc`). Only names are
/// compared: an interface also needs an address there, which is not judged here.
fn socket_interface(scope: &Scope, out: &mut Sink) {
    if !scope.own_environment {
        return;
    }
    let Some(value) = scope
        .topo
        .process
        .env
        .get("NCCL_SOCKET_IFNAME")
        .filter(|v| v.len() > 1)
    else {
        return;
    };
    let Ok(filter) = parse_nccl_ib_hca(value) else {
        return;
    };
    let names: Vec<String> = scope.topo.netdevs.iter().map(|n| n.name.clone()).collect();
    if names.is_empty() || names.iter().any(|n| filter.selects_interface(n)) {
        return;
    }
    out.push(
        out.error(format!(
            "NCCL_SOCKET_IFNAME={value} matches none of the network interfaces here ({}): NCCL stops at init with `Bootstrap : no socket interface found`",
            short_list(&names, 8)
        ))
        .with("/proc/self/environ", format!("NCCL_SOCKET_IFNAME={value}"))
        .with("/sys/class/net", names.join(" "))
        .why("NCCL uses only the interfaces NCCL_SOCKET_IFNAME names (prefixes unless the list starts with `=`; `^` excludes) for its bootstrap and for the IP address its IB transport needs; a value copied from another machine (ib0, eno1) names nothing in a pod, whose interfaces are eth0 and those its network attachments add")
        .fix("name an interface of this namespace (`rdmatopo nccl-env` gives the one that carries the default route), or unset it"),
    );
}

/// The ports here NCCL's IB transport could open: ACTIVE, InfiniBand or Ethernet.
fn ib_ports<'a>(scope: &Scope<'a>) -> Vec<(&'a RdmaDevice, &'a Port)> {
    scope
        .hcas
        .iter()
        .flat_map(|d| {
            d.ports
                .iter()
                .filter(|p| {
                    p.is_active()
                        && matches!(
                            p.link_layer,
                            Some(LinkLayer::InfiniBand | LinkLayer::Ethernet)
                        )
                })
                .map(move |p| (*d, p))
        })
        .collect()
}

fn port_names(ports: &[(&RdmaDevice, &Port)]) -> Vec<String> {
    ports.iter().map(|(d, p)| port_name(d, p.number)).collect()
}

/// The findings of this check about this process's NCCL variables that leave every
/// rail unused ([`super::nccl_variable_findings`]).
pub(super) fn nccl_variables(scope: &Scope, out: &mut Sink) {
    socket_interface(scope, out);
    if !ib_transport_off(scope, out) {
        selects_nothing(scope, out);
    }
}

/// This process turns NCCL's IB transport off while it has ports to open:
/// `NCCL_IB_DISABLE` other than 0 (`ncclIbInit` returns at once, nccl
/// `src/transport/net_ib/init.cc`) or `NCCL_NET=Socket` (the transport of that name,
/// compared case-blind, `src/plugin/net.cc`). Whether it said so.
fn ib_transport_off(scope: &Scope, out: &mut Sink) -> bool {
    if !scope.own_environment {
        return false;
    }
    let env = &scope.topo.process.env;
    let disabled = env
        .get("NCCL_IB_DISABLE")
        .filter(|v| parse_nccl_int(v).is_ok_and(|n| n != 0))
        .map(|v| ("NCCL_IB_DISABLE", v));
    let socket = env
        .get("NCCL_NET")
        .filter(|v| v.eq_ignore_ascii_case("socket"))
        .map(|v| ("NCCL_NET", v));
    let Some((var, value)) = disabled.or(socket) else {
        return false;
    };
    let ports = port_names(&ib_ports(scope));
    if ports.is_empty() {
        return false;
    }
    out.push(
        out.error(format!(
            "{var}={value}: NCCL leaves the {} ACTIVE RDMA port(s) here ({}) unused and sends inter-node traffic over TCP sockets",
            ports.len(),
            short_list(&ports, 8)
        ))
        .with("/proc/self/environ", format!("{var}={value}"))
        .why("NCCL then uses its socket transport without an error or a warning (only NCCL_DEBUG=INFO shows `NET/Socket`): TCP through the kernel at a fraction of the RDMA bandwidth, with the CPU copying every byte")
        .fix(format!("unset {var} where the job is launched (pod spec, launcher script){}", hca_hint(scope))),
    );
    true
}

/// This process's `NCCL_IB_HCA` selects none of the ACTIVE ports here. NCCL's IB
/// transport counts a port only when it is ACTIVE, InfiniBand or Ethernet, and selected
/// (`src/transport/net_ib/init.cc`); with none it logs `NET/IB : No device found.` at
/// INFO level, and `src/plugin/net.cc` moves on to the socket transport.
fn selects_nothing(scope: &Scope, out: &mut Sink) {
    let (Some(filter), Some(value)) = (
        &scope.user_filter,
        scope.topo.process.env.get("NCCL_IB_HCA"),
    ) else {
        return;
    };
    let ports = ib_ports(scope);
    if ports.is_empty() || ports.iter().any(|(d, p)| filter.selects(&d.name, p.number)) {
        return;
    }
    let active = port_names(&ports);
    out.push(
        out.error(format!(
            "NCCL_IB_HCA={value} selects none of the {} ACTIVE RDMA port(s) here ({}): NCCL finds no IB device and sends inter-node traffic over TCP sockets",
            active.len(),
            short_list(&active, 8)
        ))
        .with("/proc/self/environ", format!("NCCL_IB_HCA={value}"))
        .why("NCCL's IB transport opens only the ACTIVE ports NCCL_IB_HCA selects (a name matches as a prefix unless the list starts with `=`; `^` excludes); with none it logs `NET/IB : No device found.` at INFO level and falls back to its socket transport without an error, at a fraction of the bandwidth")
        .fix(format!("name the ports of this machine{}, or unset NCCL_IB_HCA", hca_hint(scope))),
    );
}

/// Ports of the compute fabric that are not ACTIVE. VF ports are the `sriov` check's.
fn down_ports(scope: &Scope, out: &mut Sink) {
    for (dev, port) in scope.fabric_ports() {
        if port.is_active() || scope.is_vf(dev) {
            continue;
        }
        let severity = if scope.context.is_container() && scope.hca_ownership_known {
            Severity::Error
        } else {
            Severity::Warning
        };
        let dir = port_dir(&dev.name, port.number);
        let mut f = out
            .finding(
                severity,
                format!(
                    "rail {} is not ACTIVE ({})",
                    port_name(dev, port.number),
                    state_text(port)
                ),
            )
            .with(format!("{dir}/state"), state_text(port));
        if let Some(ps) = &port.phys_state {
            f = f.with(
                format!("{dir}/phys_state"),
                format!("{}: {}", ps.code, ps.name),
            );
        }
        // On RoCE mlx5 reports Disabled both for a netdev set down and for one up
        // without a link partner; `carrier` tells them apart (it reads 0 only on an
        // interface that is up).
        let netdev = (port.link_layer == Some(LinkLayer::Ethernet))
            .then(|| scope.topo.netdev(port.netdev.as_deref()?))
            .flatten();
        if let Some(n) = netdev
            && let Some(carrier) = n.carrier
        {
            f = f.with(
                format!("/sys/class/net/{}/carrier", n.name),
                u8::from(carrier).to_string(),
            );
        }
        let disabled = match netdev {
            Some(n) if n.carrier == Some(false) => format!(
                "phys_state Disabled with {} up but no carrier: no link partner; check the cable/transceiver and the switch port (`mlxlink -d {}`)",
                n.name, dev.name
            ),
            Some(n) => format!(
                "phys_state Disabled: {} is down; bring it up (`ip link set {} up`)",
                n.name, n.name
            ),
            None => "phys_state Disabled: the port is administratively down; on RoCE bring the netdev up (`ip link set <netdev> up`), on InfiniBand enable the switch port".to_string(),
        };
        out.push(f
            .why("NCCL only uses ACTIVE ports: this rail carries nothing, and the GPUs near it send through farther NICs")
            .fix(match port.phys_state.as_ref().map(|p| p.code) {
                Some(2) => "phys_state Polling: no link partner; check the cable/transceiver and the switch port (`mlxlink -d <dev>`)".to_string(),
                Some(3) => disabled,
                Some(5) => "link is up but the logical state is not ACTIVE: on InfiniBand no subnet manager has configured the port (start opensm/UFM)".to_string(),
                _ => "check cabling, the switch port and the netdev (`ibstat`, `rdma link show`)".to_string(),
            }));
    }
}

/// Two GPUs whose only nearest NIC is the same one while another rail is nearest to
/// no GPU.
fn forced_sharing(scope: &Scope, out: &mut Sink, rails: &[(&RdmaDevice, &Port)]) {
    let mut only_nic: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for gn in &scope.gpu_nics {
        if let [only] = gn.nics.as_slice() {
            only_nic
                .entry(only.name.as_str())
                .or_default()
                .push(scope.gpu_name(gn.gpu));
        }
    }
    let idle: Vec<String> = rails
        .iter()
        .map(|(d, _)| d.name.clone())
        .filter(|n| scope.gpus_using(n).is_empty())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    if idle.is_empty() || scope.gpu_nics.is_empty() {
        return;
    }
    for (nic, gpus) in only_nic.iter().filter(|(_, g)| g.len() > 1) {
        out.push(
            out.warning(format!(
                "{} are all nearest to {nic} alone, while {} is nearest to no GPU",
                list(gpus),
                list(&idle)
            ))
            .why("NCCL gives each GPU its closest NIC: these GPUs share one rail's bandwidth while another rail idles (or is reached through the CPU)")
            .fix("place one NIC per GPU on the GPU's PCIe switch (request the matching VF/NIC per GPU), or accept PXB/PHB paths with NCCL_CROSS_NIC=1"),
        );
    }
}

/// Rails of different link layers, or of different speeds within one link layer.
fn mixed(scope: &Scope, out: &mut Sink, rails: &[(&RdmaDevice, &Port)]) {
    let mut layers: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for (d, p) in rails {
        layers
            .entry(layer(p))
            .or_default()
            .push(port_name(d, p.number));
    }
    if layers.len() > 1 {
        let parts: Vec<String> = layers
            .iter()
            .map(|(l, n)| format!("{l} on {}", list(n)))
            .collect();
        out.push(
            out.warning(format!("rails mix link layers: {}", parts.join("; ")))
                .with("/proc/self/environ", format!("NCCL_IB_HCA={}", scope.topo.process.env.get("NCCL_IB_HCA").map_or("(unset)", |v| v.as_str())))
                .why("NCCL cannot fuse or connect devices of different link layers; the InfiniBand and Ethernet rails form separate networks")
                .fix(format!("select the compute fabric only{}", hca_hint(scope))),
        );
    }
    for l in layers.keys() {
        let mut speeds: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (d, p) in rails.iter().filter(|(_, p)| layer(p) == *l) {
            speeds
                .entry(speed(p))
                .or_default()
                .push(port_name(d, p.number));
        }
        if speeds.len() < 2 {
            continue;
        }
        let parts: Vec<String> = speeds
            .iter()
            .map(|(s, n)| format!("{s} on {}", list(n)))
            .collect();
        let mut f = out.warning(format!(
            "{l} rails run at different speeds: {}",
            parts.join("; ")
        ));
        // Every port off the most common speed, and one port at it: the message names
        // the rest (a privileged pod sees 28 ports). Where no speed is the most common,
        // every port.
        let most = speeds.values().map(Vec::len).max().unwrap_or(0);
        let mut at_most = speeds.values().filter(|ports| ports.len() == most);
        let unshown: &[String] = match (at_most.next(), at_most.next()) {
            (Some(ports), None) => &ports[1..],
            _ => &[],
        };
        for (d, p) in rails.iter().filter(|(_, p)| layer(p) == *l) {
            let shown = !unshown.contains(&port_name(d, p.number));
            if let Some(r) = p.rate.as_ref().filter(|_| shown) {
                f = f.with(
                    format!("{}/rate", port_dir(&d.name, p.number)),
                    format!("{} Gb/sec ({}X {})", r.gbps, r.lanes, r.speed),
                );
            }
        }
        out.push(f
            .why("collectives stripe data evenly over the rails: the slowest rail sets the pace for all")
            .fix("find why a port trained low (cable, transceiver, switch port speed: `mlxlink -d <dev> -m`), or leave the slow rails out of NCCL_IB_HCA"));
    }
}

/// `NCCL_IB_HCA` is unset and NCCL would also open ports that are not compute rails
/// (another fabric, the front-end NIC, ports without a usable GID).
fn unplanned(scope: &Scope, out: &mut Sink) {
    // Another container's NCCL_IB_HCA is unknown (`k8s audit`).
    if !scope.own_environment {
        return;
    }
    let extra = scope.unplanned_ports();
    if extra.is_empty() {
        return;
    }
    if only_farther_rails(scope, &extra) {
        let names: Vec<String> = extra.iter().map(|(d, p)| port_name(d, p.number)).collect();
        let kinds: BTreeSet<String> = extra
            .iter()
            .map(|(_, p)| format!("{}, {}", layer(p), speed(p)))
            .collect();
        let kinds: Vec<String> = kinds.into_iter().collect();
        out.push(
            out.info(format!(
                "NCCL_IB_HCA is not set: NCCL also opens {} ({}), SYS from every GPU in use; it keeps to the nearer rails while they are up",
                short_list(&names, 6),
                kinds.join("; ")
            ))
            .with("/proc/self/environ", "NCCL_IB_HCA unset")
            .why("NCCL opens every ACTIVE port, then gives each GPU the NICs of the highest path bandwidth and, among those, the nearest (ncclTopoGetLocal); a farther NIC joins a ring only when the search finds no solution at the nearer level (a rail down), and then its traffic crosses the CPU interconnect without GPUDirect RDMA, on an HCA whose near GPUs may be another job's")
            .fix(format!("to keep NCCL on the rails{}", hca_hint(scope))),
        );
        return;
    }
    // Group ports of the same kind and reason: `mlx5_1 and mlx5_7 (Ethernet, 200 Gb/s: …)`.
    let mut groups: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    for (d, p) in &extra {
        let kind = format!("{}, {}", layer(p), speed(p));
        let reason = scope
            .plan_reason(&d.name, p.number)
            .unwrap_or("not selected by `rdmatopo nccl-env`")
            .to_string();
        groups
            .entry((kind, reason))
            .or_default()
            .push(port_name(d, p.number));
    }
    let parts: Vec<String> = groups
        .iter()
        .map(|((kind, reason), names)| format!("{} ({kind}; {reason})", short_list(names, 6)))
        .collect();
    out.push(
        out.warning(format!(
            "NCCL_IB_HCA is not set: besides the compute rails NCCL would also open {}",
            parts.join("; and ")
        ))
        .with("/proc/self/environ", "NCCL_IB_HCA unset")
        .why("without NCCL_IB_HCA NCCL opens every ACTIVE port; ports of another fabric or the front-end network cannot reach the other nodes' compute ports, and a port without a routable GID fails its connections")
        .fix(format!("set the compute rails explicitly{}", hca_hint(scope))),
    );
}

/// Every port of `extra` is of the rails' link layer and one that every GPU in use
/// reaches only across NUMA nodes (SYS), while each GPU has a nearer rail: NCCL's search
/// does not pick them while the rails are up.
fn only_farther_rails(scope: &Scope, extra: &[(&RdmaDevice, &Port)]) -> bool {
    let topo = scope.topo;
    let near_rails = !scope.gpu_nics.is_empty()
        && scope
            .gpu_nics
            .iter()
            .all(|g| g.class != PathClass::Sys && !g.nics.is_empty());
    let gpus: Option<Vec<_>> = scope
        .gpus
        .iter()
        .map(|g| topo.pci_function(g.pci))
        .collect();
    let Some(gpus) = gpus.filter(|g| !g.is_empty() && near_rails) else {
        return false;
    };
    let rails = scope.rails();
    extra.iter().all(|(dev, port)| {
        port.link_layer.is_some()
            && rails.iter().all(|(_, p)| p.link_layer == port.link_layer)
            && dev
                .pci
                .and_then(|a| topo.pci_function(a))
                .is_some_and(|nic| {
                    gpus.iter()
                        .all(|g| path_class(topo, g, nic) == PathClass::Sys)
                })
    })
}

/// `: NCCL_IB_HCA=<plan>` when the plan recommends a value.
fn hca_hint(scope: &Scope) -> String {
    match &scope.recommended_ib_hca {
        Some(v) => format!(": NCCL_IB_HCA={v} (from `rdmatopo nccl-env`)"),
        None => " with NCCL_IB_HCA".to_string(),
    }
}
