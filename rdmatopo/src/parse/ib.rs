use super::error::ParseError;
use serde::{Deserialize, Serialize};
use std::net::{Ipv4Addr, Ipv6Addr};

/// A port's logical state (`ports/<n>/state`, `"%d: %s"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum PortState {
    /// `0: NOP`.
    Nop,
    /// `1: DOWN`.
    Down,
    /// `2: INIT`.
    Init,
    /// `3: ARMED`.
    Armed,
    /// `4: ACTIVE`.
    Active,
    /// `5: ACTIVE_DEFER`.
    ActiveDefer,
    /// A number the kernel does not define.
    Unknown,
}

/// Parse `state` (`4: ACTIVE`). The number decides; the name is informative.
pub fn parse_port_state(text: &str) -> Result<PortState, ParseError> {
    let (num, _) = split_numbered(text, "port state")?;
    Ok(match num {
        0 => PortState::Nop,
        1 => PortState::Down,
        2 => PortState::Init,
        3 => PortState::Armed,
        4 => PortState::Active,
        5 => PortState::ActiveDefer,
        _ => PortState::Unknown,
    })
}

/// A port's physical state (`ports/<n>/phys_state`, `5: LinkUp`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct PhysState {
    /// The number (`5`).
    pub code: u32,
    /// The kernel's name (`LinkUp`).
    pub name: String,
}

impl PhysState {
    /// Whether the physical link is up (`5: LinkUp`).
    pub fn is_link_up(&self) -> bool {
        self.code == 5
    }
}

pub fn parse_phys_state(text: &str) -> Result<PhysState, ParseError> {
    let (code, name) = split_numbered(text, "port phys_state")?;
    Ok(PhysState {
        code,
        name: name.to_string(),
    })
}

fn split_numbered<'a>(text: &'a str, what: &'static str) -> Result<(u32, &'a str), ParseError> {
    let t = text.trim();
    let (num, name) = t
        .split_once(':')
        .ok_or_else(|| ParseError::new(what, text, "expected \"<n>: <name>\""))?;
    let num = num
        .trim()
        .parse()
        .map_err(|_| ParseError::new(what, text, "bad number"))?;
    Ok((num, name.trim()))
}

/// A port's link rate (`ports/<n>/rate`, `400 Gb/sec (4X NDR)`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Rate {
    /// The rate in Gb/s (`400`).
    pub gbps: f64,
    /// The number of lanes (`4` of `4X`).
    pub lanes: u32,
    /// Per-lane speed name (`NDR`, `HDR`, …), empty for SDR on old kernels.
    pub speed: String,
}

pub fn parse_rate(text: &str) -> Result<Rate, ParseError> {
    let err = |r: &str| ParseError::new("port rate", text, r);
    let t = text.trim();
    let (gbps, rest) = t
        .split_once(" Gb/sec")
        .ok_or_else(|| err("expected \"<n> Gb/sec (<w>X <speed>)\""))?;
    let gbps: f64 = gbps.trim().parse().map_err(|_| err("bad rate number"))?;
    if !(0.0..=1.0e6).contains(&gbps) {
        return Err(err("rate out of range"));
    }
    let inner = rest
        .trim()
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(|| err("missing (…)"))?;
    let (lanes, speed) = inner
        .split_once('X')
        .ok_or_else(|| err("missing lane count"))?;
    let lanes = lanes.trim().parse().map_err(|_| err("bad lane count"))?;
    Ok(Rate {
        gbps,
        lanes,
        speed: speed.trim().to_string(),
    })
}

/// `ports/<n>/link_layer`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum LinkLayer {
    /// `InfiniBand`.
    InfiniBand,
    /// `Ethernet` (RoCE).
    Ethernet,
    /// Anything else the kernel writes.
    Unknown,
}

impl LinkLayer {
    /// The kernel's text (`InfiniBand`).
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::InfiniBand => "InfiniBand",
            Self::Ethernet => "Ethernet",
            Self::Unknown => "Unknown",
        }
    }
}

pub fn parse_link_layer(text: &str) -> Result<LinkLayer, ParseError> {
    match text.trim() {
        "InfiniBand" => Ok(LinkLayer::InfiniBand),
        "Ethernet" => Ok(LinkLayer::Ethernet),
        "Unknown" => Ok(LinkLayer::Unknown),
        _ => Err(ParseError::new(
            "link_layer",
            text,
            "expected InfiniBand, Ethernet or Unknown",
        )),
    }
}

/// The kernel's text of an empty (or, under MLNX_OFED, another namespace's) GID slot.
const EMPTY_GID: &str = "0000:0000:0000:0000:0000:0000:0000:0000";

/// Parse a GID (`%pI6`: eight groups of four hex digits; compressed forms accepted too).
pub fn parse_gid(text: &str) -> Result<Ipv6Addr, ParseError> {
    let text = text.trim();
    // An empty slot, as nearly all of a pod's 255 are: one comparison, not 32 digits.
    if text == EMPTY_GID {
        return Ok(Ipv6Addr::UNSPECIFIED);
    }
    // The kernel's own form first, a group at a time: a pod's port has 255 slots to
    // parse, and std's parser (every IPv6 form, IPv4 tails) costs ten times as much.
    kernel_gid(text.as_bytes())
        .or_else(|| text.parse().ok())
        .ok_or_else(|| ParseError::new("GID", text, "not an IPv6-formatted GID"))
}

/// `%pI6`'s uncompressed text: eight groups of four hex digits, `:` between them.
fn kernel_gid(text: &[u8]) -> Option<Ipv6Addr> {
    if text.len() != 39 {
        return None;
    }
    let mut groups = [0u16; 8];
    for (i, group) in groups.iter_mut().enumerate() {
        let at = i * 5;
        if i > 0 && text[at - 1] != b':' {
            return None;
        }
        for &digit in &text[at..at + 4] {
            *group = *group << 4 | char::from(digit).to_digit(16)? as u16;
        }
    }
    Some(Ipv6Addr::from(groups))
}

/// The kernel's own text for a GID: eight uncompressed groups.
pub fn format_gid(gid: &Ipv6Addr) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut text = String::with_capacity(39);
    for (i, byte) in gid.octets().into_iter().enumerate() {
        if i > 0 && i % 2 == 0 {
            text.push(':');
        }
        text.push(char::from(HEX[usize::from(byte >> 4)]));
        text.push(char::from(HEX[usize::from(byte & 0xf)]));
    }
    text
}

pub fn gid_is_zero(gid: &Ipv6Addr) -> bool {
    gid.is_unspecified()
}

/// `fe80::/64`, which NCCL never picks for RoCE.
pub fn gid_is_link_local(gid: &Ipv6Addr) -> bool {
    let s = gid.segments();
    s[0] == 0xfe80 && s[1] == 0 && s[2] == 0 && s[3] == 0
}

/// The IPv4 address of an IPv4-mapped GID (`::ffff:a.b.c.d`).
pub fn gid_ipv4(gid: &Ipv6Addr) -> Option<Ipv4Addr> {
    gid.to_ipv4_mapped()
}

/// `gid_attrs/types/<i>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum GidType {
    #[serde(rename = "IB/RoCE v1")]
    /// `IB/RoCE v1`.
    IbRoceV1,
    #[serde(rename = "RoCE v2")]
    /// `RoCE v2`.
    RoceV2,
}

impl GidType {
    /// The kernel's text (`RoCE v2`).
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::IbRoceV1 => "IB/RoCE v1",
            Self::RoceV2 => "RoCE v2",
        }
    }

    /// `v1` / `v2`, as show_gids prints it.
    pub fn short(&self) -> &'static str {
        match self {
            Self::IbRoceV1 => "v1",
            Self::RoceV2 => "v2",
        }
    }
}

/// Parse a GID type. `RoCE v1` (NCCL accepts it) is v1.
pub fn parse_gid_type(text: &str) -> Result<GidType, ParseError> {
    match text.trim() {
        "IB/RoCE v1" | "RoCE v1" => Ok(GidType::IbRoceV1),
        "RoCE v2" => Ok(GidType::RoceV2),
        _ => Err(ParseError::new(
            "GID type",
            text,
            "expected \"IB/RoCE v1\" or \"RoCE v2\"",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// Eight groups of four lowercase hex digits, as `%pI6` prints them (the
        /// definition: each segment through `{:04x}`), and read back by `parse_gid`.
        #[test]
        fn format_gid_is_the_kernels_form(octets in proptest::prelude::any::<[u8; 16]>()) {
            let gid = Ipv6Addr::from(octets);
            let groups: Vec<String> = gid.segments().iter().map(|g| format!("{g:04x}")).collect();
            proptest::prop_assert_eq!(format_gid(&gid), groups.join(":"));
            proptest::prop_assert_eq!(parse_gid(&format_gid(&gid)).ok(), Some(gid));
        }
    }

    #[test]
    fn states() {
        assert_eq!(parse_port_state("4: ACTIVE\n").unwrap(), PortState::Active);
        assert_eq!(parse_port_state("1: DOWN").unwrap(), PortState::Down);
        assert_eq!(parse_port_state("9: WHAT").unwrap(), PortState::Unknown);
        assert!(parse_port_state("ACTIVE").is_err());
        let p = parse_phys_state("5: LinkUp\n").unwrap();
        assert!(p.is_link_up());
        assert_eq!(parse_phys_state("3: Disabled").unwrap().name, "Disabled");
    }

    #[test]
    fn rates_from_the_kernel_format() {
        let r = parse_rate("400 Gb/sec (4X NDR)\n").unwrap();
        assert_eq!((r.gbps, r.lanes, r.speed.as_str()), (400.0, 4, "NDR"));
        assert_eq!(parse_rate("2.5 Gb/sec (1X)").unwrap().speed, "");
        assert_eq!(parse_rate("100 Gb/sec (2X HDR)").unwrap().lanes, 2);
        assert_eq!(parse_rate("56 Gb/sec (4X FDR)").unwrap().gbps, 56.0);
        assert!(parse_rate("fast").is_err());
        assert!(parse_rate("400 Gb/sec 4X").is_err());
    }

    #[test]
    fn gids() {
        let g = parse_gid("0000:0000:0000:0000:0000:ffff:0a98:000c\n").unwrap();
        assert_eq!(gid_ipv4(&g).unwrap().to_string(), "10.152.0.12");
        assert_eq!(format_gid(&g), "0000:0000:0000:0000:0000:ffff:0a98:000c");
        let every_digit: Ipv6Addr = "0123:4567:89ab:cdef:fedc:ba98:7654:3210".parse().unwrap();
        assert_eq!(
            format_gid(&every_digit),
            "0123:4567:89ab:cdef:fedc:ba98:7654:3210"
        );
        let ll = parse_gid("fe80:0000:0000:0000:b8ce:f6ff:fe00:0001").unwrap();
        assert!(gid_is_link_local(&ll) && gid_ipv4(&ll).is_none());
        assert!(gid_is_zero(
            &parse_gid("0000:0000:0000:0000:0000:0000:0000:0000").unwrap()
        ));
        assert!(parse_gid("nonsense").is_err());
        // The kernel's form and std's reading of it agree; near misses of that form
        // are std's to judge.
        for text in [
            "fe80:0000:0000:0000:b8ce:f6ff:fe00:0001",
            "FE80:0000:0000:0000:B8CE:F6FF:FE00:0001",
            "2001:0db8:0000:0000:0000:ff00:0042:8329",
            "0000:0000:0000:0000:0000:ffff:c0a8:0a15",
        ] {
            assert_eq!(kernel_gid(text.as_bytes()), text.parse().ok(), "{text}");
        }
        for text in [
            "fe80:0000:0000:0000:b8ce:f6ff:fe00:000g",
            "fe80-0000:0000:0000:b8ce:f6ff:fe00:0001",
            "fe80:0000:0000:0000:b8ce:f6ff:fe00:00001",
            "fe80:0000:0000:0000:b8ce:f6ff:fe00:+001",
        ] {
            assert_eq!(kernel_gid(text.as_bytes()), None, "{text}");
            assert!(parse_gid(text).is_err(), "{text}");
        }
        assert_eq!(
            parse_gid("fe80::b8ce:f6ff:fe00:1").unwrap(),
            parse_gid("fe80:0000:0000:0000:b8ce:f6ff:fe00:0001").unwrap()
        );
        assert_eq!(parse_gid_type("RoCE v2\n").unwrap(), GidType::RoceV2);
        assert_eq!(parse_gid_type("IB/RoCE v1").unwrap(), GidType::IbRoceV1);
        assert!(parse_gid_type("v3").is_err());
    }
}
