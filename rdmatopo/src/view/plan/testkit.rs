//! Hand-built topologies for analysis tests: NUMA nodes, host bridges, PCIe switches,
//! GPUs and HCAs with their ports, GIDs and netdevs, shaped like what discovery builds.

use crate::model::{
    Gid, Gpu, HostBridge, Netdev, NetdevKind, NumaNode, PciFunction, PciRole, PcieLink, Port,
    RdmaDevice, Topology,
};
use crate::parse::{
    CpuSet, GidType, LinkLayer, LinkSpeed, PciAddr, PortState, format_gid, gid_ipv4, parse_gid,
};

pub(crate) struct Builder {
    pub topo: Topology,
}

fn addr(a: &str) -> PciAddr {
    a.parse().unwrap()
}

/// How an HCA port looks.
#[derive(Debug, Clone)]
pub(crate) struct NicSpec {
    pub name: String,
    pub addr: String,
    pub parent: Option<String>,
    pub host_bridge: String,
    pub link_layer: LinkLayer,
    pub active: bool,
    /// Netdev name; `None` for a port without one here.
    pub netdev: Option<String>,
    /// IPv4 of the RoCE GID at index 3 (v2; v1 at 2, link-local at 0/1).
    pub ipv4: Option<String>,
    pub guid: Option<String>,
    pub is_vf_of: Option<String>,
}

impl NicSpec {
    pub fn new(name: &str, addr: &str, parent: Option<&str>, hb: &str) -> Self {
        Self {
            name: name.into(),
            addr: addr.into(),
            parent: parent.map(str::to_string),
            host_bridge: hb.into(),
            link_layer: LinkLayer::InfiniBand,
            active: true,
            netdev: None,
            ipv4: None,
            guid: None,
            is_vf_of: None,
        }
    }

    pub fn roce(mut self, netdev: &str, ipv4: &str) -> Self {
        self.link_layer = LinkLayer::Ethernet;
        self.netdev = Some(netdev.into());
        self.ipv4 = Some(ipv4.into());
        self
    }

    pub fn down(mut self) -> Self {
        self.active = false;
        self
    }
}

pub(crate) fn netdev(name: &str, pci: Option<PciAddr>) -> Netdev {
    Netdev {
        name: name.into(),
        kind: if pci.is_some() {
            NetdevKind::Physical
        } else {
            NetdevKind::Virtual
        },
        pci,
        mtu: Some(9000),
        operstate: Some("up".into()),
        carrier: Some(true),
        speed_mbps: Some(400000),
        address: None,
        arphrd: Some(1),
        ifindex: None,
        iflink: None,
        master: None,
        bond: None,
        ipv4: Vec::new(),
    }
}

pub(crate) fn gid(index: u32, text: &str, ty: Option<GidType>, ndev: Option<&str>) -> Gid {
    let a = parse_gid(text).unwrap();
    Gid {
        index,
        gid: format_gid(&a),
        ipv4: gid_ipv4(&a).map(|x| x.to_string()),
        gid_type: ty,
        netdev: ndev.map(str::to_string),
    }
}

impl Builder {
    /// NUMA nodes with these cpulists; the process may use all of them.
    pub fn new(numa_cpus: &[&str]) -> Self {
        let mut topo = Topology::empty("test");
        let n = numa_cpus.len();
        let mut all = CpuSet::new();
        for (i, c) in numa_cpus.iter().enumerate() {
            let cpus: CpuSet = c.parse().unwrap();
            all = all.union(&cpus);
            topo.numa_nodes.push(NumaNode {
                id: i as u32,
                cpus,
                distances: (0..n).map(|j| if i == j { 10 } else { 21 }).collect(),
                memory_kib: None,
            });
        }
        topo.process.cpus_allowed = Some(all.clone());
        topo.host.cpus_online = Some(all);
        Self { topo }
    }

    pub fn host_bridge(&mut self, name: &str, numa: Option<u32>) -> &mut Self {
        self.topo.host_bridges.push(HostBridge {
            name: name.into(),
            path: format!("/sys/devices/{name}"),
            numa_node: numa,
        });
        self
    }

    fn hb_numa(&self, hb: &str) -> Option<u32> {
        self.topo
            .host_bridges
            .iter()
            .find(|h| h.name == hb)
            .and_then(|h| h.numa_node)
    }

    /// A PCI function under `parent` (or directly on the host bridge).
    pub fn func(
        &mut self,
        a: &str,
        hb: &str,
        parent: Option<&str>,
        class: u32,
        vendor: u16,
        device: u16,
    ) -> &mut Self {
        let parent_path = match parent {
            Some(p) => self
                .topo
                .pci
                .iter()
                .find(|f| f.address == addr(p))
                .map(|f| f.path.clone())
                .unwrap_or_else(|| format!("/sys/devices/{hb}/{p}")),
            None => format!("/sys/devices/{hb}"),
        };
        let numa = self.hb_numa(hb);
        let cpus = numa
            .and_then(|n| self.topo.numa_node(n))
            .map(|n| n.cpus.clone());
        self.topo.pci.push(PciFunction {
            address: addr(a),
            path: format!("{parent_path}/{a}"),
            host_bridge: hb.into(),
            parent: parent.map(addr),
            role: PciRole::Endpoint,
            class,
            vendor,
            device,
            subsystem_vendor: Some(vendor),
            subsystem_device: Some(0x0001),
            vendor_name: None,
            device_name: None,
            driver: None,
            numa_node: numa,
            local_cpus: cpus,
            link: PcieLink {
                current_speed: Some(LinkSpeed { gts: 32.0 }),
                current_width: Some(16),
                max_speed: Some(LinkSpeed { gts: 32.0 }),
                max_width: Some(16),
            },
            sriov: None,
            physfn: None,
            vf_index: None,
            is_vf: false,
            iommu_group: None,
            acs: None,
        });
        self
    }

    pub fn bridge(&mut self, a: &str, hb: &str, parent: Option<&str>) -> &mut Self {
        self.func(a, hb, parent, 0x060400, 0x1000, 0xc030)
    }

    /// A root port with a switch below it: `rp` → `usp` → one downstream port per
    /// entry of `dsps`.
    pub fn switch(&mut self, hb: &str, rp: &str, usp: &str, dsps: &[&str]) -> &mut Self {
        self.bridge(rp, hb, None);
        self.bridge(usp, hb, Some(rp));
        for d in dsps {
            self.bridge(d, hb, Some(usp));
        }
        self
    }

    pub fn gpu(&mut self, a: &str, hb: &str, parent: Option<&str>) -> &mut Self {
        self.func(a, hb, parent, 0x030200, 0x10de, 0x2330)
    }

    pub fn nic(&mut self, spec: NicSpec) -> &mut Self {
        let class = match spec.link_layer {
            LinkLayer::InfiniBand => 0x020700,
            _ => 0x020000,
        };
        self.func(
            &spec.addr,
            &spec.host_bridge,
            spec.parent.as_deref(),
            class,
            0x15b3,
            0x1021,
        );
        let a = addr(&spec.addr);
        if let Some(pf) = &spec.is_vf_of {
            let f = self.topo.pci.iter_mut().find(|f| f.address == a).unwrap();
            f.physfn = Some(addr(pf));
            f.is_vf = true;
            f.device = 0x101e;
        }
        let mut gids = Vec::new();
        if spec.link_layer == LinkLayer::Ethernet
            && let (Some(nd), Some(ip)) = (&spec.netdev, &spec.ipv4)
        {
            gids.push(gid(0, "fe80::1", Some(GidType::IbRoceV1), Some(nd)));
            gids.push(gid(1, "fe80::1", Some(GidType::RoceV2), Some(nd)));
            gids.push(gid(
                2,
                &format!("::ffff:{ip}"),
                Some(GidType::IbRoceV1),
                Some(nd),
            ));
            gids.push(gid(
                3,
                &format!("::ffff:{ip}"),
                Some(GidType::RoceV2),
                Some(nd),
            ));
        } else if spec.link_layer == LinkLayer::InfiniBand {
            gids.push(gid(
                0,
                "fe80::b8ce:f6ff:fe00:1",
                Some(GidType::IbRoceV1),
                None,
            ));
        }
        if let Some(nd) = &spec.netdev
            && self.topo.netdev(nd).is_none()
        {
            self.topo.netdevs.push(netdev(nd, Some(a)));
        }
        self.topo.rdma_devices.push(RdmaDevice {
            name: spec.name.clone(),
            pci: Some(a),
            node_type: Some("1: CA".into()),
            node_guid: None,
            sys_image_guid: spec.guid.clone(),
            fw_ver: None,
            hca_type: None,
            board_id: None,
            ports: vec![Port {
                number: 1,
                state: Some(if spec.active {
                    PortState::Active
                } else {
                    PortState::Down
                }),
                phys_state: None,
                rate: None,
                link_layer: Some(spec.link_layer),
                lid: None,
                gid_table_len: 256,
                gids,
                netdev: spec.netdev.clone(),
            }],
            uverbs: None,
            data_direct: None,
        });
        self
    }

    /// Roles from the parent links, GPUs in PCI order, lists sorted: what discovery
    /// would have produced.
    pub fn build(&mut self) -> Topology {
        let mut t = self.topo.clone();
        t.pci.sort_by_key(|f| f.address);
        let snapshot = t.pci.clone();
        let role_of = |a: PciAddr| snapshot.iter().find(|f| f.address == a);
        let roles: Vec<PciRole> = t
            .pci
            .iter()
            .map(|f| {
                if !f.is_bridge() {
                    return PciRole::Endpoint;
                }
                let mut depth = 0;
                let mut cur = f.parent;
                let mut chain = Vec::new();
                while let Some(p) = cur.and_then(role_of) {
                    chain.push(p.address);
                    cur = p.parent;
                    depth += 1;
                }
                match depth {
                    0 => PciRole::RootPort,
                    d if d % 2 == 1 => PciRole::SwitchUpstream,
                    _ => PciRole::SwitchDownstream,
                }
            })
            .collect();
        for (f, r) in t.pci.iter_mut().zip(roles) {
            f.role = r;
        }
        t.gpus = t
            .pci
            .iter()
            .filter(|f| f.is_nvidia_gpu())
            .enumerate()
            .map(|(i, f)| Gpu {
                pci: f.address,
                index: i as u32,
                name: Some("NVIDIA H100 80GB HBM3".into()),
                uuid: Some(format!("GPU-{:08x}-0000-0000-0000-000000000000", i + 0xa0)),
                numa_node: f.numa_node,
                local_cpus: f.local_cpus.clone(),
                minor: Some(i as u32),
            })
            .collect();
        t.rdma_devices
            .sort_by(|a, b| crate::parse::natural_cmp(&a.name, &b.name));
        t.netdevs.sort_by(|a, b| a.name.cmp(&b.name));
        t
    }
}

/// A DGX H100-like node: two NUMA nodes of 56+56 CPUs, four switches per node, each
/// with two GPUs and two IB HCAs... simplified to one GPU and one HCA per switch, plus
/// an Ethernet front-end NIC carrying the default route on node 0.
pub(crate) fn dgx_like() -> Topology {
    let mut b = Builder::new(&["0-55,112-167", "56-111,168-223"]);
    let buses = [0x18u8, 0x2a, 0x3a, 0x5d, 0x9a, 0xab, 0xba, 0xdb];
    for (i, bus) in buses.iter().enumerate() {
        let numa = (i / 4) as u32;
        let hb = format!("pci0000:{:02x}", bus - 3);
        b.host_bridge(&hb, Some(numa));
        let rp = format!("0000:{:02x}:01.0", bus - 3);
        let usp = format!("0000:{:02x}:00.0", bus - 2);
        let d0 = format!("0000:{:02x}:00.0", bus - 1);
        let d1 = format!("0000:{:02x}:01.0", bus - 1);
        b.switch(&hb, &rp, &usp, &[&d0, &d1]);
        let gpu = format!("0000:{:02x}:00.0", bus);
        b.gpu(&gpu, &hb, Some(&d0));
        let nic = format!("0000:{:02x}:00.0", bus + 1);
        // Bus numbers behind the second downstream port.
        let nic_spec = NicSpec::new(&format!("mlx5_{i}"), &nic, Some(&d1), &hb);
        b.nic(nic_spec);
    }
    b.host_bridge("pci0000:00", Some(0));
    b.bridge("0000:00:01.0", "pci0000:00", None);
    b.nic(
        NicSpec::new("mlx5_8", "0000:01:00.0", Some("0000:00:01.0"), "pci0000:00")
            .roce("eno1", "192.168.1.10"),
    );
    let mut t = b.build();
    t.host.default_route_interface = Some("eno1".into());
    t
}
