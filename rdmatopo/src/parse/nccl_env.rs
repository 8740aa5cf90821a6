//! NCCL variables other than `NCCL_IB_HCA`, read as NCCL reads them: integer parameters
//! (`ncclLoadParam` in nccl `src/misc/param.cc`: `strtoll` with base 0, the whole value)
//! and path levels (`ncclGetLevel` in `src/graph/paths.cc`: a name of
//! `topoPathTypeStr` in `src/graph/topo.cc`, else an old-style number).

use super::error::ParseError;

/// A type of path in NCCL's topology, nearest first (`topoPathTypeStr`). A level
/// variable (`NCCL_NET_GDR_LEVEL`, `NCCL_P2P_LEVEL`) allows every path up to its own.
/// NCCL has no `NODE`: a path through the CPU within a NUMA node is `PHB` to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum NcclPathLevel {
    Loc,
    Nvl,
    Nvb,
    C2c,
    Pix,
    Pxb,
    P2c,
    Pxn,
    Phb,
    Sys,
}

impl NcclPathLevel {
    const ALL: [Self; 10] = [
        Self::Loc,
        Self::Nvl,
        Self::Nvb,
        Self::C2c,
        Self::Pix,
        Self::Pxb,
        Self::P2c,
        Self::Pxn,
        Self::Phb,
        Self::Sys,
    ];

    /// The name NCCL reads and prints.
    pub fn name(self) -> &'static str {
        match self {
            Self::Loc => "LOC",
            Self::Nvl => "NVL",
            Self::Nvb => "NVB",
            Self::C2c => "C2C",
            Self::Pix => "PIX",
            Self::Pxb => "PXB",
            Self::P2c => "P2C",
            Self::Pxn => "PXN",
            Self::Phb => "PHB",
            Self::Sys => "SYS",
        }
    }
}

/// Parse a path level as `ncclGetLevel` does: a name, compared case-sensitively, else,
/// when the value starts with a digit, the old numbering (0 `LOC`, 1 `PIX`, 2 `PXB`,
/// 3 `PHB`, 4 and above `SYS`).
///
/// # Errors
/// Anything else: NCCL ignores the variable and keeps its default.
pub fn parse_nccl_path_level(text: &str) -> Result<NcclPathLevel, ParseError> {
    if let Some(level) = NcclPathLevel::ALL.into_iter().find(|l| l.name() == text) {
        return Ok(level);
    }
    if text.starts_with(|c: char| c.is_ascii_digit()) {
        const OLD: [NcclPathLevel; 5] = [
            NcclPathLevel::Loc,
            NcclPathLevel::Pix,
            NcclPathLevel::Pxb,
            NcclPathLevel::Phb,
            NcclPathLevel::Sys,
        ];
        // `strtol(str, NULL, 0)`: its leading number; a larger one means SYS.
        let old = c_integer_prefix(text).0.unwrap_or(i64::MAX);
        return Ok(OLD[usize::try_from(old)
            .unwrap_or(usize::MAX)
            .min(OLD.len() - 1)]);
    }
    Err(ParseError::new(
        "NCCL path level",
        text,
        "not one of LOC, NVL, NVB, C2C, PIX, PXB, P2C, PXN, PHB, SYS or a number",
    ))
}

/// Parse an integer parameter (`NCCL_IB_DISABLE`) as `ncclLoadParam` does: `strtoll`
/// with base 0 (leading blanks, a sign, `0x` hex, `0` octal) over the whole value.
///
/// # Errors
/// A value `strtoll` does not consume entirely: NCCL keeps the default.
pub fn parse_nccl_int(text: &str) -> Result<i64, ParseError> {
    match c_integer_prefix(text) {
        (Some(value), "") => Ok(value),
        (Some(_), _) => Err(ParseError::new(
            "NCCL integer parameter",
            text,
            "text after the number",
        )),
        (None, _) => Err(ParseError::new(
            "NCCL integer parameter",
            text,
            "not an integer in C's notation",
        )),
    }
}

/// The integer at the start of `text` as `strtoll(text, &end, 0)` reads it (leading
/// blanks, a sign, `0x` hex, `0` octal, else decimal), and what follows it; `None` when
/// there is none (or it overflows).
fn c_integer_prefix(text: &str) -> (Option<i64>, &str) {
    let t = text.trim_start_matches([' ', '\t', '\n', '\r', '\x0b', '\x0c']);
    let (negative, t) = match t.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, t.strip_prefix('+').unwrap_or(t)),
    };
    let hex = t
        .strip_prefix("0x")
        .or(t.strip_prefix("0X"))
        .filter(|h| h.starts_with(|c: char| c.is_ascii_hexdigit()));
    let (radix, body) = match hex {
        Some(h) => (16, h),
        None if t.starts_with('0') => (8, t),
        None => (10, t),
    };
    let end = body
        .find(|c: char| !c.is_digit(radix))
        .unwrap_or(body.len());
    if end == 0 {
        return (None, text);
    }
    match i64::from_str_radix(&body[..end], radix) {
        Ok(v) => (Some(if negative { -v } else { v }), &body[end..]),
        Err(_) => (None, text),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_by_name_and_old_number() {
        assert_eq!(parse_nccl_path_level("PHB"), Ok(NcclPathLevel::Phb));
        assert_eq!(parse_nccl_path_level("LOC"), Ok(NcclPathLevel::Loc));
        assert_eq!(parse_nccl_path_level("0"), Ok(NcclPathLevel::Loc));
        assert_eq!(parse_nccl_path_level("2"), Ok(NcclPathLevel::Pxb));
        assert_eq!(parse_nccl_path_level("5"), Ok(NcclPathLevel::Sys));
        assert_eq!(parse_nccl_path_level("99"), Ok(NcclPathLevel::Sys));
        assert_eq!(parse_nccl_path_level("0x1"), Ok(NcclPathLevel::Pix));
        assert_eq!(parse_nccl_path_level("3abc"), Ok(NcclPathLevel::Phb));
        // nvidia-smi's NODE, lower case and blanks are not NCCL's: ignored there.
        for ignored in ["NODE", "phb", " PHB", ""] {
            assert!(parse_nccl_path_level(ignored).is_err(), "{ignored:?}");
        }
        assert!(NcclPathLevel::Pxb < NcclPathLevel::Phb);
    }

    #[test]
    fn integers_as_strtoll_reads_them() {
        assert_eq!(parse_nccl_int("1"), Ok(1));
        assert_eq!(parse_nccl_int(" 0x10"), Ok(16));
        assert_eq!(parse_nccl_int("010"), Ok(8));
        assert_eq!(parse_nccl_int("-2"), Ok(-2));
        assert_eq!(parse_nccl_int("0"), Ok(0));
        for bad in ["", "1 ", "yes", "0x", "08", "1.0"] {
            assert!(parse_nccl_int(bad).is_err(), "{bad:?}");
        }
    }
}
