//! PCI configuration space (`/sys/bus/pci/devices/<bdf>/config`, binary): the
//! extended-capability list and the Access Control Services (ACS) capability.
//!
//! Without `CAP_SYS_ADMIN` in the initial user namespace the kernel returns only the
//! first 64 bytes of `config` (`pci_read_config`), so extended capabilities (from
//! offset 0x100) are then not readable at all; that is reported, not guessed.

use super::error::ParseError;
use serde::{Deserialize, Serialize};

/// Extended capability id of ACS (PCIe base spec, "ACS Extended Capability").
pub const ACS_CAP_ID: u16 = 0x000D;
/// Extended capabilities start here.
const EXT_CAP_START: usize = 0x100;
/// Size of a full PCIe configuration space.
const EXT_CONFIG_SIZE: usize = 4096;

/// One extended capability header: id, version and where it sits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExtCap {
    pub id: u16,
    pub version: u8,
    pub offset: usize,
}

/// The extended-capability list, in chain order. Empty when the space is shorter than
/// 4096 bytes or holds no capability; a malformed chain ends the walk with an error.
pub fn parse_ext_caps(config: &[u8]) -> Result<Vec<ExtCap>, ParseError> {
    let mut out = Vec::new();
    if config.len() < EXT_CONFIG_SIZE {
        return Ok(out);
    }
    let mut offset = EXT_CAP_START;
    // Each capability takes at least one dword: the walk cannot be longer than this.
    let max_caps = (EXT_CONFIG_SIZE - EXT_CAP_START) / 4;
    for _ in 0..max_caps {
        let header = read_u32(config, offset);
        // An all-zero (or all-ones, device gone) header at 0x100 means "no capabilities".
        if header == 0 || header == u32::MAX {
            return Ok(out);
        }
        out.push(ExtCap {
            id: (header & 0xffff) as u16,
            version: ((header >> 16) & 0xf) as u8,
            offset,
        });
        let next = (header >> 20) as usize;
        if next == 0 {
            return Ok(out);
        }
        if next < EXT_CAP_START || !next.is_multiple_of(4) || next + 4 > EXT_CONFIG_SIZE {
            return Err(bad(format!("next capability offset {next:#x} is invalid")));
        }
        if out.iter().any(|c| c.offset == next) {
            return Err(bad(format!("capability list loops at {next:#x}")));
        }
        offset = next;
    }
    Err(bad("capability list does not end".into()))
}

fn bad(reason: String) -> ParseError {
    ParseError::new(
        "PCI extended capability list",
        "<binary config space>",
        reason,
    )
}

fn read_u32(b: &[u8], at: usize) -> u32 {
    b.get(at..at + 4)
        .map(|s| u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
        .unwrap_or(0)
}

fn read_u16(b: &[u8], at: usize) -> u16 {
    b.get(at..at + 2)
        .map(|s| u16::from_le_bytes([s[0], s[1]]))
        .unwrap_or(0)
}

/// The ACS capability or control register, bit by bit (same layout in both).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AcsFlags {
    /// Bit 0: Source Validation.
    pub source_validation: bool,
    /// Bit 1: Translation Blocking.
    pub translation_blocking: bool,
    /// Bit 2: P2P Request Redirect: peer-to-peer requests go up to the root complex.
    pub request_redirect: bool,
    /// Bit 3: P2P Completion Redirect.
    pub completion_redirect: bool,
    /// Bit 4: Upstream Forwarding.
    pub upstream_forwarding: bool,
    /// Bit 5: P2P Egress Control.
    pub egress_control: bool,
    /// Bit 6: Direct Translated P2P.
    pub direct_translated_p2p: bool,
}

impl AcsFlags {
    pub fn from_bits(bits: u16) -> Self {
        let bit = |n: u16| bits & (1 << n) != 0;
        Self {
            source_validation: bit(0),
            translation_blocking: bit(1),
            request_redirect: bit(2),
            completion_redirect: bit(3),
            upstream_forwarding: bit(4),
            egress_control: bit(5),
            direct_translated_p2p: bit(6),
        }
    }

    pub fn bits(&self) -> u16 {
        [
            self.source_validation,
            self.translation_blocking,
            self.request_redirect,
            self.completion_redirect,
            self.upstream_forwarding,
            self.egress_control,
            self.direct_translated_p2p,
        ]
        .iter()
        .enumerate()
        .fold(0, |acc, (i, on)| acc | (u16::from(*on) << i))
    }

    /// Request or completion redirect: peer-to-peer traffic below this port is sent up
    /// to the root complex instead of straight across the switch.
    pub fn redirects_p2p(&self) -> bool {
        self.request_redirect || self.completion_redirect
    }

    /// `lspci -vvv`'s `ACSCtl:` spelling (`SrcValid+ TransBlk- ReqRedir+ …`).
    pub fn lspci(&self) -> String {
        let pm = |b: bool| if b { '+' } else { '-' };
        format!(
            "SrcValid{} TransBlk{} ReqRedir{} CmpltRedir{} UpstreamFwd{} EgressCtrl{} DirectTrans{}",
            pm(self.source_validation),
            pm(self.translation_blocking),
            pm(self.request_redirect),
            pm(self.completion_redirect),
            pm(self.upstream_forwarding),
            pm(self.egress_control),
            pm(self.direct_translated_p2p)
        )
    }
}

/// What a function's configuration space says about ACS.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "kebab-case")]
pub enum AcsState {
    /// The extended space was not returned (`config_bytes` < 4096: 64 without
    /// `CAP_SYS_ADMIN`, 256 on conventional PCI), so ACS cannot be judged.
    NotReadable { config_bytes: usize },
    /// Extended space readable, no ACS capability.
    Absent,
    /// ACS capability present: what the port can do and what is enabled.
    Present {
        capability: AcsFlags,
        control: AcsFlags,
    },
}

/// ACS state from a whole `config` file.
///
/// # Errors
/// When the extended-capability chain is malformed.
pub fn parse_acs(config: &[u8]) -> Result<AcsState, ParseError> {
    if config.len() < EXT_CONFIG_SIZE {
        return Ok(AcsState::NotReadable {
            config_bytes: config.len(),
        });
    }
    let caps = parse_ext_caps(config)?;
    Ok(match caps.iter().find(|c| c.id == ACS_CAP_ID) {
        None => AcsState::Absent,
        Some(c) => AcsState::Present {
            capability: AcsFlags::from_bits(read_u16(config, c.offset + 4)),
            control: AcsFlags::from_bits(read_u16(config, c.offset + 6)),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn space_with(caps: &[(u16, usize, usize, &[u8])]) -> Vec<u8> {
        let mut b = vec![0u8; EXT_CONFIG_SIZE];
        for (id, at, next, body) in caps {
            let header = u32::from(*id) | (1 << 16) | ((*next as u32) << 20);
            b[*at..*at + 4].copy_from_slice(&header.to_le_bytes());
            b[*at + 4..*at + 4 + body.len()].copy_from_slice(body);
        }
        b
    }

    #[test]
    fn truncated_config_is_not_readable() {
        assert_eq!(
            parse_acs(&[0u8; 64]).unwrap(),
            AcsState::NotReadable { config_bytes: 64 }
        );
        assert_eq!(
            parse_acs(&[0u8; 256]).unwrap(),
            AcsState::NotReadable { config_bytes: 256 }
        );
    }

    #[test]
    fn acs_after_another_capability() {
        // AER (0x0001) at 0x100 → ACS at 0x148; capability 0x005f, control 0x001d
        // (SrcValid, ReqRedir, CmpltRedir, UpstreamFwd): what Linux enables by default.
        let b = space_with(&[
            (0x0001, 0x100, 0x148, &[]),
            (ACS_CAP_ID, 0x148, 0, &[0x5f, 0x00, 0x1d, 0x00]),
        ]);
        let caps = parse_ext_caps(&b).unwrap();
        assert_eq!(caps.len(), 2);
        let AcsState::Present {
            capability,
            control,
        } = parse_acs(&b).unwrap()
        else {
            panic!("ACS not found");
        };
        assert_eq!(capability.bits(), 0x5f);
        assert!(control.request_redirect && control.completion_redirect);
        assert!(control.source_validation && control.upstream_forwarding);
        assert!(!control.egress_control && !control.direct_translated_p2p);
        assert!(control.redirects_p2p());
        assert_eq!(
            control.lspci(),
            "SrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-"
        );
    }

    #[test]
    fn acs_disabled_and_absent() {
        let off = space_with(&[(ACS_CAP_ID, 0x100, 0, &[0x5f, 0x00, 0x00, 0x00])]);
        assert!(matches!(
            parse_acs(&off).unwrap(),
            AcsState::Present { control, .. } if !control.redirects_p2p() && control.bits() == 0
        ));
        let none = space_with(&[(0x0001, 0x100, 0, &[])]);
        assert_eq!(parse_acs(&none).unwrap(), AcsState::Absent);
        assert_eq!(parse_acs(&vec![0u8; 4096]).unwrap(), AcsState::Absent);
    }

    #[test]
    fn malformed_chains_are_errors_not_hangs() {
        let looped = space_with(&[(0x0001, 0x100, 0x100, &[])]);
        assert!(parse_acs(&looped).is_err());
        let outside = space_with(&[(0x0001, 0x100, 0x0f0, &[])]);
        assert!(parse_acs(&outside).is_err());
        let unaligned = space_with(&[(0x0001, 0x100, 0x102, &[])]);
        assert!(parse_acs(&unaligned).is_err());
    }

    #[test]
    fn flag_bits_round_trip() {
        for bits in 0..0x80u16 {
            assert_eq!(AcsFlags::from_bits(bits).bits(), bits);
        }
    }
}
