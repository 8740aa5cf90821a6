use crate::parse::PciAddr;
use serde::{Deserialize, Serialize};

/// What a netdev is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum NetdevKind {
    /// On a physical PCI function.
    Physical,
    /// On an SR-IOV virtual function.
    VirtualFunction,
    /// A bonding master.
    Bond,
    /// The loopback interface (`lo`).
    Loopback,
    /// veth, macvlan, ipvlan, bridges, tunnels: no device of its own.
    Virtual,
}

/// Bonding facts of a master (`bonding/mode`, `bonding/slaves`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Bond {
    /// `bonding/mode` (`802.3ad 4`).
    pub mode: Option<String>,
    /// `bonding/slaves`.
    pub slaves: Vec<String>,
}

/// A network interface visible in this network namespace (`/sys/class/net/<if>/`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Netdev {
    /// The interface name (`/sys/class/net/<name>`).
    pub name: String,
    /// What it is, from its `device` link, `physfn`, `bonding/` and `type`.
    pub kind: NetdevKind,
    /// The PCI function behind it (from the canonical path).
    pub pci: Option<PciAddr>,
    /// `mtu`.
    pub mtu: Option<u32>,
    /// `operstate`.
    pub operstate: Option<String>,
    /// `carrier` (unreadable while the interface is down).
    pub carrier: Option<bool>,
    /// `speed` in Mb/s (unreadable or -1 when unknown).
    pub speed_mbps: Option<u64>,
    /// `address`.
    pub address: Option<String>,
    /// `type` (ARPHRD: 1 Ethernet, 32 InfiniBand).
    pub arphrd: Option<u32>,
    /// `ifindex` and `iflink`; they differ for veth and other stacked devices.
    pub ifindex: Option<u32>,
    /// `iflink`: the ifindex of the interface it is stacked on (itself otherwise).
    pub iflink: Option<u32>,
    /// Basename of the `master` link.
    pub master: Option<String>,
    /// Bonding facts, on a bonding master.
    pub bond: Option<Bond>,
    /// IPv4 addresses (from `/proc/net/fib_trie` and `/proc/net/route`, or the host's
    /// `/proc/1/net` ones, `Ctx::net_table`).
    #[serde(default)]
    pub ipv4: Vec<String>,
}
