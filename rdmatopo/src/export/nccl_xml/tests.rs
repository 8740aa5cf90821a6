use super::*;
use crate::model::CpuInfo;
use crate::view::plan::preferred_hcas;
use crate::view::plan::testkit::{Builder, NicSpec, dgx_like};
use crate::view::{PathClass, TopoMatrix};

/// NCCL has no NODE level: host bridges of one NUMA node merge into one CPU node.
fn nccl_view(k: PathClass) -> PathClass {
    if k == PathClass::Node {
        PathClass::Phb
    } else {
        k
    }
}

/// Every GPU–NIC class, keyed by GPU address and RDMA device name.
fn classes(t: &Topology) -> BTreeMap<(PciAddr, String), PathClass> {
    let m = TopoMatrix::for_topology(t);
    let mut out = BTreeMap::new();
    for g in m.devices().iter().filter(|d| d.kind == "gpu") {
        for n in m.devices().iter().filter(|d| d.kind == "nic") {
            let k = m.get(&g.name, &n.name).unwrap();
            out.insert((g.pci, n.rdma.clone().unwrap()), nccl_view(k));
        }
    }
    out
}

fn with_cpu(mut t: Topology) -> Topology {
    t.host.cpu = Some(CpuInfo {
        vendor: Some("GenuineIntel".into()),
        family: Some(6),
        model: Some(143),
        model_name: None,
        arm_architecture: None,
    });
    t
}

#[test]
fn writes_what_nccls_loader_expects() {
    let x = write(&with_cpu(dgx_like()), &XmlOptions::default());
    assert!(x.starts_with("<system version=\"1\">\n"), "{x}");
    assert!(!x.contains("<?xml"));
    // Node 0 is 0-55,112-167 of 224 CPUs: seven 32-bit words, most significant first.
    assert!(x.contains(
        "<cpu numaid=\"0\" affinity=\"00000000,000000ff,ffffffff,ffff0000,00000000,00ffffff,ffffffff\" arch=\"x86_64\" vendor=\"GenuineIntel\" familyid=\"6\" modelid=\"143\">"
    ), "{x}");
    // The switch appears as its upstream port; the root port 0000:15:01.0 and the
    // downstream ports do not.
    assert!(x.contains("    <pci busid=\"0000:16:00.0\" class=\"0x060400\" vendor=\"0x1000\" device=\"0xc030\" subsystem_vendor=\"0x1000\" subsystem_device=\"0x0001\" link_speed=\"32.0 GT/s PCIe\" link_width=\"16\">\n      <pci busid=\"0000:18:00.0\" class=\"0x030200\""), "{x}");
    assert!(!x.contains("0000:15:01.0") && !x.contains("0000:17:00.0"));
    assert!(!x.contains("<gpu") && !x.contains("<net"));
    // The front-end NIC sits on a root port: directly under the CPU.
    assert!(x.contains("    <pci busid=\"0000:01:00.0\" class=\"0x020000\""));
    let nets = write(
        &dgx_like(),
        &XmlOptions {
            nets: true,
            ..Default::default()
        },
    );
    assert!(
        nets.contains("<nic>\n          <net name=\"mlx5_0\" dev=\"1\" port=\"1\"/>"),
        "{nets}"
    );
    // Without a known x86 vendor NCCL fills in arch itself.
    assert!(nets.contains("<cpu numaid=\"1\" affinity="));
    assert!(!nets.contains("arch="));
}

#[test]
fn arm64_as_nccl_writes_it_and_back() {
    let mut t = dgx_like();
    t.host.cpu = Some(CpuInfo {
        vendor: None,
        family: None,
        model: None,
        model_name: None,
        arm_architecture: Some(8),
    });
    let x = write(&t, &XmlOptions::default());
    assert!(x.contains("\" arch=\"arm64\">"), "{x}");
    assert!(!x.contains("vendor=\"") || !x.contains("familyid"), "{x}");
    let back = read(&x, "arm").unwrap();
    assert_eq!(back.host.cpu.and_then(|c| c.arm_architecture), Some(8));
}

#[test]
fn family_ids_as_nccl_computes_them() {
    assert_eq!(familyid(6), 6);
    assert_eq!(familyid(23), 143);
    assert_eq!(familyid(25), 175);
    assert_eq!(familyid(15), 15);
    for f in [5, 6, 15, 23, 25, 26] {
        assert_eq!(linux_family(familyid(f)), f);
    }
}

#[test]
fn cpumaps_like_sysfs() {
    let s: CpuSet = "0-39".parse().unwrap();
    assert_eq!(cpumap(&s, 40), "ff,ffffffff");
    assert_eq!(cpumap(&"4-7".parse().unwrap(), 64), "00000000,000000f0");
    assert_eq!(
        parse_cpumask(&cpumap(&"1,33,70".parse().unwrap(), 96))
            .unwrap()
            .to_string(),
        "1,33,70"
    );
}

#[test]
fn round_trip_keeps_pairing_and_classes() {
    for t in [dgx_like(), dual_port_and_vf(), two_level_switch()] {
        let t = with_cpu(t);
        let x = write(
            &t,
            &XmlOptions {
                nets: true,
                ..Default::default()
            },
        );
        let back = read(&x, "round-trip").unwrap();
        assert!(back.diagnostics.is_empty(), "{:?}", back.diagnostics);
        assert_eq!(classes(&back), classes(&t), "{x}");
        // NCCL's `port` counts up across the functions of one card, so compare devices.
        let devices = |t: &Topology| -> BTreeMap<PciAddr, (Vec<String>, PathClass)> {
            preferred_hcas(t)
                .into_iter()
                .map(|(g, (ports, k))| {
                    let names = ports
                        .iter()
                        .map(|p| p.split(':').next().unwrap().to_string())
                        .collect();
                    (g, (names, k))
                })
                .collect()
        };
        assert_eq!(devices(&back), devices(&t), "{x}");
        assert_eq!(back.host.cpu.as_ref().unwrap().family, Some(6));
        for n in &t.numa_nodes {
            assert_eq!(back.numa_node(n.id).unwrap().cpus, n.cpus);
        }
    }
}

/// A dual-port card (two PFs, one `sys_image_guid`) and a VF of its first port.
fn dual_port_and_vf() -> Topology {
    let mut b = Builder::new(&["0-15", "16-31"]);
    b.host_bridge("pci0000:00", Some(0));
    b.switch(
        "pci0000:00",
        "0000:00:01.0",
        "0000:01:00.0",
        &["0000:02:00.0", "0000:02:01.0"],
    );
    b.gpu("0000:03:00.0", "pci0000:00", Some("0000:02:00.0"));
    for (name, a) in [("mlx5_0", "0000:04:00.0"), ("mlx5_1", "0000:04:00.1")] {
        let mut s = NicSpec::new(name, a, Some("0000:02:01.0"), "pci0000:00");
        s.guid = Some("b8ce:f603:00a1:b2c4".into());
        b.nic(s);
    }
    let mut vf = NicSpec::new("mlx5_2", "0000:04:00.2", Some("0000:02:01.0"), "pci0000:00");
    vf.is_vf_of = Some("0000:04:00.0".into());
    b.nic(vf);
    b.host_bridge("pci0000:80", Some(1));
    b.bridge("0000:80:01.0", "pci0000:80", None);
    b.gpu("0000:81:00.0", "pci0000:80", Some("0000:80:01.0"));
    b.build()
}

/// GPU below two levels of switches, NIC below the first: PXB.
fn two_level_switch() -> Topology {
    let mut b = Builder::new(&["0-7"]);
    b.host_bridge("pci0000:00", Some(0));
    b.switch(
        "pci0000:00",
        "0000:00:01.0",
        "0000:01:00.0",
        &["0000:02:00.0", "0000:02:01.0"],
    );
    b.bridge("0000:03:00.0", "pci0000:00", Some("0000:02:00.0"));
    b.bridge("0000:04:00.0", "pci0000:00", Some("0000:03:00.0"));
    b.gpu("0000:05:00.0", "pci0000:00", Some("0000:04:00.0"));
    b.nic(NicSpec::new(
        "mlx5_0",
        "0000:06:00.0",
        Some("0000:02:01.0"),
        "pci0000:00",
    ));
    // A second host bridge of the same NUMA node: NODE for nvidia-smi, PHB for NCCL.
    b.host_bridge("pci0000:40", Some(0));
    b.bridge("0000:40:01.0", "pci0000:40", None);
    b.nic(NicSpec::new(
        "mlx5_1",
        "0000:41:00.0",
        Some("0000:40:01.0"),
        "pci0000:40",
    ));
    let t = b.build();
    let m = TopoMatrix::for_topology(&t);
    assert_eq!(m.get("GPU0", "NIC0"), Some(PathClass::Pxb));
    assert_eq!(m.get("GPU0", "NIC1"), Some(PathClass::Node));
    t
}

#[test]
fn merged_bus_ids_and_ports_like_nccl() {
    let x = write(
        &dual_port_and_vf(),
        &XmlOptions {
            nets: true,
            ..Default::default()
        },
    );
    // Functions 0, 1 and the VF at device 0 share one <pci> node; ports count up.
    assert_eq!(x.matches("busid=\"0000:04:00.0\"").count(), 1, "{x}");
    assert!(!x.contains("0000:04:00.1") && !x.contains("0000:04:00.2"));
    assert!(x.contains("<net name=\"mlx5_0\" dev=\"0\" port=\"1\"/>"));
    assert!(x.contains("<net name=\"mlx5_1\" dev=\"1\" port=\"2\"/>"));
    assert!(x.contains("<net name=\"mlx5_2\" dev=\"2\" port=\"3\"/>"));
    assert_eq!(
        hca_busid("0000:17:03.4".parse().unwrap(), true).to_string(),
        "0000:17:00.0"
    );
    assert_eq!(
        hca_busid("0000:17:03.4".parse().unwrap(), false).to_string(),
        "0000:17:03.0"
    );
}

#[test]
fn reads_an_ncclish_dump() {
    let dump = r#"<!-- NCCL_TOPO_DUMP_FILE -->
<system version="1">
  <cpu host_hash="0x9e4c" numaid="0" affinity="00000000,0000ffff" arch="x86_64" vendor="AuthenticAMD" familyid="175" modelid="1">
    <pci busid="0000:41:00.0" class="0x060400" vendor="0x1000" device="0xc030" subsystem_vendor="0x1000" subsystem_device="0xa064" link_speed="32.0 GT/s PCIe" link_width="16">
      <pci busid="0000:43:00.0" class="0x030200" vendor="0x10de" device="0x2330" subsystem_vendor="0x10de" subsystem_device="0x16c1" link_speed="32.0 GT/s PCIe" link_width="16">
        <gpu dev="0" sm="90" rank="0" gdr="1">
          <nvlink target="fffffff:ffff:ff" count="18" tclass="0x068000"/>
        </gpu>
      </pci>
      <pci busid='0000:44:00.0' class='0x020700' link_speed='32.0 GT/s PCIe' link_width='16'>
        <nic>
          <net name="mlx5_0" dev="0" speed="400000" port="1" latency="0.000000" guid="0x8c2c0003a1b2c4" maxconn="131072" gdr="1"/>
          <net name="mlx5_0+mlx5_1" dev="4" speed="800000" port="0"/>
        </nic>
      </pci>
    </pci>
    <unknown-element/>
  </cpu>
  <cpu numaid="1" affinity="ffff0000">
    <pci busid="0000:c1:00.0" class="0x020700" link_speed="" link_width="0">
      <nic><net name="mlx5_1" dev="1" speed="400000" port="1"/></nic>
    </pci>
  </cpu>
</system>
"#;
    let t = read(dump, "dump.xml").unwrap();
    assert_eq!(t.gpus.len(), 1);
    assert_eq!(t.host.cpu.as_ref().unwrap().family, Some(25));
    let names: Vec<&str> = t.rdma_devices.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(names, ["mlx5_0", "mlx5_1"]);
    let m = TopoMatrix::for_topology(&t);
    assert_eq!(m.get("GPU0", "NIC0"), Some(PathClass::Pix));
    assert_eq!(m.get("GPU0", "NIC1"), Some(PathClass::Sys));
    assert_eq!(
        t.rdma_devices[0].ports[0].rate.as_ref().unwrap().gbps,
        400.0
    );
    assert_eq!(
        t.rdma_devices[0].ports[0].link_layer,
        Some(LinkLayer::InfiniBand)
    );
    assert_eq!(t.nvml.as_ref().unwrap().gpus[0].nvlinks.len(), 18);
    let pref = preferred_hcas(&t);
    assert_eq!(
        pref[&t.gpus[0].pci],
        (vec!["mlx5_0:1".to_string()], PathClass::Pix)
    );
}

#[test]
fn reads_a_skeleton_with_made_up_switches() {
    // The shape of the files clouds ship for VMs: fake bridges in domain ffff, each
    // holding one GPU slot and one NIC slot, nothing else.
    let x = r#"<system version="1">
  <cpu numaid="0" affinity="0000ffff" arch="x86_64" vendor="GenuineIntel" familyid="6" modelid="143">
    <pci busid="ffff:ff:01.0" class="0x060400" link_speed="32.0 GT/s PCIe" link_width="16">
      <pci busid="0001:00:00.0" class="0x030200" link_speed="32.0 GT/s PCIe" link_width="16"/>
      <pci busid="0101:00:00.0" class="0x020700" link_speed="32.0 GT/s PCIe" link_width="16"/>
    </pci>
    <pci busid="ffff:ff:02.0" class="0x060400" link_speed="32.0 GT/s PCIe" link_width="16">
      <pci busid="0002:00:00.0" class="0x030200" link_speed="32.0 GT/s PCIe" link_width="16"/>
      <pci busid="0102:00:00.0" class="0x020700" link_speed="32.0 GT/s PCIe" link_width="16"/>
    </pci>
  </cpu>
</system>"#;
    let t = read(x, "vm.xml").unwrap();
    assert_eq!(t.gpus.len(), 2);
    let pref = preferred_hcas(&t);
    assert_eq!(pref[&"0001:00:00.0".parse().unwrap()].0, ["0101:00:00.0:1"]);
    assert_eq!(pref[&"0002:00:00.0".parse().unwrap()].0, ["0102:00:00.0:1"]);
    assert_eq!(pref[&"0002:00:00.0".parse().unwrap()].1, PathClass::Pix);
}

/// A `class` wider than a PCI class (24 bits) reads as unknown: the model read from a
/// file stays one whose JSON reads back.
#[test]
fn a_class_wider_than_24_bits_is_unknown() {
    let x = r#"<system version="1">
  <cpu numaid="0" affinity="0000ffff" arch="x86_64">
    <pci busid="0000:01:00.0" class="0x1030200" link_speed="16.0 GT/s PCIe" link_width="16"/>
  </cpu>
</system>"#;
    let t = read(x, "wide.xml").unwrap();
    let f = t.pci_function("0000:01:00.0".parse().unwrap()).unwrap();
    assert_eq!(f.class, 0);
    let json = serde_json::to_string(&t).unwrap();
    assert_eq!(Topology::read_json(&json).unwrap(), t);
}

#[test]
fn rejects_what_nccl_rejects() {
    assert_eq!(
        read("<system version=\"2\"></system>", "x"),
        Err(NcclXmlError::Version("2".into()))
    );
    assert_eq!(
        read("<system></system>", "x"),
        Err(NcclXmlError::Version(String::new()))
    );
    assert_eq!(read("<topology/>", "x"), Err(NcclXmlError::NoSystem));
    assert!(matches!(
        read("<system version=\"1\"><cpu>", "x"),
        Err(NcclXmlError::Syntax { .. })
    ));
    assert!(matches!(
        read("<system version=\"1\"></cpu>", "x"),
        Err(NcclXmlError::Syntax { .. })
    ));
    assert!(matches!(
        read("<system version=\"1\" a=\"1\" a=\"2\"/>", "x"),
        Err(NcclXmlError::Syntax { .. })
    ));
    let deep = format!("<system version=\"1\">{}", "<pci>".repeat(200));
    assert!(read(&deep, "x").is_err());
    // Odd content is a diagnostic, not an error.
    let t = read(
        "<system version=\"1\"><cpu numaid=\"0\"><pci busid=\"nonsense\"/><pci busid=\"0000:01:00.0\" class=\"0x030200\"/><pci busid=\"0000:01:00.0\"/></cpu></system>",
        "x",
    )
    .unwrap();
    assert_eq!(t.diagnostics.len(), 2);
    assert_eq!(t.gpus.len(), 1);
}
