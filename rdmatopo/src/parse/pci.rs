use super::error::ParseError;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

/// A PCI function address. Displays in the kernel's form, `%04x:%02x:%02x.%x`: the
/// domain grows past four digits when it has to (VMD `10000:00:00.0`, Hyper-V).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PciAddr {
    /// The PCI domain (segment).
    pub domain: u32,
    /// The bus number.
    pub bus: u8,
    /// The device number (0-31).
    pub device: u8,
    /// The function number (0-7).
    pub function: u8,
}

impl PciAddr {
    /// The address `domain:bus:device.function`.
    pub const fn new(domain: u32, bus: u8, device: u8, function: u8) -> Self {
        Self {
            domain,
            bus,
            device,
            function,
        }
    }

    /// NVML's form: `00000000:3B:00.0`.
    pub fn nvml(&self) -> String {
        format!(
            "{:08X}:{:02X}:{:02X}.{:X}",
            self.domain, self.bus, self.device, self.function
        )
    }

    /// The same card's function 0 (NCCL merges the ports of one card this way).
    #[doc(hidden)]
    pub fn function0(&self) -> Self {
        Self {
            function: 0,
            ..*self
        }
    }

    /// VF `index` of this PF, whose SR-IOV capability gives the First VF Offset and VF
    /// Stride (`sriov_offset`, `sriov_stride`): the routing ID (bus, device, function as
    /// one number) of VF n is the PF's plus offset + n x stride, as the kernel places
    /// VFs (`pci_iov_virtfn_bus`, `pci_iov_virtfn_devfn` in drivers/pci/iov.c). `None`
    /// past bus 255.
    #[doc(hidden)]
    pub fn virtfn(&self, offset: u32, stride: u32, index: u32) -> Option<Self> {
        let pf = u32::from(self.bus) << 8 | u32::from(self.device) << 3 | u32::from(self.function);
        let routing = stride
            .checked_mul(index)
            .and_then(|n| n.checked_add(offset))
            .and_then(|n| n.checked_add(pf))?;
        Some(Self::new(
            self.domain,
            u8::try_from(routing >> 8).ok()?,
            ((routing >> 3) & 0x1f) as u8,
            (routing & 7) as u8,
        ))
    }

    /// Whether `name` looks like a PCI address (a sysfs path component).
    #[doc(hidden)]
    pub fn looks_like(name: &str) -> bool {
        name.len() >= 12 && name.parse::<PciAddr>().is_ok()
    }
}

impl fmt::Display for PciAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:04x}:{:02x}:{:02x}.{:x}",
            self.domain, self.bus, self.device, self.function
        )
    }
}

impl fmt::Debug for PciAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PciAddr({self})")
    }
}

impl PciAddr {
    /// The fixed-width forms, parsed without splitting: `%04x:%02x:%02x.%x` (sysfs) and
    /// NVML's `%08X:%02X:%02X.%X`, the domain 4 to 8 hex digits of either case.
    fn from_fixed_form(b: &[u8]) -> Option<Self> {
        let at = b.len().checked_sub(8).filter(|d| (4..=8).contains(d))?;
        let (domain, rest) = b.split_at(at);
        let [b':', b0, b1, b':', v0, v1, b'.', f] = *rest else {
            return None;
        };
        let hex = |c: u8| (c as char).to_digit(16);
        let num = |digits: &[u8]| {
            digits
                .iter()
                .try_fold(0u32, |acc, &c| Some(acc * 16 + hex(c)?))
        };
        let domain = num(domain)?;
        let bus = num(&[b0, b1])?;
        let device = num(&[v0, v1])?;
        let function = hex(f)?;
        (device <= 0x1f && function <= 7)
            .then(|| Self::new(domain, bus as u8, device as u8, function as u8))
    }

    /// A path component that is a PCI address (`0000:3b:00.0`), else `None`. Most
    /// components of a sysfs path are not: they are refused on their shape, without
    /// building an error.
    #[doc(hidden)]
    pub fn from_component(c: &str) -> Option<Self> {
        let shaped = c.len() >= 7
            && c.as_bytes()[c.len() - 2] == b'.'
            && c.bytes().filter(|b| *b == b':').count() >= 1;
        if shaped { c.parse().ok() } else { None }
    }
}

/// Parse a PCI address ([`PciAddr::parse`]).
impl std::str::FromStr for PciAddr {
    type Err = crate::error::Error;

    fn from_str(text: &str) -> Result<Self, crate::error::Error> {
        Ok(Self::parse(text)?)
    }
}

impl PciAddr {
    /// Accepts `0000:3b:00.0`, NVML's `00000000:3B:00.0`, and `3b:00.0` (domain 0).
    #[doc(hidden)]
    pub fn parse(text: &str) -> Result<Self, ParseError> {
        if let Some(addr) = Self::from_fixed_form(text.as_bytes()) {
            return Ok(addr);
        }
        // Called on every component of every sysfs path walked, most of which are not
        // addresses: no allocation unless the text is refused.
        let err = |r: &str| ParseError::new("PCI address", text, r);
        let hex = |s: &str, max_len: usize| -> Result<u32, ParseError> {
            if s.is_empty() || s.len() > max_len || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(err("bad hexadecimal field"));
            }
            u32::from_str_radix(s, 16).map_err(|_| err("bad hexadecimal field"))
        };
        let t = text.trim();
        let (rest, function) = t.rsplit_once('.').ok_or_else(|| err("missing .function"))?;
        let (head, device) = rest
            .rsplit_once(':')
            .ok_or_else(|| err("expected domain:bus:device.function"))?;
        let (domain, bus) = head.rsplit_once(':').unwrap_or(("0", head));
        if domain.contains(':') {
            return Err(err("expected domain:bus:device.function"));
        }
        let domain = hex(domain, 8)?;
        let bus = hex(bus, 2)?;
        let device = hex(device, 2)?;
        let function = hex(function, 1)?;
        if device > 0x1f || function > 7 {
            return Err(err("device must be at most 1f and function at most 7"));
        }
        Ok(Self::new(domain, bus as u8, device as u8, function as u8))
    }
}

impl Serialize for PciAddr {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for PciAddr {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

/// A PCIe link speed as the kernel prints it (`16.0 GT/s PCIe`, or `8 GT/s` before 5.7).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LinkSpeed {
    /// Transfer rate per lane.
    pub gts: f32,
}

impl LinkSpeed {
    /// PCIe generation (1 for 2.5 GT/s … 6 for 64 GT/s).
    pub fn generation(&self) -> u8 {
        match self.gts {
            g if g >= 64.0 => 6,
            g if g >= 32.0 => 5,
            g if g >= 16.0 => 4,
            g if g >= 8.0 => 3,
            g if g >= 5.0 => 2,
            _ => 1,
        }
    }
}

/// Parse `current_link_speed` / `max_link_speed`. `Unknown` (VFs, links down) is `None`.
pub fn parse_link_speed(text: &str) -> Result<Option<LinkSpeed>, ParseError> {
    let t = text.trim();
    if t.is_empty() || t.eq_ignore_ascii_case("unknown") {
        return Ok(None);
    }
    let num = t
        .strip_suffix(" PCIe")
        .unwrap_or(t)
        .strip_suffix(" GT/s")
        .ok_or_else(|| ParseError::new("PCIe link speed", text, "expected \"<n> GT/s [PCIe]\""))?;
    let gts: f32 = num
        .parse()
        .map_err(|_| ParseError::new("PCIe link speed", text, "bad number"))?;
    if !(0.0..=1024.0).contains(&gts) {
        return Err(ParseError::new("PCIe link speed", text, "out of range"));
    }
    Ok(Some(LinkSpeed { gts }))
}

/// Parse `numa_node`: a node number, or `-1` for unknown (`None`).
pub fn parse_numa_node(text: &str) -> Result<Option<u32>, ParseError> {
    let n: i64 = text
        .trim()
        .parse()
        .map_err(|_| ParseError::new("numa_node", text, "not an integer"))?;
    match n {
        -1 => Ok(None),
        0..=4095 => Ok(Some(n as u32)),
        _ => Err(ParseError::new("numa_node", text, "out of range")),
    }
}

/// Parse a `0x`-prefixed hex attribute of up to 32 bits (`class`).
pub fn parse_hex_u32(what: &'static str, text: &str) -> Result<u32, ParseError> {
    let t = text.trim();
    let digits = t
        .strip_prefix("0x")
        .or_else(|| t.strip_prefix("0X"))
        .unwrap_or(t);
    if digits.is_empty() || digits.len() > 8 {
        return Err(ParseError::new(
            what,
            text,
            "expected 0x and 1 to 8 hex digits",
        ));
    }
    u32::from_str_radix(digits, 16).map_err(|_| ParseError::new(what, text, "not hexadecimal"))
}

/// Parse a 16-bit id (`vendor`, `device`).
pub fn parse_hex_u16(what: &'static str, text: &str) -> Result<u16, ParseError> {
    let v = parse_hex_u32(what, text)?;
    u16::try_from(v).map_err(|_| ParseError::new(what, text, "larger than 16 bits"))
}

/// Parse a function's `class` (`0x030200`): base class, subclass and programming
/// interface, 24 bits, which the kernel prints as `0x%06x`.
pub fn parse_pci_class(text: &str) -> Result<u32, ParseError> {
    let v = parse_hex_u32("class", text)?;
    if v > 0xff_ffff {
        return Err(ParseError::new("class", text, "larger than 24 bits"));
    }
    Ok(v)
}

/// A function's identity as its `uevent` states it: one read instead of `class`,
/// `vendor`, `device`, `subsystem_vendor` and `subsystem_device`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PciIds {
    pub class: u32,
    pub vendor: u16,
    pub device: u16,
    /// Subsystem vendor and device; `None` where the file leaves `PCI_SUBSYS_ID` out
    /// (the kernel always writes it; a hand-made capture may not).
    pub subsystem: Option<(u16, u16)>,
    /// The driver bound to the function (`DRIVER=nvidia`, the name its `driver` link
    /// ends in); `None` where none is bound or the name is not one a driver has.
    pub driver: Option<String>,
}

/// A PCI function's `uevent`: `KEY=value` lines, of which `PCI_CLASS=30200` (the class,
/// `%04X`), `PCI_ID=10DE:2330` (vendor and device, `%04X:%04X`) and
/// `PCI_SUBSYS_ID=10DE:16C1` (the same of the subsystem) are read (the kernel's
/// `pci_uevent` in drivers/pci/pci-driver.c), and `DRIVER=nvidia` (the driver core's
/// `dev_uevent` in drivers/base/core.c, written only while a driver is bound).
pub fn parse_pci_uevent(text: &str) -> Result<PciIds, ParseError> {
    let err = |reason| ParseError::new("PCI uevent", text, reason);
    let value = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix('='))
    };
    let hex = |s: &str, max: usize| -> Option<u32> {
        (!s.is_empty() && s.len() <= max && s.bytes().all(|b| b.is_ascii_hexdigit()))
            .then(|| u32::from_str_radix(s, 16).ok())
            .flatten()
    };
    let class = value("PCI_CLASS").ok_or_else(|| err("no PCI_CLASS"))?;
    let class = hex(class, 6).ok_or_else(|| err("PCI_CLASS is not 1 to 6 hex digits"))?;
    let pair = |id: &str| {
        let (v, d) = id.split_once(':')?;
        Some((hex(v, 4)? as u16, hex(d, 4)? as u16))
    };
    let (vendor, device) = value("PCI_ID")
        .and_then(pair)
        .ok_or_else(|| err("PCI_ID is not vendor:device in hex"))?;
    let subsystem = value("PCI_SUBSYS_ID")
        .map(|id| pair(id).ok_or_else(|| err("PCI_SUBSYS_ID is not vendor:device in hex")))
        .transpose()?;
    // A name the driver core could have printed: no path, no spaces or controls.
    let driver = value("DRIVER")
        .filter(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_graphic() && b != b'/'))
        .map(str::to_string);
    Ok(PciIds {
        class,
        vendor,
        device,
        subsystem,
        driver,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_uevent_gives_class_vendor_and_device() {
        let text = "DRIVER=nvidia\nPCI_CLASS=30200\nPCI_ID=10DE:2330\nPCI_SUBSYS_ID=10DE:16C1\nPCI_SLOT_NAME=0000:1b:00.0\nMODALIAS=pci:v000010DEd00002330sv000010DEsd000016C1bc03sc02i00\n";
        assert_eq!(
            parse_pci_uevent(text).unwrap(),
            PciIds {
                class: 0x030200,
                vendor: 0x10de,
                device: 0x2330,
                subsystem: Some((0x10de, 0x16c1)),
                driver: Some("nvidia".into()),
            }
        );
        // A bridge without a driver: the class has leading digits dropped by `%04X`.
        let bridge = parse_pci_uevent("PCI_CLASS=60400\nPCI_ID=1000:C030\n").unwrap();
        assert_eq!((bridge.class, bridge.vendor), (0x060400, 0x1000));
        assert_eq!(bridge.driver, None);
        // A driver name that is no name is no driver; the ids still stand.
        for odd in ["DRIVER=\n", "DRIVER=../../x\n", "DRIVER=a b\n"] {
            let ids =
                parse_pci_uevent(&format!("{odd}PCI_CLASS=30200\nPCI_ID=10DE:2330\n")).unwrap();
            assert_eq!((ids.driver, ids.vendor), (None, 0x10de), "{odd:?}");
        }
        // A capture without the subsystem line still tells class and ids.
        assert_eq!(bridge.subsystem, None);
        for bad in [
            "",
            "PCI_ID=10DE:2330\n",
            "PCI_CLASS=30200\n",
            "PCI_CLASS=30200\nPCI_ID=10DE\n",
            "PCI_CLASS=3020000\nPCI_ID=10DE:2330\n",
            "PCI_CLASS=\nPCI_ID=10DE:2330\n",
            "PCI_CLASS=30200\nPCI_ID=10DEE:2330\n",
            "PCI_CLASS=+30200\nPCI_ID=10DE:2330\n",
            "XPCI_CLASS=30200\nPCI_ID=10DE:2330\n",
            "PCI_CLASS=30200\nPCI_ID=10DE:2330\nPCI_SUBSYS_ID=10DE\n",
            "PCI_CLASS=30200\nPCI_ID=10DE:2330\nPCI_SUBSYS_ID=10DE:16C1X\n",
        ] {
            assert!(parse_pci_uevent(bad).is_err(), "{bad:?}");
        }
    }

    /// The fast path for the fixed-width spellings agrees with the general parser, which
    /// a leading space forces (it trims first).
    #[test]
    fn the_fixed_width_fast_path_agrees_with_the_general_parser() {
        for text in [
            "00000000:3B:00.0",
            "10000:e1:00.1",
            "ffffffff:00:1f.7",
            "fffffffff:00:00.0",
            "000:00:00.0",
            "0000000g:00:00.0",
            "0000:3b:00.0",
            "0000:3B:1F.7",
            "abcd:ff:1f.7",
            "0000:00:20.0",
            "0000:00:1f.8",
            "0000:0g:00.0",
            "000g:00:00.0",
            "0000-00:00.0",
            "0000:00:00:0",
            "+000:00:00.0",
        ] {
            let fast = text.parse::<PciAddr>().ok();
            let general = format!(" {text}").parse::<PciAddr>().ok();
            assert_eq!(fast, general, "{text}");
        }
    }

    #[test]
    fn addresses_in_every_form() {
        let a: PciAddr = "0000:3b:00.0".parse().unwrap();
        assert_eq!(a.to_string(), "0000:3b:00.0");
        assert_eq!(a.nvml(), "00000000:3B:00.0");
        assert_eq!("00000000:3B:00.0".parse::<PciAddr>().unwrap(), a);
        assert_eq!("3b:00.0".parse::<PciAddr>().unwrap(), a);
        assert_eq!(
            "10000:e1:00.1".parse::<PciAddr>().unwrap().to_string(),
            "10000:e1:00.1"
        );
        assert_eq!("0101:00:00.0".parse::<PciAddr>().unwrap().domain, 0x101);
        for bad in [
            "",
            "pci0000:00",
            "0000:3b:00",
            "0000:3b:20.0",
            "0000:3b:00.8",
            "zz:00.0",
            "0:0:0:0.0",
        ] {
            assert!(bad.parse::<PciAddr>().is_err(), "{bad}");
        }
        assert!(PciAddr::looks_like("0000:00:01.0"));
        assert!(!PciAddr::looks_like("pci0000:00"));
    }

    #[test]
    fn link_speeds_old_and_new() {
        assert_eq!(
            parse_link_speed("16.0 GT/s PCIe\n")
                .unwrap()
                .unwrap()
                .generation(),
            4
        );
        assert_eq!(parse_link_speed("8 GT/s").unwrap().unwrap().generation(), 3);
        assert_eq!(
            parse_link_speed("2.5 GT/s PCIe")
                .unwrap()
                .unwrap()
                .generation(),
            1
        );
        assert_eq!(parse_link_speed("Unknown\n").unwrap(), None);
        assert!(parse_link_speed("fast").is_err());
    }

    #[test]
    fn numa_and_hex() {
        assert_eq!(parse_numa_node("-1\n").unwrap(), None);
        assert_eq!(parse_numa_node("1\n").unwrap(), Some(1));
        assert!(parse_numa_node("999999").is_err());
        assert_eq!(parse_hex_u32("class", "0x030200\n").unwrap(), 0x030200);
        assert_eq!(parse_pci_class("0x030200\n").unwrap(), 0x030200);
        assert_eq!(parse_pci_class("0xffffff").unwrap(), 0xff_ffff);
        // The model holds 24 bits (its JSON refuses more): so does the parser.
        assert!(parse_pci_class("0x1000000").is_err());
        assert_eq!(parse_hex_u16("vendor", "0x15b3\n").unwrap(), 0x15b3);
        assert!(parse_hex_u16("vendor", "0x115b3").is_err());
    }
}
