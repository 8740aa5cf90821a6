//! RDMA devices (`/sys/class/infiniband`), their ports and GID tables.

use super::{Ctx, Scope};
use crate::model::{Gid, Port, RdmaDevice, Topology};
use crate::parse::natural_cmp;
use crate::parse::{
    LinkLayer, PciAddr, format_gid, gid_ipv4, gid_is_zero, parse_gid, parse_gid_type,
    parse_link_layer, parse_phys_state, parse_port_state, parse_rate,
};
use crate::sysfs::join;
use std::collections::BTreeMap;

const CLASS_DIR: &str = "/sys/class/infiniband";
const VERBS_DIR: &str = "/sys/class/infiniband_verbs";

pub(super) fn read_rdma(ctx: &mut Ctx, topo: &mut Topology) {
    let uverbs = if ctx.scope.reads_details() {
        uverbs_by_device(ctx)
    } else {
        BTreeMap::new()
    };
    let names = ctx.list(CLASS_DIR);
    // Devices are read side by side: their GID tables (up to 256 files a port) are
    // most of a full read. Without ports (the affinity scope) a device is one link.
    let per_thread = if ctx.scope == Scope::Affinity {
        super::FUNCTIONS_PER_THREAD
    } else {
        1
    };
    let mut devices: Vec<RdmaDevice> = ctx.par_filter_map(&names, per_thread, |ctx, name| {
        let dir = join(CLASS_DIR, name);
        Some(read_device(
            ctx,
            &dir,
            name.clone(),
            uverbs.get(name).cloned(),
        ))
    });
    devices.sort_by(|a, b| natural_cmp(&a.name, &b.name));
    topo.rdma_devices = devices;
}

fn uverbs_by_device(ctx: &mut Ctx) -> BTreeMap<String, String> {
    ctx.list(VERBS_DIR)
        .into_iter()
        .filter(|n| n.starts_with("uverbs"))
        .filter_map(|n| Some((ctx.text(&join(&join(VERBS_DIR, &n), "ibdev"), true)?, n)))
        .collect()
}

/// The PCI function behind a class device (`/sys/class/infiniband/mlx5_0`): the last
/// PCI-address component of its canonical path. The kernel puts a class device under
/// its parent (`<parent>/infiniband/mlx5_0`, with `device` → `<parent>`), so this is
/// the function of its `device` link without reading that link; an auxiliary device
/// such as an mlx5 SF (`<PF>/mlx5_core.sf.2/infiniband/mlx5_2`) resolves to its PF.
fn pci_of(ctx: &Ctx, class_device: &str) -> Option<PciAddr> {
    let real = ctx.fs.resolve_for_reads(class_device).ok()?;
    if !real.starts_with("/sys/devices/") || real.contains("/virtual/") {
        return None;
    }
    real.rsplit('/').find_map(PciAddr::from_component)
}

fn read_device(ctx: &mut Ctx, dir: &str, name: String, uverbs: Option<String>) -> RdmaDevice {
    let at = |f: &str| join(dir, f);
    let pci = pci_of(ctx, dir);
    if ctx.scope == Scope::Affinity {
        return RdmaDevice::named(name, pci);
    }
    let ports_dir = at("ports");
    let mut numbers: Vec<u32> = ctx
        .list(&ports_dir)
        .iter()
        .filter_map(|p| p.parse().ok())
        .collect();
    numbers.sort_unstable();
    let ports = numbers
        .into_iter()
        .map(|n| read_port(ctx, &join(&ports_dir, &n.to_string()), n))
        .collect();
    if !ctx.scope.reads_details() {
        return RdmaDevice {
            ports,
            ..RdmaDevice::named(name, pci)
        };
    }
    RdmaDevice {
        pci,
        node_type: ctx.text(&at("node_type"), true),
        node_guid: ctx.text(&at("node_guid"), true),
        sys_image_guid: ctx.text(&at("sys_image_guid"), true),
        fw_ver: ctx.text(&at("fw_ver"), true),
        hca_type: ctx.text(&at("hca_type"), true),
        board_id: ctx.text(&at("board_id"), true),
        ports,
        uverbs,
        name,
    }
}

fn read_port(ctx: &mut Ctx, dir: &str, number: u32) -> Port {
    let at = |f: &str| join(dir, f);
    let link_layer = ctx.attr(&at("link_layer"), false, parse_link_layer);
    let gids_dir = at("gids");
    let mut slots: Vec<u32> = ctx
        .list(&gids_dir)
        .iter()
        .filter_map(|g| g.parse().ok())
        .collect();
    slots.sort_unstable();
    let gid_table_len = slots.last().map_or(0, |l| l + 1);
    // ibdev2netdev's relation: InfiniBand GIDs name no netdev (`ndevs` fails there),
    // and on RoCE the first slot naming one is the answer.
    let netdev_only = matches!(ctx.scope, Scope::PortNetdevs | Scope::Container);
    if netdev_only && link_layer == Some(LinkLayer::InfiniBand) {
        slots.clear();
    }
    let mut gids = Vec::new();
    for index in &slots {
        let path = join(&gids_dir, &index.to_string());
        let Some(gid) = ctx.attr(&path, false, parse_gid) else {
            continue;
        };
        if gid_is_zero(&gid) {
            continue;
        }
        // Reading the attributes of a slot not mapped into this namespace fails with
        // EINVAL, and `ndevs` always fails on InfiniBand: both mean "none".
        let gid_type = (!netdev_only)
            .then(|| ctx.text_quiet(&at(&format!("gid_attrs/types/{index}"))))
            .flatten()
            .and_then(|t| parse_gid_type(&t).ok());
        let netdev = ctx.text_quiet(&at(&format!("gid_attrs/ndevs/{index}")));
        let found = netdev.is_some();
        gids.push(Gid {
            index: *index,
            gid: format_gid(&gid),
            ipv4: gid_ipv4(&gid).map(|a| a.to_string()),
            gid_type,
            netdev,
        });
        if found && netdev_only {
            break;
        }
    }
    if !ctx.scope.reads_details() {
        return Port {
            link_layer,
            gid_table_len,
            gids,
            ..Port::numbered(number)
        };
    }
    Port {
        number,
        state: ctx.attr(&at("state"), false, parse_port_state),
        phys_state: ctx.attr(&at("phys_state"), true, parse_phys_state),
        rate: ctx.attr(&at("rate"), true, parse_rate),
        link_layer,
        lid: ctx.text(&at("lid"), true),
        gid_table_len,
        gids,
        netdev: None,
    }
}

/// The ibdev2netdev relation: a RoCE port's netdev is the `ndevs` entry of any valid
/// GID (slot 0 is often empty in pods); otherwise the netdev on the same PCI
/// function, matched by `dev_port` when the function has several.
pub(super) fn link_port_netdevs(topo: &mut Topology) {
    let netdevs = topo.netdevs.clone();
    for dev in &mut topo.rdma_devices {
        let on_function: Vec<&crate::model::Netdev> = netdevs
            .iter()
            .filter(|n| n.pci.is_some() && n.pci == dev.pci && n.master.is_none())
            .collect();
        let single_port = dev.ports.len() == 1;
        for port in &mut dev.ports {
            let by_gid = port.gids.iter().find_map(|g| g.netdev.clone());
            port.netdev = by_gid.or_else(|| match on_function.as_slice() {
                [only] => Some(only.name.clone()),
                many if !many.is_empty() && !single_port => many
                    .get(port.number.saturating_sub(1) as usize)
                    .map(|n| n.name.clone()),
                many => many.first().map(|n| n.name.clone()),
            });
        }
    }
}
