//! A PF's VFs are placed by its `sriov_offset` and `sriov_stride` (two files) rather
//! than read from a `virtfn<N>` link each: on every fixture, the placed VFs must be
//! exactly the functions the links name, in link order.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;
use rdmatopo::parse::PciAddr;
use rdmatopo::{Needs, discover_needs};

#[test]
fn vfs_placed_by_offset_and_stride_are_the_virtfn_links_on_every_fixture() {
    let mut placed = 0;
    for root in support::fixture_roots() {
        let fs = support::open(&root);
        let topo = discover_needs(&fs, Needs::ALL).unwrap();
        for pf in &topo.pci {
            let Some(sriov) = &pf.sriov else { continue };
            let dir = format!("/sys/bus/pci/devices/{}", pf.address);
            let links: Vec<PciAddr> = (0..)
                .map_while(|i| fs.read_link(&format!("{dir}/virtfn{i}")).ok())
                .map(|t| t.rsplit('/').next().unwrap().parse().unwrap())
                .collect();
            assert_eq!(sriov.vfs, links, "{}: {}", root.display(), pf.address);
            placed += usize::from(!links.is_empty() && fs.exists(&format!("{dir}/sriov_stride")));
        }
    }
    assert!(placed > 0, "no fixture has a PF with VFs and sriov_stride");
}

#[test]
fn a_vf_routing_id_crosses_into_the_next_bus() {
    let pf: PciAddr = "0000:3b:00.0".parse().unwrap();
    assert_eq!(pf.virtfn(2, 1, 0), Some("0000:3b:00.2".parse().unwrap()));
    assert_eq!(pf.virtfn(2, 1, 254), Some("0000:3c:00.0".parse().unwrap()));
    let pf1: PciAddr = "0000:3b:00.1".parse().unwrap();
    assert_eq!(
        pf1.virtfn(0x80, 2, 3),
        Some("0000:3b:10.7".parse().unwrap())
    );
    assert_eq!(
        "0000:ff:00.0".parse::<PciAddr>().unwrap().virtfn(2, 1, 300),
        None
    );
}
