//! The inventory JSON is the contract between Rust, Python and C: reading it back must
//! give the same model, on every fixture.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;
use rdmatopo::Topology;

#[test]
fn every_fixture_model_round_trips_through_json() {
    let mut checked = 0;
    for root in support::fixture_roots() {
        let topo = support::discover(&root);
        let back = Topology::from_json(&topo.to_json()).unwrap();
        assert!(
            back == topo,
            "{}: model differs after a JSON round trip",
            root.display()
        );
        checked += 1;
    }
    assert!(checked >= 8, "only {checked} fixtures");
}

/// `rdmatopo.inventory/1` wrote PCI ids and class as decimal numbers; version 2 writes
/// the sysfs text. A report from a node running the older release still reads back to
/// the same model (the README's N-1 rule), tagged with the current schema.
#[test]
fn inventory_version_1_with_decimal_ids_reads_back() {
    let root = support::root("dual-socket-pcie");
    let topo = support::discover(&root);
    let mut v2: serde_json::Value = serde_json::from_str(&rdmatopo::inventory_json(&topo)).unwrap();
    assert_eq!(v2["schema"], "rdmatopo.inventory/2");
    // The H100 PCIe (10de:2331, 3D controller) as its sysfs files spell it.
    let gpu_addr = topo.gpus[0].pci.to_string();
    let gpu = v2["pci"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["address"] == gpu_addr.as_str())
        .unwrap();
    let ids = ["vendor", "device", "class"].map(|k| gpu[k].as_str().unwrap_or("?"));
    assert_eq!(ids, ["0x10de", "0x2331", "0x030200"], "{gpu}");

    let mut v1 = v2.clone();
    v1["schema"] = "rdmatopo.inventory/1".into();
    for f in v1["pci"].as_array_mut().unwrap() {
        for key in [
            "class",
            "vendor",
            "device",
            "subsystem_vendor",
            "subsystem_device",
        ] {
            if let Some(hex) = f[key].as_str() {
                f[key] = u64::from_str_radix(&hex[2..], 16).unwrap().into();
            }
        }
    }
    assert!(v1["pci"][0]["vendor"].is_u64());
    let back = Topology::from_json(&v1.to_string()).unwrap();
    assert!(back == topo, "version 1 read back to another model");

    v2["schema"] = "rdmatopo.inventory/3".into();
    let err = Topology::from_json(&v2.to_string())
        .unwrap_err()
        .to_string();
    assert!(err.contains("rdmatopo.inventory/3"), "{err}");
}
