//! RDMA devices (`/sys/class/infiniband`), their ports and GID tables.

use super::ctx::Ctx;
use super::needs::{DeviceFacts, GidFacts, OtherNames};
use crate::model::{DetailView, Diagnostic, Gid, Port, RdmaDevice, Severity, Topology};
use crate::parse::{
    GidType, LinkLayer, PciAddr, format_gid, gid_ipv4, gid_is_zero, parse_gid, parse_gid_type,
    parse_link_layer, parse_phys_state, parse_port_state, parse_rate,
};
use crate::parse::{natural_cmp, sort_natural_by};
use crate::sysfs::join;
use std::collections::{BTreeMap, BTreeSet};

const CLASS_DIR: &str = "/sys/class/infiniband";
const VERBS_DIR: &str = "/sys/class/infiniband_verbs";
const PCI_DIR: &str = "/sys/bus/pci/devices";
/// GID slots per thread below which another thread costs more than it saves: a slot is
/// one small file, and files read side by side go slower each (on the shared 2-core VM
/// two threads read a pod doctor's 861 files in 1.27 ms where one takes 1.11, see
/// BENCHMARKS.md). A second thread starts from twice this: one table of 255 slots stays
/// on one thread.
const GID_SLOTS_PER_THREAD: usize = 128;

pub(super) fn read_rdma(ctx: &mut Ctx, topo: &mut Topology) {
    if ctx.partial {
        return read_partial(ctx, topo);
    }
    let uverbs = if ctx.needs.uverbs {
        uverbs_by_device(ctx)
    } else {
        BTreeMap::new()
    };
    let names = ctx.list(CLASS_DIR);
    // Devices are read side by side: their GID tables (up to 256 files a port) are
    // most of a full read. Without ports a device is one link.
    let per_thread = if !ctx.needs.ports {
        super::ctx::FUNCTIONS_PER_THREAD
    } else {
        1
    };
    let mut devices: Vec<RdmaDevice> = ctx.par_filter_map(&names, per_thread, |ctx, name| {
        let dir = join(CLASS_DIR, name);
        let gids = ctx.needs.gids;
        Some(read_device(
            ctx,
            &dir,
            name.clone(),
            uverbs.get(name).cloned(),
            gids,
        ))
    });
    sort_natural_by(&mut devices, |d| d.name.as_str());
    topo.rdma_devices = devices;
    pair_data_direct(ctx, topo);
}

use crate::sources::DATA_DIRECT_DRIVER_DIR as DATA_DIRECT_DRIVER;
/// The largest VPD a function holds (`PCI_VPD_MAX_SIZE`, drivers/pci/vpd.c).
const VPD_LIMIT: usize = 0x8000;

/// Each RDMA device's Data Direct DMA function ([`RdmaDevice::data_direct`]).
///
/// The kernel pairs them by the DMA function's VPD keyword `VU` and the vuid the
/// device's firmware reports, and hands the path to user space only through an ioctl
/// (`mlx5dv_get_data_direct_sysfs_path`, which NCCL calls); sysfs shows no link. What
/// sysfs does show is both functions' `vpd`, whose `V3` UUID is the same on the two:
/// rdma-core's `kernel-boot/rdma_topo` pairs them by it. `vpd` is readable by root
/// only, so a run as another user says which DMA functions it could not pair.
fn pair_data_direct(ctx: &mut Ctx, topo: &mut Topology) {
    let dma: Vec<PciAddr> = ctx
        .list(DATA_DIRECT_DRIVER)
        .iter()
        .filter_map(|n| n.parse().ok())
        .collect();
    if dma.is_empty() {
        return;
    }
    let mut by_uuid: BTreeMap<String, PciAddr> = BTreeMap::new();
    for &addr in &dma {
        let path = join(&join(PCI_DIR, &addr.to_string()), "vpd");
        let why = match uuid_of(ctx, addr) {
            Ok(Some(uuid)) => {
                by_uuid.insert(uuid, addr);
                continue;
            }
            Ok(None) => "its VPD holds no V3 UUID".to_string(),
            Err(e) => format!("its VPD is unreadable ({e}; root may read it)"),
        };
        ctx.diags.push(Diagnostic::new(
            Severity::Warning,
            "data-direct-unpaired",
            Some(&path),
            format!(
                "Data Direct DMA function {addr}: {why}, so which RDMA device it serves is not known; NCCL places that device here as <name>_dma"
            ),
        ));
    }
    let functions: BTreeSet<PciAddr> = topo.rdma_devices.iter().filter_map(|d| d.pci).collect();
    let mut paired: BTreeMap<PciAddr, PciAddr> = BTreeMap::new();
    for f in functions.into_iter().filter(|f| !dma.contains(f)) {
        if let Ok(Some(uuid)) = uuid_of(ctx, f)
            && let Some(&d) = by_uuid.get(&uuid)
        {
            paired.insert(f, d);
        }
    }
    for dev in &mut topo.rdma_devices {
        dev.data_direct = dev.pci.and_then(|f| paired.get(&f).copied());
    }
}

/// The `V3` UUID in a function's `vpd`: `Ok(None)` where it has no VPD or no `V3`.
fn uuid_of(ctx: &mut Ctx, addr: PciAddr) -> Result<Option<String>, String> {
    let path = join(&join(PCI_DIR, &addr.to_string()), "vpd");
    let bytes = match ctx.fs.read_bytes(&path, VPD_LIMIT) {
        Ok(b) => b,
        Err(e) if e.is_not_found() => return Ok(None),
        Err(e) => return Err(e.to_string()),
    };
    let parsed = crate::parse::vpd_ro_keyword(&bytes, b"V3");
    ctx.accept(&path, parsed)
        .ok_or_else(|| "not PCI VPD".to_string())
}

/// The candidates for this container's devices in part, opening no file: those
/// beside a uverbs node in `/dev/infiniband` and on the functions of this namespace's
/// netdevs and of `PCIDEVICE_*`, each with its PCI function and uverbs node from links.
/// Every other device is only named ([`DetailView::other_rdma_devices`]): a host's
/// hundreds of VFs are other pods', and cost one entry of a listing each. A uverbs
/// node's `ibdev` is read once its device is chosen ([`read_focus`]).
fn read_partial(ctx: &mut Ctx, topo: &mut Topology) {
    let mut parents: Vec<String> = topo
        .process
        .dev_infiniband
        .iter()
        .filter(|n| n.starts_with("uverbs"))
        .filter_map(|n| {
            let real = ctx.fs.resolve_for_reads(&join(VERBS_DIR, n)).ok()?;
            Some(real.rsplit_once("/infiniband_verbs/")?.0.to_string())
        })
        .collect();
    let mut functions = super::net::namespace_functions(ctx);
    functions.extend(super::pci::pcidevice_functions(topo));
    parents.extend(functions.iter().filter_map(|f| {
        ctx.fs
            .resolve_for_reads(&join(PCI_DIR, &f.to_string()))
            .ok()
    }));
    // A VF's function is named both by its uverbs node and by its netdev.
    parents.sort_unstable();
    parents.dedup();
    let candidates: BTreeSet<String> = parents
        .iter()
        .flat_map(|p| ctx.fs.list_opt(&join(p, "infiniband")).unwrap_or_default())
        .collect();
    // The candidates present are read in part; every other device is counted, and
    // named as far as the answer needs ([`OtherNames`]).
    let mut present: Vec<String> = Vec::new();
    let mut others = Others::new(ctx.needs.others);
    match ctx.fs.visit_names(CLASS_DIR, |name| {
        if candidates.contains(name) {
            present.push(name.to_owned());
        } else {
            others.add(name);
        }
    }) {
        Ok(()) => {}
        Err(e) if e.is_not_found() => {}
        Err(e) => ctx.unreadable(&e),
    }
    let mut devices: Vec<RdmaDevice> = present
        .into_iter()
        .map(|name| {
            let dir = join(CLASS_DIR, &name);
            let pci = pci_of(ctx, &dir);
            let uverbs = uverbs_beside(ctx, &dir);
            RdmaDevice {
                uverbs,
                ..RdmaDevice::named(name, pci)
            }
        })
        .collect();
    devices.sort_by(|a, b| natural_cmp(&a.name, &b.name));
    // The PCI partial read places what this container names and its candidates' functions.
    functions.extend(devices.iter().filter_map(|d| d.pci));
    ctx.named_functions = functions;
    topo.rdma_devices = devices;
    // A partial read holds no device in full (the focus is read after).
    let (other_rdma_devices, unnamed_rdma_devices) = others.finish();
    topo.view = Some(DetailView {
        other_rdma_devices,
        unnamed_rdma_devices,
        ..DetailView::default()
    });
}

/// The devices of a listing that are no candidate: how many, and the names
/// [`OtherNames`] keeps.
struct Others {
    keep: OtherNames,
    /// In natural order but under [`OtherNames::All`] (sorted once, at the end).
    names: Vec<String>,
    /// Every name added, kept or not.
    seen: usize,
}

impl Others {
    fn new(keep: OtherNames) -> Self {
        Self {
            keep,
            names: Vec::new(),
            seen: 0,
        }
    }

    fn add(&mut self, name: &str) {
        self.seen += 1;
        match self.keep {
            OtherNames::None => {}
            OtherNames::All => self.names.push(name.to_owned()),
            OtherNames::First(n) => {
                // Most names of a long listing come after those kept: one comparison
                // tells.
                let full = self.names.len() == n;
                if full
                    && self
                        .names
                        .last()
                        .is_none_or(|l| natural_cmp(l, name).is_lt())
                {
                    return;
                }
                let at = self.names.partition_point(|k| natural_cmp(k, name).is_lt());
                if at < n {
                    self.names.truncate(n - 1);
                    self.names.insert(at, name.to_owned());
                }
            }
        }
    }

    /// The names kept, in natural order, and how many were not kept.
    fn finish(mut self) -> (Vec<String>, usize) {
        if self.keep == OtherNames::All {
            sort_natural_by(&mut self.names, String::as_str);
        }
        let unnamed = self.seen - self.names.len();
        (self.names, unnamed)
    }
}

/// Take `devices` (each with the function it sits under) out of the partial read's other
/// devices into the model, in part, to be read in part: the RDMA devices of a VF's
/// PF, those beside a far GPU. Those not among the other devices are left as they are.
/// One that was only counted ([`OtherNames`]) is found in the listing's directory.
pub(super) fn hold_others(ctx: &Ctx, topo: &mut Topology, devices: &[(String, PciAddr)]) {
    let Some(view) = topo.view.as_mut() else {
        return;
    };
    let mut taken: Vec<(String, PciAddr)> = Vec::new();
    view.other_rdma_devices.retain(|n| {
        let held = devices.iter().find(|(d, _)| d == n);
        taken.extend(held.cloned());
        held.is_none()
    });
    for (name, pci) in devices {
        if view.unnamed_rdma_devices > 0
            && !taken.iter().any(|(t, _)| t == name)
            && !topo.rdma_devices.iter().any(|d| &d.name == name)
            && ctx.fs.exists(&join(CLASS_DIR, name))
        {
            view.unnamed_rdma_devices -= 1;
            taken.push((name.clone(), *pci));
        }
    }
    for (name, pci) in taken {
        let at = topo
            .rdma_devices
            .partition_point(|d| natural_cmp(&d.name, &name).is_lt());
        topo.rdma_devices
            .insert(at, RdmaDevice::named(name, Some(pci)));
    }
}

/// The uverbs node whose class device hangs under the same parent as the class device
/// `dir` (`<function>/infiniband_verbs/uverbsN` beside `<function>/infiniband/mlx5_N`),
/// from links and a listing.
fn uverbs_beside(ctx: &Ctx, dir: &str) -> Option<String> {
    let real = ctx.fs.resolve_for_reads(dir).ok()?;
    let (parent, _) = real.rsplit_once("/infiniband/")?;
    let verbs = ctx.fs.list_opt(&join(parent, "infiniband_verbs")).ok()?;
    verbs.into_iter().find(|n| n.starts_with("uverbs"))
}

/// Read the devices named in `focus` in full, in place of their partial reads. Each one's
/// uverbs node (found by its parent in the partial read) is confirmed by its `ibdev`, as a
/// whole read finds it; those not confirmed are returned as diagnostics (the caller
/// widens the view).
pub(super) fn read_focus(
    ctx: &mut Ctx,
    topo: &mut Topology,
    focus: &BTreeSet<String>,
    gids: GidFacts,
) -> Vec<Diagnostic> {
    let wanted: Vec<(usize, String, Option<String>)> = topo
        .rdma_devices
        .iter()
        .enumerate()
        .filter(|(_, d)| focus.contains(&d.name))
        .map(|(i, d)| (i, d.name.clone(), d.uverbs.clone()))
        .collect();
    // Whole GID tables side by side, two devices to a thread: a pod's VFs each show 255
    // slots, about half a millisecond of reads, which a second thread does not win back
    // (see GID_SLOTS_PER_THREAD). Without them a device is a dozen files.
    let per_thread = if gids == GidFacts::Whole {
        2
    } else {
        super::ctx::FUNCTIONS_PER_THREAD
    };
    let read = ctx.par_filter_map(&wanted, per_thread, |ctx, (i, name, candidate)| {
        // A device chosen without a candidate node (a PF of a VF): the one beside it.
        let candidate = candidate
            .clone()
            .or_else(|| uverbs_beside(ctx, &join(CLASS_DIR, name)));
        if let Some(u) = &candidate {
            let path = join(&join(VERBS_DIR, u), "ibdev");
            let ibdev = ctx.text(&path, true);
            if ibdev.as_deref() != Some(name.as_str()) {
                return Some(Err(Diagnostic::new(
                    Severity::Warning,
                    "view-widened",
                    Some(&path),
                    format!(
                        "{u} sits beside {name} but its ibdev is {ibdev:?}; the whole machine is read instead of this container's devices"
                    ),
                )));
            }
        }
        let dir = join(CLASS_DIR, name);
        Some(Ok((*i, read_device(ctx, &dir, name.clone(), candidate, gids))))
    });
    let mut unconfirmed = Vec::new();
    for device in read {
        match device {
            Ok((i, device)) => topo.rdma_devices[i] = device,
            Err(diagnostic) => unconfirmed.push(diagnostic),
        }
    }
    unconfirmed
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
    function_of_class_device(&ctx.fs.resolve_for_reads(class_device).ok()?)
}

/// The PCI function in a class device's canonical path (see [`pci_of`]).
fn function_of_class_device(real: &str) -> Option<PciAddr> {
    if !real.starts_with("/sys/devices/") || real.contains("/virtual/") {
        return None;
    }
    real.rsplit('/').find_map(PciAddr::from_component)
}

fn read_device(
    ctx: &mut Ctx,
    dir: &str,
    name: String,
    uverbs: Option<String>,
    gids: GidFacts,
) -> RdmaDevice {
    let at = |f: &str| join(dir, f);
    let pci = pci_of(ctx, dir);
    if !ctx.needs.ports {
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
        .map(|n| read_port(ctx, &join(&ports_dir, &n.to_string()), n, gids))
        .collect();
    // In the order the files were always read (diagnostics keep their order).
    let (usable, whole) = (
        ctx.needs.device >= DeviceFacts::Usable,
        ctx.needs.device == DeviceFacts::Whole,
    );
    let mut text = |file: &str, read: bool| read.then(|| ctx.text(&at(file), true)).flatten();
    RdmaDevice {
        pci,
        node_type: text("node_type", whole),
        node_guid: text("node_guid", whole),
        sys_image_guid: text("sys_image_guid", usable),
        fw_ver: text("fw_ver", whole),
        hca_type: text("hca_type", whole),
        board_id: text("board_id", whole),
        ports,
        uverbs,
        name,
        data_direct: None,
    }
}

fn read_port(ctx: &mut Ctx, dir: &str, number: u32, gid_facts: GidFacts) -> Port {
    let at = |f: &str| join(dir, f);
    let link_layer = ctx.attr(&at("link_layer"), false, parse_link_layer);
    let gids_dir = at("gids");
    let gid_table_len = ctx.table_len(&gids_dir);
    // ibdev2netdev's relation: on RoCE the first slot naming a netdev is the answer.
    let netdev_only = gid_facts <= GidFacts::UpToNetdev;
    // No slot where the answer takes none: InfiniBand GIDs name no netdev (`ndevs` fails
    // there), and NCCL takes index 0 on InfiniBand whatever the table holds
    // (`view::gid::best_gid`).
    let read_none = gid_facts == GidFacts::None
        || (link_layer == Some(LinkLayer::InfiniBand) && gid_facts != GidFacts::Whole);
    let slots: Vec<u32> = if read_none {
        Vec::new()
    } else {
        (0..gid_table_len).collect()
    };
    // A whole table is read side by side when it is long (a pod's port shows 255
    // slots, nearly all empty): each slot is a file of its own. Up to the first netdev,
    // in order.
    let slot_files = (!slots.is_empty()).then(|| ctx.fs.dir_files(&gids_dir));
    let read_slot = |ctx: &mut Ctx, index: &u32| {
        let gid = ctx.attr_in(slot_files.as_ref()?, &index.to_string(), parse_gid)?;
        if gid_is_zero(&gid) {
            return None;
        }
        // Under MLNX_OFED reading the attributes of another namespace's slot fails with
        // EINVAL (the upstream kernel shows them), and `ndevs` always fails on
        // InfiniBand: both mean "none". Which slots are this namespace's is the view's
        // question (view::gid::unusable_reason), not the reader's.
        let gid_type = (!netdev_only)
            .then(|| ctx.text_quiet(&at(&format!("gid_attrs/types/{index}"))))
            .flatten()
            .and_then(|t| parse_gid_type(&t).ok());
        let netdev = ctx.text_quiet(&at(&format!("gid_attrs/ndevs/{index}")));
        Some(Gid {
            index: *index,
            gid: format_gid(&gid),
            ipv4: gid_ipv4(&gid).map(|a| a.to_string()),
            gid_type,
            netdev,
        })
    };
    // A netdev of this namespace: the upstream kernel also shows the host's GIDs, with
    // the host's netdev names, to a pod.
    let here = |ctx: &Ctx, gid: &Gid| {
        gid.netdev
            .as_deref()
            .is_some_and(|n| ctx.fs.exists(&join("/sys/class/net", n)))
    };
    // The best case of `view::gid::best_gid`, whose order (IPv4, then RoCE v2, then the
    // lowest index) no later slot can better.
    let unbettered = |ctx: &Ctx, gid: &Gid| {
        gid.ipv4.is_some() && gid.gid_type == Some(GidType::RoceV2) && here(ctx, gid)
    };
    let gids = if netdev_only {
        read_slots_until(ctx, &slots, read_slot, here).0
    } else if gid_facts == GidFacts::UpToChoice && link_layer == Some(LinkLayer::Ethernet) {
        // In order while the choice is near the start (it is at index 3 of a pod's
        // table), side by side for the rest when it is not.
        let first = slots.len().min(GID_SLOTS_PER_THREAD / 4);
        let (mut gids, found) = read_slots_until(ctx, &slots[..first], read_slot, unbettered);
        if !found {
            gids.extend(ctx.par_filter_map(&slots[first..], GID_SLOTS_PER_THREAD, read_slot));
        }
        gids
    } else {
        ctx.par_filter_map(&slots, GID_SLOTS_PER_THREAD, read_slot)
    };
    let (usable, whole) = (
        ctx.needs.device >= DeviceFacts::Usable,
        ctx.needs.device == DeviceFacts::Whole,
    );
    Port {
        number,
        state: usable
            .then(|| ctx.attr(&at("state"), false, parse_port_state))
            .flatten(),
        phys_state: whole
            .then(|| ctx.attr(&at("phys_state"), true, parse_phys_state))
            .flatten(),
        rate: whole
            .then(|| ctx.attr(&at("rate"), true, parse_rate))
            .flatten(),
        link_layer,
        lid: whole.then(|| ctx.text(&at("lid"), true)).flatten(),
        gid_table_len,
        gids,
        netdev: None,
    }
}

/// The GIDs of `slots`, read in order up to the first that is `enough` (whether one was).
fn read_slots_until(
    ctx: &mut Ctx,
    slots: &[u32],
    read_slot: impl Fn(&mut Ctx, &u32) -> Option<Gid>,
    enough: impl Fn(&Ctx, &Gid) -> bool,
) -> (Vec<Gid>, bool) {
    let mut gids = Vec::new();
    for index in slots {
        if let Some(gid) = read_slot(ctx, index) {
            let found = enough(ctx, &gid);
            gids.push(gid);
            if found {
                return (gids, true);
            }
        }
    }
    (gids, false)
}

/// The ibdev2netdev relation: a RoCE port's netdev is the `ndevs` entry of any valid
/// GID (slot 0 is often empty in pods), one in this namespace when there is one; otherwise the netdev on the same PCI
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
            // A netdev of this namespace first: the upstream kernel also lists other
            // namespaces' GIDs (with their netdev names) in a pod's table.
            let named = || port.gids.iter().filter_map(|g| g.netdev.as_deref());
            let by_gid = named()
                .find(|n| netdevs.iter().any(|d| d.name == *n))
                .or_else(|| named().next())
                .map(str::to_string);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::discover::Needs;
    use crate::sysfs::{MemEntry, MemTree, Sysfs};

    /// VPD with an identifier string and a VPD-R holding `V3`.
    fn vpd(v3: &str) -> MemEntry {
        let mut d = vec![0x82, 4, 0];
        d.extend(b"CX-8");
        let mut ro = vec![b'V', b'3', v3.len() as u8];
        ro.extend(v3.as_bytes());
        d.push(0x90);
        d.extend((ro.len() as u16).to_le_bytes());
        d.extend(ro);
        d.push(0x78);
        MemEntry::File(d)
    }

    /// A ConnectX-8 PF on one root port and its Data Direct DMA function below the GPU's
    /// switch on another, as rdma_topo describes them; `dma_vpd` is the DMA function's.
    fn tray(dma_vpd: MemEntry) -> (Sysfs, Topology) {
        let pf = "/sys/devices/pci0000:00/0000:00:00.0/0000:01:00.0";
        let dma = "/sys/devices/pci0008:00/0008:00:00.0/0008:01:00.0/0008:02:00.0/0008:03:00.0";
        let mut t = MemTree::new();
        t.insert(
            &format!("{pf}/vpd"),
            vpd("6c1d0e8a3f2b4a719d350b7e2c4a1f01"),
        )
        .dir(&format!("{pf}/infiniband/mlx5_0"))
        .link(
            "/sys/class/infiniband/mlx5_0",
            &format!("{pf}/infiniband/mlx5_0"),
        )
        .link("/sys/bus/pci/devices/0000:01:00.0", pf)
        .insert(&format!("{dma}/vpd"), dma_vpd)
        .link("/sys/bus/pci/devices/0008:03:00.0", dma)
        .link("/sys/bus/pci/drivers/mlx5_ib/0008:03:00.0", dma);
        let mut topo = Topology::empty("test");
        topo.rdma_devices = vec![RdmaDevice::named(
            "mlx5_0".into(),
            Some(PciAddr::new(0, 1, 0, 0)),
        )];
        (Sysfs::memory(t, "tray"), topo)
    }

    #[test]
    fn a_data_direct_function_is_paired_by_its_vpd_uuid() {
        let (fs, mut topo) = tray(vpd("6c1d0e8a3f2b4a719d350b7e2c4a1f01"));
        let mut ctx = Ctx::new(&fs, Needs::ALL);
        pair_data_direct(&mut ctx, &mut topo);
        assert_eq!(
            topo.rdma_devices[0].data_direct,
            Some(PciAddr::new(8, 3, 0, 0))
        );
        assert!(ctx.diags.is_empty(), "{:?}", ctx.diags);

        // Another card's DMA function (another UUID) serves another device.
        let (fs, mut topo) = tray(vpd("6c1d0e8a3f2b4a719d350b7e2c4a1f02"));
        let mut ctx = Ctx::new(&fs, Needs::ALL);
        pair_data_direct(&mut ctx, &mut topo);
        assert_eq!(topo.rdma_devices[0].data_direct, None);
    }

    #[test]
    fn an_unreadable_vpd_leaves_the_function_unpaired_and_says_so() {
        let (fs, mut topo) = tray(MemEntry::Unreadable(13));
        let mut ctx = Ctx::new(&fs, Needs::ALL);
        pair_data_direct(&mut ctx, &mut topo);
        assert_eq!(topo.rdma_devices[0].data_direct, None);
        let d = ctx
            .diags
            .iter()
            .find(|d| d.code == "data-direct-unpaired")
            .expect("a diagnostic");
        assert!(d.message.contains("0008:03:00.0"), "{}", d.message);
        assert_eq!(
            d.path.as_deref(),
            Some("/sys/bus/pci/devices/0008:03:00.0/vpd")
        );
    }

    fn kept(keep: OtherNames, listing: &[String]) -> (Vec<String>, usize) {
        let mut others = Others::new(keep);
        listing.iter().for_each(|n| others.add(n));
        others.finish()
    }

    proptest::proptest! {
        /// Whatever order the listing comes in, the names kept are the first in natural
        /// order, and the rest are counted.
        #[test]
        fn others_keep_the_first_names_and_count_the_rest(
            listing in proptest::collection::btree_set("mlx5_[0-9]{1,3}|mlx5_bond_[0-9]", 0..40),
            seed in 0u64..1000,
            n in 0usize..6,
        ) {
            let mut shuffled: Vec<String> = listing.into_iter().collect();
            // Rotate and reverse by the seed: an order that is no sort.
            let len = shuffled.len().max(1);
            shuffled.rotate_left(seed as usize % len);
            if seed % 2 == 1 {
                shuffled.reverse();
            }
            let mut sorted = shuffled.clone();
            sorted.sort_by(|a, b| natural_cmp(a, b));
            let all = kept(OtherNames::All, &shuffled);
            proptest::prop_assert_eq!(&all, &(sorted.clone(), 0));
            let first = kept(OtherNames::First(n), &shuffled);
            let head = sorted[..n.min(sorted.len())].to_vec();
            proptest::prop_assert_eq!(first, (head.clone(), sorted.len() - head.len()));
            proptest::prop_assert_eq!(kept(OtherNames::None, &shuffled), (Vec::new(), sorted.len()));
        }
    }
}
