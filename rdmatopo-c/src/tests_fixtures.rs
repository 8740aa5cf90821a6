//! The binding against the core on every committed fixture: path classes and nearest
//! NICs agree with `TopoMatrix` (what `rdmatopo topo` prints), JSON with the model.

use crate::error::rdmatopo_status;
use crate::topology::{rdmatopo_topology, rdmatopo_topology_from_json};
use rdmatopo::TopoMatrix;
use std::path::PathBuf;
use std::sync::OnceLock;

fn fixtures_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fixtures")
}

/// Every fixture's archive (each folder of `fixtures/` but `tools/` must hold one).
fn fixtures() -> Vec<PathBuf> {
    let dir = fixtures_dir();
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| Some(e.ok()?.path()))
        .filter(|p| p.is_dir() && !p.ends_with("tools"))
        .map(|p| p.join("root.tar.gz"))
        .collect();
    v.sort();
    assert!(!v.is_empty(), "no fixtures under {}", dir.display());
    for archive in &v {
        assert!(
            archive.is_file(),
            "fixture without its archive: {}",
            archive.display()
        );
    }
    v
}

/// Every fixture's archive with its whole read, each discovered once for all the tests
/// here.
fn reads() -> &'static [(PathBuf, rdmatopo::Topology)] {
    static READS: OnceLock<Vec<(PathBuf, rdmatopo::Topology)>> = OnceLock::new();
    READS.get_or_init(|| {
        fixtures()
            .into_iter()
            .map(|root| {
                let topo = rdmatopo::Discovery::root(&root)
                    .view(rdmatopo::View::All)
                    .run()
                    .unwrap();
                (root, topo)
            })
            .collect()
    })
}

fn handle(topo: &rdmatopo::Topology) -> rdmatopo_topology {
    rdmatopo_topology::new(topo.clone()).unwrap()
}

#[test]
fn path_classes_match_the_topo_matrix() {
    for (root, topo) in reads() {
        let h = handle(topo);
        let m = TopoMatrix::for_topology(h.topology());
        for a in m.devices() {
            for b in m.devices() {
                let got = h.devices().class_between(a.pci, b.pci).unwrap();
                assert_eq!(
                    Some(got),
                    m.get(&a.name, &b.name),
                    "{}: {} to {}",
                    root.display(),
                    a.name,
                    b.name
                );
            }
        }
    }
}

#[test]
fn nearest_nics_are_the_closest_in_the_matrix_row() {
    for (root, topo) in reads() {
        let h = handle(topo);
        let m = TopoMatrix::for_topology(h.topology());
        let nics: Vec<_> = m.devices().iter().filter(|d| d.kind == "nic").collect();
        for gpu in m.devices().iter().filter(|d| d.kind == "gpu") {
            let result = h.devices().nearest_nics(gpu.pci);
            if nics.is_empty() {
                let err = crate::error::FfiError::from(result.unwrap_err());
                assert_eq!(err.status, rdmatopo_status::NotFound);
                continue;
            }
            let (got, class) = result.unwrap();
            let best = nics
                .iter()
                .filter_map(|n| m.get(&gpu.name, &n.name))
                .min_by_key(|c| c.rank())
                .unwrap();
            assert_eq!(class, best, "{}: {}", root.display(), gpu.name);
            let want: Vec<usize> = h
                .topology()
                .rdma_devices
                .iter()
                .enumerate()
                .filter(|(_, d)| {
                    nics.iter().any(|n| {
                        n.rdma.as_deref() == Some(d.name.as_str())
                            && m.get(&gpu.name, &n.name).map(|c| c.rank()) == Some(best.rank())
                    })
                })
                .map(|(i, _)| i)
                .collect();
            assert_eq!(got, want, "{}: {}", root.display(), gpu.name);
        }
    }
}

#[test]
fn json_round_trips_to_the_same_json() {
    for (root, topo) in reads() {
        let h = handle(topo);
        let json = std::ffi::CString::new(h.json().unwrap()).unwrap();
        let mut out = std::ptr::null_mut();
        // SAFETY: a valid string and out-pointer.
        let status = unsafe { rdmatopo_topology_from_json(json.as_ptr(), &mut out) };
        assert_eq!(status, rdmatopo_status::Ok);
        // SAFETY: set by the successful call above; freed once.
        let back = unsafe { Box::from_raw(out) };
        assert!(
            back.json().unwrap() == h.json().unwrap(),
            "{}",
            root.display()
        );
    }
}

#[test]
fn a_nul_in_a_model_string_is_a_parse_error_not_a_truncation() {
    let root = fixtures_dir().join("h100-dgx/root.tar.gz");
    let mut topo = rdmatopo::Discovery::root(&root)
        .view(rdmatopo::View::All)
        .run()
        .unwrap();
    let d = topo
        .rdma_devices
        .first_mut()
        .expect("h100-dgx has RDMA devices");
    d.name = "mlx5_0\0evil".into();
    let err = rdmatopo_topology::new(topo).unwrap_err();
    assert_eq!(err.status, rdmatopo_status::Parse);
    assert!(err.message.contains("NUL"), "{}", err.message);
}

/// The NUMA node the C accessors give a GPU is the NUMA Affinity column `rdmatopo topo`
/// prints (one rule, `Topology::numa_affinity`): that node when it is one, -1 when the
/// column is `N/A` or lists several.
#[test]
fn gpu_numa_nodes_match_the_topo_numa_affinity_column() {
    let mut derived = 0;
    for (root, topo) in reads() {
        let h = handle(topo);
        let topo = h.topology();
        let m = TopoMatrix::for_topology(topo);
        for (i, g) in topo.gpus.iter().enumerate() {
            let column = &m.numa_affinity[&format!("GPU{i}")];
            let want = column.parse::<i32>().unwrap_or(-1);
            let got = h.gpu_info(i).unwrap().numa_node;
            assert_eq!(
                got,
                want,
                "{}: GPU{i} NUMA Affinity {column}",
                root.display()
            );
            let f = topo.pci_function(g.pci).unwrap();
            derived += usize::from(f.numa_node.is_none() && got >= 0);
        }
    }
    // fixtures/workstation-2gpu: numa_node -1, node 0 from local_cpulist.
    assert!(derived >= 2, "no GPU took its node from its local CPUs");
}
