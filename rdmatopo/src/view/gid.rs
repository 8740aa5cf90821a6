//! The RoCE GID index NCCL picks by itself for a port (`ncclIbGetGidIndex`, automatic
//! since NCCL 2.21.5), restricted to what this network namespace can use.
//!
//! NCCL scans the GID table (`/sys/class/infiniband/<dev>/ports/<p>/gids/<i>`) for the
//! lowest index that holds an IPv4-mapped address (`::ffff:a.b.c.d`) of RoCE version 2
//! (`gid_attrs/types/<i>`), falling back to any IPv4-mapped GID, and it skips indexes
//! whose `types/<i>` cannot be read. On top of that this module never picks an all-zero
//! or link-local (`fe80::/64`) GID, nor one whose netdev (`gid_attrs/ndevs/<i>`) is not
//! in this network namespace ([`unusable_reason`], the one rule): inside a pod the
//! right index is that of the pod's own interface, which is why it differs between a
//! host and its pods. Drivers differ in what a pod reads of the other namespaces'
//! slots: MLNX_OFED (`rdma_check_gid_user_access`) returns a zero GID and fails their
//! attributes, the upstream kernel (`show_port_gid` in drivers/infiniband/core/sysfs.c)
//! shows them with the other namespace's netdev names; the rule covers both. When a port has no IPv4 GID,
//! an IPv6 one is chosen (NCCL then needs `NCCL_IB_ADDR_FAMILY=AF_INET6`). InfiniBand
//! ports get nothing: NCCL uses index 0 there and ignores `NCCL_IB_GID_INDEX`.

use crate::model::{Gid, Port, Topology};
use crate::parse::{GidType, LinkLayer, gid_is_link_local, gid_is_zero, parse_gid, parse_nccl_int};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::net::Ipv6Addr;

/// The GID a RoCE port should use.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct GidChoice {
    /// RDMA device (`/sys/class/infiniband/<device>`).
    pub device: String,
    /// The port number.
    pub port: u32,
    /// Index into the port's GID table (`gids/<index>`).
    pub index: u32,
    /// The GID as the kernel prints it.
    pub gid: String,
    /// The IPv4 address of an IPv4-mapped GID.
    pub ipv4: Option<String>,
    /// `gid_attrs/ndevs/<index>`: the interface that owns the address.
    pub netdev: Option<String>,
}

impl GidChoice {
    /// Whether the chosen GID is an IPv6 address (NCCL's default family is IPv4).
    pub fn is_ipv6(&self) -> bool {
        self.ipv4.is_none()
    }
}

/// Why a GID table entry is not usable from this network namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Unusable {
    /// The slot does not parse as a GID.
    NotAGid,
    /// An all-zero slot: empty, or hidden from this namespace (MLNX_OFED).
    Empty,
    /// `gid_attrs/ndevs/<i>` names a netdev that is not in this network namespace. The
    /// upstream kernel shows every namespace's GIDs in every namespace (`show_port_gid`
    /// has no namespace test), but traffic sent from such a GID leaves with the other
    /// namespace's address, outside this one's network.
    OtherNamespace,
    /// `fe80::/64`: not routable.
    LinkLocal,
    /// `gid_attrs/types/<i>` could not be read.
    TypeUnreadable,
    /// `gid_attrs/ndevs/<i>` could not be read.
    NoNetdev,
}

impl Unusable {
    pub fn as_str(self) -> &'static str {
        match self {
            Unusable::NotAGid => "not a GID",
            Unusable::Empty => "all-zero (empty slot)",
            Unusable::OtherNamespace => "its netdev is not in this network namespace",
            Unusable::LinkLocal => "link-local (fe80::/64)",
            Unusable::TypeUnreadable => "type unreadable",
            Unusable::NoNetdev => "no netdev",
        }
    }
}

impl std::fmt::Display for Unusable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The one rule for whether a GID table entry can be used from this network namespace:
/// why not, or `None` when it can. A GID is this namespace's when its netdev is in
/// `topo.netdevs` (`/sys/class/net` as this process sees it); on a host or a
/// hostNetwork pod that is every host netdev. The namespace test comes before the
/// others, so a row of another namespace is always reported as such, whichever
/// driver (upstream shows it, MLNX_OFED reads it as zero) produced the table.
pub fn unusable_reason(topo: &Topology, gid: &Gid) -> Option<Unusable> {
    let Ok(addr) = parse_gid(&gid.gid) else {
        return Some(Unusable::NotAGid);
    };
    if gid_is_zero(&addr) {
        return Some(Unusable::Empty);
    }
    if let Some(n) = gid.netdev.as_deref()
        && topo.netdev(n).is_none()
    {
        return Some(Unusable::OtherNamespace);
    }
    if gid_is_link_local(&addr) {
        return Some(Unusable::LinkLocal);
    }
    if gid.gid_type.is_none() {
        return Some(Unusable::TypeUnreadable);
    }
    if gid.netdev.is_none() {
        return Some(Unusable::NoNetdev);
    }
    None
}

/// Whether a GID belongs to a netdev of another network namespace (see
/// [`unusable_reason`]).
pub fn of_other_namespace(topo: &Topology, gid: &Gid) -> bool {
    unusable_reason(topo, gid) == Some(Unusable::OtherNamespace)
}

/// Whether a port runs RoCE: Ethernet link layer, or an unknown link layer with RoCE
/// GID types.
pub fn is_roce(port: &Port) -> bool {
    match port.link_layer {
        Some(LinkLayer::Ethernet) => true,
        Some(LinkLayer::InfiniBand) => false,
        Some(LinkLayer::Unknown) | None => port
            .gids
            .iter()
            .any(|g| g.gid_type == Some(GidType::RoceV2)),
    }
}

/// The GID NCCL's automatic choice lands on for a RoCE port, among the GIDs usable from
/// this namespace: IPv4 before IPv6, RoCE v2 before v1, then the lowest index. `None`
/// for InfiniBand ports and RoCE ports without a usable GID. Every command (nccl-env,
/// plan, gids, doctor, the C API) chooses through this.
pub fn best_gid<'a>(topo: &Topology, port: &'a Port) -> Option<&'a Gid> {
    if !is_roce(port) {
        return None;
    }
    port.gids
        .iter()
        .filter(|g| unusable_reason(topo, g).is_none())
        .min_by_key(|g| {
            (
                g.ipv4.is_none(),
                g.gid_type != Some(GidType::RoceV2),
                g.index,
            )
        })
}

/// [`best_gid`] for `device` port `port`. `None` also for unknown ports.
pub fn choose_gid(topo: &Topology, device: &str, port: u32) -> Option<GidChoice> {
    let dev = topo.rdma_device(device)?;
    let p = dev.ports.iter().find(|p| p.number == port)?;
    let best = best_gid(topo, p)?;
    Some(GidChoice {
        device: device.to_string(),
        port,
        index: best.index,
        gid: best.gid.clone(),
        ipv4: best.ipv4.clone(),
        netdev: best.netdev.clone(),
    })
}

/// The variables that steer NCCL's own RoCE GID choice, read as NCCL reads them
/// (nccl `src/transport/net_ib/connect.cc`, v2.30.7-1: `NCCL_PARAM(IbGidIndex)`,
/// `envIbAddrFamily`, `envIbAddrRange`, `NCCL_PARAM(IbRoceVersionNum)`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NcclGidEnv {
    /// `NCCL_IB_GID_INDEX` (default −1: automatic).
    pub gid_index: i64,
    /// `NCCL_IB_ADDR_FAMILY=AF_INET6`; anything else, or unset, is AF_INET.
    pub ipv6: bool,
    /// `NCCL_IB_ADDR_RANGE` as `addr/len` in the chosen family; `None`: every address.
    pub range: Option<(Ipv6Addr, u32)>,
    /// `NCCL_IB_ROCE_VERSION_NUM` (default 2).
    pub roce_version: i64,
}

impl Default for NcclGidEnv {
    fn default() -> Self {
        Self {
            gid_index: -1,
            ipv6: false,
            range: None,
            roce_version: 2,
        }
    }
}

impl NcclGidEnv {
    /// Read the four variables from an environment. A value NCCL rejects leaves its
    /// default, as NCCL does (`ncclLoadParam` keeps the default on a bad number;
    /// `envIbAddrRange` ignores a range without `/`, an address of the other family,
    /// or a length past the family's width).
    pub fn from_env(env: &BTreeMap<String, String>) -> Self {
        let int = |k: &str, default: i64| {
            env.get(k)
                .and_then(|v| parse_nccl_int(v).ok())
                .unwrap_or(default)
        };
        let ipv6 = env.get("NCCL_IB_ADDR_FAMILY").map(String::as_str) == Some("AF_INET6");
        let range = env
            .get("NCCL_IB_ADDR_RANGE")
            .and_then(|v| parse_addr_range(v, ipv6));
        Self {
            gid_index: int("NCCL_IB_GID_INDEX", -1),
            ipv6,
            range,
            roce_version: int("NCCL_IB_ROCE_VERSION_NUM", 2),
        }
    }
}

/// `envIbAddrRange`: `addr/len` parsed with `inet_pton` in the family NCCL looks for,
/// the length with `strtol` (leading digits; none reads 0). NCCL copies the value into
/// a 128-byte buffer first. IPv4 addresses are held as `::ffff:a.b.c.d`.
fn parse_addr_range(value: &str, ipv6: bool) -> Option<(Ipv6Addr, u32)> {
    let value: String = value.chars().take(127).collect();
    let (addr, len) = value.split_once('/')?;
    let addr = if ipv6 {
        addr.parse::<Ipv6Addr>().ok()?
    } else {
        addr.parse::<std::net::Ipv4Addr>().ok()?.to_ipv6_mapped()
    };
    let len = len.trim_start();
    let (negative, digits) = match len.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, len.strip_prefix('+').unwrap_or(len)),
    };
    let n: i64 = digits
        .bytes()
        .take_while(u8::is_ascii_digit)
        .take(12)
        .fold(0, |acc, d| acc * 10 + i64::from(d - b'0'));
    let n = if negative { -n } else { n };
    if n > if ipv6 { 128 } else { 32 } {
        return None;
    }
    // A length of 0 or less matches every address (`matchGidAddrPrefix`'s loop never runs).
    Some((addr, u32::try_from(n).unwrap_or(0)))
}

/// The GID's 32-bit words, as NCCL's `s6_addr32` reads them (network order).
fn words(a: &Ipv6Addr) -> [u32; 4] {
    let o = a.octets();
    [0, 1, 2, 3].map(|i| u32::from_be_bytes([o[4 * i], o[4 * i + 1], o[4 * i + 2], o[4 * i + 3]]))
}

/// `getGidAddrFamily`: IPv4 for `::ffff:0:0/96` and its `ff0e::ffff:0:0/96` multicast form.
fn nccl_family_v4(a: &Ipv6Addr) -> bool {
    let w = words(a);
    (w[0] | w[1] | (w[2] ^ 0x0000_ffff)) == 0
        || (w[0] == 0xff0e_0000 && (w[1] | (w[2] ^ 0x0000_ffff)) == 0)
}

/// `validGid` = `configuredGid && !linkLocalGid`.
fn nccl_valid(a: &Ipv6Addr) -> bool {
    let w = words(a);
    let trailer = w[1] | w[2] | w[3];
    let configured = !((w[0] | trailer) == 0 || (w[0] == 0xfe80_0000 && trailer == 0));
    let link_local = w[0] == 0xfe80_0000 && w[1] == 0;
    configured && !link_local
}

/// `matchGidAddrPrefix`: IPv4 compares the last word only, IPv6 word by word.
fn nccl_in_range(range: Option<&(Ipv6Addr, u32)>, ipv6: bool, a: &Ipv6Addr) -> bool {
    let Some((base, len)) = range else {
        return true;
    };
    let (b, g) = (words(base), words(a));
    let mask = |bits: u32| u32::MAX.checked_shl(32 - bits).unwrap_or(0);
    if *len == 0 {
        return true;
    }
    if !ipv6 {
        let m = mask((*len).min(32));
        return (b[3] & m) == (g[3] & m);
    }
    let mut left = *len;
    for i in 0..4 {
        if left == 0 {
            break;
        }
        let m = mask(left.min(32));
        if (b[i] & m) != (g[i] & m) {
            return false;
        }
        left = left.saturating_sub(32);
    }
    true
}

/// The GID index NCCL ≥ 2.21.5 itself uses on a RoCE port under `env`, read from the
/// port's table as sysfs shows it (`ncclIbGetGidIndex` and `ncclUpdateGidIndex` in
/// nccl `src/transport/net_ib/connect.cc`, v2.30.7-1). `NCCL_IB_GID_INDEX` ≥ 0 is
/// taken as is. Otherwise, starting from index 0, each index from 1 up the table
/// replaces the choice when its family differs from the choice's, is the wanted one
/// and is in range; or when it has the wanted family, is valid (not zero, not
/// `fe80::/64`), is in range, has the wanted RoCE version and the choice has another
/// version or is invalid. So the first wanted-family GID wins at once, whatever its
/// version, and a later one only for its version. A slot whose
/// `gid_attrs/types/<i>` cannot be read has no version (NCCL skips it since 2.26.2).
/// `None` for InfiniBand ports, where `NCCL_IB_GID_INDEX` is not used.
pub fn nccl_gid_index(port: &Port, env: &NcclGidEnv) -> Option<u32> {
    if !is_roce(port) {
        return None;
    }
    if env.gid_index >= 0 {
        return u32::try_from(env.gid_index).ok();
    }
    let slot = |i: u32| -> (Ipv6Addr, Option<i64>) {
        port.gids
            .iter()
            .find(|g| g.index == i)
            .map(|g| {
                let addr = parse_gid(&g.gid).unwrap_or(Ipv6Addr::UNSPECIFIED);
                let version = g.gid_type.map(|t| match t {
                    GidType::IbRoceV1 => 1,
                    GidType::RoceV2 => 2,
                });
                (addr, version)
            })
            .unwrap_or((Ipv6Addr::UNSPECIFIED, None))
    };
    let len = port
        .gid_table_len
        .max(port.gids.iter().map(|g| g.index + 1).max().unwrap_or(0));
    let want_v4 = !env.ipv6;
    let mut best = 0u32;
    for cand in 1..len {
        let (g, g_ver) = slot(best);
        let (c, c_ver) = slot(cand);
        let (g_v4, c_v4) = (nccl_family_v4(&g), nccl_family_v4(&c));
        let in_range = nccl_in_range(env.range.as_ref(), env.ipv6, &c);
        if c_v4 != g_v4 && c_v4 == want_v4 && in_range {
            best = cand;
            continue;
        }
        if c_v4 != want_v4 || !nccl_valid(&c) || !in_range {
            continue;
        }
        if (g_ver != c_ver || !nccl_valid(&g)) && c_ver == Some(env.roce_version) {
            best = cand;
        }
    }
    Some(best)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Netdev, NetdevKind, RdmaDevice};
    use crate::parse::PciAddr;

    pub(crate) fn gid(index: u32, text: &str, ty: Option<GidType>, ndev: Option<&str>) -> Gid {
        let addr = parse_gid(text).unwrap();
        Gid {
            index,
            gid: crate::parse::format_gid(&addr),
            ipv4: crate::parse::gid_ipv4(&addr).map(|a| a.to_string()),
            gid_type: ty,
            netdev: ndev.map(str::to_string),
        }
    }

    fn netdev(name: &str) -> Netdev {
        Netdev {
            name: name.into(),
            kind: NetdevKind::Physical,
            pci: None,
            mtu: Some(9000),
            operstate: Some("up".into()),
            carrier: Some(true),
            speed_mbps: None,
            address: None,
            arphrd: Some(1),
            ifindex: None,
            iflink: None,
            master: None,
            bond: None,
            ipv4: Vec::new(),
        }
    }

    fn topo_with(link_layer: LinkLayer, gids: Vec<Gid>, netdevs: &[&str]) -> Topology {
        let mut t = Topology::empty("test");
        t.rdma_devices.push(RdmaDevice {
            ports: vec![Port {
                number: 1,
                state: Some(crate::parse::PortState::Active),
                phys_state: None,
                rate: None,
                link_layer: Some(link_layer),
                lid: None,
                gid_table_len: 16,
                gids,
                netdev: None,
            }],
            ..RdmaDevice::named("mlx5_0".into(), Some(PciAddr::new(0, 0x18, 0, 0)))
        });
        t.netdevs = netdevs.iter().map(|n| netdev(n)).collect();
        t
    }

    const V1: Option<GidType> = Some(GidType::IbRoceV1);
    const V2: Option<GidType> = Some(GidType::RoceV2);

    /// The usual host table: link-local v1/v2 at 0/1, IPv4 v1/v2 at 2/3.
    #[test]
    fn host_table_picks_ipv4_roce_v2() {
        let t = topo_with(
            LinkLayer::Ethernet,
            vec![
                gid(0, "fe80::b8ce:f6ff:fe00:1", V1, Some("ens18np0")),
                gid(1, "fe80::b8ce:f6ff:fe00:1", V2, Some("ens18np0")),
                gid(2, "::ffff:10.8.10.4", V1, Some("ens18np0")),
                gid(3, "::ffff:10.8.10.4", V2, Some("ens18np0")),
            ],
            &["ens18np0"],
        );
        let c = choose_gid(&t, "mlx5_0", 1).unwrap();
        assert_eq!(c.index, 3);
        assert_eq!(c.ipv4.as_deref(), Some("10.8.10.4"));
        assert_eq!(c.netdev.as_deref(), Some("ens18np0"));
    }

    /// In a pod the host's slots are unreadable or name netdevs of another namespace;
    /// the pod's own interface sits higher in the table.
    #[test]
    fn pod_table_skips_other_namespaces() {
        let t = topo_with(
            LinkLayer::Ethernet,
            vec![
                gid(2, "::ffff:10.8.10.4", None, None),
                gid(3, "::ffff:10.8.10.4", V2, Some("ens18np0")),
                gid(4, "::ffff:10.152.0.12", V1, Some("net1")),
                gid(5, "::ffff:10.152.0.12", V2, Some("net1")),
            ],
            &["eth0", "net1"],
        );
        assert_eq!(choose_gid(&t, "mlx5_0", 1).unwrap().index, 5);
    }

    /// The upstream kernel's table in a pod with a macvlan on a shared HCA: the host's
    /// GIDs (host netdev names) at 0-3, the macvlan's at 4/5. A host netdev's GID is
    /// not the pod's address: not usable, and the reason says why.
    #[test]
    fn host_netdev_gid_on_pod_is_not_usable() {
        let table = vec![
            gid(0, "fe80::b8ce:f6ff:fe00:1", V1, Some("ens20np0")),
            gid(1, "fe80::b8ce:f6ff:fe00:1", V2, Some("ens20np0")),
            gid(2, "::ffff:10.8.10.4", V1, Some("ens20np0")),
            gid(3, "::ffff:10.8.10.4", V2, Some("ens20np0")),
            gid(4, "::ffff:10.8.10.131", V1, Some("net1")),
            gid(5, "::ffff:10.8.10.131", V2, Some("net1")),
        ];
        let pod = topo_with(LinkLayer::Ethernet, table.clone(), &["eth0", "net1"]);
        let p = &pod.rdma_devices[0].ports[0];
        for g in &p.gids[..4] {
            // the namespace test wins over link-local: the row is another namespace's
            assert_eq!(unusable_reason(&pod, g), Some(Unusable::OtherNamespace));
            assert!(of_other_namespace(&pod, g));
        }
        assert_eq!(
            Unusable::OtherNamespace.to_string(),
            "its netdev is not in this network namespace"
        );
        assert_eq!(unusable_reason(&pod, &p.gids[5]), None);
        assert_eq!(best_gid(&pod, p).map(|g| g.index), Some(5));
        let c = choose_gid(&pod, "mlx5_0", 1).unwrap();
        assert_eq!((c.index, c.netdev.as_deref()), (5, Some("net1")));

        // MLNX_OFED's table for the same pod: the host's slots read as zero (absent
        // from the model); the same answer.
        let ofed = topo_with(LinkLayer::Ethernet, table[4..].to_vec(), &["eth0", "net1"]);
        assert_eq!(choose_gid(&ofed, "mlx5_0", 1).unwrap().index, 5);

        // On the host the same GID is its own.
        let host = topo_with(LinkLayer::Ethernet, table[..4].to_vec(), &["ens20np0"]);
        let h = &host.rdma_devices[0].ports[0];
        assert_eq!(unusable_reason(&host, &h.gids[3]), None);
        assert_eq!(
            unusable_reason(&host, &h.gids[1]),
            Some(Unusable::LinkLocal)
        );
        assert!(!of_other_namespace(&host, &h.gids[3]));
        assert_eq!(choose_gid(&host, "mlx5_0", 1).unwrap().index, 3);
    }

    #[test]
    fn ipv4_before_version_then_ipv6() {
        let t = topo_with(
            LinkLayer::Ethernet,
            vec![
                gid(1, "2001:db8::1", V2, Some("e")),
                gid(2, "::ffff:10.0.0.1", V1, Some("e")),
            ],
            &["e"],
        );
        assert_eq!(choose_gid(&t, "mlx5_0", 1).unwrap().index, 2);
        let t = topo_with(
            LinkLayer::Ethernet,
            vec![
                gid(1, "2001:db8::1", V1, Some("e")),
                gid(2, "2001:db8::1", V2, Some("e")),
            ],
            &["e"],
        );
        let c = choose_gid(&t, "mlx5_0", 1).unwrap();
        assert_eq!((c.index, c.is_ipv6()), (2, true));
    }

    #[test]
    fn nothing_on_infiniband_or_without_usable_gid() {
        let t = topo_with(
            LinkLayer::InfiniBand,
            vec![gid(0, "fe80::1", None, None)],
            &[],
        );
        assert_eq!(choose_gid(&t, "mlx5_0", 1), None);
        let t = topo_with(
            LinkLayer::Ethernet,
            vec![
                gid(0, "fe80::1", V2, Some("e")),
                gid(1, "::ffff:10.0.0.1", V2, Some("gone")),
            ],
            &["e"],
        );
        assert_eq!(choose_gid(&t, "mlx5_0", 1), None);
        assert_eq!(choose_gid(&t, "mlx5_9", 1), None);
        assert_eq!(choose_gid(&t, "mlx5_0", 2), None);
    }

    fn nccl_port(gids: Vec<Gid>) -> Port {
        let t = topo_with(LinkLayer::Ethernet, gids, &[]);
        t.rdma_devices[0].ports[0].clone()
    }

    fn env(pairs: &[(&str, &str)]) -> NcclGidEnv {
        NcclGidEnv::from_env(
            &pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
    }

    /// A host table with IPv4 on two subnets and a global IPv6 address.
    fn two_subnets() -> Port {
        nccl_port(vec![
            gid(0, "fe80::b8ce:f6ff:fe00:1", V1, Some("a")),
            gid(1, "fe80::b8ce:f6ff:fe00:1", V2, Some("a")),
            gid(2, "::ffff:10.8.10.4", V1, Some("a")),
            gid(3, "::ffff:10.8.10.4", V2, Some("a")),
            gid(4, "::ffff:192.168.7.4", V1, Some("b")),
            gid(5, "::ffff:192.168.7.4", V2, Some("b")),
            gid(6, "fd00:7::4", V1, Some("a")),
            gid(7, "fd00:7::4", V2, Some("a")),
        ])
    }

    /// NCCL's scan, case by case as `ncclUpdateGidIndex` decides.
    #[test]
    fn nccl_auto_choice_follows_its_variables() {
        let p = two_subnets();
        // Default: the first IPv4 GID (2, v1) is taken for its family, then 3 for v2.
        assert_eq!(nccl_gid_index(&p, &NcclGidEnv::default()), Some(3));
        // A range moves it to the other subnet's v2 GID.
        let r = env(&[("NCCL_IB_ADDR_RANGE", "192.168.0.0/16")]);
        assert_eq!(nccl_gid_index(&p, &r), Some(5));
        // RoCE v1 wanted: the family switch lands on 2 and no later v1 replaces it.
        assert_eq!(
            nccl_gid_index(&p, &env(&[("NCCL_IB_ROCE_VERSION_NUM", "1")])),
            Some(2)
        );
        // IPv6: link-local 1 is not valid; 6 (v1) is not the wanted version while 0
        // is invalid only through its version rule; 7 (v2) wins.
        assert_eq!(
            nccl_gid_index(&p, &env(&[("NCCL_IB_ADDR_FAMILY", "AF_INET6")])),
            Some(7)
        );
        // A forced index is used as is; any other family text is AF_INET.
        assert_eq!(
            nccl_gid_index(&p, &env(&[("NCCL_IB_GID_INDEX", "6")])),
            Some(6)
        );
        assert_eq!(
            nccl_gid_index(&p, &env(&[("NCCL_IB_ADDR_FAMILY", "inet6")])),
            Some(3)
        );
        // Ranges NCCL ignores: no '/', the wrong family, a length past 32.
        for bad in ["192.168.0.0", "fd00::/16", "192.168.0.0/33"] {
            assert_eq!(
                nccl_gid_index(&p, &env(&[("NCCL_IB_ADDR_RANGE", bad)])),
                Some(3),
                "{bad}"
            );
        }
        // An IPv6 range on an IPv6 family.
        let v6 = env(&[
            ("NCCL_IB_ADDR_FAMILY", "AF_INET6"),
            ("NCCL_IB_ADDR_RANGE", "fd00:7::/32"),
        ]);
        assert_eq!(nccl_gid_index(&p, &v6), Some(7));
        let none = env(&[
            ("NCCL_IB_ADDR_FAMILY", "AF_INET6"),
            ("NCCL_IB_ADDR_RANGE", "fd00:8::/32"),
        ]);
        assert_eq!(nccl_gid_index(&p, &none), Some(0));
    }

    /// Where NCCL's own choice and the right one part: the host's IPv4 GIDs, shown in
    /// a pod by the upstream kernel, come first; an unreadable type stops the v2 step.
    #[test]
    fn nccl_choice_against_the_right_one() {
        let gids = vec![
            gid(0, "fe80::1", V1, Some("ens1f0np0")),
            gid(1, "fe80::1", V2, Some("ens1f0np0")),
            gid(2, "::ffff:10.8.10.4", V1, Some("ens1f0np0")),
            gid(3, "::ffff:10.8.10.4", V2, Some("ens1f0np0")),
            gid(4, "::ffff:192.168.7.4", V1, Some("net1")),
            gid(5, "::ffff:192.168.7.4", V2, Some("net1")),
        ];
        let t = topo_with(LinkLayer::Ethernet, gids.clone(), &["net1"]);
        let port = &t.rdma_devices[0].ports[0];
        assert_eq!(choose_gid(&t, "mlx5_0", 1).unwrap().index, 5);
        assert_eq!(nccl_gid_index(port, &NcclGidEnv::default()), Some(3));
        // 3's type unreadable: 2 is taken for its family, 3 has no version, 4 (v1) is
        // no better than 2, and 5 (v2) replaces it.
        let mut unreadable = gids;
        unreadable[3].gid_type = None;
        assert_eq!(
            nccl_gid_index(&nccl_port(unreadable.clone()), &NcclGidEnv::default()),
            Some(5)
        );
        unreadable[5].gid_type = None;
        assert_eq!(
            nccl_gid_index(&nccl_port(unreadable), &NcclGidEnv::default()),
            Some(2)
        );
        // InfiniBand: NCCL does not use the index.
        let ib = topo_with(LinkLayer::InfiniBand, Vec::new(), &[]);
        assert_eq!(
            nccl_gid_index(&ib.rdma_devices[0].ports[0], &NcclGidEnv::default()),
            None
        );
    }
}
