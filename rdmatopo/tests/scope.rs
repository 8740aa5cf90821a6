//! `Scope::Affinity` reads a fraction of the files (what `rdmatopo topo` uses on a
//! host) and must give exactly the matrix and the container context of a full read,
//! on every fixture and on the fuzzers' base machine.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use rdmatopo::analysis::TopoMatrix;
use rdmatopo::analysis::container::ContainerView;
use rdmatopo::{Scope, Sysfs, Topology, discover_scope};
use std::path::{Path, PathBuf};

fn fixture_roots() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures");
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| Some(e.ok()?.path().join("root")))
        .filter(|p| p.is_dir())
        .collect();
    v.sort();
    v
}

/// Both scopes on one root: (full, affinity, files read by each).
fn both(open: impl Fn() -> Sysfs) -> (Topology, Topology, usize, usize) {
    let (fs_full, fs_aff) = (open(), open());
    let full = discover_scope(&fs_full, Scope::Full).unwrap();
    let aff = discover_scope(&fs_aff, Scope::Affinity).unwrap();
    (full, aff, fs_full.files_read(), fs_aff.files_read())
}

fn assert_same_answer(name: &str, full: &Topology, aff: &Topology) {
    assert_eq!(
        TopoMatrix::for_topology(aff),
        TopoMatrix::for_topology(full),
        "{name}: the affinity scope changed the matrix"
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
    assert_eq!(
        aff.process, full.process,
        "{name}: the process view is read whole"
    );
    assert_eq!(aff.numa_nodes, full.numa_nodes, "{name}");
    assert_eq!(aff.host_bridges, full.host_bridges, "{name}");
    let addrs = |t: &Topology| t.pci.iter().map(|f| f.address).collect::<Vec<_>>();
    assert_eq!(addrs(aff), addrs(full), "{name}: the same PCI functions");
}

#[test]
fn the_affinity_scope_gives_the_full_answer_on_every_fixture() {
    let roots = fixture_roots();
    assert!(roots.len() >= 5, "fixtures missing: {roots:?}");
    for root in roots {
        let name = root.display().to_string();
        let (full, aff, n_full, n_aff) = both(|| Sysfs::at(&root));
        assert_same_answer(&name, &full, &aff);
        assert!(n_aff <= n_full, "{name}: {n_aff} > {n_full} files");
        if full.gpus.len() >= 8 {
            // The point of the scope: on a DGX-class tree most files are GID slots,
            // link state and netdevs the matrix never looks at.
            assert!(n_aff * 4 < n_full, "{name}: {n_aff} of {n_full} files");
        }
    }
}

#[test]
fn the_affinity_scope_on_the_base_machine() {
    let (full, aff, _, _) = both(|| Sysfs::memory(rdmatopo::fuzzing::base_machine(), "base"));
    assert_same_answer("base", &full, &aff);
    assert!(aff.netdevs.is_empty() && aff.rdma_devices[0].ports.is_empty());
    assert_eq!(aff.rdma_devices[0].pci, full.rdma_devices[0].pci);
}
