//! `NCCL_IB_HCA`, read exactly as NCCL reads it (`parseStringList` and `matchIfList` in
//! nccl `src/misc/utils.cc`, the `^` / `=` handling in `ncclIbInitDevices`):
//! `[^][=]name[:port][,name[:port]…]`. A leading `^` excludes the listed devices, a
//! following `=` makes every name exact instead of a prefix (`mlx5_1` otherwise also
//! selects `mlx5_10`…`mlx5_19`). Nothing is trimmed: NCCL compares bytes.

use super::error::ParseError;
use serde::{Deserialize, Serialize};
use std::fmt;

/// Entries NCCL keeps (`MAX_IB_DEVS`); it silently ignores the rest.
pub const MAX_HCA_ENTRIES: usize = 32;
/// Longest name NCCL can hold: `struct netIf { char prefix[64]; }` and no bounds check.
pub const MAX_HCA_NAME: usize = 63;

/// One `name[:port]` entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HcaEntry {
    /// Device name, or its prefix when the list is not exact.
    pub name: String,
    /// `None`: every port. A port that is not a number reads as 0 (`atoi`), which
    /// matches no port.
    pub port: Option<i32>,
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

    fn picks(&self, name: &str, port: Option<u32>) -> bool {
        let listed = self.entries.is_empty()
            || self.entries.iter().any(|e| {
                let name_ok = if self.exact {
                    name == e.name
                } else {
                    name.starts_with(&e.name)
                };
                let port_ok = match (e.port, port) {
                    (Some(listed), Some(port)) => i64::from(listed) == i64::from(port),
                    _ => true,
                };
                name_ok && port_ok
            });
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
        let (name, port) = match item.split_once(':') {
            Some((name, port)) => (name, Some(atoi(port))),
            None => (item, None),
        };
        if name.is_empty() {
            continue;
        }
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
            if let Some(p) = e.port {
                write!(f, ":{p}")?;
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
        assert_eq!(ports, [Some(1), Some(0), Some(0)]);
        assert!(!f.selects("mlx5_1", 1), "a port of 0 matches nothing");
        assert!(parse_nccl_ib_hca("").unwrap().selects("anything", 1));
        assert!(!parse_nccl_ib_hca("^").unwrap().selects("anything", 1));
        // NCCL's `atoi` reads the rail field's colon as the end of the port.
        assert_eq!(
            parse_nccl_ib_hca("mlx5_0:1:0").unwrap().entries[0].port,
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
        for text in ["^=mlx5_0:1,mlx5_1", "mlx5", ",^odd", "^,=odd", "==x"] {
            let f = parse_nccl_ib_hca(text).unwrap();
            assert_eq!(parse_nccl_ib_hca(&f.to_string()).unwrap(), f, "{text}");
        }
        assert_eq!(parse_nccl_ib_hca(",^odd").unwrap().to_string(), ",^odd");
    }
}
