//! Each answer's needs (`rdmatopo::Needs`) read a fraction of the files and must give
//! exactly the answer of a whole read ([`Needs::ALL`]), on every fixture and on the
//! fuzzers' base machine: [`Needs::TOPO`] (`topo` on a host) the matrix and the
//! container context, [`Needs::TOPO_IN_CONTAINER`] the ownership view, [`Needs::GIDS`]
//! the GID tables and NCCL's GID choice, [`Needs::NETDEVS`] the ibdev2netdev relation,
//! [`Needs::NCCL_ENV`] the rank plan (host and owned views).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;
use rdmatopo::model::Port;
use rdmatopo::view::TopoMatrix;
use rdmatopo::view::affinity::numa_of;
use rdmatopo::view::container::ContainerView;
use rdmatopo::view::gid::{choose_gid, is_roce};
use rdmatopo::view::plan::{Plan, PlanOptions};
use rdmatopo::{Needs, Sysfs, Topology, View, discover_needs, discover_view};
use std::path::PathBuf;

fn fixture_roots() -> Vec<PathBuf> {
    support::fixture_roots()
}

/// Both reads of one root: (whole, `topo`'s, files read by each).
fn both(open: impl Fn() -> Sysfs) -> (Topology, Topology, usize, usize) {
    let (fs_full, fs_aff) = (open(), open());
    let full = discover_needs(&fs_full, Needs::ALL).unwrap();
    let aff = discover_needs(&fs_aff, Needs::TOPO).unwrap();
    (full, aff, fs_full.files_read(), fs_aff.files_read())
}

fn assert_same_answer(name: &str, full: &Topology, aff: &Topology) {
    assert_eq!(
        TopoMatrix::for_topology(aff),
        TopoMatrix::for_topology(full),
        "{name}: topo's needs changed the matrix"
    );
    let (vf, va) = (ContainerView::of(full), ContainerView::of(aff));
    // Host or container is decided from the process view alone; which kind of
    // container needs the netdevs, so `topo` reads the whole model in containers.
    assert_eq!(
        va.context.is_container(),
        vf.context.is_container(),
        "{name}"
    );
    if !vf.context.is_container() {
        assert_eq!(va.context, vf.context, "{name}: context");
    }
    // The process view's CPU mask and container evidence are read whole; limits,
    // device nodes and the driver's GPU list stay empty.
    let (pa, pf) = (&aff.process, &full.process);
    assert_eq!(pa.usable_cpus(), pf.usable_cpus(), "{name}: usable CPUs");
    assert_eq!(
        (
            &pa.cgroups,
            &pa.env,
            &pa.device_mounts,
            &pa.container_markers,
            pa.cap_eff
        ),
        (
            &pf.cgroups,
            &pf.env,
            &pf.device_mounts,
            &pf.container_markers,
            pf.cap_eff
        ),
        "{name}: the container evidence"
    );
    assert_eq!(pa.memlock, None, "{name}");
    assert!(
        pa.proc_nvidia_gpu_info.is_empty() && pa.dev_nvidia.is_empty(),
        "{name}"
    );
    let cpus = |t: &Topology| {
        t.numa_nodes
            .iter()
            .map(|n| (n.id, n.cpus.clone()))
            .collect::<Vec<_>>()
    };
    assert_eq!(cpus(aff), cpus(full), "{name}: NUMA nodes");
    // The functions the matrix is about (GPUs, RDMA devices' functions) and every
    // bridge above them are read, each placed as in a whole read; a host's other
    // functions may be left out (where the GPU drivers tell its GPUs).
    let place = |t: &Topology, a| {
        t.pci_function(a)
            .map(|f| (f.address, f.parent, f.host_bridge.clone(), f.path.clone()))
    };
    // GPUs (NVML's: not one another driver holds) and RDMA devices' functions.
    let endpoints = |t: &Topology| {
        t.pci
            .iter()
            .filter(|f| {
                t.gpus.iter().any(|g| g.pci == f.address)
                    || t.rdma_devices.iter().any(|d| d.pci == Some(f.address))
            })
            .map(|f| f.address)
            .collect::<Vec<_>>()
    };
    let mut above = Vec::new();
    for endpoint in endpoints(full) {
        let mut at = Some(endpoint);
        while let Some(a) = at {
            above.push(a);
            at = full.pci_function(a).and_then(|f| f.parent);
        }
    }
    for a in above {
        assert_eq!(place(aff, a), place(full, a), "{name}: function {a}");
    }
    for f in &aff.pci {
        assert_eq!(place(aff, f.address), place(full, f.address), "{name}");
    }
    // Host bridges' nodes stand in for GPUs and NICs that know none of their own:
    // those are read as in a whole read.
    let bridge_of = |t: &Topology, a| t.pci_function(a).map(|f| f.host_bridge.clone());
    let node_of_bridge = |t: &Topology, name: &str| {
        t.host_bridges
            .iter()
            .find(|h| h.name == name)
            .map(|h| h.numa_node)
    };
    for endpoint in endpoints(full) {
        let bridge = bridge_of(full, endpoint).unwrap();
        assert_eq!(bridge_of(aff, endpoint), Some(bridge.clone()), "{name}");
        assert_eq!(
            node_of_bridge(aff, &bridge),
            node_of_bridge(full, &bridge),
            "{name}: node of {bridge}"
        );
    }
    let aff_endpoints = endpoints(aff);
    for f in aff.pci.iter().filter(|f| f.numa_node.is_none()) {
        if aff_endpoints.contains(&f.address) {
            let full_f = full.pci_function(f.address).unwrap();
            assert_eq!(
                numa_of(aff, f),
                numa_of(full, full_f),
                "{name}: node of {}",
                f.address
            );
        }
    }
    let gpus = |t: &Topology| {
        t.gpus
            .iter()
            .map(|g| (g.index, g.pci, g.numa_node))
            .collect::<Vec<_>>()
    };
    assert_eq!(gpus(aff), gpus(full), "{name}: the GPUs and their numbers");
}

#[test]
fn topos_needs_give_the_whole_answer_on_every_fixture() {
    let roots = fixture_roots();
    assert!(roots.len() >= 5, "fixtures missing: {roots:?}");
    for root in roots {
        let name = root.display().to_string();
        let (full, aff, n_full, n_aff) = both(|| support::open(&root));
        assert_same_answer(&name, &full, &aff);
        assert!(n_aff <= n_full, "{name}: {n_aff} > {n_full} files");
        if full.gpus.len() >= 8 {
            // The point of the needs: on a DGX-class tree most files are GID slots,
            // link state and netdevs the matrix never looks at.
            assert!(n_aff * 4 < n_full, "{name}: {n_aff} of {n_full} files");
        }
    }
}

/// On a host whose GPU drivers hold its GPUs, `topo` reads the functions the matrix
/// places and the bridges above them, not the host's others (h100-dgx: its NVMe drives,
/// management NIC, USB and SATA controllers).
#[test]
fn topos_needs_on_a_host_read_the_placed_functions_only() {
    let root = support::root("h100-dgx");
    let (full, aff, n_full, n_aff) = both(|| support::open(&root));
    let held: Vec<String> = support::open(&root)
        .list("/sys/bus/pci/drivers/nvidia")
        .unwrap();
    let endpoint = |f: &rdmatopo::model::PciFunction| {
        held.contains(&f.address.to_string())
            || aff.rdma_devices.iter().any(|d| d.pci == Some(f.address))
    };
    for f in &aff.pci {
        let bridge = aff.pci.iter().any(|c| c.parent == Some(f.address));
        assert!(endpoint(f) || bridge, "{} is read", f.address);
    }
    assert!(aff.pci.len() < full.pci.len() && n_aff < n_full);
    assert!(
        full.pci.iter().any(|f| f.class >> 8 == 0x0108),
        "an NVMe drive"
    );
    assert!(aff.pci.iter().all(|f| f.class >> 8 != 0x0108));
}

#[test]
fn topos_needs_on_the_base_machine() {
    let (full, aff, _, _) = both(|| Sysfs::memory(rdmatopo::fuzzing::base_machine(), "base"));
    assert_same_answer("base", &full, &aff);
    assert!(aff.netdevs.is_empty() && aff.rdma_devices[0].ports.is_empty());
    assert_eq!(aff.rdma_devices[0].pci, full.rdma_devices[0].pci);
}

#[test]
fn topos_needs_read_host_bridges_for_endpoints_without_a_node() {
    // GPU0 says no node (-1) and the NIC's PF names one the machine lacks (7): both
    // stand on their host bridge's node, as in a whole read, and the NIC's CPUs are
    // read in its stead.
    let sw = "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0";
    let mut tree = rdmatopo::fuzzing::base_machine();
    tree.file(&format!("{sw}/0000:02:00.0/0000:03:00.0/numa_node"), "-1\n")
        .file(&format!("{sw}/0000:02:01.0/0000:04:00.0/numa_node"), "7\n");
    let (full, aff, _, _) = both(|| Sysfs::memory(tree.clone(), "edited"));
    assert_same_answer("edited", &full, &aff);
    let pf = "0000:04:00.0".parse().unwrap();
    assert_eq!(numa_of(&aff, aff.pci_function(pf).unwrap()), Some(0));
    assert!(aff.pci_function(pf).unwrap().local_cpus.is_some());
    // A NIC that knows its node is not asked for its CPUs.
    let (_, aff, _, _) = both(|| Sysfs::memory(rdmatopo::fuzzing::base_machine(), "base"));
    assert!(aff.pci_function(pf).unwrap().local_cpus.is_none());
    assert_eq!(aff.host_bridges[0].numa_node, Some(0));
}

/// `rdmatopo gids`'s answer: every port's link layer and GID table, NCCL's choice, and
/// which netdevs are in this namespace.
fn assert_same_gids(name: &str, full: &Topology, narrow: &Topology) {
    for (at, device, np, fp) in same_ports(name, full, narrow) {
        assert_eq!(np.link_layer, fp.link_layer, "{at}");
        assert_eq!(np.gid_table_len, fp.gid_table_len, "{at}");
        assert_eq!(np.gids, fp.gids, "{at}");
        assert_eq!(
            choose_gid(narrow, device, np.number),
            choose_gid(full, device, fp.number),
            "{at}"
        );
    }
    let names = |t: &Topology| {
        t.netdevs
            .iter()
            .map(|n| (n.name.clone(), n.pci))
            .collect::<Vec<_>>()
    };
    assert_eq!(names(narrow), names(full), "{name}: netdevs");
}

/// `rdmatopo netdevs`'s answer: each port's netdev, that netdev's carrier, master and
/// bond, and the link layer of ports without one.
fn assert_same_port_netdevs(name: &str, full: &Topology, narrow: &Topology) {
    for (at, _, np, fp) in same_ports(name, full, narrow) {
        assert_eq!(np.netdev, fp.netdev, "{at}");
        match fp.netdev.as_deref().and_then(|d| full.netdev(d)) {
            Some(fd) => {
                let nd = narrow.netdev(&fd.name).expect("visible in both");
                assert_eq!(
                    (nd.carrier, &nd.master, &nd.bond),
                    (fd.carrier, &fd.master, &fd.bond),
                    "{at}"
                );
            }
            None => {
                assert!(
                    narrow.netdev(fp.netdev.as_deref().unwrap_or("")).is_none()
                        || fp.netdev.is_none(),
                    "{at}"
                );
                assert_eq!(is_roce(np), is_roce(fp), "{at}");
            }
        }
    }
}

/// The same RDMA devices (name and function) and ports in both: each port pair, named
/// for messages, with its device's name.
fn same_ports<'a>(
    name: &str,
    full: &'a Topology,
    narrow: &'a Topology,
) -> Vec<(String, &'a str, &'a Port, &'a Port)> {
    assert_eq!(narrow.rdma_devices.len(), full.rdma_devices.len(), "{name}");
    let mut pairs = Vec::new();
    for (n, f) in narrow.rdma_devices.iter().zip(&full.rdma_devices) {
        assert_eq!((&n.name, n.pci), (&f.name, f.pci), "{name}");
        assert_eq!(n.ports.len(), f.ports.len(), "{name} {}", f.name);
        for (np, fp) in n.ports.iter().zip(&f.ports) {
            let at = format!("{name} {} port {}", f.name, fp.number);
            pairs.push((at, f.name.as_str(), np, fp));
        }
    }
    pairs
}

/// The whole, `gids` and `netdevs` reads of one root, with the files each read.
fn rdma_reads(open: impl Fn() -> Sysfs) -> [(Topology, usize); 3] {
    [Needs::ALL, Needs::GIDS, Needs::NETDEVS].map(|needs| {
        let fs = open();
        let topo = discover_needs(&fs, needs).unwrap();
        (topo, fs.files_read())
    })
}

#[test]
fn the_gids_and_netdevs_needs_give_the_whole_answer_on_every_fixture() {
    for root in fixture_roots() {
        let name = root.display().to_string();
        let [(full, n_full), (gids, n_gids), (nd, n_nd)] = rdma_reads(|| support::open(&root));
        assert_same_gids(&name, &full, &gids);
        assert_same_port_netdevs(&name, &full, &nd);
        assert!(
            n_nd <= n_gids && n_gids <= n_full,
            "{name}: {n_nd} / {n_gids} / {n_full}"
        );
        // A port with a netdev of this namespace costs at most its link layer, one GID
        // slot and its netdev (ibdev2netdev's own count is two files per netdev);
        // proving that a RoCE port has none takes its whole GID table (the upstream
        // kernel shows a pod the host's GIDs, whose netdevs are not here).
        let bound: usize = full
            .rdma_devices
            .iter()
            .flat_map(|d| &d.ports)
            .map(|p| match &p.netdev {
                // A RoCE LAG port's netdev is a bond: its slaves (the PFs' netdevs) are
                // read too, three files each (fixtures/pub-b300-cx8-bond-deepep590: eight).
                Some(n) if full.netdev(n).is_some() => {
                    4 + 3 * full
                        .netdevs
                        .iter()
                        .filter(|d| d.master.as_deref() == Some(n.as_str()))
                        .count()
                }
                _ => 2 + 2 * p.gid_table_len as usize,
            })
            .sum();
        assert!(n_nd <= bound + 8, "{name}: {n_nd} files, bound {bound}");
    }
}

#[test]
fn the_gids_and_netdevs_needs_on_the_base_machine() {
    let [(full, _), (gids, _), (nd, _)] =
        rdma_reads(|| Sysfs::memory(rdmatopo::fuzzing::base_machine(), "base"));
    assert_same_gids("base", &full, &gids);
    assert_same_port_netdevs("base", &full, &nd);
    assert!(gids.pci.is_empty() && gids.numa_nodes.is_empty() && nd.pci.is_empty());
}

#[test]
fn bridges_are_placed_by_the_paths_below_them_without_their_own_links() {
    let fs = Sysfs::memory(rdmatopo::fuzzing::base_machine(), "base").recording();
    let topo = discover_needs(&fs, Needs::ALL).unwrap();
    let journal = fs.journal();
    let link = |a: &str| format!("/sys/bus/pci/devices/{a}");
    // Every bridge is in the model, under its parent, yet only the links of functions
    // with nothing below them were followed.
    for f in &topo.pci {
        let followed = journal.contains(&link(&f.address.to_string()));
        let has_children = topo.pci.iter().any(|c| c.parent == Some(f.address));
        assert_eq!(followed, !has_children, "{}", f.address);
    }
    let switch = topo.pci_function("0000:02:01.0".parse().unwrap()).unwrap();
    assert_eq!(switch.parent, Some("0000:01:00.0".parse().unwrap()));
    assert!(
        switch.path.ends_with("/0000:01:00.0/0000:02:01.0"),
        "{}",
        switch.path
    );
}

/// `topo` inside a container: the ownership view and the matrices built from it are
/// the full read's, on every fixture.
#[test]
fn topos_needs_in_a_container_give_the_whole_view_on_every_fixture() {
    for root in fixture_roots() {
        let name = root.display().to_string();
        let (fs_full, fs_pod) = (support::open(&root), support::open(&root));
        let full = discover_needs(&fs_full, Needs::ALL).unwrap();
        let pod = discover_needs(&fs_pod, Needs::TOPO_IN_CONTAINER).unwrap();
        let view = ContainerView::of(&full);
        assert_eq!(ContainerView::of(&pod), view, "{name}: container view");
        assert_eq!(
            TopoMatrix::for_topology(&pod),
            TopoMatrix::for_topology(&full),
            "{name}"
        );
        let gpus = view.owned_gpus();
        let nics = view.owned_rdma();
        let nics: Vec<&str> = nics.iter().map(String::as_str).collect();
        assert_eq!(
            TopoMatrix::build(&pod, &gpus, &nics),
            TopoMatrix::build(&full, &gpus, &nics),
            "{name}: owned matrix"
        );
        assert_eq!(
            (pod.gpus.len(), pod.rdma_devices.len()),
            (full.gpus.len(), full.rdma_devices.len())
        );
        assert!(fs_pod.files_read() <= fs_full.files_read(), "{name}");
    }
}

/// The rank plan of one read, as `nccl-env --format json` writes it (every rank).
fn plan_json(topo: &Topology) -> String {
    Plan::compute(topo, &PlanOptions::default())
        .map_or_else(|e| format!("error: {e}"), |p| p.to_json())
}

/// `nccl-env` (and `exec`) read for [`Needs::NCCL_ENV`]: on every fixture, host and
/// owned views alike, the plan is the plan of a whole read, from fewer files.
#[test]
fn nccl_envs_needs_give_the_whole_plan_on_every_fixture() {
    for root in fixture_roots() {
        let name = root.display().to_string();
        for view in [View::All, View::Owned] {
            let read = |needs| {
                let fs = support::open(&root);
                let topo = discover_view(&fs, needs, view).unwrap();
                (topo, fs.files_read())
            };
            let (whole, n_whole) = read(Needs::ALL);
            let (nccl, n_nccl) = read(Needs::NCCL_ENV);
            assert_eq!(
                plan_json(&nccl),
                plan_json(&whole),
                "{name} {view:?}: the plan"
            );
            // The same devices in view; only `doctor` reads the functions beside a GPU
            // (and holds their RDMA devices as records rather than names).
            let devices = |t: &Topology| {
                let view = t.view.clone().map(|mut v| {
                    v.pci.clear();
                    v.other_rdma_devices.clear();
                    v.unnamed_rdma_devices = 0;
                    v
                });
                (view, t.rdma_device_count())
            };
            assert_eq!(devices(&nccl), devices(&whole), "{name} {view:?}: the view");
            // Of the devices it does not hold, `nccl-env` names the first (its note
            // shows four at most) and counts the rest.
            let mut not_held: Vec<String> = whole
                .rdma_devices
                .iter()
                .map(|d| d.name.clone())
                .chain(whole.other_rdma_devices().iter().cloned())
                .filter(|n| nccl.rdma_device(n).is_none())
                .collect();
            not_held.sort_by(|a, b| rdmatopo::parse::natural_cmp(a, b));
            let named = nccl.other_rdma_devices();
            assert!(
                not_held.starts_with(named) && named.len() <= 4,
                "{name} {view:?}: named {named:?}, not held {not_held:?}"
            );
            assert_eq!(
                nccl.other_rdma_device_count(),
                not_held.len(),
                "{name} {view:?}: the devices not held"
            );
            // What the plan groups ports into adapters by, where their functions do not
            // tell (Socket Direct, Multi-Host): no fixture's plan turns on it alone, so
            // it is compared itself, for every device the plan weighs.
            for device in &nccl.rdma_devices {
                let Some(held) = whole.rdma_device(&device.name) else {
                    continue;
                };
                assert_eq!(
                    device.sys_image_guid, held.sys_image_guid,
                    "{name} {view:?}: {}'s sys_image_guid",
                    device.name
                );
            }
            assert!(
                n_nccl <= n_whole,
                "{name} {view:?}: {n_nccl} > {n_whole} files"
            );
        }
    }
}

/// NCCL takes GID index 0 on InfiniBand whatever the table holds, so the plan's read
/// leaves InfiniBand GID tables unread: on a DGX-class host they are most of the
/// files (8 HCAs, 128 slots each), while the whole read holds their entries.
#[test]
fn nccl_envs_needs_read_no_infiniband_gid_table() {
    let mut ib_ports_with_gids = 0;
    for root in fixture_roots() {
        let name = root.display().to_string();
        let whole = discover_needs(&support::open(&root), Needs::ALL).unwrap();
        let nccl = discover_needs(&support::open(&root), Needs::NCCL_ENV).unwrap();
        for device in &nccl.rdma_devices {
            for port in &device.ports {
                if port.link_layer != Some(rdmatopo::parse::LinkLayer::InfiniBand) {
                    continue;
                }
                assert!(
                    port.gids.is_empty(),
                    "{name}: {} port {}",
                    device.name,
                    port.number
                );
                let held = whole.rdma_device(&device.name).unwrap();
                if held
                    .ports
                    .iter()
                    .any(|p| p.number == port.number && !p.gids.is_empty())
                {
                    ib_ports_with_gids += 1;
                }
            }
        }
    }
    // The fixtures hold InfiniBand hosts (h100-dgx, a100-hgx-4numa, azure-ndv5).
    assert!(ib_ports_with_gids >= 8, "{ib_ports_with_gids}");
}

/// The plan's fallbacks read what the fixtures' plans never need: with no default route
/// the bootstrap interface comes from the netdevs' state and addresses, and with no CPU
/// mask and no NUMA locality a rank's CPUs from the online CPUs. [`Needs::NCCL_ENV`]
/// must read those then.
#[test]
fn nccl_envs_needs_give_the_whole_plan_in_its_fallbacks() {
    let cases = [
        "pod-sriov",
        "dual-socket-pcie",
        "h100-dgx",
        "pod-macvlan-inbox",
    ];
    for (name, no_locality) in cases.iter().flat_map(|n| [(*n, false), (*n, true)]) {
        let archive = support::root(name);
        let mut tree = rdmatopo::snapshot::load(&archive).unwrap();
        // No default route (the connected routes stay), no CPU mask anywhere.
        let route = tree.text("/proc/net/route").unwrap().to_string();
        let route: String = route
            .lines()
            .filter(|l| l.split_whitespace().nth(1) != Some("00000000"))
            .map(|l| format!("{l}\n"))
            .collect();
        tree.file("/proc/net/route", &route);
        let status = tree.text("/proc/self/status").unwrap().to_string();
        let status: String = status
            .lines()
            .filter(|l| !l.starts_with("Cpus_allowed"))
            .map(|l| format!("{l}\n"))
            .collect();
        tree.file("/proc/self/status", &status);
        let cpusets: Vec<String> = tree
            .entries()
            .map(|(p, _)| p.to_string())
            .filter(|p| {
                p.ends_with("/cpuset.cpus.effective") || p.ends_with("/cpuset.effective_cpus")
            })
            .collect();
        for p in cpusets {
            tree.remove(&p);
        }
        if no_locality {
            let cpulists: Vec<String> = tree
                .entries()
                .map(|(p, _)| p.to_string())
                .filter(|p| p.ends_with("/cpulist") || p.ends_with("/local_cpulist"))
                .collect();
            for p in cpulists {
                tree.remove(&p);
            }
        }
        for view in [View::All, View::Owned] {
            let read = |needs| {
                let fs = Sysfs::memory(tree.clone(), name);
                discover_view(&fs, needs, view).unwrap()
            };
            let whole = plan_json(&read(Needs::ALL));
            assert!(
                whole.contains("no default route"),
                "{name} {view:?}: {whole}"
            );
            assert!(
                whole.contains("CPU set is unknown"),
                "{name} {view:?}: {whole}"
            );
            if no_locality {
                assert!(whole.contains("binding to 0-"), "{name} {view:?}: {whole}");
            }
            let nccl = plan_json(&read(Needs::NCCL_ENV));
            assert_eq!(nccl, whole, "{name} {view:?} (no locality: {no_locality})");
        }
    }
}

/// A PCI function's class and ids are taken from its `uevent` where that states them
/// all, and give the model the attribute files give: each fixture read again with
/// every `uevent` removed (a capture that leaves it out) holds the same functions with
/// the same ids, read through `class`, `vendor`, `device` and `subsystem_*`.
#[test]
fn pci_ids_from_uevent_are_the_attribute_files_ids() {
    for name in [
        "h100-dgx",
        "pod-h100-2gpu-2vf",
        "pod-sriov",
        "a100-hgx-4numa",
    ] {
        let archive = support::root(name);
        let tree = rdmatopo::snapshot::load(&archive).unwrap();
        let without = support::without_pci_uevents(&tree);
        let removed = tree.len() - without.len();
        assert!(removed > 100, "{name}: {removed} uevent files");
        for view in [View::All, View::Owned] {
            let read = |tree: &rdmatopo::sysfs::MemTree| {
                let fs = Sysfs::memory(tree.clone(), name).recording();
                let topo = discover_view(&fs, Needs::ALL, view).unwrap();
                let ids_read = fs
                    .journal()
                    .iter()
                    .filter(|p| p.ends_with("/subsystem_vendor"))
                    .count();
                (topo, ids_read)
            };
            let ((from_uevent, ids_read), (from_files, ids_read_without)) =
                (read(&tree), read(&without));
            assert_eq!(
                ids_read, 0,
                "{name} {view:?}: subsystem ids read from files"
            );
            assert!(ids_read_without > 0, "{name} {view:?}");
            // A whole read holds every function's subsystem ids (an owned view's
            // partial reads hold none).
            assert!(
                view == View::Owned || from_uevent.pci.iter().all(|f| f.subsystem_vendor.is_some()),
                "{name} {view:?}"
            );
            assert_eq!(from_uevent, from_files, "{name} {view:?}");
        }
    }
}
