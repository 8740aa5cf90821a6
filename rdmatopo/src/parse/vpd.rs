//! PCI Vital Product Data (`/sys/bus/pci/devices/<bdf>/vpd`, binary).
//!
//! The layout is the PCI Local Bus Specification's (6.4): resource tags, each either
//! small (one byte: type in bits 6-3, length in bits 2-0) or large (bit 7 set, then a
//! 16-bit little-endian length). The large tags read here are 0x82 (identifier
//! string) and 0x90 (VPD-R, the read-only keywords: two ASCII letters, a length byte,
//! the value). The small tag 0x78 ends the data.

use super::error::ParseError;

const LARGE: u8 = 0x80;
const TAG_VPD_R: u8 = 0x90;
const TAG_END: u8 = 0x78;

/// The value of read-only keyword `keyword` (`V3`, `SN`), trailing spaces and NULs
/// trimmed; `Ok(None)` when the data holds no such keyword.
pub fn vpd_ro_keyword(data: &[u8], keyword: &[u8; 2]) -> Result<Option<String>, ParseError> {
    let bad = |reason: &str| ParseError::new("PCI VPD", &hex_prefix(data), reason);
    let mut at = 0;
    while at < data.len() {
        let tag = data[at];
        if tag == TAG_END || tag == 0xff || tag == 0 {
            // End tag; an unprogrammed or absent VPD reads as 0xff or 0.
            return Ok(None);
        }
        let (body, len) = if tag & LARGE != 0 {
            let Some(len) = data.get(at + 1..at + 3) else {
                return Err(bad("large resource tag without its length"));
            };
            (at + 3, usize::from(u16::from_le_bytes([len[0], len[1]])))
        } else {
            (at + 1, usize::from(tag & 0x07))
        };
        let Some(value) = data.get(body..body + len) else {
            return Err(bad("a resource runs past the end of the data"));
        };
        if tag == TAG_VPD_R {
            let mut k = 0;
            while k + 3 <= value.len() {
                let (name, klen) = (&value[k..k + 2], usize::from(value[k + 2]));
                let Some(v) = value.get(k + 3..k + 3 + klen) else {
                    return Err(bad("a VPD-R keyword runs past its resource"));
                };
                if name == keyword {
                    let text = String::from_utf8_lossy(v);
                    return Ok(Some(text.trim_end_matches([' ', '\0']).to_string()));
                }
                k += 3 + klen;
            }
        }
        at = body + len;
    }
    Ok(None)
}

fn hex_prefix(data: &[u8]) -> String {
    data.iter().take(24).map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Identifier string, then VPD-R with PN, V3 and the RV checksum, then the end tag.
    fn sample(v3: &str) -> Vec<u8> {
        let mut d = vec![0x82];
        let id = b"NVIDIA ConnectX-8 SuperNIC";
        d.extend((id.len() as u16).to_le_bytes());
        d.extend(id);
        let mut ro = Vec::new();
        for (k, v) in [
            (b"PN", "900-9X81E-00EX-ST0 ".as_bytes()),
            (b"V3", v3.as_bytes()),
        ] {
            ro.extend(k);
            ro.push(v.len() as u8);
            ro.extend(v);
        }
        ro.extend(b"RV\x01\x00");
        d.push(TAG_VPD_R);
        d.extend((ro.len() as u16).to_le_bytes());
        d.extend(ro);
        d.push(TAG_END);
        d
    }

    #[test]
    fn reads_a_read_only_keyword() {
        let d = sample("9b3b2c4e6a1f4d1c8e2f0a7b5c3d9e11");
        assert_eq!(
            vpd_ro_keyword(&d, b"V3").unwrap().as_deref(),
            Some("9b3b2c4e6a1f4d1c8e2f0a7b5c3d9e11")
        );
        assert_eq!(
            vpd_ro_keyword(&d, b"PN").unwrap().as_deref(),
            Some("900-9X81E-00EX-ST0")
        );
        assert_eq!(vpd_ro_keyword(&d, b"SN").unwrap(), None);
    }

    #[test]
    fn unprogrammed_and_truncated_data() {
        assert_eq!(vpd_ro_keyword(&[0xff; 16], b"V3").unwrap(), None);
        assert_eq!(vpd_ro_keyword(&[], b"V3").unwrap(), None);
        let d = sample("abc");
        assert!(vpd_ro_keyword(&d[..d.len() - 8], b"V3").is_err());
        assert!(vpd_ro_keyword(&[TAG_VPD_R, 0x10], b"V3").is_err());
    }
}
