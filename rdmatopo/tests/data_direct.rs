//! ConnectX-8 Data Direct (issue 49, item 2): the two places of one NIC.
//!
//! `fixtures/gb300-cx8-dd` is a GB300 tray whose ConnectX-8 PFs sit on Grace root ports
//! of their own while each card's Data Direct DMA function shares the GPU's PCIe switch
//! (rdma-core kernel-boot/rdma_topo; the fixture's README). nvidia-smi places `mlx5_0` at
//! its PF, NODE from GPU0; NCCL 2.28+ under `NCCL_IB_DATA_DIRECT=1` (its default) exposes
//! only `mlx5_0_dma`, at the DMA function (src/transport/net_ib/init.cc, v2.30.7-1), PXB
//! from GPU0, where GPUDirect RDMA is on by default. `=0` puts NCCL back at the PF.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;
use rdmatopo::Topology;
use rdmatopo::parse::PciAddr;
use rdmatopo::view::affinity::TopoMatrix;
use rdmatopo::view::plan::{Plan, PlanOptions};
use std::path::PathBuf;

fn tray() -> Topology {
    support::discover(&support::root("gb300-cx8-dd"))
}

#[test]
fn each_rdma_device_names_its_dma_function() {
    let topo = tray();
    for (dev, dma) in [
        ("mlx5_0", "0008:03:00.0"),
        ("mlx5_1", "0009:03:00.0"),
        ("mlx5_2", "0018:03:00.0"),
        ("mlx5_3", "0019:03:00.0"),
    ] {
        let d = topo.rdma_device(dev).unwrap();
        assert_eq!(
            d.data_direct,
            Some(dma.parse::<PciAddr>().unwrap()),
            "{dev}"
        );
        // Placed in the tree, so NCCL's distance to it can be measured.
        assert!(topo.pci_function(d.data_direct.unwrap()).is_some(), "{dev}");
    }
    let json: serde_json::Value = serde_json::from_str(&rdmatopo::inventory_json(&topo)).unwrap();
    let devices = json["rdma_devices"].as_array().unwrap();
    assert_eq!(devices[0]["data_direct"], "0008:03:00.0");
}

#[test]
fn nvidia_smi_places_the_nic_at_its_pf() {
    let m = TopoMatrix::for_topology(&tray());
    assert_eq!(
        m.get("GPU0", "NIC0").map(|c| c.to_string()).as_deref(),
        Some("NODE")
    );
}

fn plan(env: &[(&str, &str)]) -> Plan {
    let mut topo = tray();
    topo.process
        .env
        .extend(env.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    let opts = PlanOptions {
        env: topo.process.env.clone(),
        ..Default::default()
    };
    Plan::compute(&topo, &opts).unwrap()
}

#[test]
fn nccl_places_the_nic_at_its_dma_function_by_default() {
    let p = plan(&[]);
    for (r, dev) in ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"].iter().enumerate() {
        let rank = &p.ranks[r];
        assert_eq!(rank.hcas, vec![format!("{dev}:1")], "rank {r}");
        assert!(
            rank.reasons
                .iter()
                .any(|s| s.contains(&format!("{dev}:1 is PXB"))),
            "rank {r}: {:?}",
            rank.reasons
        );
    }
    // NCCL_IB_HCA names the verbs devices, never the _dma names.
    assert_eq!(p.env["NCCL_IB_HCA"], "=mlx5_0:1,mlx5_1:1,mlx5_2:1,mlx5_3:1");
    let note = p.notes.iter().find(|n| n.contains("Data Direct")).unwrap();
    assert!(note.contains("mlx5_0_dma (0008:03:00.0)"), "{note}");
}

#[test]
fn data_direct_off_puts_nccl_back_at_the_pf() {
    let p = plan(&[("NCCL_IB_DATA_DIRECT", "0")]);
    assert!(
        p.ranks[0].reasons.iter().all(|s| !s.contains("is PXB")),
        "{:?}",
        p.ranks[0].reasons
    );
    assert!(
        p.ranks[0].reasons.iter().any(|s| s.contains("NODE")),
        "{:?}",
        p.ranks[0].reasons
    );
    let note = p.notes.iter().find(|n| n.contains("Data Direct")).unwrap();
    assert!(note.contains("at its PF"), "{note}");
    // 2 exposes both; the DMA function is the closer.
    let both = plan(&[("NCCL_IB_DATA_DIRECT", "2")]);
    assert!(
        both.ranks[0]
            .reasons
            .iter()
            .any(|s| s.contains("mlx5_0:1 is PXB"))
    );
}

#[test]
fn the_topology_file_names_the_dma_device_where_nccl_finds_it() {
    use rdmatopo::export::nccl_xml::{XmlOptions, write};
    use rdmatopo::view::plan::DataDirect;
    let topo = tray();
    let xml = |data_direct| {
        write(
            &topo,
            &XmlOptions {
                nets: true,
                data_direct,
                ..Default::default()
            },
        )
    };
    let dma = xml(DataDirect::DmaOnly);
    let at = dma
        .find("<pci busid=\"0008:03:00.0\" class=\"0x080100\"")
        .unwrap();
    let net = dma.find("<net name=\"mlx5_0_dma\"").unwrap();
    assert!(at < net && !dma[at..net].contains("</pci>"), "{dma}");
    assert!(!dma.contains("busid=\"0000:01:00.0\""), "{dma}");
    let off = xml(DataDirect::Off);
    assert!(off.contains("<net name=\"mlx5_0\""), "{off}");
    assert!(
        !off.contains("_dma") && !off.contains("0008:03:00.0"),
        "{off}"
    );
    let both = xml(DataDirect::Both);
    assert!(both.contains("<net name=\"mlx5_0\"") && both.contains("<net name=\"mlx5_0_dma\""));
}

/// NVLink-C2C (NVML counts the tray's GPUs' links): with Data Direct off, each GPU's
/// NIC hangs from its own Grace, NODE here and P2C in NCCL (src/graph/paths.cc,
/// v2.30.7-1), where NCCL_NET_GDR_C2C=1 (default since 2.27.3) keeps GPUDirect RDMA on.
#[test]
fn a_c2c_attached_gpu_gets_gpudirect_at_p2c() {
    let note = |p: &Plan| p.notes.iter().find(|n| n.contains("P2C")).cloned();
    // Data Direct puts the NIC at PXB, closer than P2C: nothing to say.
    assert_eq!(note(&plan(&[])), None);
    let p = plan(&[("NCCL_IB_DATA_DIRECT", "0")]);
    let n = note(&p).expect("a P2C note");
    assert!(
        n.contains("0008:06:00.0") && n.contains("NCCL_NET_GDR_C2C=1"),
        "{n}"
    );
    let off = plan(&[("NCCL_IB_DATA_DIRECT", "0"), ("NCCL_NET_GDR_C2C", "0")]);
    assert!(note(&off).unwrap().contains("turns GPUDirect RDMA off"));
}

/// The DGX Spark fixture holds no NVML facts; its GPU hangs from the GB10's own
/// `10de:22d1` bridge. The doctor used to call its NODE NIC "no GPUDirect RDMA".
#[test]
fn doctor_on_dgx_spark_names_p2c_not_a_gdr_loss() {
    let archive = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures"))
        .join("dgx-spark")
        .join("root.tar.gz");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_rdmatopo"))
        .args(["doctor", "--format", "json", "--root"])
        .arg(&archive)
        .env_clear()
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    let dist = json["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["check"] == "gpu-nic-distance")
        .unwrap_or_else(|| panic!("{text}"));
    let s = dist.to_string();
    assert!(s.contains("P2C") && s.contains("000f:00:00.0"), "{s}");
    assert!(!s.contains("will not use GPUDirect RDMA"), "{s}");
}
