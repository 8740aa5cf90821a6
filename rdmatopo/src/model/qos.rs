//! RoCE QoS facts: traffic class, ECN (DCQCN), port buffers (the visible side of PFC)
//! and VF settings, each where the driver exposes it in sysfs.
//!
//! What sysfs does not hold, on any mlx5 driver: the trust mode (PCP/DSCP), the PFC
//! enable bits and the DSCP-to-priority map (DCB netlink only: `mlnx_qos -i <if>`,
//! `dcb pfc show dev <if>`), and pause-frame counters (`ethtool -S <if>`:
//! `rx_prio3_pause`, `tx_prio3_pause`, …; `statistics/` holds only the standard link
//! counters). Nothing here is guessed from their absence.

use crate::parse::{GidType, PciAddr, PortBuffers, TrafficClass, VfConfig};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// QoS of one RDMA port (RoCE ports only: InfiniBand QoS lives in the subnet manager).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortQos {
    pub device: String,
    pub port: u32,
    /// `/sys/class/infiniband/<dev>/tc/<port>/traffic_class` (MLNX_OFED `mlx5_ib`);
    /// `None`: not exposed (the inbox driver has no such file).
    pub traffic_class: Option<TrafficClass>,
    /// `/sys/kernel/config/rdma_cm/<dev>/ports/<port>/default_roce_tos`: the ToS of
    /// rdma_cm connections (`cma_roce_tos -d <dev> -t <tos>`); `None`: no configfs group
    /// for the device (the default, 0).
    pub rdma_cm_tos: Option<u8>,
    /// `default_roce_mode` beside it (`RoCE v2`).
    pub rdma_cm_roce_mode: Option<GidType>,
}

/// One side of DCQCN on a netdev: `ecn/roce_np` (notification point: the receiver that
/// turns ECN marks into CNPs) or `ecn/roce_rp` (reaction point: the sender that slows
/// down on CNPs).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EcnPoint {
    /// Priorities whose `enable/<prio>` reads 1.
    pub enabled: Vec<u8>,
    /// Priorities whose `enable/<prio>` reads 0 (the others were unreadable).
    pub disabled: Vec<u8>,
    /// The other files of the directory (`cnp_dscp`, `rpg_ai_rate`, …), as read.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub params: BTreeMap<String, i64>,
}

/// `/sys/class/net/<if>/ecn/` (MLNX_OFED `mlx5_core`; created on PF netdevs only).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ecn {
    /// `ecn/roce_np`; `None` when the directory is absent.
    pub roce_np: Option<EcnPoint>,
    /// `ecn/roce_rp`; `None` when the directory is absent.
    pub roce_rp: Option<EcnPoint>,
}

/// QoS of one netdev (`/sys/class/net/<if>/ecn`, `/sys/class/net/<if>/qos`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetdevQos {
    pub netdev: String,
    pub pci: Option<PciAddr>,
    /// `ecn/roce_{np,rp}`; `None`: not exposed.
    pub ecn: Option<Ecn>,
    /// `qos/tc_num`: traffic classes in use.
    pub tc_num: Option<u32>,
    /// `qos/maxrate`: rate limit per traffic class in kbit/s (0: none).
    pub maxrate_kbps: Option<Vec<u64>>,
    /// `qos/prio2buffer`: the receive buffer of each priority 0-7.
    pub prio2buffer: Option<Vec<u8>>,
    /// `qos/buffer_size`: the port's receive buffers and their pause thresholds.
    pub buffers: Option<PortBuffers>,
}

impl EcnPoint {
    /// The enabled priorities, when at least one `enable/<prio>` could be read.
    pub fn known_enabled(&self) -> Option<Vec<u8>> {
        (!self.enabled.is_empty() || !self.disabled.is_empty()).then(|| self.enabled.clone())
    }
}

impl NetdevQos {
    /// Priorities on a lossless buffer (one with an XOFF threshold), when both buffer
    /// files are exposed.
    pub fn lossless_priorities(&self) -> Option<Vec<u8>> {
        let map = self.prio2buffer.as_ref()?;
        let buffers = self.buffers.as_ref()?;
        Some(
            map.iter()
                .enumerate()
                .filter(|(_, b)| {
                    buffers
                        .buffers
                        .iter()
                        .any(|x| x.index == **b && x.is_lossless())
                })
                .filter_map(|(p, _)| u8::try_from(p).ok())
                .collect(),
        )
    }
}

/// A VF's e-switch settings as its PF publishes them
/// (`/sys/bus/pci/devices/<pf>/sriov/<n>/config`, MLNX_OFED `mlx5_core`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VfQos {
    pub pf: PciAddr,
    /// `<n>` of `sriov/<n>` (the `virtfn<n>` index).
    pub index: u32,
    /// The VF's PCI address, from the PF's `virtfn<n>` link.
    pub vf: Option<PciAddr>,
    pub config: VfConfig,
}

/// Every QoS fact discovery found (the `qos` section of the inventory).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QosFacts {
    /// One entry per RoCE port, exposed or not.
    pub ports: Vec<PortQos>,
    /// RoCE netdevs, and other PCI netdevs that publish `ecn/` or `qos/`.
    pub netdevs: Vec<NetdevQos>,
    /// VFs whose PF publishes `sriov/<n>/config`.
    pub vfs: Vec<VfQos>,
}

impl QosFacts {
    pub fn is_empty(&self) -> bool {
        self.ports.is_empty() && self.netdevs.is_empty() && self.vfs.is_empty()
    }

    pub fn port(&self, device: &str, port: u32) -> Option<&PortQos> {
        self.ports
            .iter()
            .find(|p| p.device == device && p.port == port)
    }

    pub fn netdev(&self, name: &str) -> Option<&NetdevQos> {
        self.netdevs.iter().find(|n| n.netdev == name)
    }

    pub fn vf(&self, vf: PciAddr) -> Option<&VfQos> {
        self.vfs.iter().find(|v| v.vf == Some(vf))
    }
}
