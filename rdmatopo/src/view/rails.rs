//! The compute rails of one node: the HCA ports that the NCCL plan ([`super::plan`])
//! keeps for collective traffic, each with the facts that the Kubernetes export and
//! the fleet check (`rdmatopo cluster`) need. The ports the plan
//! leaves out (front-end, storage, other fabric, down) are kept aside with the plan's
//! reason.
//!
//! These describe the node, not the reading process: the process's container view
//! and environment (`CUDA_VISIBLE_DEVICES`, `/dev` nodes, cgroups) are ignored, so a
//! DaemonSet that reads the host's `/sys` gets the same answer as the host itself.

use super::affinity::{PathClass, path_class};
use super::error::ViewError;
use super::plan::{Exclusion, Plan, PlanOptions};
use crate::model::{PciFunction, PciRole, Port, Process, RdmaDevice, Topology};
use crate::parse::natural_cmp;
use crate::parse::{LinkLayer, PciAddr};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// One HCA port with the facts that decide whether nodes agree.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HcaPort {
    /// `mlx5_0:1` (NCCL's `NCCL_IB_HCA` form).
    pub label: String,
    /// RDMA device (`/sys/class/infiniband/<device>`).
    pub device: String,
    pub port: u32,
    /// The PCI function (the device's `device` link); `None` for rxe/siw.
    pub pci: Option<PciAddr>,
    /// `vendor` of the function, lowercase hex without `0x` (`15b3`).
    pub vendor: Option<String>,
    /// `device` of the function, lowercase hex without `0x` (`1021`).
    pub device_id: Option<String>,
    /// The port's netdev (`ibdev2netdev`), else the function's first netdev.
    pub netdev: Option<String>,
    /// The first netdev of the PCI function in name order (its `net/` directory):
    /// how device plugins name it. A RoCE LAG port's netdev is the bond, this is the
    /// first slave.
    pub pci_netdev: Option<String>,
    /// `ports/<n>/link_layer`.
    pub link_layer: Option<LinkLayer>,
    /// `ports/<n>/rate`, in Gb/s.
    pub rate_gbps: Option<f64>,
    /// `mtu` of the netdev.
    pub netdev_mtu: Option<u32>,
    /// Active MTU from `ibv_query_port`, when a verbs source was there.
    pub active_mtu: Option<u32>,
    /// The RoCE GID index NCCL will use on this port (none on InfiniBand).
    pub gid_index: Option<u32>,
    /// IPv4 addresses of the netdev, with prefix length (`10.0.0.5/24`).
    pub ipv4: Vec<String>,
    /// `numa_node` of the function (or of its host bridge).
    pub numa_node: Option<u32>,
    /// Upstream port of the outermost PCIe switch above the function: NICs and GPUs
    /// with the same switch reach each other at PIX or PXB.
    pub pcie_switch: Option<PciAddr>,
    /// GPUs the plan pairs with this port, in PCI order.
    pub gpus: Vec<PciAddr>,
    /// The path class from those GPUs (the worst, when several).
    pub gpu_class: Option<PathClass>,
    /// SR-IOV facts when the function is a physical function able to create VFs.
    pub sriov: Option<PortVfs>,
    /// The function is an SR-IOV virtual function.
    pub is_vf: bool,
}

/// The virtual functions of a rail's physical function.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortVfs {
    /// `sriov_numvfs`.
    pub num_vfs: u32,
    /// `sriov_totalvfs`.
    pub total_vfs: u32,
    /// `virtfn<N>` indexes that exist.
    pub vf_indexes: Vec<u32>,
    /// VFs that have an RDMA device of their own.
    pub rdma_vfs: u32,
    /// `vendor:device` of the VFs, lowercase hex (`15b3`, `101e`), when a VF exists.
    pub vf_vendor: Option<String>,
    pub vf_device_id: Option<String>,
}

/// A compute rail: a port the plan puts in `NCCL_IB_HCA`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rail {
    /// Position in rail order: by the first GPU the rail serves, then PCI address.
    pub index: u32,
    #[serde(flatten)]
    pub port: HcaPort,
}

/// A port of a PCI-backed HCA that is not a compute rail, and why. VFs whose PF is
/// in the model are not listed: they are counted under the PF.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LeftOut {
    #[serde(flatten)]
    pub port: HcaPort,
    pub reason: String,
}

/// One GPU and its rails.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuRails {
    pub pci: PciAddr,
    pub index: u32,
    pub numa_node: Option<u32>,
    /// Indexes into [`NodeRails::rails`].
    pub rails: Vec<u32>,
    /// Path class to those rails; `None` when the GPU has none.
    pub class: Option<PathClass>,
}

/// The rails of a node and what the plan recommends for it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeRails {
    pub rails: Vec<Rail>,
    pub left_out: Vec<LeftOut>,
    pub gpus: Vec<GpuRails>,
    /// The NCCL variables the plan sets for the whole node.
    pub nccl_env: BTreeMap<String, String>,
    /// RDMA devices with a PCI function, down or not.
    pub rdma_capable: bool,
}

impl NodeRails {
    /// The rails of the node `topo` describes.
    ///
    /// # Errors
    /// When the plan cannot be computed.
    pub fn of(topo: &Topology) -> Result<Self, ViewError> {
        let node = node_view(topo);
        let plan = Plan::compute(&node, &PlanOptions::default())?;
        Ok(Self::from_plan(&node, &plan))
    }

    fn from_plan(topo: &Topology, plan: &Plan) -> Self {
        let compute = hca_labels(plan);
        let mut gpus_of: BTreeMap<&str, Vec<PciAddr>> = BTreeMap::new();
        for r in &plan.ranks {
            for h in &r.hcas {
                let v = gpus_of.entry(h.as_str()).or_default();
                if !v.contains(&r.gpu) {
                    v.push(r.gpu);
                }
            }
        }
        let mut rails: Vec<HcaPort> = Vec::new();
        for dev in &topo.rdma_devices {
            for port in &dev.ports {
                let label = format!("{}:{}", dev.name, port.number);
                if compute.contains(&label) {
                    let mut gpus = gpus_of.get(label.as_str()).cloned().unwrap_or_default();
                    gpus.sort();
                    rails.push(hca_port(topo, plan, dev, port, gpus));
                }
            }
        }
        let gpu_index: BTreeMap<PciAddr, u32> =
            topo.gpus.iter().map(|g| (g.pci, g.index)).collect();
        rails.sort_by(|a, b| {
            let first = |p: &HcaPort| {
                p.gpus
                    .iter()
                    .filter_map(|g| gpu_index.get(g))
                    .min()
                    .copied()
            };
            (first(a).unwrap_or(u32::MAX), a.pci)
                .cmp(&(first(b).unwrap_or(u32::MAX), b.pci))
                .then_with(|| natural_cmp(&a.label, &b.label))
        });
        let rails: Vec<Rail> = rails
            .into_iter()
            .enumerate()
            .map(|(i, port)| Rail {
                index: i as u32,
                port,
            })
            .collect();

        let left_out = left_out(topo, plan, &compute);
        let gpus = topo
            .gpus
            .iter()
            .map(|g| {
                let mine: Vec<&Rail> = rails
                    .iter()
                    .filter(|r| r.port.gpus.contains(&g.pci))
                    .collect();
                let func = topo.pci_function(g.pci);
                let class = mine
                    .iter()
                    .filter_map(|r| {
                        let nic = r.port.pci.and_then(|a| topo.pci_function(a))?;
                        Some(path_class(topo, func?, nic))
                    })
                    .max_by_key(PathClass::rank);
                GpuRails {
                    pci: g.pci,
                    index: g.index,
                    numa_node: g.numa_node,
                    rails: mine.iter().map(|r| r.index).collect(),
                    class,
                }
            })
            .collect();
        Self {
            rails,
            left_out,
            gpus,
            nccl_env: plan.env.clone(),
            rdma_capable: topo.rdma_devices.iter().any(|d| d.pci.is_some()),
        }
    }

    /// The worst GPU–rail path class over all GPUs that have a rail.
    pub fn worst_gpu_class(&self) -> Option<PathClass> {
        self.gpus
            .iter()
            .filter_map(|g| g.class)
            .max_by_key(PathClass::rank)
    }

    /// The link layer of the rails when they all agree.
    pub fn link_layer(&self) -> Option<LinkLayer> {
        let set: BTreeSet<&'static str> = self
            .rails
            .iter()
            .map(|r| r.port.link_layer.map_or("?", |l| l.as_str()))
            .collect();
        match set.into_iter().collect::<Vec<_>>().as_slice() {
            [one] => self
                .rails
                .first()
                .and_then(|r| r.port.link_layer)
                .filter(|_| *one != "?"),
            _ => None,
        }
    }

    /// The slowest rail's rate in Gb/s.
    pub fn min_rate_gbps(&self) -> Option<f64> {
        self.rails
            .iter()
            .filter_map(|r| r.port.rate_gbps)
            .min_by(|a, b| a.total_cmp(b))
    }
}

/// The model with the reading process's facts removed: the node as the host sees it.
pub fn node_view(topo: &Topology) -> Topology {
    let mut node = topo.clone();
    node.process = Process::default();
    node
}

/// The ports of `NCCL_IB_HCA` (`=mlx5_0:1,mlx5_3:1`).
fn hca_labels(plan: &Plan) -> BTreeSet<String> {
    plan.env
        .get("NCCL_IB_HCA")
        .map(|v| {
            v.trim_start_matches(['=', '^'])
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(|s| {
                    if s.contains(':') {
                        s.to_string()
                    } else {
                        format!("{s}:1")
                    }
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Every port of a PCI-backed HCA that is not a rail, with the plan's reason.
fn left_out(topo: &Topology, plan: &Plan, compute: &BTreeSet<String>) -> Vec<LeftOut> {
    let reason_for = |dev: &str, port: u32| -> Option<&Exclusion> {
        let label = format!("{dev}:{port}");
        plan.excluded
            .iter()
            .find(|e| e.device == label)
            .or_else(|| plan.excluded.iter().find(|e| e.device == dev))
    };
    // A VF whose PF is in the model belongs to that PF's pool (`HcaPort::sriov`); a
    // VF without its PF (a VM's view) stands for itself.
    let host_vf = |d: &RdmaDevice| {
        d.pci
            .and_then(|a| topo.pci_function(a))
            .is_some_and(|f| f.physfn.is_some_and(|pf| topo.pci_function(pf).is_some()))
    };
    let mut out = Vec::new();
    for dev in topo
        .rdma_devices
        .iter()
        .filter(|d| d.pci.is_some() && !host_vf(d))
    {
        for port in &dev.ports {
            let label = format!("{}:{}", dev.name, port.number);
            if compute.contains(&label) {
                continue;
            }
            let reason = reason_for(&dev.name, port.number).map_or_else(
                || "not among the ports NCCL would use here".to_string(),
                |e| e.reason.clone(),
            );
            out.push(LeftOut {
                port: hca_port(topo, plan, dev, port, Vec::new()),
                reason,
            });
        }
    }
    out.sort_by(|a, b| natural_cmp(&a.port.label, &b.port.label));
    out
}

fn hex(v: u16) -> String {
    format!("{v:04x}")
}

fn hca_port(
    topo: &Topology,
    plan: &Plan,
    dev: &RdmaDevice,
    port: &Port,
    gpus: Vec<PciAddr>,
) -> HcaPort {
    let label = format!("{}:{}", dev.name, port.number);
    let func = dev.pci.and_then(|a| topo.pci_function(a));
    let pci_netdev = dev
        .pci
        .and_then(|a| topo.first_netdev_of(a))
        .map(str::to_string);
    let netdev = port.netdev.clone().or_else(|| pci_netdev.clone());
    let nd = netdev.as_deref().and_then(|n| topo.netdev(n));
    let active_mtu = topo.verbs.as_ref().and_then(|v| {
        v.devices
            .iter()
            .find(|d| d.name == dev.name)?
            .ports
            .iter()
            .find(|p| p.port == port.number)?
            .active_mtu
    });
    let gpu_class = func.and_then(|nic| {
        gpus.iter()
            .filter_map(|g| topo.pci_function(*g))
            .map(|g| path_class(topo, g, nic))
            .max_by_key(PathClass::rank)
    });
    HcaPort {
        gid_index: plan.gid_index.get(&label).copied(),
        label,
        device: dev.name.clone(),
        port: port.number,
        pci: dev.pci,
        vendor: func.map(|f| hex(f.vendor)),
        device_id: func.map(|f| hex(f.device)),
        netdev,
        pci_netdev,
        link_layer: port.link_layer,
        rate_gbps: port.rate.as_ref().map(|r| r.gbps),
        netdev_mtu: nd.and_then(|n| n.mtu),
        active_mtu,
        ipv4: nd.map(|n| n.ipv4.clone()).unwrap_or_default(),
        numa_node: func.and_then(|f| super::affinity::numa_of(topo, f)),
        pcie_switch: func.and_then(|f| outer_switch(topo, f)),
        gpus,
        gpu_class,
        sriov: func.and_then(|f| port_vfs(topo, f)),
        is_vf: func.is_some_and(|f| f.is_vf),
    }
}

/// The outermost PCIe switch above `f` (its upstream port).
pub fn outer_switch(topo: &Topology, f: &PciFunction) -> Option<PciAddr> {
    topo.ancestors(f.address)
        .into_iter()
        .rfind(|b| b.role == PciRole::SwitchUpstream)
        .map(|b| b.address)
}

fn port_vfs(topo: &Topology, pf: &PciFunction) -> Option<PortVfs> {
    let s = pf.sriov.as_ref().filter(|s| s.total_vfs > 0)?;
    let vfs: Vec<&PciFunction> = s.vfs.iter().filter_map(|a| topo.pci_function(*a)).collect();
    let mut vf_indexes: Vec<u32> = vfs.iter().filter_map(|v| v.vf_index).collect();
    if vf_indexes.is_empty() {
        // Indexes follow the `virtfn<N>` order when the VFs' own links were not read.
        vf_indexes = (0..s.vfs.len() as u32).collect();
    }
    vf_indexes.sort_unstable();
    let rdma_vfs = s
        .vfs
        .iter()
        .filter(|a| topo.rdma_devices.iter().any(|d| d.pci == Some(**a)))
        .count() as u32;
    Some(PortVfs {
        num_vfs: s.num_vfs,
        total_vfs: s.total_vfs,
        vf_indexes,
        rdma_vfs,
        vf_vendor: vfs.first().map(|v| hex(v.vendor)),
        vf_device_id: vfs.first().map(|v| hex(v.device)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::view::plan::testkit::{Builder, NicSpec};

    /// Two GPUs, each with a rail under its own switch, and a front-end RoCE port
    /// carrying the default route.
    fn two_rails() -> Topology {
        let mut b = Builder::new(&["0-7"]);
        b.host_bridge("pci0000:00", Some(0));
        b.switch(
            "pci0000:00",
            "0000:00:01.0",
            "0000:01:00.0",
            &["0000:02:00.0", "0000:02:01.0"],
        );
        b.gpu("0000:03:00.0", "pci0000:00", Some("0000:02:00.0"));
        b.nic(NicSpec::new(
            "mlx5_0",
            "0000:04:00.0",
            Some("0000:02:01.0"),
            "pci0000:00",
        ));
        b.host_bridge("pci0000:80", Some(0));
        b.switch(
            "pci0000:80",
            "0000:80:01.0",
            "0000:81:00.0",
            &["0000:82:00.0", "0000:82:01.0"],
        );
        b.gpu("0000:83:00.0", "pci0000:80", Some("0000:82:00.0"));
        b.nic(NicSpec::new(
            "mlx5_1",
            "0000:84:00.0",
            Some("0000:82:01.0"),
            "pci0000:80",
        ));
        b.nic(
            NicSpec::new("mlx5_2", "0000:90:00.0", None, "pci0000:80").roce("eth0", "192.168.1.5"),
        );
        let mut t = b.build();
        t.host.default_route_interface = Some("eth0".into());
        t
    }

    #[test]
    fn rails_follow_the_plan_and_gpu_order() {
        let r = NodeRails::of(&two_rails()).unwrap();
        let labels: Vec<&str> = r.rails.iter().map(|r| r.port.label.as_str()).collect();
        assert_eq!(labels, ["mlx5_0:1", "mlx5_1:1"]);
        assert_eq!(r.rails[1].port.gpus, vec!["0000:83:00.0".parse().unwrap()]);
        assert_eq!(r.rails[0].port.gpu_class, Some(PathClass::Pix));
        assert_eq!(
            r.rails[0].port.pcie_switch,
            Some("0000:01:00.0".parse().unwrap())
        );
        assert_eq!(r.left_out.len(), 1);
        assert_eq!(r.left_out[0].port.label, "mlx5_2:1");
        assert!(
            r.left_out[0].reason.contains("link layer"),
            "{}",
            r.left_out[0].reason
        );
        assert_eq!(r.worst_gpu_class(), Some(PathClass::Pix));
        assert_eq!(r.gpus[1].rails, vec![1]);
    }

    #[test]
    fn the_reading_process_does_not_matter() {
        let mut t = two_rails();
        t.process
            .env
            .insert("CUDA_VISIBLE_DEVICES".into(), "1".into());
        t.process.cgroups = Vec::new();
        assert_eq!(
            NodeRails::of(&t).unwrap(),
            NodeRails::of(&two_rails()).unwrap()
        );
    }

    #[test]
    fn a_down_port_is_left_out_with_the_plan_reason() {
        let mut t = two_rails();
        t.rdma_devices[1].ports[0].state = Some(crate::parse::PortState::Down);
        let r = NodeRails::of(&t).unwrap();
        assert_eq!(r.rails.len(), 1);
        let down = r
            .left_out
            .iter()
            .find(|l| l.port.label == "mlx5_1:1")
            .unwrap();
        assert!(down.reason.contains("not ACTIVE"), "{}", down.reason);
        // GPU 1 falls back to the other rail, across host bridges.
        assert_eq!(r.gpus[1].rails, vec![0]);
        assert_eq!(r.gpus[1].class, Some(PathClass::Node));
        assert_eq!(r.rails[0].port.gpus.len(), 2);
    }
}
