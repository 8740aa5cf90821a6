//! PCI functions and the hierarchy from their canonical sysfs paths.

use super::ctx::Ctx;
use super::needs::PciFacts;
use crate::model::{Gpu, HostBridge, PciFunction, PciRole, PcieLink, Sriov, Topology};
use crate::parse::{
    AcsState, PciAddr, PciIds, parse_acs, parse_cpulist, parse_dec, parse_hex_u16,
    parse_link_speed, parse_numa_node, parse_pci_class, parse_pci_uevent,
};
use crate::sources::{NVIDIA_DRIVER, NVIDIA_DRIVER_DIR};
use crate::sysfs::{SysfsError, join};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

const BUS_DIR: &str = "/sys/bus/pci/devices";
/// `class` of a PCI-to-PCI bridge (normal decode), recorded in a placement read for
/// functions with functions below them, without reading it.
const PCI_BRIDGE_CLASS: u32 = 0x060400;

/// Device ids of SR-IOV virtual functions, recognised even when the PF is not visible
/// (a VF passed into a VM or a pod).
const KNOWN_VF_IDS: [(u16, u16); 10] = [
    (0x15b3, 0x1012), // ConnectX-4 VF
    (0x15b3, 0x1014), // ConnectX-4 Lx VF
    (0x15b3, 0x1016), // ConnectX-5 VF (older id)
    (0x15b3, 0x1018), // ConnectX-5 VF
    (0x15b3, 0x101a), // ConnectX-5 Ex VF
    (0x15b3, 0x101c), // ConnectX-6 VF
    (0x15b3, 0x101e), // ConnectX family VF (CX-6 Dx, CX-7)
    (0x8086, 0x154c), // Intel XL710/X710 VF
    (0x8086, 0x1889), // Intel E810 VF
    (0x8086, 0x10ed), // Intel 82599 VF
];

/// The host-bridge component of a canonical path: `pci<hex>:<hex>`.
fn is_host_bridge_name(c: &str) -> bool {
    c.strip_prefix("pci")
        .and_then(|r| r.split_once(':'))
        .is_some_and(|(d, b)| {
            !d.is_empty()
                && !b.is_empty()
                && d.bytes().chain(b.bytes()).all(|x| x.is_ascii_hexdigit())
        })
}

/// A function's host bridge (`pci0000:00`, or `unknown`) and parent function.
type Place = (String, Option<PciAddr>);

/// Where a canonical path sits in the PCI tree.
struct Chain {
    /// `pci0000:00`
    host_bridge: String,
    /// `/sys/devices/pci0000:00`
    host_bridge_path: String,
    /// The PCI addresses below the host bridge, top first, each with where its own
    /// directory's path ends in the path.
    functions: Vec<(PciAddr, usize)>,
}

/// The host bridge and the chain of PCI functions in a canonical path.
fn chain_of(path: &str) -> Option<Chain> {
    // The last host-bridge component, by byte range (the path is canonical: no empty
    // components, so the bridge's own path is a prefix of it).
    let mut bridge = None;
    let mut at = 0;
    for c in path.split('/') {
        if is_host_bridge_name(c) {
            bridge = Some((at, at + c.len()));
        }
        at += c.len() + 1;
    }
    let (start, end) = bridge?;
    let mut chain = Vec::new();
    let mut at = end + 1;
    for c in path.get(end + 1..).unwrap_or_default().split('/') {
        let Some(addr) = PciAddr::from_component(c) else {
            break;
        };
        at += c.len();
        chain.push((addr, at));
        at += 1;
    }
    Some(Chain {
        host_bridge: path[start..end].to_string(),
        host_bridge_path: path[..end].to_string(),
        functions: chain,
    })
}

/// What a placement read ([`PciFacts::Placement`], and a partial read) reads a function for.
struct Placement {
    /// RDMA devices' functions, read in detail beside GPUs, with their `physfn` link (in
    /// a partial read: the functions of this namespace's netdevs and of `PCIDEVICE_*`
    /// variables).
    nics: BTreeSet<PciAddr>,
    /// Ids of `/sys/devices/system/node`: a `numa_node` outside them is unknown.
    nodes: BTreeSet<u32>,
    /// Read GPUs' `numa_node` and `local_cpulist`. Not in a partial read: most GPUs a
    /// container sees are other containers', so its own are placed once chosen
    /// ([`place_gpus`]).
    gpu_nodes: bool,
    /// Name GPUs from the PCI ID table ([`PciFacts::Named`]).
    gpu_names: bool,
}

impl Placement {
    /// Whether `numa_node` names a node this machine has (any, when none is listed).
    fn knows(&self, numa_node: Option<u32>) -> bool {
        numa_node.is_some_and(|n| self.nodes.is_empty() || self.nodes.contains(&n))
    }
}

/// How many functions' placement reads cost one full read: a placement read opens one
/// or two files of an endpoint, a full one about a dozen.
const PLACEMENT_READS_PER_FULL: usize = 8;

pub(super) fn read_pci(ctx: &mut Ctx, topo: &mut Topology) {
    // A placement read takes only GPUs and RDMA devices' functions in detail.
    let nodes = || topo.numa_nodes.iter().map(|n| n.id).collect();
    let needs: Option<Placement> = if ctx.partial {
        // A partial read for the ownership view: GPUs as in a placement read, and the
        // functions this container names (its netdevs', `PCIDEVICE_*`); no RDMA
        // function is read (a host has hundreds of VFs).
        let nics = ctx.named_functions.clone();
        Some(Placement {
            nics,
            nodes: nodes(),
            gpu_nodes: false,
            gpu_names: ctx.needs.pci >= PciFacts::Named,
        })
    } else {
        (ctx.needs.pci <= PciFacts::Named).then(|| Placement {
            // With each device's Data Direct DMA function: NCCL places it there.
            nics: topo
                .rdma_devices
                .iter()
                .flat_map(|d| d.pci.into_iter().chain(d.data_direct))
                .collect(),
            nodes: nodes(),
            gpu_nodes: true,
            gpu_names: ctx.needs.pci == PciFacts::Named,
        })
    };
    // A host's matrix and plan are about its GPUs and RDMA devices: its other functions
    // (storage, management NICs, USB) would cost a `uevent` each and place nothing the
    // answer shows. On a host where the GPU drivers hold no function (none loaded, a
    // capture without `drivers/`), only their class tells GPUs: every function is read,
    // as on a machine without GPUs, whose line says what it holds.
    let names = match &needs {
        Some(needs) => match endpoint_names(ctx, &needs.nics) {
            Some((names, held)) if ctx.partial || held > 0 => names,
            _ => ctx.list(BUS_DIR),
        },
        None => ctx.list(BUS_DIR),
    };
    let mut listed: Vec<(PciAddr, &String)> = Vec::with_capacity(names.len());
    for name in &names {
        match name.parse::<PciAddr>() {
            Ok(addr) => listed.push((addr, name)),
            Err(_) => ctx.diags.push(crate::model::Diagnostic::new(
                crate::model::Severity::Warning,
                "unexpected-entry",
                Some(&join(BUS_DIR, name)),
                "not a PCI address; ignored",
            )),
        }
    }
    // A function's canonical path names every bridge above it, so a bridge is placed by
    // the path of a function below it rather than by its own link: most bridges then
    // cost no `readlink`. Deepest first (children are numbered after their bridge); a
    // link whose function an earlier path placed is not read.
    let placed: Mutex<BTreeSet<PciAddr>> = Mutex::new(BTreeSet::new());
    let deepest_first: Vec<&(PciAddr, &String)> = listed.iter().rev().collect();
    let mut resolved = ctx.par_filter_map(
        &deepest_first,
        super::ctx::LINKS_PER_THREAD,
        |ctx, (addr, name)| {
            if placed.lock().is_ok_and(|p| p.contains(addr)) {
                return None;
            }
            let path = ctx.fs.resolve_for_reads(&join(BUS_DIR, name));
            let chain = path.as_deref().ok().and_then(chain_of);
            if let Some(chain) = &chain
                && let Ok(mut placed) = placed.lock()
            {
                placed.extend(chain.functions.iter().map(|(a, _)| *a));
            }
            Some((*addr, path.map(|p| (p, chain))))
        },
    );
    resolved.reverse();
    let mut linked: BTreeMap<PciAddr, (String, Option<Chain>)> = BTreeMap::new();
    for (addr, path) in resolved {
        match path {
            Ok(found) => {
                linked.insert(addr, found);
            }
            Err(e) => ctx.unreadable(&e),
        }
    }
    // Each function's path and place (host bridge, parent) from its canonical path, and
    // bridges named in a device's path but not read from their own link (placed by a
    // path below them, or absent from the bus listing in a partial capture).
    let mut found: BTreeMap<PciAddr, (String, Place)> = BTreeMap::new();
    let mut bridges: BTreeMap<String, String> = BTreeMap::new();
    // Functions with functions below them: PCI-to-PCI bridges, by the tree itself.
    let mut parents: BTreeSet<PciAddr> = BTreeSet::new();
    for (addr, (path, chain)) in &linked {
        let place = match chain {
            None => ("unknown".to_string(), None),
            Some(Chain {
                host_bridge: hb,
                host_bridge_path: hb_path,
                functions: chain,
            }) => {
                let parent_at = |i: usize| i.checked_sub(1).map(|p| chain[p].0);
                for (i, (a, end)) in chain.iter().enumerate() {
                    if !linked.contains_key(a) {
                        found.entry(*a).or_insert_with(|| {
                            (path[..*end].to_string(), (hb.clone(), parent_at(i)))
                        });
                    }
                }
                // Every function on the way has one below it.
                parents.extend(chain.iter().rev().skip(1).map(|(a, _)| *a));
                let own = chain
                    .iter()
                    .position(|(a, _)| a == addr)
                    .and_then(parent_at);
                bridges.entry(hb.clone()).or_insert_with(|| hb_path.clone());
                (hb.clone(), own)
            }
        };
        found.insert(*addr, (path.clone(), place));
    }
    let paths: Vec<(PciAddr, String, Place)> = found
        .into_iter()
        .map(|(a, (path, place))| (a, path, place))
        .collect();
    let on_bus: BTreeSet<PciAddr> = listed.iter().map(|(a, _)| *a).collect();
    let origin = |addr: &PciAddr, path: &str| {
        if on_bus.contains(addr) {
            join(BUS_DIR, &addr.to_string())
        } else {
            path.to_string()
        }
    };
    // Bridges placed by the tree cost no read in a placement read or a partial read, and
    // the others a file or two (`uevent`, a GPU's `numa_node`) against a dozen in
    // full: only what is read weighs on whether threads pay.
    let per_thread = match needs {
        Some(_) => {
            let read = paths
                .iter()
                .filter(|(a, _, _)| !parents.contains(a))
                .count();
            super::ctx::FUNCTIONS_PER_THREAD * PLACEMENT_READS_PER_FULL * paths.len() / read.max(1)
        }
        None => super::ctx::FUNCTIONS_PER_THREAD,
    };
    let mut functions: Vec<PciFunction> =
        ctx.par_filter_map(&paths, per_thread, |ctx, (addr, path, place)| {
            // A function's `uevent` states its class and ids in one file (a GPU's or a
            // NIC's ids are read anyway, and a full read reads every id); `class`
            // where it does not.
            let (class, ids) = if needs.is_some() && parents.contains(addr) {
                (Some(PCI_BRIDGE_CLASS), None)
            } else {
                read_identity(ctx, path, || origin(addr, path))?
            };
            read_function(ctx, *addr, path, class, ids, place, needs.as_ref())
        });
    functions.sort_by_key(|f| f.address);
    if let Some(needs) = &needs {
        read_host_bridge_numa(ctx, &mut functions, needs);
    }
    assign_roles(&mut functions);
    forget_unknown_numa_nodes(ctx, topo, &mut functions);
    topo.host_bridges = bridges
        .into_iter()
        .map(|(name, path)| HostBridge {
            numa_node: host_bridge_node(&functions, &name),
            name,
            path,
        })
        .collect();
    topo.pci = functions;
}

/// The functions a placement read places: those the `nvidia` driver holds (its GPUs
/// and NVSwitches; [`fill_gpus`] numbers its GPUs only) and `named` (a host's RDMA
/// devices' functions; in a partial read this container's netdevs' and `PCIDEVICE_*`, with
/// the PFs of those that are VFs), with how many the driver holds; the bridges above
/// them come with their paths. `None` on a machine without the `nvidia` driver (or a
/// capture that does not list its directory), whose GPUs only their class tells. Not
/// the host's other functions (in a pod, its NICs and their VFs: hundreds on an SR-IOV
/// host), nor a GPU another driver (`vfio-pci` for a VM) or none holds: nvidia-smi
/// does not show one either.
fn endpoint_names(ctx: &mut Ctx, named: &BTreeSet<PciAddr>) -> Option<(Vec<String>, usize)> {
    // A driver's directory always lists its own attribute files; one that lists
    // nothing is a capture that kept the directory (a `driver` link leads there) but
    // not its listing, and says nothing of which functions the driver holds.
    let listing = ctx.fs.list_opt(NVIDIA_DRIVER_DIR).unwrap_or_default();
    if listing.is_empty() {
        return None;
    }
    let mut wanted: BTreeSet<PciAddr> = named
        .iter()
        .copied()
        .filter(|a| ctx.fs.exists(&join(BUS_DIR, &a.to_string())))
        .collect();
    // The PFs of those that are VFs: their ports carry the VFs' traffic. A partial read
    // names a VF alone; a host's RDMA devices hold their PFs' functions already.
    if ctx.partial {
        let pfs: Vec<PciAddr> = wanted
            .iter()
            .filter_map(|a| {
                let link = join(&join(BUS_DIR, &a.to_string()), "physfn");
                ctx.fs.link_name(&link).ok()?.parse().ok()
            })
            .collect();
        wanted.extend(pfs);
    }
    let held: Vec<PciAddr> = listing.iter().filter_map(|n| n.parse().ok()).collect();
    let count = held.len();
    wanted.extend(held);
    Some((wanted.iter().map(PciAddr::to_string).collect(), count))
}

/// A host bridge's node: that of its first function (in address order) that knows one.
fn host_bridge_node(functions: &[PciFunction], host_bridge: &str) -> Option<u32> {
    functions
        .iter()
        .filter(|f| f.host_bridge == host_bridge)
        .find_map(|f| f.numa_node)
}

/// The functions `PCIDEVICE_<PREFIX>_<NAME>` variables (SR-IOV and RDMA device plugins)
/// and DRA device metadata files name: what a container was given.
pub(super) fn pcidevice_functions(topo: &Topology) -> BTreeSet<PciAddr> {
    topo.process
        .given_functions()
        .filter_map(|(_, item)| item.parse().ok())
        .collect()
}

/// Read the functions `seeds` in full in place of their partial reads, with the PFs of
/// those that are VFs and every bridge above them all, as a whole read reads them; then
/// the nodes of their host bridges. Returns the functions read.
pub(super) fn read_focus(
    ctx: &mut Ctx,
    topo: &mut Topology,
    seeds: BTreeSet<PciAddr>,
) -> BTreeSet<PciAddr> {
    // The partial read placed them and their PFs (`endpoint_names`).
    let mut wanted: BTreeSet<PciAddr> = BTreeSet::new();
    let mut pfs: BTreeSet<PciAddr> = BTreeSet::new();
    for addr in seeds {
        let Some(f) = topo.pci_function(addr) else {
            continue;
        };
        wanted.insert(addr);
        if let Some(pf) = ctx
            .fs
            .link_name(&join(&f.path, "physfn"))
            .ok()
            .and_then(|n| n.parse::<PciAddr>().ok())
        {
            pfs.insert(pf);
        }
    }
    wanted.extend(
        pfs.into_iter()
            .filter(|pf| topo.pci_function(*pf).is_some()),
    );
    let above: Vec<PciAddr> = wanted
        .iter()
        .flat_map(|a| topo.ancestors(*a))
        .map(|f| f.address)
        .collect();
    wanted.extend(above);
    let items: Vec<(usize, PciAddr, String, Place)> = wanted
        .iter()
        .filter_map(|a| {
            let i = topo.pci.binary_search_by(|f| f.address.cmp(a)).ok()?;
            let f = &topo.pci[i];
            Some((i, *a, f.path.clone(), (f.host_bridge.clone(), f.parent)))
        })
        .collect();
    let read: Vec<(usize, PciFunction)> = ctx.par_filter_map(
        &items,
        super::ctx::FUNCTIONS_PER_THREAD,
        |ctx, (i, addr, path, place)| {
            let origin = || join(BUS_DIR, &addr.to_string());
            let (class, ids) = read_identity(ctx, path, origin)?;
            Some((
                *i,
                read_function(ctx, *addr, path, class, ids, place, None)?,
            ))
        },
    );
    let mut functions = std::mem::take(&mut topo.pci);
    let mut detailed = BTreeSet::new();
    for (i, f) in read {
        detailed.insert(f.address);
        functions[i] = f;
    }
    forget_unknown_numa_nodes(
        ctx,
        topo,
        functions
            .iter_mut()
            .filter(|f| detailed.contains(&f.address)),
    );
    assign_roles(&mut functions);
    // The nodes of the host bridges above what was read, as a whole read finds them:
    // the first function that knows one, reading the nodes of devices read in part on the way
    // (usually none: the first function is the root port, read above).
    let bridges: BTreeSet<String> = functions
        .iter()
        .filter(|f| detailed.contains(&f.address))
        .map(|f| f.host_bridge.clone())
        .collect();
    for hb in &bridges {
        for f in functions.iter_mut().filter(|f| &f.host_bridge == hb) {
            if !detailed.contains(&f.address) && f.numa_node.is_none() {
                f.numa_node = ctx
                    .attr(&join(&f.path, "numa_node"), true, parse_numa_node)
                    .flatten();
            }
            if f.numa_node.is_some() {
                break;
            }
        }
    }
    for h in &mut topo.host_bridges {
        if bridges.contains(&h.name) {
            h.numa_node = host_bridge_node(&functions, &h.name);
        }
    }
    topo.pci = functions;
    detailed
}

/// Place the GPUs `gpus` of a partial read as a placement read does: their `numa_node` and
/// `local_cpulist`, and the node of their host bridges where they know none.
pub(super) fn place_gpus(ctx: &mut Ctx, topo: &mut Topology, gpus: &BTreeSet<PciAddr>) {
    let mut functions = std::mem::take(&mut topo.pci);
    for f in functions.iter_mut().filter(|f| gpus.contains(&f.address)) {
        f.numa_node = ctx
            .attr(&join(&f.path, "numa_node"), true, parse_numa_node)
            .flatten();
        f.local_cpus = ctx.attr(&join(&f.path, "local_cpulist"), true, parse_cpulist);
    }
    forget_unknown_numa_nodes(
        ctx,
        topo,
        functions.iter_mut().filter(|f| gpus.contains(&f.address)),
    );
    let needs = Placement {
        nics: gpus.clone(),
        nodes: topo.numa_nodes.iter().map(|n| n.id).collect(),
        gpu_nodes: false,
        gpu_names: false,
    };
    read_host_bridge_numa(ctx, &mut functions, &needs);
    let bridges: BTreeSet<&str> = functions
        .iter()
        .filter(|f| gpus.contains(&f.address))
        .map(|f| f.host_bridge.as_str())
        .collect();
    for h in &mut topo.host_bridges {
        if bridges.contains(h.name.as_str()) {
            h.numa_node = host_bridge_node(&functions, &h.name);
        }
    }
    topo.pci = functions;
}

/// For each GPU of `gpus` with no function of `nics` below its root port, read in full
/// the functions below that root port that the partial read did not place: the NICs and
/// VFs beside the GPU and the switch ports between them, which a whole read holds and
/// the checks weigh against a far NIC (`gpu-nic-distance`'s nearest function and
/// `acs-redirect` on the way to it). Call before [`read_focus`] (which assigns the
/// roles); returns the functions read, the RDMA devices under them, each with its
/// function (to be held as partial reads), and the functions there that the partial read placed
/// already (where it placed every function: a capture that does not list the GPU
/// driver's functions), for [`read_focus`] to read in full.
pub(super) fn read_far_gpu_neighbours(
    ctx: &mut Ctx,
    topo: &mut Topology,
    gpus: &BTreeSet<PciAddr>,
    nics: &BTreeSet<PciAddr>,
) -> FarGpuNeighbours {
    let root_port = |topo: &Topology, a: PciAddr| topo.ancestors(a).last().map(|f| f.address);
    let near: BTreeSet<PciAddr> = nics.iter().filter_map(|n| root_port(topo, *n)).collect();
    // (directory, its function, host bridge): the root ports of GPUs far from every NIC.
    let mut todo: Vec<(String, PciAddr, String)> = gpus
        .iter()
        .filter_map(|g| topo.ancestors(*g).last().copied())
        .filter(|rp| !nics.is_empty() && !near.contains(&rp.address))
        .map(|rp| (rp.path.clone(), rp.address, rp.host_bridge.clone()))
        .collect();
    let mut visited: BTreeSet<PciAddr> = BTreeSet::new();
    let mut read: Vec<PciFunction> = Vec::new();
    let mut placed: Vec<(String, PciAddr)> = Vec::new();
    while let Some((dir, bridge, host_bridge)) = todo.pop() {
        if !visited.insert(bridge) {
            continue;
        }
        for name in ctx.list(&dir) {
            let Some(addr) = PciAddr::from_component(&name) else {
                continue;
            };
            let path = join(&dir, &name);
            if let Some(f) = topo.pci_function(addr) {
                if f.class >> 8 == 0x0604 {
                    todo.push((path, addr, host_bridge.clone()));
                } else if !gpus.contains(&addr) {
                    placed.push((path, addr));
                }
                continue;
            }
            if read.iter().any(|f| f.address == addr) {
                continue;
            }
            let Some((class, ids)) = read_identity(ctx, &path, || path.clone()) else {
                continue;
            };
            let place = (host_bridge.clone(), Some(bridge));
            let Some(f) = read_function(ctx, addr, &path, class, ids, &place, None) else {
                continue;
            };
            if f.is_bridge() {
                todo.push((path, addr, host_bridge.clone()));
            }
            read.push(f);
        }
    }
    forget_unknown_numa_nodes(ctx, topo, read.iter_mut());
    let added: BTreeSet<PciAddr> = read.iter().map(|f| f.address).collect();
    // A function's devices are those under it: the partial read only named them.
    let mut under: Vec<(String, PciAddr)> = Vec::new();
    let functions = read.iter().map(|f| (f.path.as_str(), f.address));
    for (path, addr) in functions.chain(placed.iter().map(|(p, a)| (p.as_str(), *a))) {
        for name in ctx
            .fs
            .list_opt(&join(path, "infiniband"))
            .unwrap_or_default()
        {
            under.push((name, addr));
        }
    }

    topo.pci.extend(read);
    topo.pci.sort_by_key(|f| f.address);
    FarGpuNeighbours {
        read: added,
        devices: under,
        placed: placed.into_iter().map(|(_, a)| a).collect(),
    }
}

/// What [`read_far_gpu_neighbours`] found beside GPUs far from every NIC.
#[derive(Debug, Default)]
pub(super) struct FarGpuNeighbours {
    /// The functions it read in full.
    pub read: BTreeSet<PciAddr>,
    /// The RDMA devices under them, each with its function.
    pub devices: Vec<(String, PciAddr)>,
    /// The functions there the partial read had placed already, to be read in full.
    pub placed: BTreeSet<PciAddr>,
}

/// A placement read takes `numa_node` of GPUs and NICs only. A host bridge's node
/// stands in for theirs where they know none (path classes across host bridges, a GPU's
/// NUMA node): for those host bridges, the node is its first function's that knows one
/// (as in a whole read), so read the others in address order until one does (usually
/// one file); other host bridges are left as their GPUs and NICs say.
fn read_host_bridge_numa(ctx: &mut Ctx, functions: &mut [PciFunction], needs: &Placement) {
    let is_endpoint =
        |f: &PciFunction| (needs.gpu_nodes && f.is_nvidia_gpu()) || needs.nics.contains(&f.address);
    let wanted: BTreeSet<String> = functions
        .iter()
        .filter(|f| is_endpoint(f) && !needs.knows(f.numa_node))
        .map(|f| f.host_bridge.clone())
        .collect();
    let mut settled: BTreeSet<String> = BTreeSet::new();
    for f in functions.iter_mut() {
        if !wanted.contains(&f.host_bridge) || settled.contains(&f.host_bridge) {
            continue;
        }
        if !is_endpoint(f) {
            f.numa_node = ctx
                .attr(&join(&f.path, "numa_node"), true, parse_numa_node)
                .flatten();
        }
        if f.numa_node.is_some() {
            settled.insert(f.host_bridge.clone());
        }
    }
}

/// A `numa_node` naming no node in `/sys/devices/system/node` (broken firmware tables,
/// hand-edited captures): warn, and treat it as unknown so affinity falls back to the
/// host bridge's node instead of calling every path SYS.
fn forget_unknown_numa_nodes<'f>(
    ctx: &mut Ctx,
    topo: &Topology,
    functions: impl IntoIterator<Item = &'f mut PciFunction>,
) {
    if topo.numa_nodes.is_empty() {
        return; // nothing to check against (a capture without the node directory)
    }
    for f in functions {
        if let Some(n) = f.numa_node
            && topo.numa_node(n).is_none()
        {
            ctx.diags.push(crate::model::Diagnostic::new(
                crate::model::Severity::Warning,
                "unknown-numa-node",
                Some(&join(&f.path, "numa_node")),
                format!("NUMA node {n} is not in /sys/devices/system/node; treated as unknown"),
            ));
            f.numa_node = None;
        }
    }
}

/// A function's `class`, the first file read beneath its path. The path was taken from
/// a link target without checking each directory ([`crate::sysfs::Sysfs::resolve_for_reads`]);
/// this read checks it. `None` when the path itself is bad (a device unplugged since the
/// listing, a link leading out of the tree), with a diagnostic naming `origin` (the bus
/// link) rather than the attribute; `Some(None)` when only the attribute is.
fn read_class(ctx: &mut Ctx, path: &str, origin: impl FnOnce() -> String) -> Option<Option<u32>> {
    let file = join(path, "class");
    let e = match ctx
        .fs
        .read_with(&file, |t| parse_pci_class(super::ctx::trim_attr(t)))
    {
        Ok(parsed) => return Some(ctx.accept(&file, parsed)),
        Err(e) => e,
    };
    let bad_path = matches!(
        e,
        SysfsError::NotFound { .. }
            | SysfsError::SymlinkLoop { .. }
            | SysfsError::NotADirectory { .. }
    );
    if bad_path && let Err(origin_error) = ctx.fs.canonicalize(&origin()) {
        ctx.unreadable(&origin_error);
        return None;
    }
    ctx.unreadable(&e);
    Some(None)
}

/// A PF's `num_vfs` VFs from its `sriov_offset` and `sriov_stride` ([`PciAddr::virtfn`]):
/// two files in place of a `virtfn<N>` link per VF (a pod's PF carries dozens of other
/// pods' VFs). `None` where the files are not there (older kernels, captures) or do
/// not parse (a diagnostic names the file).
fn vfs_by_routing(ctx: &mut Ctx, pf: PciAddr, path: &str, num_vfs: u32) -> Option<Vec<PciAddr>> {
    let mut number =
        |name: &'static str| ctx.attr(&join(path, name), true, |t| parse_dec::<u32>(name, t));
    let (offset, stride) = (number("sriov_offset")?, number("sriov_stride")?);
    if stride == 0 && num_vfs > 1 {
        return None;
    }
    (0..num_vfs).map(|i| pf.virtfn(offset, stride, i)).collect()
}

/// A PF's VFs from its `virtfn<N>` links, in the order of N.
fn vfs_by_links(ctx: &mut Ctx, path: &str) -> Vec<PciAddr> {
    let mut vfs: Vec<(u32, PciAddr)> = ctx
        .list(path)
        .iter()
        .filter_map(|n| n.strip_prefix("virtfn")?.parse::<u32>().ok())
        .filter_map(|i| {
            let link = ctx.fs.link_name(&join(path, &format!("virtfn{i}"))).ok()?;
            Some((i, link.parse().ok()?))
        })
        .collect();
    vfs.sort_by_key(|(i, _)| *i);
    vfs.into_iter().map(|(_, a)| a).collect()
}

/// A function's class, with its ids where its `uevent` tells them all
/// ([`read_uevent`]), else from `class` ([`read_class`], whose `None` this returns).
fn read_identity(
    ctx: &mut Ctx,
    path: &str,
    origin: impl FnOnce() -> String,
) -> Option<(Option<u32>, Option<PciIds>)> {
    match read_uevent(ctx, path) {
        Some(ids) => Some((Some(ids.class), Some(ids))),
        None => Some((read_class(ctx, path, origin)?, None)),
    }
}

/// Class and ids from a function's `uevent`, one file in place of up to five; `None`
/// (quietly: captures may leave `uevent` out) when it cannot tell, and the attribute
/// files are read instead.
fn read_uevent(ctx: &Ctx, path: &str) -> Option<PciIds> {
    ctx.fs
        .read_with(&join(path, "uevent"), parse_pci_uevent)
        .ok()?
        .ok()
}

/// One function (`class` read already, `None` when unreadable; `ids` when its `uevent`
/// was read). With `needs` (a placement read), only the tree's facts are read, and
/// `numa_node` and `local_cpulist` for GPUs and RDMA devices' functions (a NIC's CPUs
/// only stand in for a node it does not know).
fn read_function(
    ctx: &mut Ctx,
    address: PciAddr,
    path: &str,
    class: Option<u32>,
    ids: Option<PciIds>,
    (host_bridge, parent): &Place,
    needs: Option<&Placement>,
) -> Option<PciFunction> {
    let (host_bridge, parent) = (host_bridge.clone(), *parent);
    let at = |name: &str| join(path, name);
    let full = needs.is_none();
    let is_nic = needs.is_some_and(|n| n.nics.contains(&address));
    let vendor_of = |ctx: &mut Ctx| ctx.attr(&at("vendor"), false, |t| parse_hex_u16("vendor", t));
    let device_of = |ctx: &mut Ctx| ctx.attr(&at("device"), false, |t| parse_hex_u16("device", t));
    // A placement read needs ids only to tell NVIDIA GPUs among display functions (and
    // to name the NICs), from `uevent` where it tells them; for every other function the
    // class is enough (0: not read).
    let display = class.is_some_and(|c| c >> 16 == 0x03);
    let ids = match ids {
        None if !full && (is_nic || display) => read_uevent(ctx, path),
        ids => ids,
    };
    let (vendor, device) = match &ids {
        Some(ids) if full || is_nic || display => (Some(ids.vendor), Some(ids.device)),
        _ if !(full || is_nic || display) => (Some(0), Some(0)),
        _ => (vendor_of(ctx), device_of(ctx)),
    };
    let (Some(vendor), Some(device), Some(class)) = (vendor, device, class) else {
        // Vanished (hot-unplug) or broken: diagnostics already name the files.
        return None;
    };
    let is_gpu = vendor == 0x10de && matches!(class >> 8, 0x0300 | 0x0302);
    let gpu_nodes = is_gpu && needs.is_none_or(|n| n.gpu_nodes);
    let local = full || gpu_nodes || is_nic;
    let width = |t: &str| parse_dec::<u32>("link width", t);
    // The link, IOMMU group and ACS are judged by `doctor` alone.
    let whole = full && ctx.needs.pci == PciFacts::Whole;
    let link = if !whole {
        PcieLink::default()
    } else {
        PcieLink {
            current_speed: ctx
                .attr(&at("current_link_speed"), true, parse_link_speed)
                .flatten(),
            current_width: ctx.attr(&at("current_link_width"), true, width),
            max_speed: ctx
                .attr(&at("max_link_speed"), true, parse_link_speed)
                .flatten(),
            max_width: ctx.attr(&at("max_link_width"), true, width),
        }
    };
    let physfn = (full || is_nic)
        .then(|| ctx.fs.link_name(&at("physfn")).ok())
        .flatten()
        .and_then(|n| n.parse().ok());
    let sriov = if !full {
        None
    } else {
        ctx.attr(&at("sriov_totalvfs"), true, |t| {
            parse_dec::<u32>("sriov_totalvfs", t)
        })
        .map(|total_vfs| {
            let num_vfs = ctx
                .attr(&at("sriov_numvfs"), true, |t| {
                    parse_dec::<u32>("sriov_numvfs", t)
                })
                .unwrap_or(0);
            let vfs = if num_vfs == 0 {
                Vec::new()
            } else {
                vfs_by_routing(ctx, address, path, num_vfs)
                    .unwrap_or_else(|| vfs_by_links(ctx, path))
            };
            Sriov {
                total_vfs,
                num_vfs,
                vfs,
            }
        })
    };
    // Names are for people reading the inventory, and a GPU's for the plan's reasons
    // where NVML does not name it; other lookups would cost instructions for nothing
    // (a lookup is about ten thousand).
    let (vendor_name, device_name) = if full || (is_gpu && needs.is_some_and(|n| n.gpu_names)) {
        names(vendor, device)
    } else {
        (None, None)
    };
    // In the order the files were always read (diagnostics keep their order).
    let uevent_subsystem = ids.as_ref().and_then(|i| i.subsystem);
    let (subsystem_vendor, subsystem_device) = match (full, uevent_subsystem) {
        (false, _) => (None, None),
        (true, Some((vendor, device))) => (Some(vendor), Some(device)),
        (true, None) => (
            ctx.attr(&at("subsystem_vendor"), true, |t| {
                parse_hex_u16("subsystem_vendor", t)
            }),
            ctx.attr(&at("subsystem_device"), true, |t| {
                parse_hex_u16("subsystem_device", t)
            }),
        ),
    };
    // From `uevent` where it was read, else the `driver` link; a placement read takes a
    // GPU's only (whose driver decides whether it is one: [`fill_gpus`]).
    let uevent_read = ids.is_some();
    let driver = match ids.and_then(|i| i.driver) {
        _ if !(full || is_gpu) => None,
        Some(driver) => Some(driver),
        None if !uevent_read => ctx.fs.link_name(&at("driver")).ok(),
        None => None,
    };
    let numa_node = local
        .then(|| ctx.attr(&at("numa_node"), true, parse_numa_node))
        .flatten()
        .flatten();
    Some(PciFunction {
        address,
        path: path.to_string(),
        host_bridge,
        parent,
        role: PciRole::Endpoint,
        class,
        vendor,
        device,
        subsystem_vendor,
        subsystem_device,
        vendor_name,
        device_name,
        driver,
        numa_node,
        local_cpus: (full || gpu_nodes || (is_nic && !needs.is_some_and(|n| n.knows(numa_node))))
            .then(|| ctx.attr(&at("local_cpulist"), true, parse_cpulist))
            .flatten(),
        link,
        sriov,
        is_vf: physfn.is_some() || KNOWN_VF_IDS.contains(&(vendor, device)),
        physfn,
        vf_index: None,
        iommu_group: whole
            .then(|| ctx.fs.link_name(&at("iommu_group")).ok())
            .flatten()
            .and_then(|n| n.parse().ok()),
        acs: (whole && class >> 8 == 0x0604)
            .then(|| read_acs(ctx, &at("config")))
            .flatten(),
    })
}

/// ACS of a bridge from its `config` file (64 bytes without CAP_SYS_ADMIN: then
/// [`AcsState::NotReadable`]).
fn read_acs(ctx: &mut Ctx, path: &str) -> Option<AcsState> {
    match ctx.fs.read_bytes(path, 4096) {
        Ok(bytes) => ctx.accept(path, parse_acs(&bytes)),
        Err(e) if e.is_not_found() => None,
        Err(e) => {
            ctx.unreadable(&e);
            None
        }
    }
}

/// Root port, switch upstream or downstream port, from position among bridges.
fn assign_roles(functions: &mut [PciFunction]) {
    // `functions` is sorted by address: a parent is found by binary search, and each
    // role is worked out once (a switch's role depends on its parent's).
    let index_of = |functions: &[PciFunction], a: PciAddr| {
        functions.binary_search_by(|f| f.address.cmp(&a)).ok()
    };
    let mut memo: Vec<Option<PciRole>> = vec![None; functions.len()];
    fn role_of(
        i: usize,
        functions: &[PciFunction],
        index_of: &dyn Fn(&[PciFunction], PciAddr) -> Option<usize>,
        memo: &mut [Option<PciRole>],
        depth: usize,
    ) -> PciRole {
        if let Some(r) = memo[i] {
            return r;
        }
        let f = &functions[i];
        let r = if !f.is_bridge() {
            PciRole::Endpoint
        } else {
            match f.parent {
                None => PciRole::RootPort,
                Some(_) if depth > 64 => PciRole::SwitchDownstream,
                Some(p) => match index_of(functions, p)
                    .map(|p| role_of(p, functions, index_of, memo, depth + 1))
                {
                    Some(PciRole::SwitchUpstream) => PciRole::SwitchDownstream,
                    // A parent missing from the tree is taken for a root port.
                    _ => PciRole::SwitchUpstream,
                },
            }
        };
        memo[i] = Some(r);
        r
    }
    for i in 0..functions.len() {
        let role = role_of(i, functions, &index_of, &mut memo, 0);
        functions[i].role = role;
    }
    // VF index from the PF's virtfn links.
    let vf_index: BTreeMap<PciAddr, u32> = functions
        .iter()
        .filter_map(|f| f.sriov.as_ref())
        .flat_map(|s| s.vfs.iter().enumerate().map(|(i, a)| (*a, i as u32)))
        .collect();
    for f in functions.iter_mut() {
        f.vf_index = vf_index.get(&f.address).copied();
    }
}

#[cfg(feature = "pci-names")]
fn names(vendor: u16, device: u16) -> (Option<String>, Option<String>) {
    match pci_ids::Device::from_vid_pid(vendor, device) {
        Some(d) => (
            Some(d.vendor().name().to_string()),
            Some(d.name().to_string()),
        ),
        None => (
            <pci_ids::Vendor as pci_ids::FromId<u16>>::from_id(vendor)
                .map(|v| v.name().to_string()),
            None,
        ),
    }
}

#[cfg(not(feature = "pci-names"))]
fn names(_vendor: u16, _device: u16) -> (Option<String>, Option<String>) {
    (None, None)
}

/// GPUs in PCI order, numbered as NVML numbers them, with NVML facts merged in when
/// present. Where the `nvidia` driver holds a function, the GPUs are those it holds:
/// nvidia-smi, CUDA and NCCL neither see nor count one bound to `vfio-pci` (passed to a
/// VM) or to no driver (its probe failed, or it is excluded). Elsewhere (no driver
/// loaded, a capture that does not say) every NVIDIA display function is one.
pub(super) fn fill_gpus(topo: &mut Topology) {
    // Taken out while the GPUs are built beside it, and put back.
    let nvml = topo.nvml.take();
    let nvidia_holds_any = topo
        .pci
        .iter()
        .any(|f| f.driver.as_deref() == Some(NVIDIA_DRIVER));
    topo.gpus =
        topo.pci
            .iter()
            .filter(|f| f.is_nvidia_gpu())
            .filter(|f| !nvidia_holds_any || f.driver.as_deref() == Some(NVIDIA_DRIVER))
            .enumerate()
            .map(|(i, f)| {
                let facts = nvml.as_ref().and_then(|n| n.gpu(f.address));
                // Without NVML, the driver's /proc/driver/nvidia/gpus/<bdf>/information.
                let procfs =
                    topo.process.proc_nvidia_gpu_info.iter().find(|p| {
                        p.bus_id.parse::<crate::parse::PciAddr>().ok() == Some(f.address)
                    });
                Gpu {
                    pci: f.address,
                    index: i as u32,
                    name: facts
                        .and_then(|g| g.name.clone())
                        .or_else(|| f.device_name.clone()),
                    uuid: facts
                        .and_then(|g| g.uuid.clone())
                        .or_else(|| procfs.and_then(|p| p.uuid.clone())),
                    numa_node: topo.numa_node_of(f),
                    local_cpus: f.local_cpus.clone(),
                    minor: facts
                        .and_then(|g| g.minor_number)
                        .or_else(|| procfs.and_then(|p| p.minor)),
                }
            })
            .collect();
    topo.nvml = nvml;
}
