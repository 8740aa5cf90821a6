use crate::parse::{GidType, LinkLayer, PciAddr, PhysState, PortState, Rate};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One valid entry of a port's GID table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Gid {
    /// The slot in the table (`gids/<index>`).
    pub index: u32,
    /// `gids/<i>`, as the kernel prints it.
    pub gid: String,
    /// The IPv4 address of an IPv4-mapped GID.
    pub ipv4: Option<String>,
    /// `gid_attrs/types/<i>` (unreadable in some pods: `None`).
    pub gid_type: Option<GidType>,
    /// `gid_attrs/ndevs/<i>` (none on InfiniBand).
    pub netdev: Option<String>,
}

/// A port of an RDMA device (`ports/<n>/`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Port {
    /// The port number (`ports/<number>`).
    pub number: u32,
    /// `state`.
    pub state: Option<PortState>,
    /// `phys_state`.
    pub phys_state: Option<PhysState>,
    /// `rate`.
    pub rate: Option<Rate>,
    /// `link_layer`.
    pub link_layer: Option<LinkLayer>,
    /// `lid` (`0x1a`).
    pub lid: Option<String>,
    /// Number of `gids/<i>` slots.
    pub gid_table_len: u32,
    /// The non-zero slots.
    pub gids: Vec<Gid>,
    /// The netdev of this port (the ibdev2netdev relation), when visible.
    pub netdev: Option<String>,
}

impl Port {
    /// Port `number` with nothing known about it yet.
    #[doc(hidden)]
    pub fn numbered(number: u32) -> Self {
        Self {
            number,
            state: None,
            phys_state: None,
            rate: None,
            link_layer: None,
            lid: None,
            gid_table_len: 0,
            gids: Vec::new(),
            netdev: None,
        }
    }

    /// Whether `state` is `ACTIVE`.
    pub fn is_active(&self) -> bool {
        self.state == Some(PortState::Active)
    }
}

/// An RDMA device (`/sys/class/infiniband/<name>/`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct RdmaDevice {
    /// The device name (`mlx5_0`).
    pub name: String,
    /// The PCI function (the `device` link); `None` for software devices (rxe, siw).
    pub pci: Option<PciAddr>,
    /// `node_type` (`1: CA`).
    pub node_type: Option<String>,
    /// `node_guid`.
    pub node_guid: Option<String>,
    /// `sys_image_guid`: the same on every function of one adapter.
    pub sys_image_guid: Option<String>,
    /// `fw_ver`.
    pub fw_ver: Option<String>,
    /// `hca_type` (`MT4129`).
    pub hca_type: Option<String>,
    /// `board_id` (the PSID on mlx5).
    pub board_id: Option<String>,
    /// Its ports, in number order.
    pub ports: Vec<Port>,
    /// `uverbs<N>` char device of this device (`/sys/class/infiniband_verbs/*/ibdev`).
    pub uverbs: Option<String>,
    /// The ConnectX-8 Data Direct DMA function (`15b3:2100`) of this device: a function
    /// bound to the data-direct PCI driver of mlx5_ib (`/sys/bus/pci/drivers/mlx5_ib/<bdf>`) whose
    /// `vpd` keyword `V3` equals this device's function's, the pairing rdma-core's
    /// `rdma_topo` makes. NCCL places the device there as `<name>_dma`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_direct: Option<PciAddr>,
}

impl RdmaDevice {
    /// A device known by name and function only, without ports.
    #[doc(hidden)]
    pub fn named(name: String, pci: Option<PciAddr>) -> Self {
        Self {
            name,
            pci,
            node_type: None,
            node_guid: None,
            sys_image_guid: None,
            fw_ver: None,
            hca_type: None,
            board_id: None,
            ports: Vec::new(),
            uverbs: None,
            data_direct: None,
        }
    }
}

/// Per-port facts from `ibv_query_port`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VerbsPort {
    pub port: u32,
    /// `ACTIVE`, `DOWN`, … (the names sysfs `state` uses).
    pub state: Option<String>,
    /// Active MTU in bytes (256…4096).
    pub active_mtu: Option<u32>,
    pub max_mtu: Option<u32>,
    /// `InfiniBand`, `Ethernet` or `Unknown` (as sysfs `link_layer`).
    pub link_layer: Option<String>,
    /// `active_speed` code of `ibv_port_attr` (1 SDR, 2 DDR, 4 QDR, 8 FDR10, 16 FDR,
    /// 32 EDR, 64 HDR, 128 NDR).
    pub active_speed: Option<u32>,
    /// `active_width` code of `ibv_port_attr` (1 = 1X, 2 = 4X, 4 = 8X, 8 = 12X, 16 = 2X).
    pub active_width: Option<u32>,
    pub gid_tbl_len: Option<u32>,
    /// Valid GID entries with their types, from `ibv_query_gid_table` (`netdev` is left
    /// empty: sysfs names it).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gids: Vec<Gid>,
}

/// Per-device facts from `ibv_query_device` / `ibv_query_port`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VerbsDevice {
    pub name: String,
    pub max_qp: Option<u32>,
    pub max_cq: Option<u32>,
    pub max_mr: Option<u32>,
    pub max_srq: Option<u32>,
    pub ports: Vec<VerbsPort>,
}

/// The libibverbs view of a machine (live, or replayed from `rdmatopo/verbs.json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VerbsSnapshot {
    pub schema: String,
    pub devices: Vec<VerbsDevice>,
    /// The kernel's index of each RDMA device `ibv_get_device_list` listed, opened or
    /// not (`ibv_get_device_index`, rdma-core 32 and later; empty before, or where the
    /// kernel gives none). ib_core hands indices out in the order devices register and
    /// never reuses one soon (`assign_name`: `xa_alloc_cyclic`, drivers/infiniband/core/
    /// device.c), and rdma-core lists devices in that order (its RDMA netlink dump of
    /// `RDMA_NLDEV_CMD_GET` walks the devices by index): the order nvidia-smi numbers
    /// NICs in (`view::nic_order`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub device_index: BTreeMap<String, u32>,
}

impl VerbsSnapshot {
    pub const SCHEMA: &'static str = "rdmatopo.verbs/1";
}

/// The kernel's index of each RDMA device, read from its RDMA netlink
/// (`RDMA_NLDEV_CMD_GET` dump, `RDMA_NLDEV_ATTR_DEV_INDEX`), live or replayed from
/// `rdmatopo/device-index.json`. The same index `ibv_get_device_index` returns
/// ([`VerbsSnapshot::device_index`]), without libibverbs: the order the devices
/// registered, which nvidia-smi numbers NICs in (`view::nic_order`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceIndexSnapshot {
    pub schema: String,
    /// Device name (as this network namespace sees it) to kernel index.
    pub device_index: BTreeMap<String, u32>,
}

impl DeviceIndexSnapshot {
    pub const SCHEMA: &'static str = "rdmatopo.device-index/1";

    /// A snapshot of `pairs` (index, name), as the kernel's dump lists them.
    pub fn new(pairs: impl IntoIterator<Item = (u32, String)>) -> Self {
        Self {
            schema: Self::SCHEMA.to_string(),
            device_index: pairs.into_iter().map(|(i, n)| (n, i)).collect(),
        }
    }
}
