//! Netdevs visible in this network namespace (`/sys/class/net`).

use super::ctx::Ctx;
use super::needs::NetdevFacts;
use crate::model::{Bond, Netdev, NetdevKind, Topology};
use crate::parse::{PciAddr, parse_dec, parse_fib_trie_local, parse_route};
use crate::sysfs::{EntryKind, join};
use std::collections::BTreeSet;

const CLASS_DIR: &str = "/sys/class/net";
/// A netdev is about ten files: fewer per thread than PCI functions.
const NETDEVS_PER_THREAD: usize = 4;

pub(super) fn read_netdevs(ctx: &mut Ctx, topo: &mut Topology) {
    if ctx.needs.netdevs == NetdevFacts::None {
        return;
    }
    // Details only of the netdevs `netdevs` prints.
    let wanted = (ctx.needs.netdevs == NetdevFacts::Printed).then(|| {
        let names: BTreeSet<&str> = topo
            .rdma_devices
            .iter()
            .flat_map(|d| &d.ports)
            .flat_map(|p| &p.gids)
            .filter_map(|g| g.netdev.as_deref())
            .collect();
        let functions: BTreeSet<PciAddr> = topo.rdma_devices.iter().filter_map(|d| d.pci).collect();
        (names, functions)
    });
    let names = ctx.list(CLASS_DIR);
    let seen: &Topology = topo;
    let mut out: Vec<Netdev> = ctx.par_filter_map(&names, NETDEVS_PER_THREAD, |ctx, name| {
        let entry = join(CLASS_DIR, name);
        // `bonding_masters` is a file beside the interface links.
        if matches!(ctx.fs.kind(&entry), Ok(EntryKind::File)) {
            return None;
        }
        let real = match ctx.fs.canonicalize(&entry) {
            Ok(r) => r,
            Err(e) => {
                ctx.unreadable(&e);
                return None;
            }
        };
        let name = name.clone();
        if ctx.needs.netdevs >= NetdevFacts::Links {
            return Some(read_netdev(ctx, &real, name, seen));
        }
        let pci = function_of(&real);
        let detail = wanted.as_ref().is_some_and(|(names, functions)| {
            names.contains(name.as_str()) || pci.is_some_and(|a| functions.contains(&a))
        });
        Some(read_outline(ctx, &real, name, pci, detail))
    });
    if ctx.needs.netdevs == NetdevFacts::Whole {
        assign_ipv4(ctx, &mut out);
    }
    let routed = |route: &str| out.iter().any(|n| n.name == route);
    if ctx.needs.netdevs == NetdevFacts::Routed
        && !topo
            .host
            .default_route_interface
            .as_deref()
            .is_some_and(routed)
    {
        for n in &mut out {
            n.operstate = ctx.text(&join(&join(CLASS_DIR, &n.name), "operstate"), true);
        }
        assign_ipv4(ctx, &mut out);
    }
    topo.netdevs = out;
}

/// The PCI functions of this namespace's netdevs (links only: no file is opened).
pub(super) fn namespace_functions(ctx: &mut Ctx) -> BTreeSet<PciAddr> {
    ctx.list(CLASS_DIR)
        .iter()
        .filter_map(|name| ctx.fs.canonicalize(&join(CLASS_DIR, name)).ok())
        .filter_map(|real| function_of(&real))
        .collect()
}

/// The function is the last PCI address before `/net/<name>` of the canonical path.
fn function_of(dir: &str) -> Option<PciAddr> {
    dir.rsplit_once("/net/")
        .and_then(|(parent, _)| PciAddr::from_component(parent.rsplit('/').next()?))
        .filter(|_| !dir.contains("/virtual/"))
}

fn kind_of(
    name: &str,
    arphrd: Option<u32>,
    bond: bool,
    pci: Option<PciAddr>,
    is_vf: bool,
) -> NetdevKind {
    if name == "lo" || arphrd == Some(772) {
        NetdevKind::Loopback
    } else if bond {
        NetdevKind::Bond
    } else if pci.is_some() && is_vf {
        NetdevKind::VirtualFunction
    } else if pci.is_some() {
        NetdevKind::Physical
    } else {
        NetdevKind::Virtual
    }
}

fn read_bond(ctx: &mut Ctx, dir: &str) -> Option<Bond> {
    let at = |f: &str| join(dir, f);
    ctx.fs.exists(&at("bonding")).then(|| Bond {
        mode: ctx.text(&at("bonding/mode"), true),
        slaves: ctx
            .text(&at("bonding/slaves"), true)
            .map(|s| s.split_whitespace().map(str::to_string).collect())
            .unwrap_or_default(),
    })
}

/// A netdev in part: name, function (`pci`, from the canonical path) and
/// kind (`device/physfn` tells a VF); with `detail`, also `carrier`, `master` and bond.
fn read_outline(
    ctx: &mut Ctx,
    dir: &str,
    name: String,
    pci: Option<PciAddr>,
    detail: bool,
) -> Netdev {
    let at = |f: &str| join(dir, f);
    let is_vf = pci.is_some() && ctx.fs.exists(&at("device/physfn"));
    let bond = if detail { read_bond(ctx, dir) } else { None };
    let is_bond = bond.is_some() || (!detail && ctx.fs.exists(&at("bonding")));
    Netdev {
        kind: kind_of(&name, None, is_bond, pci, is_vf),
        pci,
        mtu: None,
        operstate: None,
        carrier: detail
            .then(|| ctx.fs.read_with(&at("carrier"), |t| t.trim() == "1").ok())
            .flatten(),
        speed_mbps: None,
        address: None,
        arphrd: None,
        ifindex: None,
        iflink: None,
        master: detail
            .then(|| ctx.fs.link_name(&at("master")).ok())
            .flatten(),
        bond,
        ipv4: Vec::new(),
        name,
    }
}

fn read_netdev(ctx: &mut Ctx, dir: &str, name: String, topo: &Topology) -> Netdev {
    let at = |f: &str| join(dir, f);
    let pci = function_of(dir);
    // A container's view tells a netdev on a PCI function by its function and `lo` by
    // its name; only the other virtual netdevs' type, index and link say what they are
    // (a veth to the host, a loopback by another name).
    let ids = ctx.needs.netdevs == NetdevFacts::Whole || (pci.is_none() && name != "lo");
    let arphrd = ids
        .then(|| ctx.attr(&at("type"), true, |t| parse_dec::<u32>("type", t)))
        .flatten();
    let bond = read_bond(ctx, dir);
    let is_vf = pci
        .and_then(|a| topo.pci_function(a))
        .is_some_and(|f| f.is_vf);
    let kind = kind_of(&name, arphrd, bond.is_some(), pci, is_vf);
    let mut netdev = Netdev {
        kind,
        pci,
        mtu: None,
        operstate: None,
        carrier: None,
        speed_mbps: None,
        address: None,
        arphrd,
        ifindex: ids
            .then(|| ctx.attr(&at("ifindex"), true, |t| parse_dec::<u32>("ifindex", t)))
            .flatten(),
        iflink: ids
            .then(|| ctx.attr(&at("iflink"), true, |t| parse_dec::<u32>("iflink", t)))
            .flatten(),
        master: ctx.fs.link_name(&at("master")).ok(),
        bond,
        ipv4: Vec::new(),
        name,
    };
    // `topo` in a container tells its network by kinds and links; the link's state,
    // speed and MTU are `doctor`'s and `nccl-env`'s.
    if ctx.needs.netdevs < NetdevFacts::Whole {
        return netdev;
    }
    netdev.mtu = ctx.attr(&at("mtu"), true, |t| parse_dec::<u32>("mtu", t));
    netdev.operstate = ctx.text(&at("operstate"), true);
    // `carrier` fails with EINVAL while the interface is down: that is "no carrier".
    netdev.carrier = ctx.fs.read_with(&at("carrier"), |t| t.trim() == "1").ok();
    netdev.speed_mbps = ctx
        .fs
        .read(&at("speed"))
        .ok()
        .and_then(|t| t.trim().parse::<i64>().ok())
        .and_then(|s| u64::try_from(s).ok());
    netdev.address = ctx.text(&at("address"), true);
    netdev
}

/// Local IPv4 addresses, each given to the interface whose connected route covers it.
fn assign_ipv4(ctx: &mut Ctx, netdevs: &mut [Netdev]) {
    let (trie, route) = (ctx.net_table("fib_trie"), ctx.net_table("route"));
    let Some(trie) = ctx.text(&trie, true) else {
        return;
    };
    let routes = ctx.attr(&route, true, parse_route).unwrap_or_default();
    for addr in parse_fib_trie_local(&trie) {
        if addr.is_loopback() {
            continue;
        }
        let a = u32::from(addr);
        let best = routes
            .iter()
            .filter(|r| r.gateway.is_unspecified() && !r.mask.is_unspecified())
            .filter(|r| a & u32::from(r.mask) == u32::from(r.destination))
            .max_by_key(|r| u32::from(r.mask).count_ones());
        if let Some(r) = best
            && let Some(n) = netdevs.iter_mut().find(|n| n.name == r.iface)
        {
            n.ipv4
                .push(format!("{addr}/{}", u32::from(r.mask).count_ones()));
        }
    }
}
