//! The live NVML and libibverbs sources on the machine running the tests, and the
//! snapshot form of their facts.
//!
//! Without an NVIDIA driver (no `/dev/nvidiactl`) NVML must say Unavailable with a
//! message that tells the user why; without an RDMA subsystem (no
//! `/sys/class/infiniband_verbs`) verbs must too. Where the hardware is present the
//! sources must return facts instead, and those are checked for sense.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use rdmatopo::model::{
    Gid, MigMode, NvLink, NvLinkRemote, NvmlGpu, NvmlPcie, NvmlSnapshot, TopologyLevel,
    VerbsDevice, VerbsPort, VerbsSnapshot,
};
use rdmatopo::parse::{GidType, PciAddr};
use rdmatopo::sysfs::{MemTree, Sysfs};
use std::path::Path;

fn nvidia_driver_present() -> bool {
    Path::new("/dev/nvidiactl").exists()
}

fn rdma_subsystem_present() -> bool {
    Path::new("/sys/class/infiniband_verbs").exists()
}

/// The live NVML source of this build: NVML in process, or (the static musl build, which
/// cannot load the driver's library) through the `rdmatopo-nvml` helper.
#[cfg(all(feature = "nvml", not(target_env = "musl")))]
fn live_nvml() -> Box<dyn rdmatopo::sources::FactSource> {
    Box::new(rdmatopo::sources::nvml::LiveNvml)
}

#[cfg(all(feature = "nvml", target_env = "musl"))]
fn live_nvml() -> Box<dyn rdmatopo::sources::FactSource> {
    Box::new(rdmatopo::sources::nvml_helper::NvmlHelper::default())
}

#[cfg(feature = "nvml")]
#[test]
fn live_nvml_is_unavailable_without_a_driver() {
    use rdmatopo::sources::{Facts, SourceError};
    let result = live_nvml().collect(&Sysfs::live());
    match result {
        Ok(Facts::Nvml(s)) => {
            assert!(
                nvidia_driver_present(),
                "NVML answered without /dev/nvidiactl"
            );
            assert!(!s.gpus.is_empty());
            for g in &s.gpus {
                assert!(g.pci().is_some(), "unparsable NVML bus id {:?}", g.bus_id);
            }
        }
        Ok(other) => panic!("NVML source returned {other:?}"),
        Err(SourceError::Unavailable(msg)) => {
            assert!(msg.starts_with("NVML: "), "{msg}");
            assert!(msg.len() > 40, "message too terse to act on: {msg}");
            if !nvidia_driver_present() {
                assert!(
                    msg.contains("libnvidia-ml") || msg.contains("driver"),
                    "should say the driver is missing: {msg}"
                );
            }
        }
        Err(e) => assert!(
            nvidia_driver_present(),
            "without a driver NVML must be Unavailable, not {e:?}"
        ),
    }
}

#[cfg(feature = "verbs")]
#[test]
fn live_verbs_is_unavailable_without_rdma() {
    use rdmatopo::sources::{FactSource, Facts, SourceError};
    let result = rdmatopo::sources::verbs::LiveVerbs.collect(&Sysfs::live());
    match result {
        Ok(Facts::Verbs(s)) => {
            assert!(
                rdma_subsystem_present(),
                "verbs answered without RDMA sysfs"
            );
            assert!(!s.devices.is_empty());
        }
        Ok(other) => panic!("verbs source returned {other:?}"),
        Err(SourceError::Unavailable(msg)) => {
            assert!(msg.starts_with("verbs: "), "{msg}");
            if !rdma_subsystem_present() {
                assert!(msg.contains("no RDMA subsystem"), "{msg}");
                assert!(msg.contains("Function not implemented"), "{msg}");
            }
        }
        Err(e) => assert!(
            rdma_subsystem_present(),
            "without RDMA, verbs must be Unavailable, not {e:?}"
        ),
    }
}

/// Discovery of the live root never fails because a library is missing: the missing
/// source is an info diagnostic and the rest of the model is there.
#[test]
fn live_discovery_degrades_to_sysfs() {
    let topo = rdmatopo::discover(None).expect("live discovery");
    let unavailable: Vec<&str> = topo
        .diagnostics
        .iter()
        .filter(|d| d.code == "source-unavailable")
        .map(|d| d.message.as_str())
        .collect();
    if cfg!(feature = "nvml") && !nvidia_driver_present() {
        assert!(topo.nvml.is_none());
        assert!(
            unavailable.iter().any(|m| m.starts_with("NVML: ")),
            "{unavailable:?}"
        );
    }
    if cfg!(feature = "verbs") && !rdma_subsystem_present() {
        assert!(topo.verbs.is_none());
        assert!(
            unavailable.iter().any(|m| m.starts_with("verbs: ")),
            "{unavailable:?}"
        );
    }
    assert!(!topo.pci.is_empty() || !Path::new("/sys/bus/pci/devices").exists());
}

fn nvml_facts() -> NvmlSnapshot {
    NvmlSnapshot {
        schema: NvmlSnapshot::SCHEMA.into(),
        driver_version: Some("550.54.15".into()),
        cuda_driver_version: Some(12040),
        device_count: None,
        gpus: vec![NvmlGpu {
            index: 0,
            bus_id: "00000000:03:00.0".into(),
            name: Some("NVIDIA H100 80GB HBM3".into()),
            uuid: Some("GPU-00000000-1111-2222-3333-444444444444".into()),
            minor_number: Some(0),
            numa_node: Some(0),
            cpu_affinity: Some("0-7".parse().unwrap()),
            mig_mode: Some(MigMode {
                current: true,
                pending: true,
                instances: 3,
                uuids: vec!["MIG-5c0f2d1e-7a3b-5e8f-9b1c-2d3e4f5a6b7c".into()],
            }),
            pcie: Some(NvmlPcie {
                max_gen: Some(5),
                max_width: Some(16),
                current_gen: Some(5),
                current_width: Some(16),
            }),
            nvlinks: vec![
                NvLink {
                    link: 0,
                    active: true,
                    remote_bus_id: Some("00000000:A4:00.0".into()),
                    remote_kind: NvLinkRemote::Nvswitch,
                },
                NvLink {
                    link: 1,
                    active: false,
                    remote_bus_id: None,
                    remote_kind: NvLinkRemote::Unknown,
                },
            ],
            topology: [("00000000:04:00.0".to_string(), TopologyLevel::Single)]
                .into_iter()
                .collect(),
            c2c_links: None,
        }],
    }
}

fn verbs_facts() -> VerbsSnapshot {
    VerbsSnapshot {
        schema: VerbsSnapshot::SCHEMA.into(),
        devices: vec![VerbsDevice {
            name: "mlx5_0".into(),
            max_qp: Some(131072),
            max_cq: Some(16777216),
            max_mr: Some(16777216),
            max_srq: Some(8388608),
            ports: vec![VerbsPort {
                port: 1,
                state: Some("ACTIVE".into()),
                active_mtu: Some(4096),
                max_mtu: Some(4096),
                link_layer: Some("Ethernet".into()),
                active_speed: Some(128),
                active_width: Some(2),
                gid_tbl_len: Some(255),
                gids: vec![Gid {
                    index: 3,
                    gid: "0000:0000:0000:0000:0000:ffff:0a00:0001".into(),
                    ipv4: Some("10.0.0.1".into()),
                    gid_type: Some(GidType::RoceV2),
                    netdev: None,
                }],
            }],
        }],
        device_index: [("mlx5_0".to_string(), 7)].into_iter().collect(),
    }
}

/// A capture replays the facts exactly: what the live sources produce, serialised into
/// `rdmatopo/nvml.json` and `rdmatopo/verbs.json`, comes back unchanged.
#[test]
fn snapshots_round_trip_through_a_capture() {
    let nvml = nvml_facts();
    let verbs = verbs_facts();
    let mut t = MemTree::new();
    t.dir("/sys/class")
        .file(
            rdmatopo::sources::NVML_SNAPSHOT_PATH,
            &serde_json::to_string_pretty(&nvml).unwrap(),
        )
        .file(
            rdmatopo::sources::VERBS_SNAPSHOT_PATH,
            &serde_json::to_string_pretty(&verbs).unwrap(),
        );
    let fs = Sysfs::memory(t, "capture");
    let topo = rdmatopo::discover_fs(&fs).unwrap();
    assert_eq!(topo.nvml.as_ref(), Some(&nvml));
    assert_eq!(topo.verbs.as_ref(), Some(&verbs));
    // And through the whole model's JSON.
    let back = rdmatopo::Topology::from_json(&topo.to_json()).unwrap();
    assert_eq!(back.nvml, Some(nvml));
    assert_eq!(back.verbs, Some(verbs));
    assert_eq!(
        back.nvml.unwrap().gpus[0].pci(),
        Some(PciAddr::new(0, 3, 0, 0))
    );
}
