//! Netdevs visible in this network namespace (`/sys/class/net`).

use super::Ctx;
use crate::model::{Bond, Netdev, NetdevKind, Topology};
use crate::parse::{PciAddr, parse_dec, parse_fib_trie_local, parse_route};
use crate::sysfs::{EntryKind, join};

const CLASS_DIR: &str = "/sys/class/net";

pub(super) fn read_netdevs(ctx: &mut Ctx, topo: &mut Topology) {
    if ctx.scope == super::Scope::Affinity {
        return;
    }
    let mut out = Vec::new();
    for name in ctx.list(CLASS_DIR) {
        let entry = join(CLASS_DIR, &name);
        // `bonding_masters` is a file beside the interface links.
        if matches!(ctx.fs.kind(&entry), Ok(EntryKind::File)) {
            continue;
        }
        let real = match ctx.fs.canonicalize(&entry) {
            Ok(r) => r,
            Err(e) => {
                ctx.unreadable(&e);
                continue;
            }
        };
        out.push(read_netdev(ctx, &real, name, topo));
    }
    assign_ipv4(ctx, &mut out);
    topo.netdevs = out;
}

fn read_netdev(ctx: &mut Ctx, dir: &str, name: String, topo: &Topology) -> Netdev {
    let at = |f: &str| join(dir, f);
    // The function is the last PCI address before `/net/<name>`.
    let pci: Option<PciAddr> = dir
        .rsplit_once("/net/")
        .and_then(|(parent, _)| parent.rsplit('/').next()?.parse().ok())
        .filter(|_| !dir.contains("/virtual/"));
    let arphrd = ctx.attr(&at("type"), true, |t| parse_dec::<u32>("type", t));
    let bond = ctx.fs.exists(&at("bonding")).then(|| Bond {
        mode: ctx.text(&at("bonding/mode"), true),
        slaves: ctx
            .text(&at("bonding/slaves"), true)
            .map(|s| s.split_whitespace().map(str::to_string).collect())
            .unwrap_or_default(),
    });
    let is_vf = pci
        .and_then(|a| topo.pci_function(a))
        .is_some_and(|f| f.is_vf);
    let kind = if name == "lo" || arphrd == Some(772) {
        NetdevKind::Loopback
    } else if bond.is_some() {
        NetdevKind::Bond
    } else if pci.is_some() && is_vf {
        NetdevKind::VirtualFunction
    } else if pci.is_some() {
        NetdevKind::Physical
    } else {
        NetdevKind::Virtual
    };
    let speed = ctx
        .fs
        .read(&at("speed"))
        .ok()
        .and_then(|t| t.trim().parse::<i64>().ok())
        .and_then(|s| u64::try_from(s).ok());
    Netdev {
        kind,
        pci,
        mtu: ctx.attr(&at("mtu"), true, |t| parse_dec::<u32>("mtu", t)),
        operstate: ctx.text(&at("operstate"), true),
        // `carrier` fails with EINVAL while the interface is down: that is "no carrier".
        carrier: ctx.fs.read(&at("carrier")).ok().map(|t| t.trim() == "1"),
        speed_mbps: speed,
        address: ctx.text(&at("address"), true),
        arphrd,
        ifindex: ctx.attr(&at("ifindex"), true, |t| parse_dec::<u32>("ifindex", t)),
        iflink: ctx.attr(&at("iflink"), true, |t| parse_dec::<u32>("iflink", t)),
        master: ctx.fs.link_name(&at("master")).ok(),
        bond,
        ipv4: Vec::new(),
        name,
    }
}

/// Local IPv4 addresses, each given to the interface whose connected route covers it.
fn assign_ipv4(ctx: &mut Ctx, netdevs: &mut [Netdev]) {
    let Some(trie) = ctx.text("/proc/net/fib_trie", true) else {
        return;
    };
    let routes = ctx
        .attr("/proc/net/route", true, parse_route)
        .unwrap_or_default();
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
