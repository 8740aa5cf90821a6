//! The fixture builder (`fixtures/tools/sysfs_builder.py`) classifies every GPU/NIC
//! pair from the layout it writes, independently of this crate, into
//! `fixtures/<name>/expected-topo.txt`. The matrix rdmatopo reads back from the tree
//! must agree cell by cell (rows and columns matched by GPU PCI order and RDMA name,
//! so the two may list NICs in different orders).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;
use rdmatopo::view::TopoMatrix;
use rdmatopo::view::container::ContainerView;
use std::collections::BTreeMap;

type Cells = BTreeMap<(String, String), String>;

/// Parse an nvidia-smi style table into cells keyed by device name, with `NICn`
/// replaced by the RDMA device name from the NIC legend.
fn parse_table(text: &str) -> Cells {
    let legend: BTreeMap<String, String> = text
        .lines()
        .filter_map(|l| {
            let (nic, dev) = l.trim().split_once(": ")?;
            nic.starts_with("NIC")
                .then(|| (nic.to_string(), dev.to_string()))
        })
        .collect();
    let name = |n: &str| legend.get(n).cloned().unwrap_or_else(|| n.to_string());
    let mut lines = text.lines().filter(|l| !l.starts_with('#'));
    let header: Vec<String> = lines
        .next()
        .unwrap_or_default()
        .split('\t')
        .filter(|h| h.starts_with("GPU") || h.starts_with("NIC"))
        .filter(|h| !h.contains(' '))
        .map(name)
        .collect();
    let mut cells = Cells::new();
    for line in lines.take_while(|l| !l.trim().is_empty()) {
        let fields: Vec<&str> = line.split('\t').collect();
        let row = name(fields[0]);
        for (col, cell) in header.iter().zip(&fields[1..]) {
            cells.insert((row.clone(), col.clone()), cell.trim().to_string());
        }
    }
    cells
}

#[test]
fn matrices_agree_with_the_builders_independent_classification() {
    let mut checked = 0;
    for fixture in support::fixture_dirs() {
        let topo = support::discover(&fixture.join("root.tar.gz"));
        let Ok(expected) = std::fs::read_to_string(fixture.join("expected-topo.txt")) else {
            // Only a machine with nothing to classify may go without the builder's matrix.
            assert!(
                topo.gpus.is_empty() && topo.rdma_devices.is_empty(),
                "{}: GPUs or RDMA devices but no expected-topo.txt from the builder",
                fixture.display()
            );
            continue;
        };
        // "(PCIe only)" tables leave NVLink out: GPU pairs there are not comparable.
        let pcie_only = expected
            .lines()
            .next()
            .is_some_and(|l| l.contains("PCIe only"));
        let mut expected = parse_table(&expected);
        if pcie_only {
            expected.retain(|(r, c), _| !(r.starts_with("GPU") && c.starts_with("GPU") && r != c));
        }
        // The builder lists the devices a matrix should show (a pod's own, or all).
        let mut gpus: Vec<String> = expected
            .keys()
            .map(|(r, _)| r.clone())
            .filter(|r| r.starts_with("GPU"))
            .collect();
        gpus.dedup();
        let mut nics: Vec<String> = expected
            .keys()
            .map(|(r, _)| r.clone())
            .filter(|r| !r.starts_with("GPU"))
            .collect();
        nics.dedup();
        // A pod's table shows its own GPUs, renumbered from 0 in PCI order.
        let view = ContainerView::of(&topo);
        let mut gpu_addrs: Vec<_> = topo.gpus.iter().map(|g| g.pci).collect();
        if gpus.len() < gpu_addrs.len() {
            gpu_addrs = view.owned_gpus();
        }
        assert_eq!(
            gpu_addrs.len(),
            gpus.len(),
            "{}: GPUs in view",
            fixture.display()
        );
        let nic_names: Vec<&str> = nics.iter().map(String::as_str).collect();
        let mut ours = parse_table(&rdmatopo::export::table::nvidia_smi_table(
            &TopoMatrix::build(&topo, &gpu_addrs, &nic_names),
            false,
        ));
        if pcie_only {
            ours.retain(|(r, c), _| !(r.starts_with("GPU") && c.starts_with("GPU") && r != c));
        }
        let differing: Vec<String> = expected
            .iter()
            .filter(|(k, v)| ours.get(*k) != Some(*v))
            .map(|((r, c), v)| {
                format!(
                    "{r}/{c}: builder {v}, rdmatopo {:?}",
                    ours.get(&(r.clone(), c.clone()))
                )
            })
            .take(10)
            .collect();
        assert!(
            differing.is_empty() && ours.len() == expected.len(),
            "{}: {differing:#?}",
            fixture.display()
        );
        // The class of each pair as the public API answers it, cell by cell against
        // the builder (not against the matrix, which shares its code).
        let devices = rdmatopo::view::Devices::of(&topo);
        let pci_of = |name: &str| {
            name.strip_prefix("GPU")
                .and_then(|i| i.parse::<usize>().ok())
                .map(|i| gpu_addrs[i])
                .or_else(|| topo.rdma_devices.iter().find(|d| d.name == name)?.pci)
        };
        for ((row, col), cell) in &expected {
            if row == col || cell == "X" {
                continue;
            }
            let (Some(a), Some(b)) = (pci_of(row), pci_of(col)) else {
                panic!("{}: no PCI function for {row} or {col}", fixture.display());
            };
            let class = devices.class_between(a, b).map(|c| c.to_string());
            assert_eq!(
                class.as_deref(),
                Ok(cell.as_str()),
                "{}: class_between({row}, {col})",
                fixture.display()
            );
        }
        checked += 1;
    }
    assert!(checked > 0, "no fixture carries expected-topo.txt");
}
