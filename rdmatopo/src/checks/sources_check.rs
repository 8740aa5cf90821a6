//! Cross-checks of the NVML and libibverbs facts against sysfs. Where two sources
//! disagree one of them is wrong, so each diagnostic says which source said what and
//! which one the rest of rdmatopo uses (sysfs, for every PCIe class and port fact).

use crate::model::{
    Diagnostic, NvmlSnapshot, Port, RdmaDevice, Severity, Topology, TopologyLevel, VerbsDevice,
    VerbsPort, VerbsSnapshot,
};
use crate::parse::{PciAddr, PortState};
use crate::view::GpuNames;
use crate::view::PathClass;
use crate::view::affinity::path_class;

/// Every disagreement between NVML or verbs facts (when the model has them) and the
/// sysfs facts of the same model.
pub fn check_sources(topo: &Topology) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    if let Some(nvml) = &topo.nvml {
        check_nvml(topo, nvml, &mut out);
    }
    if let Some(verbs) = &topo.verbs {
        check_verbs(topo, verbs, &mut out);
    }
    out
}

/// The `nvidia-smi topo -m` class that an NVML common-ancestor level stands for.
/// `Internal` (two GPUs of one board, behind the board's own switch) is `PIX`.
pub fn level_class(level: TopologyLevel) -> PathClass {
    match level {
        TopologyLevel::Internal | TopologyLevel::Single => PathClass::Pix,
        TopologyLevel::Multiple => PathClass::Pxb,
        TopologyLevel::Hostbridge => PathClass::Phb,
        TopologyLevel::Node => PathClass::Node,
        TopologyLevel::System => PathClass::Sys,
    }
}

fn pci_device_path(addr: PciAddr) -> String {
    format!("/sys/bus/pci/devices/{addr}")
}

/// `GPU3 (0000:3b:00.0)` as every answer names the GPU ([`GpuNames`]), or `GPU
/// 0000:3b:00.0` when sysfs does not know it.
fn gpu_label(topo: &Topology, addr: PciAddr) -> String {
    match topo.gpus.iter().find(|g| g.pci == addr) {
        Some(g) => GpuNames::of(topo).label(g),
        None => format!("GPU {addr}"),
    }
}

fn check_nvml(topo: &Topology, nvml: &NvmlSnapshot, out: &mut Vec<Diagnostic>) {
    for gpu in &nvml.gpus {
        let Some(addr) = gpu.pci() else {
            out.push(Diagnostic::new(
                Severity::Warning,
                "nvml-bad-bus-id",
                None,
                format!(
                    "NVML reports GPU {} with bus id {:?}, which is not a PCI address; its NVML facts are not used",
                    gpu.index, gpu.bus_id
                ),
            ));
            continue;
        };
        let Some(fa) = topo.pci_function(addr) else {
            out.push(Diagnostic::new(
                Severity::Warning,
                "nvml-gpu-not-in-sysfs",
                Some(&pci_device_path(addr)),
                format!(
                    "NVML reports GPU {} ({}) at {}, but sysfs has no PCI function there; its NVML facts are not used",
                    gpu.index,
                    gpu.name.as_deref().unwrap_or("unnamed"),
                    gpu.bus_id
                ),
            ));
            continue;
        };
        for (other, level) in &gpu.topology {
            // Each pair once, from the lower address.
            let Some(fb) = other
                .parse::<PciAddr>()
                .ok()
                .filter(|b| *b > addr)
                .and_then(|b| topo.pci_function(b))
            else {
                continue;
            };
            let sysfs = path_class(topo, fa, fb);
            let said = level_class(*level);
            if sysfs != said {
                out.push(Diagnostic::new(
                    Severity::Warning,
                    "nvml-topology-mismatch",
                    Some(&pci_device_path(addr)),
                    format!(
                        "{} and {}: NVML (nvmlDeviceGetTopologyCommonAncestor) says {said}, the sysfs PCIe tree says {sysfs}; the matrix shows the sysfs class",
                        gpu_label(topo, addr),
                        gpu_label(topo, fb.address)
                    ),
                ));
            }
        }
    }
}

/// The name sysfs `state` prints for a state.
fn sysfs_state_name(s: PortState) -> &'static str {
    match s {
        PortState::Nop => "NOP",
        PortState::Down => "DOWN",
        PortState::Init => "INIT",
        PortState::Armed => "ARMED",
        PortState::Active => "ACTIVE",
        PortState::ActiveDefer => "ACTIVE_DEFER",
        PortState::Unknown => "UNKNOWN",
    }
}

fn check_verbs(topo: &Topology, verbs: &VerbsSnapshot, out: &mut Vec<Diagnostic>) {
    for dev in &verbs.devices {
        let dir = format!("/sys/class/infiniband/{}", dev.name);
        let Some(sysfs_dev) = topo.rdma_device(&dev.name) else {
            out.push(Diagnostic::new(
                Severity::Warning,
                "verbs-device-not-in-sysfs",
                Some(&dir),
                format!("libibverbs lists {}, but sysfs has no {dir}", dev.name),
            ));
            continue;
        };
        for port in &dev.ports {
            match sysfs_dev.ports.iter().find(|p| p.number == port.port) {
                Some(sysfs_port) => check_port(dev, port, sysfs_port, &dir, out),
                None => out.push(Diagnostic::new(
                    Severity::Warning,
                    "verbs-port-not-in-sysfs",
                    Some(&format!("{dir}/ports/{}", port.port)),
                    format!(
                        "libibverbs reports port {} of {}, but sysfs does not list it",
                        port.port, dev.name
                    ),
                )),
            }
        }
    }
    for sysfs_dev in &topo.rdma_devices {
        if !verbs.devices.iter().any(|d| d.name == sysfs_dev.name) {
            out.push(missing_from_verbs(sysfs_dev));
        }
    }
}

fn missing_from_verbs(dev: &RdmaDevice) -> Diagnostic {
    let node = dev.uverbs.as_deref().map_or_else(
        || "its /dev/infiniband/uverbs* node".to_string(),
        |u| format!("/dev/infiniband/{u}"),
    );
    Diagnostic::new(
        Severity::Info,
        "verbs-device-missing",
        Some(&format!("/sys/class/infiniband/{}", dev.name)),
        format!(
            "{} is in sysfs but libibverbs did not report it ({node} could not be opened or queried, or no provider library for it)",
            dev.name
        ),
    )
}

fn check_port(
    dev: &VerbsDevice,
    port: &VerbsPort,
    sysfs_port: &Port,
    dir: &str,
    out: &mut Vec<Diagnostic>,
) {
    let at = |f: &str| format!("{dir}/ports/{}/{f}", port.port);
    let what = format!("{} port {}", dev.name, port.port);
    let mut mismatch = |code: &str, path: String, field: &str, verbs: &str, sysfs: &str| {
        out.push(Diagnostic::new(
            Severity::Warning,
            code,
            Some(&path),
            format!(
                "{what}: libibverbs ({field}) says {verbs}, sysfs says {sysfs}; rdmatopo uses the sysfs value"
            ),
        ));
    };
    if let (Some(v), Some(s)) = (&port.state, sysfs_port.state) {
        let s = sysfs_state_name(s);
        if v != s {
            mismatch(
                "verbs-port-state-mismatch",
                at("state"),
                "ibv_query_port",
                v,
                s,
            );
        }
    }
    if let (Some(v), Some(s)) = (&port.link_layer, sysfs_port.link_layer)
        && v != s.as_str()
    {
        mismatch(
            "verbs-link-layer-mismatch",
            at("link_layer"),
            "ibv_query_port",
            v,
            s.as_str(),
        );
    }
    for vg in &port.gids {
        let Some(sg) = sysfs_port.gids.iter().find(|g| g.index == vg.index) else {
            continue;
        };
        if vg.gid != sg.gid {
            mismatch(
                "verbs-gid-mismatch",
                at(&format!("gids/{}", vg.index)),
                &format!("GID {}", vg.index),
                &vg.gid,
                &sg.gid,
            );
        }
        if let (Some(v), Some(s)) = (vg.gid_type, sg.gid_type)
            && v != s
        {
            mismatch(
                "verbs-gid-type-mismatch",
                at(&format!("gid_attrs/types/{}", vg.index)),
                &format!("type of GID {}", vg.index),
                v.as_str(),
                s.as_str(),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Discoverer;
    use crate::model::{Gid, NvmlGpu};
    use crate::parse::GidType;
    use crate::sysfs::{MemTree, Sysfs};
    use std::collections::BTreeMap;

    /// Add a PCI function at canonical `path` with its `/sys/bus/pci/devices` link.
    fn function(t: &mut MemTree, path: &str, class: &str, device: &str, numa: i32) {
        let addr = path.rsplit('/').next().unwrap();
        t.file(&format!("{path}/vendor"), "0x10de\n")
            .file(&format!("{path}/device"), &format!("{device}\n"))
            .file(&format!("{path}/class"), &format!("{class}\n"))
            .file(&format!("{path}/numa_node"), &format!("{numa}\n"))
            .link(
                &format!("/sys/bus/pci/devices/{addr}"),
                &format!("../../..{}", path.strip_prefix("/sys").unwrap()),
            );
    }

    /// Two GPUs under one switch on NUMA node 0 (PIX to each other), a third on node 1
    /// (SYS), and one InfiniBand port.
    fn machine() -> Topology {
        let mut t = MemTree::new();
        t.file("/sys/devices/system/node/node0/cpulist", "0-7\n")
            .file("/sys/devices/system/node/node1/cpulist", "8-15\n");
        let rp = "/sys/devices/pci0000:00/0000:00:01.0";
        let up = format!("{rp}/0000:01:00.0");
        function(&mut t, rp, "0x060400", "0x1234", 0);
        function(&mut t, &up, "0x060400", "0x1234", 0);
        for (down, gpu) in [
            ("0000:02:00.0", "0000:03:00.0"),
            ("0000:02:01.0", "0000:04:00.0"),
        ] {
            let d = format!("{up}/{down}");
            function(&mut t, &d, "0x060400", "0x1234", 0);
            function(&mut t, &format!("{d}/{gpu}"), "0x030200", "0x2330", 0);
        }
        let rp1 = "/sys/devices/pci0000:80/0000:80:01.0";
        function(&mut t, rp1, "0x060400", "0x1234", 1);
        function(
            &mut t,
            &format!("{rp1}/0000:81:00.0"),
            "0x030200",
            "0x2330",
            1,
        );
        let port = "/sys/class/infiniband/mlx5_0/ports/1";
        t.file(&format!("{port}/state"), "4: ACTIVE\n")
            .file(&format!("{port}/link_layer"), "InfiniBand\n")
            .file(
                &format!("{port}/gids/0"),
                "fe80:0000:0000:0000:a088:c203:0045:1234\n",
            )
            .file(&format!("{port}/gid_attrs/types/0"), "IB/RoCE v1\n");
        let fs = Sysfs::memory(t, "test");
        Discoverer::new(&fs)
            .cross_check(check_sources)
            .discover()
            .unwrap()
    }

    fn nvml_gpu(bus_id: &str, topology: &[(&str, TopologyLevel)]) -> NvmlGpu {
        NvmlGpu {
            name: Some("NVIDIA H100 80GB HBM3".into()),
            topology: topology
                .iter()
                .map(|(b, l)| (b.to_string(), *l))
                .collect::<BTreeMap<_, _>>(),
            ..NvmlGpu::new(0, bus_id)
        }
    }

    fn codes(d: &[Diagnostic]) -> Vec<&str> {
        d.iter().map(|d| d.code.as_str()).collect()
    }

    #[test]
    fn agreeing_nvml_levels_give_nothing() {
        let mut topo = machine();
        assert_eq!(topo.gpus.len(), 3);
        topo.nvml = Some(NvmlSnapshot {
            schema: NvmlSnapshot::SCHEMA.into(),
            driver_version: None,
            cuda_driver_version: None,
            device_count: None,
            gpus: vec![
                nvml_gpu(
                    "00000000:03:00.0",
                    &[
                        ("00000000:04:00.0", TopologyLevel::Single),
                        ("00000000:81:00.0", TopologyLevel::System),
                    ],
                ),
                nvml_gpu(
                    "00000000:04:00.0",
                    &[("00000000:03:00.0", TopologyLevel::Single)],
                ),
            ],
        });
        assert_eq!(check_sources(&topo), []);
    }

    #[test]
    fn disagreeing_nvml_level_names_both_sources() {
        let mut topo = machine();
        topo.nvml = Some(NvmlSnapshot {
            schema: NvmlSnapshot::SCHEMA.into(),
            driver_version: None,
            cuda_driver_version: None,
            device_count: None,
            gpus: vec![
                nvml_gpu(
                    "00000000:03:00.0",
                    &[
                        ("00000000:04:00.0", TopologyLevel::Multiple),
                        ("00000000:81:00.0", TopologyLevel::Node),
                    ],
                ),
                // The reverse direction of a pair is not reported twice.
                nvml_gpu(
                    "00000000:04:00.0",
                    &[("00000000:03:00.0", TopologyLevel::Multiple)],
                ),
                nvml_gpu("00000000:AA:00.0", &[]),
                nvml_gpu("not-an-address", &[]),
            ],
        });
        let d = check_sources(&topo);
        assert_eq!(
            codes(&d),
            [
                "nvml-topology-mismatch",
                "nvml-topology-mismatch",
                "nvml-gpu-not-in-sysfs",
                "nvml-bad-bus-id"
            ]
        );
        assert_eq!(
            d[0].message,
            "GPU0 (0000:03:00.0) and GPU1 (0000:04:00.0): NVML (nvmlDeviceGetTopologyCommonAncestor) says PXB, the sysfs PCIe tree says PIX; the matrix shows the sysfs class"
        );
        assert_eq!(
            d[0].path.as_deref(),
            Some("/sys/bus/pci/devices/0000:03:00.0")
        );
        assert!(
            d[1].message
                .contains("says NODE, the sysfs PCIe tree says SYS"),
            "{}",
            d[1].message
        );
        assert_eq!(
            d[2].path.as_deref(),
            Some("/sys/bus/pci/devices/0000:aa:00.0")
        );
    }

    fn verbs_port(state: &str, link_layer: &str, gid_type: GidType) -> VerbsPort {
        VerbsPort {
            port: 1,
            state: Some(state.into()),
            active_mtu: Some(4096),
            max_mtu: Some(4096),
            link_layer: Some(link_layer.into()),
            active_speed: Some(128),
            active_width: Some(2),
            gid_tbl_len: Some(128),
            gids: vec![Gid {
                index: 0,
                gid: "fe80:0000:0000:0000:a088:c203:0045:1234".into(),
                ipv4: None,
                gid_type: Some(gid_type),
                netdev: None,
            }],
        }
    }

    fn with_verbs(ports: Vec<VerbsPort>, extra_device: bool) -> Topology {
        let mut topo = machine();
        let mut devices = vec![VerbsDevice {
            name: "mlx5_0".into(),
            max_qp: Some(131072),
            max_cq: Some(16777216),
            max_mr: Some(16777216),
            max_srq: Some(8388608),
            ports,
        }];
        if extra_device {
            devices.push(VerbsDevice {
                name: "mlx5_9".into(),
                max_qp: None,
                max_cq: None,
                max_mr: None,
                max_srq: None,
                ports: Vec::new(),
            });
        }
        topo.verbs = Some(VerbsSnapshot {
            schema: VerbsSnapshot::SCHEMA.into(),
            devices,
            device_index: Default::default(),
        });
        topo
    }

    #[test]
    fn agreeing_verbs_give_nothing() {
        let topo = with_verbs(
            vec![verbs_port("ACTIVE", "InfiniBand", GidType::IbRoceV1)],
            false,
        );
        assert_eq!(check_sources(&topo), []);
    }

    #[test]
    fn disagreeing_verbs_port_facts() {
        let mut port = verbs_port("DOWN", "Ethernet", GidType::RoceV2);
        let mut extra = port.clone();
        extra.port = 2;
        let topo = with_verbs(vec![port.clone(), extra], true);
        let d = check_sources(&topo);
        assert_eq!(
            codes(&d),
            [
                "verbs-port-state-mismatch",
                "verbs-link-layer-mismatch",
                "verbs-gid-type-mismatch",
                "verbs-port-not-in-sysfs",
                "verbs-device-not-in-sysfs"
            ]
        );
        assert_eq!(
            d[0].message,
            "mlx5_0 port 1: libibverbs (ibv_query_port) says DOWN, sysfs says ACTIVE; rdmatopo uses the sysfs value"
        );
        assert_eq!(
            d[0].path.as_deref(),
            Some("/sys/class/infiniband/mlx5_0/ports/1/state")
        );
        assert_eq!(
            d[2].path.as_deref(),
            Some("/sys/class/infiniband/mlx5_0/ports/1/gid_attrs/types/0")
        );
        assert!(
            d[2].message.contains("says RoCE v2, sysfs says IB/RoCE v1"),
            "{}",
            d[2].message
        );

        port.gids[0].gid = "fe80:0000:0000:0000:0000:0000:0000:0001".into();
        port.gids[0].gid_type = Some(GidType::IbRoceV1);
        port.state = Some("ACTIVE".into());
        port.link_layer = Some("InfiniBand".into());
        let d = check_sources(&with_verbs(vec![port], false));
        assert_eq!(codes(&d), ["verbs-gid-mismatch"]);
    }

    #[test]
    fn sysfs_device_that_verbs_could_not_open() {
        let mut topo = with_verbs(Vec::new(), false);
        topo.verbs.as_mut().unwrap().devices.clear();
        let d = check_sources(&topo);
        assert_eq!(codes(&d), ["verbs-device-missing"]);
        assert_eq!(d[0].severity, Severity::Info);
        assert!(
            d[0].message
                .starts_with("mlx5_0 is in sysfs but libibverbs did not report it")
        );
    }

    /// A source that hands discovery fixed facts.
    struct Fixed(crate::sources::Facts);

    impl crate::sources::FactSource for Fixed {
        fn collect(
            &self,
            _fs: &Sysfs,
        ) -> Result<crate::sources::Facts, crate::sources::SourceError> {
            Ok(self.0.clone())
        }
    }

    #[test]
    fn discovery_puts_the_cross_checks_into_the_model() {
        let topo = with_verbs(
            vec![verbs_port("DOWN", "InfiniBand", GidType::IbRoceV1)],
            false,
        );
        let source = Fixed(crate::sources::Facts::Verbs(topo.verbs.clone().unwrap()));
        let mut t = MemTree::new();
        let port = "/sys/class/infiniband/mlx5_0/ports/1";
        t.file(&format!("{port}/state"), "4: ACTIVE\n")
            .file(&format!("{port}/link_layer"), "InfiniBand\n");
        let fs = Sysfs::memory(t, "test");
        let found = Discoverer::new(&fs)
            .source(&source)
            .cross_check(check_sources)
            .discover()
            .unwrap();
        assert!(found.verbs.is_some());
        assert_eq!(
            found
                .diagnostics
                .iter()
                .filter(|d| d.code.starts_with("verbs-"))
                .map(|d| d.code.as_str())
                .collect::<Vec<_>>(),
            ["verbs-port-state-mismatch"]
        );
    }

    #[test]
    fn levels_to_classes() {
        assert_eq!(level_class(TopologyLevel::Internal), PathClass::Pix);
        assert_eq!(level_class(TopologyLevel::Hostbridge), PathClass::Phb);
        assert_eq!(level_class(TopologyLevel::System), PathClass::Sys);
    }
}
