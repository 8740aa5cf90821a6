//! Replace identifying values in a capture, consistently: every distinct MAC, GUID,
//! UUID, IPv4 address (by its /16), IPv6 /64 prefix and the host name gets one
//! replacement, assigned in path order, so one snapshot always scrubs the same way
//! and values that must agree (a netdev's MAC and the link-local GID built from it,
//! an IPv4 address and its IPv4-mapped GID, an address and its route) still agree.

use crate::parse::parse_ext_caps;
use crate::sysfs::MemEntry;
use std::collections::{BTreeMap, HashMap};
use std::net::{Ipv4Addr, Ipv6Addr};

/// PCIe Device Serial Number extended capability.
const DSN_CAP_ID: u16 = 0x0003;

#[derive(Default)]
struct Scrubber {
    macs: HashMap<[u8; 6], [u8; 6]>,
    guids: HashMap<u64, u64>,
    uuids: HashMap<String, String>,
    nets16: HashMap<(u8, u8), (u8, u8)>,
    prefixes64: HashMap<u64, u64>,
    hostname: Option<String>,
    /// VPD serial numbers and UUIDs (`SN`, `V3`, `VU`) by value.
    vpd_values: HashMap<Vec<u8>, Vec<u8>>,
}

pub(super) fn scrub(entries: &mut BTreeMap<String, MemEntry>) {
    let hostname = entries
        .iter()
        .find(|(p, _)| p.ends_with("/sys/kernel/hostname"))
        .and_then(|(_, e)| match e {
            MemEntry::File(b) => {
                let h = String::from_utf8_lossy(b).trim().to_string();
                (h.len() >= 2).then_some(h)
            }
            _ => None,
        });
    let mut s = Scrubber {
        hostname,
        ..Scrubber::default()
    };
    for (path, entry) in entries.iter_mut() {
        let MemEntry::File(bytes) = entry else {
            continue;
        };
        if path.ends_with("/config") && bytes.len() == 4096 {
            zero_dsn(bytes);
            continue;
        }
        if path.ends_with("/vpd") {
            s.vpd(bytes);
            continue;
        }
        let Ok(text) = std::str::from_utf8(bytes) else {
            continue;
        };
        let out = if path.ends_with("/net/route") {
            s.route(text)
        } else if path.ends_with("/net/if_inet6") {
            s.if_inet6(text)
        } else {
            s.text(text)
        };
        *bytes = out.into_bytes();
    }
}

/// Read-only VPD keywords that identify a card: its serial number, and the UUIDs that
/// pair a ConnectX-8 PF with its Data Direct DMA function (rdma_topo reads `V3`, the
/// kernel `VU`); the same value gets the same replacement, so the pairing survives.
const VPD_IDENTIFYING: [&[u8; 2]; 3] = [b"SN", b"V3", b"VU"];

impl Scrubber {
    /// Replace the identifying keywords of a VPD (layout: parse/vpd.rs) in place and
    /// set the `RV` checksum again; data that does not parse is left alone.
    fn vpd(&mut self, data: &mut [u8]) {
        let mut at = 0;
        while at < data.len() {
            let tag = data[at];
            if tag == 0x78 || tag == 0xff || tag == 0 {
                return;
            }
            let (body, len) = if tag & 0x80 != 0 {
                match data.get(at + 1..at + 3) {
                    Some(l) => (at + 3, usize::from(u16::from_le_bytes([l[0], l[1]]))),
                    None => return,
                }
            } else {
                (at + 1, usize::from(tag & 0x07))
            };
            if body + len > data.len() {
                return;
            }
            if tag == 0x90 {
                let mut k = body;
                while k + 3 <= body + len {
                    let klen = usize::from(data[k + 2]);
                    let (start, end) = (k + 3, k + 3 + klen);
                    if end > body + len {
                        return;
                    }
                    let name = [data[k], data[k + 1]];
                    if VPD_IDENTIFYING.iter().any(|w| **w == name) {
                        let new = self.vpd_value(&data[start..end]);
                        data[start..end].copy_from_slice(&new);
                    } else if &name == b"RV" && klen > 0 {
                        // The checksum byte makes the bytes up to it sum to zero.
                        let sum = data[..start].iter().fold(0u8, |a, b| a.wrapping_add(*b));
                        data[start] = 0u8.wrapping_sub(sum);
                    }
                    k = end;
                }
            }
            at = body + len;
        }
    }

    fn vpd_value(&mut self, value: &[u8]) -> Vec<u8> {
        let n = self.vpd_values.len() + 1;
        self.vpd_values
            .entry(value.to_vec())
            .or_insert_with(|| {
                let digits = format!("{n:X}");
                let mut out = vec![b'0'; value.len()];
                let keep = digits.len().min(out.len());
                let at = out.len() - keep;
                out[at..].copy_from_slice(&digits.as_bytes()[digits.len() - keep..]);
                out
            })
            .clone()
    }
}

/// Zero the serial number in a PCIe Device Serial Number capability.
fn zero_dsn(config: &mut [u8]) {
    let Ok(caps) = parse_ext_caps(config) else {
        return;
    };
    for c in caps.iter().filter(|c| c.id == DSN_CAP_ID) {
        if let Some(serial) = config.get_mut(c.offset + 4..c.offset + 12) {
            serial.fill(0);
        }
    }
}

fn is_hex(b: u8) -> bool {
    b.is_ascii_hexdigit()
}

/// Whether `s` is `groups` groups of `width` hex digits separated by `sep`.
fn grouped(s: &[u8], groups: usize, width: usize, sep: u8) -> bool {
    s.len() == groups * width + groups - 1
        && s.iter().enumerate().all(|(i, b)| {
            if (i + 1) % (width + 1) == 0 {
                *b == sep
            } else {
                is_hex(*b)
            }
        })
}

fn hex_bytes(s: &[u8]) -> Vec<u8> {
    s.split(|b| *b == b':')
        .flat_map(|g| {
            g.chunks(2)
                .map(|c| u8::from_str_radix(std::str::from_utf8(c).unwrap_or("0"), 16).unwrap_or(0))
        })
        .collect()
}

fn colon_bytes(b: &[u8]) -> String {
    b.iter()
        .map(|x| format!("{x:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

fn is_uuid(s: &[u8]) -> bool {
    s.len() == 36
        && s.iter().enumerate().all(|(i, b)| {
            if matches!(i, 8 | 13 | 18 | 23) {
                *b == b'-'
            } else {
                is_hex(*b)
            }
        })
}

/// A netmask (contiguous leading ones), the unspecified address, loopback, multicast
/// and broadcast carry no identity.
fn keep_ipv4(a: Ipv4Addr) -> bool {
    let v = u32::from(a);
    a.is_loopback()
        || a.is_multicast()
        || a.is_broadcast()
        || v.leading_ones() + v.trailing_zeros() == 32
}

impl Scrubber {
    fn mac(&mut self, m: [u8; 6]) -> [u8; 6] {
        if m == [0; 6] || m == [0xff; 6] {
            return m;
        }
        let n = self.macs.len() as u32 + 1;
        *self
            .macs
            .entry(m)
            .or_insert([0x02, 0x00, 0x5c, (n >> 16) as u8, (n >> 8) as u8, n as u8])
    }

    fn guid(&mut self, g: u64) -> u64 {
        if g == 0 || g == u64::MAX {
            return g;
        }
        let n = self.guids.len() as u64 + 1;
        *self.guids.entry(g).or_insert(0x5ca1_ab1e_0000_0000 | n)
    }

    fn uuid(&mut self, u: &str) -> String {
        let n = self.uuids.len() as u64 + 1;
        self.uuids
            .entry(u.to_ascii_lowercase())
            .or_insert_with(|| format!("00000000-0000-4000-8000-{n:012x}"))
            .clone()
    }

    /// Each distinct /16 becomes its own 10.x/16 (11.x after 256 of them); the low two
    /// octets stay, so subnets, routes and broadcast addresses still fit together.
    fn ipv4(&mut self, a: Ipv4Addr) -> Ipv4Addr {
        if keep_ipv4(a) {
            return a;
        }
        let o = a.octets();
        let n = self.nets16.len();
        let (x, y) = *self
            .nets16
            .entry((o[0], o[1]))
            .or_insert(((10 + n / 256) as u8, (n % 256) as u8));
        Ipv4Addr::new(x, y, o[2], o[3])
    }

    /// GIDs and IPv6 addresses: IPv4-mapped ones by their IPv4 address; the interface
    /// id by the MAC it is built from (EUI-64) or as a GUID; prefixes other than
    /// fe80::/64 each become an fd00::/64.
    fn ipv6(&mut self, a: Ipv6Addr) -> Ipv6Addr {
        if a.is_unspecified() || a.is_loopback() {
            return a;
        }
        if let Some(v4) = a.to_ipv4_mapped() {
            return self.ipv4(v4).to_ipv6_mapped();
        }
        let bits = u128::from(a);
        let prefix = (bits >> 64) as u64;
        let iid = bits as u64;
        let new_prefix = if prefix == 0xfe80_0000_0000_0000 || prefix >> 48 == 0xff02 {
            prefix
        } else {
            let n = self.prefixes64.len() as u64 + 1;
            *self
                .prefixes64
                .entry(prefix)
                .or_insert(0xfd00_0000_0000_0000 | n)
        };
        let b = iid.to_be_bytes();
        let new_iid = if b[3] == 0xff && b[4] == 0xfe {
            let m = self.mac([b[0] ^ 0x02, b[1], b[2], b[5], b[6], b[7]]);
            u64::from_be_bytes([m[0] ^ 0x02, m[1], m[2], 0xff, 0xfe, m[3], m[4], m[5]])
        } else {
            self.guid(iid)
        };
        Ipv6Addr::from((u128::from(new_prefix) << 64) | u128::from(new_iid))
    }

    fn gid_text(&mut self, s: &[u8]) -> String {
        let b = hex_bytes(s);
        let mut a = [0u8; 16];
        a.copy_from_slice(&b[..16]);
        let out = self.ipv6(Ipv6Addr::from(a)).octets();
        out.chunks(2)
            .map(|c| format!("{:02x}{:02x}", c[0], c[1]))
            .collect::<Vec<_>>()
            .join(":")
    }

    /// Scan text for the identifier shapes the kernel and NVML print.
    fn text(&mut self, text: &str) -> String {
        let b = text.as_bytes();
        let mut out = String::with_capacity(text.len());
        let mut i = 0;
        let mut copied = 0;
        // A token may start after anything but a letter, digit, ':' or '.' ('-' is
        // allowed: `GPU-<uuid>`), and must end before a letter, digit or ':', and before
        // a '.' that continues a number.
        let starts = |i: usize| {
            i == 0 || !(b[i - 1].is_ascii_alphanumeric() || matches!(b[i - 1], b':' | b'.'))
        };
        let ends = |j: usize| {
            j >= b.len()
                || !(b[j].is_ascii_alphanumeric()
                    || b[j] == b':'
                    || (b[j] == b'.' && b.get(j + 1).is_some_and(u8::is_ascii_digit)))
        };
        while i < b.len() {
            if !starts(i) || !(b[i].is_ascii_hexdigit()) {
                i += 1;
                continue;
            }
            let try_len = |n: usize| (i + n <= b.len() && ends(i + n)).then(|| &b[i..i + n]);
            let replacement: Option<(usize, String)> =
                if let Some(t) = try_len(36).filter(|t| is_uuid(t)) {
                    Some((36, self.uuid(std::str::from_utf8(t).unwrap_or_default())))
                } else if let Some(t) = try_len(59).filter(|t| grouped(t, 20, 2, b':')) {
                    // IPoIB hardware address: 4 bytes of flags and QPN, then the port GID.
                    let bytes = hex_bytes(t);
                    let mut a = [0u8; 16];
                    a.copy_from_slice(&bytes[4..20]);
                    let gid = self.ipv6(Ipv6Addr::from(a)).octets();
                    let mut all = bytes[..4].to_vec();
                    all.extend_from_slice(&gid);
                    Some((59, colon_bytes(&all)))
                } else if let Some(t) = try_len(39).filter(|t| grouped(t, 8, 4, b':')) {
                    Some((39, self.gid_text(t)))
                } else if let Some(t) = try_len(19).filter(|t| grouped(t, 4, 4, b':')) {
                    let g = hex_bytes(t);
                    let v = u64::from_be_bytes([g[0], g[1], g[2], g[3], g[4], g[5], g[6], g[7]]);
                    let h = format!("{:016x}", self.guid(v));
                    Some((
                        19,
                        format!("{}:{}:{}:{}", &h[0..4], &h[4..8], &h[8..12], &h[12..16]),
                    ))
                } else if let Some(t) = try_len(17).filter(|t| grouped(t, 6, 2, b':')) {
                    let m = hex_bytes(t);
                    let new = self.mac([m[0], m[1], m[2], m[3], m[4], m[5]]);
                    Some((17, colon_bytes(&new)))
                } else {
                    self.dotted_ipv4(b, i, &ends)
                };
            match replacement {
                Some((len, new)) => {
                    out.push_str(&text[copied..i]);
                    out.push_str(&new);
                    i += len;
                    copied = i;
                }
                None => {
                    // Skip the rest of this word: its inner positions are no token starts.
                    while i < b.len()
                        && (b[i].is_ascii_alphanumeric() || matches!(b[i], b':' | b'.'))
                    {
                        i += 1;
                    }
                }
            }
        }
        out.push_str(&text[copied..]);
        if let Some(h) = self.hostname.clone() {
            out = replace_word(&out, &h, "scrubbed-host");
        }
        out
    }

    fn dotted_ipv4(
        &mut self,
        b: &[u8],
        i: usize,
        ends: &dyn Fn(usize) -> bool,
    ) -> Option<(usize, String)> {
        let mut j = i;
        let mut octets = [0u8; 4];
        for (k, o) in octets.iter_mut().enumerate() {
            let start = j;
            while j < b.len() && b[j].is_ascii_digit() && j - start < 3 {
                j += 1;
            }
            if j == start {
                return None;
            }
            *o = std::str::from_utf8(&b[start..j]).ok()?.parse::<u8>().ok()?;
            if k < 3 {
                if b.get(j) != Some(&b'.') {
                    return None;
                }
                j += 1;
            }
        }
        if !ends(j) {
            return None;
        }
        let a = self.ipv4(Ipv4Addr::from(octets));
        Some((j - i, a.to_string()))
    }

    /// `/proc/net/route`: destination and gateway are little-endian hex; the mask stays.
    fn route(&mut self, text: &str) -> String {
        let mut out = String::with_capacity(text.len());
        for (n, line) in text.split_inclusive('\n').enumerate() {
            if n == 0 {
                out.push_str(line);
                continue;
            }
            let mut field = 0;
            let mut rest = line;
            while !rest.is_empty() {
                let ws = rest.len() - rest.trim_start_matches([' ', '\t']).len();
                out.push_str(&rest[..ws]);
                rest = &rest[ws..];
                let end = rest.find([' ', '\t', '\n']).unwrap_or(rest.len());
                let word = &rest[..end];
                if (field == 1 || field == 2)
                    && word.len() == 8
                    && let Ok(v) = u32::from_str_radix(word, 16)
                {
                    let a = self.ipv4(Ipv4Addr::from(v.swap_bytes()));
                    out.push_str(&format!("{:08X}", u32::from(a).swap_bytes()));
                } else {
                    out.push_str(word);
                }
                if end < rest.len() && rest.as_bytes()[end] == b'\n' {
                    out.push('\n');
                    rest = &rest[end + 1..];
                } else {
                    rest = &rest[end..];
                }
                if !word.is_empty() {
                    field += 1;
                }
            }
        }
        out
    }

    /// `/proc/net/if_inet6`: 32 hex digits of address at the start of each line.
    fn if_inet6(&mut self, text: &str) -> String {
        let mut out = String::with_capacity(text.len());
        for line in text.split_inclusive('\n') {
            match line
                .get(..32)
                .and_then(|h| u128::from_str_radix(h, 16).ok())
            {
                Some(v) => {
                    let a = self.ipv6(Ipv6Addr::from(v));
                    out.push_str(&format!("{:032x}", u128::from(a)));
                    out.push_str(&line[32..]);
                }
                None => out.push_str(line),
            }
        }
        out
    }
}

/// Replace whole-word occurrences of `word`.
fn replace_word(text: &str, word: &str, with: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(pos) = rest.find(word) {
        let before = rest[..pos].chars().next_back();
        let after = rest[pos + word.len()..].chars().next();
        let boundary =
            |c: Option<char>| c.is_none_or(|c| !(c.is_alphanumeric() || c == '-' || c == '_'));
        out.push_str(&rest[..pos]);
        if boundary(before) && boundary(after) {
            out.push_str(with);
        } else {
            out.push_str(word);
        }
        rest = &rest[pos + word.len()..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consistent_across_shapes() {
        let mut s = Scrubber::default();
        let mac = s.text("b8:ce:f6:00:00:01\n");
        // The link-local GID of that MAC maps to the link-local GID of the new MAC.
        let ll = s.text("fe80:0000:0000:0000:bace:f6ff:fe00:0001\n");
        let m = hex_bytes(mac.trim().as_bytes());
        let expected = format!(
            "fe80:0000:0000:0000:{:02x}{:02x}:{:02x}ff:fe{:02x}:{:02x}{:02x}\n",
            m[0] ^ 2,
            m[1],
            m[2],
            m[3],
            m[4],
            m[5]
        );
        assert_eq!(ll, expected);
        assert_ne!(mac, "b8:ce:f6:00:00:01\n");
        // IPv4, its IPv4-mapped GID and its route agree.
        let ip = s.text("inet 192.168.10.21/24 brd 192.168.10.255\n");
        assert_eq!(ip, "inet 10.0.10.21/24 brd 10.0.10.255\n");
        let gid = s.text("0000:0000:0000:0000:0000:ffff:c0a8:0a15");
        assert_eq!(gid, "0000:0000:0000:0000:0000:ffff:0a00:0a15");
        let route = s.route("Iface\tDestination\tGateway\tFlags\tRefCnt\tUse\tMetric\tMask\nnet1\t000AA8C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n");
        assert!(
            route.contains("net1\t000A000A\t00000000\t0001\t0\t0\t0\t00FFFFFF"),
            "{route}"
        );
        // Same input, same output; GUIDs and UUIDs too.
        assert_eq!(s.text("b8:ce:f6:00:00:01"), mac.trim());
        let g1 = s.text("b8ce:f603:00a1:b2c4");
        assert_eq!(g1, s.text("b8ce:f603:00a1:b2c4"));
        assert_ne!(g1, "b8ce:f603:00a1:b2c4");
        let u = s.text("GPU UUID: \t GPU-4c8c5a9e-1f0e-3f4a-8a52-0e4c2d3b5e71\n");
        assert!(
            u.starts_with("GPU UUID: \t GPU-00000000-0000-4000-8000-"),
            "{u}"
        );
    }

    #[test]
    fn leaves_other_numbers_alone() {
        let mut s = Scrubber::default();
        for t in [
            "0000:18:00.0",
            "Video BIOS: \t 96.00.74.00.01",
            "5.15.0-105-generic",
            "28.39.1002",
            "255.255.255.0",
            "127.0.0.1",
            "0-31,64-95",
            "400 Gb/sec (4X NDR)",
            "0000:0000:0000:0000:0000:0000:0000:0000",
        ] {
            assert_eq!(s.text(t), t);
        }
    }

    #[test]
    fn ipoib_address_keeps_qpn_and_scrubs_gid() {
        let mut s = Scrubber::default();
        let hw = "00:00:10:49:fe:80:00:00:00:00:00:00:b8:ce:f6:03:00:a1:b2:c4";
        let out = s.text(hw);
        assert!(
            out.starts_with("00:00:10:49:fe:80:00:00:00:00:00:00:"),
            "{out}"
        );
        assert_ne!(out, hw);
        // The port GUID inside maps like the same GUID written on its own.
        let guid = s.text("b8ce:f603:00a1:b2c4");
        assert_eq!(out[36..].replace(':', ""), guid.replace(':', ""));
    }

    #[test]
    fn if_inet6_lines() {
        let mut s = Scrubber::default();
        let line = "fe80000000000000bacef6fffe000001 02 40 20 80     eth0\n";
        let out = s.if_inet6(line);
        assert!(!out.contains("bacef6fffe000001"), "{out}");
        assert!(out.starts_with("fe80000000000000") && out.ends_with(" 02 40 20 80     eth0\n"));
    }

    /// VPD with SN, V3 and the RV checksum.
    fn vpd(sn: &str, v3: &str) -> Vec<u8> {
        let mut d = vec![0x82, 4, 0];
        d.extend(b"CX-8");
        let mut ro = Vec::new();
        for (k, v) in [(b"SN", sn), (b"V3", v3)] {
            ro.extend(k);
            ro.push(v.len() as u8);
            ro.extend(v.as_bytes());
        }
        ro.extend(b"RV\x01\x00");
        d.push(0x90);
        d.extend((ro.len() as u16).to_le_bytes());
        d.extend(ro);
        d.push(0x78);
        d
    }

    #[test]
    fn vpd_serials_and_uuids_are_replaced_and_pairs_kept() {
        let mut s = Scrubber::default();
        let mut pf = vpd("MT2530X04711", "6c1d0e8a3f2b4a719d350b7e2c4a1f01");
        let mut dma = vpd("MT2530X04711", "6c1d0e8a3f2b4a719d350b7e2c4a1f01");
        let mut other = vpd("MT2531X04712", "6c1d0e8a3f2b4a719d350b7e2c4a1f02");
        for d in [&mut pf, &mut dma, &mut other] {
            s.vpd(d);
        }
        let v3 = |d: &[u8]| crate::parse::vpd_ro_keyword(d, b"V3").unwrap().unwrap();
        let sn = |d: &[u8]| crate::parse::vpd_ro_keyword(d, b"SN").unwrap().unwrap();
        assert_eq!(v3(&pf), v3(&dma));
        assert_ne!(v3(&pf), v3(&other));
        assert!(!v3(&pf).contains("6c1d") && !sn(&pf).contains("MT25"));
        // The checksum: every byte up to and including RV's sums to zero.
        let rv = pf.windows(2).position(|w| w == b"RV").unwrap() + 3;
        assert_eq!(pf[..=rv].iter().fold(0u8, |a, b| a.wrapping_add(*b)), 0);
    }
}
