//! `NCCL_IB_HCA`, read exactly as NCCL 2.30 reads it (`parseStringList` and
//! `matchIfList` in nccl `src/misc/utils.cc`, the `^` / `=` handling in
//! `ncclIbInitDevices`, `src/transport/net_ib/init.cc`, tag v2.30.7-1):
//! `[^][=]name[:port[:rail[:plane]]][,…]`. A leading `^` excludes the listed devices, a
//! following `=` makes every name exact instead of a prefix (`mlx5_1` otherwise also
//! selects `mlx5_10`…`mlx5_19`). Entries split at `,` with empty ones skipped
//! (`strtok_r`), fields at `:` (`strsep`); a missing or empty field is −1, which as a
//! port matches every port (`matchPort`). The rail and plane ids (new in 2.30) label the
//! devices an entry selects; NCCL keeps channels on one rail and never mixes planes
//! (`src/graph/search.cc`). Nothing is trimmed: NCCL compares bytes.
//!
//! Names are matched against the verbs device (`devices[d]->name`), before NCCL adds
//! the `_dma` suffix of a ConnectX-8 Data Direct device: `mlx5_0` selects `mlx5_0_dma`,
//! the only one NCCL exposes under `NCCL_IB_DATA_DIRECT=1` (its default), and `mlx5_0`
//! too under `NCCL_IB_DATA_DIRECT=2`; `mlx5_0_dma` selects nothing.
//!
//! NCCL up to 2.29 had a hand-written scanner: an empty port (`mlx5_0:`) read as
//! `atoi("") = 0` and matched no port, fields after the port were ignored, and a name
//! past 63 bytes overran its buffer (2.30 truncates it). This module reads 2.30's way
//! and still refuses names past 63 bytes, which older releases cannot hold.

use super::error::ParseError;
use serde::{Deserialize, Serialize};
use std::fmt;

/// Entries NCCL keeps (`MAX_IB_DEVS`); it silently ignores the rest.
pub const MAX_HCA_ENTRIES: usize = 32;
/// Longest name NCCL can hold: `struct netIf { char prefix[64]; }` and no bounds check.
pub const MAX_HCA_NAME: usize = 63;

/// One `name[:port[:rail[:plane]]]` entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HcaEntry {
    /// Device name, or its prefix when the list is not exact.
    pub name: String,
    /// `None` (field missing or empty): every port; so is −1. A port that is not a
    /// number reads as 0 (`atoi`), which matches no port.
    pub port: Option<i32>,
    /// Rail id given to the selected devices (NCCL 2.30, `int16_t`); `None`: unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rail: Option<i16>,
    /// Plane id given to the selected devices (NCCL 2.30, `int16_t`); `None`: unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plane: Option<i16>,
}

/// A parsed `NCCL_IB_HCA` value.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HcaFilter {
    /// Leading `^`: the entries say which ports NCCL must not use.
    pub exclude: bool,
    /// `=` (after any `^`): names are exact, not prefixes.
    pub exact: bool,
    pub entries: Vec<HcaEntry>,
    /// More than [`MAX_HCA_ENTRIES`] entries were given; NCCL ignores the rest.
    pub truncated: bool,
}

impl HcaFilter {
    /// Whether NCCL would use `port` of `device` under this filter. An empty list
    /// selects everything, so `^` alone excludes everything.
    pub fn selects(&self, device: &str, port: u32) -> bool {
        self.picks(device, Some(port))
    }

    /// Whether NCCL would pick the network interface `name` under this list, read as
    /// `NCCL_SOCKET_IFNAME` (the same grammar; `matchIfList` is given no port there, so
    /// an entry's port does not count).
    pub fn selects_interface(&self, name: &str) -> bool {
        self.picks(name, None)
    }

    /// The first entry that selects `port` of `device` in an include list: the one whose
    /// rail and plane ids NCCL gives the port (`userIfId`). `None` in an exclude list.
    pub fn entry_for(&self, device: &str, port: u32) -> Option<&HcaEntry> {
        if self.exclude {
            return None;
        }
        self.entries
            .iter()
            .find(|e| self.entry_picks(e, device, Some(port)))
    }

    fn entry_picks(&self, e: &HcaEntry, name: &str, port: Option<u32>) -> bool {
        let name_ok = if self.exact {
            name == e.name
        } else {
            name.starts_with(&e.name)
        };
        let port_ok = match (e.port, port) {
            (Some(-1), _) | (None, _) | (_, None) => true,
            (Some(listed), Some(port)) => i64::from(listed) == i64::from(port),
        };
        name_ok && port_ok
    }

    fn picks(&self, name: &str, port: Option<u32>) -> bool {
        let listed =
            self.entries.is_empty() || self.entries.iter().any(|e| self.entry_picks(e, name, port));
        listed != self.exclude
    }
}

/// Parse an `NCCL_IB_HCA` value.
///
/// # Errors
/// A name longer than [`MAX_HCA_NAME`] bytes: NCCL would write past its buffer.
pub fn parse_nccl_ib_hca(text: &str) -> Result<HcaFilter, ParseError> {
    let mut rest = text;
    let exclude = rest.starts_with('^');
    if exclude {
        rest = &rest[1..];
    }
    let exact = rest.starts_with('=');
    if exact {
        rest = &rest[1..];
    }
    let mut filter = HcaFilter {
        exclude,
        exact,
        ..HcaFilter::default()
    };
    // NCCL stops at the first NUL, like any C string.
    let rest = rest.split('\0').next().unwrap_or_default();
    for item in rest.split(',') {
        let mut fields = item.split(':');
        let name = fields.next().unwrap_or_default();
        if name.is_empty() {
            continue;
        }
        // Absent or empty: −1 in NCCL; `int16_t` keeps the low 16 bits of rail and plane.
        let mut field = || fields.next().filter(|f| !f.is_empty()).map(atoi);
        let port = field();
        let rail = field().map(|v| v as i16);
        let plane = field().map(|v| v as i16);
        if name.len() > MAX_HCA_NAME {
            return Err(ParseError::new(
                "NCCL_IB_HCA",
                text,
                format!("a name is longer than the {MAX_HCA_NAME} bytes NCCL can hold"),
            ));
        }
        if filter.entries.len() == MAX_HCA_ENTRIES {
            filter.truncated = true;
            break;
        }
        filter.entries.push(HcaEntry {
            name: name.to_string(),
            port,
            rail,
            plane,
        });
    }
    Ok(filter)
}

/// C's `atoi`: optional blanks and sign, then digits; anything else ends the number
/// (no digits: 0). Saturates instead of overflowing.
fn atoi(s: &str) -> i32 {
    let s = s.trim_start_matches([' ', '\t', '\n', '\x0b', '\x0c', '\r']);
    let (negative, digits) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let mut value: i64 = 0;
    for d in digits.bytes().take_while(u8::is_ascii_digit) {
        value = (value * 10 + i64::from(d - b'0')).min(i64::from(i32::MAX) + 1);
    }
    let value = if negative { -value } else { value };
    value.clamp(i64::from(i32::MIN), i64::from(i32::MAX)) as i32
}

impl fmt::Display for HcaFilter {
    /// The canonical text, which parses back to the same filter.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.exclude {
            f.write_str("^")?;
        }
        if self.exact {
            f.write_str("=")?;
        }
        for (i, e) in self.entries.iter().enumerate() {
            // A first name starting with a marker NCCL would take as one: an empty
            // first item keeps it a name.
            let marker = match (self.exclude, self.exact) {
                (false, false) => e.name.starts_with(['^', '=']),
                (true, false) => e.name.starts_with('='),
                _ => false,
            };
            if i > 0 || marker {
                f.write_str(",")?;
            }
            f.write_str(&e.name)?;
            // Trailing unset fields are left out; an unset one before a set one is empty.
            let fields = [
                e.port.map(i64::from),
                e.rail.map(i64::from),
                e.plane.map(i64::from),
            ];
            let last = fields.iter().rposition(Option::is_some);
            for v in fields.iter().take(last.map_or(0, |l| l + 1)) {
                match v {
                    Some(v) => write!(f, ":{v}")?,
                    None => f.write_str(":")?,
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_exact_and_exclude() {
        let f = parse_nccl_ib_hca("mlx5_1").unwrap();
        assert!(f.selects("mlx5_1", 1) && f.selects("mlx5_10", 1) && !f.selects("mlx5_2", 1));
        let f = parse_nccl_ib_hca("=mlx5_1").unwrap();
        assert!(f.selects("mlx5_1", 1) && !f.selects("mlx5_10", 1));
        let f = parse_nccl_ib_hca("^=mlx5_1:1").unwrap();
        assert!(!f.selects("mlx5_1", 1) && f.selects("mlx5_1", 2) && f.selects("mlx5_10", 1));
        // `=^` is not `^=`: the `^` becomes part of the name.
        let f = parse_nccl_ib_hca("=^mlx5_1").unwrap();
        assert!(!f.exclude && f.exact && f.entries[0].name == "^mlx5_1");
    }

    #[test]
    fn ports_and_empty_lists() {
        let f = parse_nccl_ib_hca("mlx5_0:1,mlx5_1:x,,mlx5_2:").unwrap();
        let ports: Vec<_> = f.entries.iter().map(|e| e.port).collect();
        // 2.30: an empty port field is −1, every port (2.29 read it as port 0).
        assert_eq!(ports, [Some(1), Some(0), None]);
        assert!(!f.selects("mlx5_1", 1), "a port of 0 matches nothing");
        assert!(f.selects("mlx5_2", 2), "an empty port matches every port");
        assert!(
            parse_nccl_ib_hca("=mlx5_0:-1")
                .unwrap()
                .selects("mlx5_0", 2)
        );
        assert!(parse_nccl_ib_hca("").unwrap().selects("anything", 1));
        assert!(!parse_nccl_ib_hca("^").unwrap().selects("anything", 1));
        // An entry without a name is skipped, as strtok_r + strsep leave it.
        assert!(parse_nccl_ib_hca(":1,mlx5_0").unwrap().entries.len() == 1);
    }

    /// NCCL 2.30's rail and plane fields, and the entry that gives a port its ids.
    #[test]
    fn rail_and_plane_fields() {
        let f = parse_nccl_ib_hca("=mlx5_0:1:0:0,mlx5_1::1:0,mlx5_2:1:2:1:9,mlx5_3:1::1").unwrap();
        let ids: Vec<_> = f
            .entries
            .iter()
            .map(|e| (e.port, e.rail, e.plane))
            .collect();
        assert_eq!(
            ids,
            [
                (Some(1), Some(0), Some(0)),
                (None, Some(1), Some(0)),
                (Some(1), Some(2), Some(1)),
                (Some(1), None, Some(1)),
            ]
        );
        assert_eq!(f.entry_for("mlx5_1", 2).and_then(|e| e.rail), Some(1));
        assert_eq!(f.entry_for("mlx5_4", 1), None);
        assert_eq!(
            parse_nccl_ib_hca("^mlx5_0:1:3")
                .unwrap()
                .entry_for("mlx5_1", 1),
            None
        );
        // int16_t: the low 16 bits.
        assert_eq!(
            parse_nccl_ib_hca("mlx5_0:1:65537").unwrap().entries[0].rail,
            Some(1)
        );
    }

    #[test]
    fn limits_of_nccls_buffers() {
        let long = "m".repeat(64);
        assert!(parse_nccl_ib_hca(&long).is_err());
        assert!(parse_nccl_ib_hca(&long[..63]).is_ok());
        let many: Vec<String> = (0..40).map(|i| format!("mlx5_{i}")).collect();
        let f = parse_nccl_ib_hca(&many.join(",")).unwrap();
        assert!(f.truncated && f.entries.len() == MAX_HCA_ENTRIES);
    }

    #[test]
    fn display_parses_back() {
        for text in [
            "^=mlx5_0:1,mlx5_1",
            "mlx5",
            ",^odd",
            "^,=odd",
            "==x",
            "=mlx5_0::2:1,mlx5_1:1:0",
            "mlx5_0:1::3",
        ] {
            let f = parse_nccl_ib_hca(text).unwrap();
            assert_eq!(parse_nccl_ib_hca(&f.to_string()).unwrap(), f, "{text}");
        }
        assert_eq!(parse_nccl_ib_hca(",^odd").unwrap().to_string(), ",^odd");
    }
}
