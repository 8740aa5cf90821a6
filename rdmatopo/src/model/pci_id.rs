//! JSON form of PCI ids: the text of their sysfs file (`vendor` is `0x10b5`, `class` is
//! `0x020700`), the spelling lspci, NCCL's topology XML and the device plugins use and
//! users grep for. `rdmatopo.inventory/1` wrote them as decimal numbers; reading accepts
//! both, so reports from older nodes stay usable.

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serializer};
use std::fmt;

/// Digits of a 16-bit id (`vendor`, `device`, `subsystem_*`).
const ID_DIGITS: usize = 4;
/// Digits of `class` (base class, subclass, programming interface).
const CLASS_DIGITS: usize = 6;

struct HexOrNumber {
    max: u64,
    what: &'static str,
}

impl Visitor<'_> for HexOrNumber {
    type Value = u64;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(
            f,
            "a PCI {} as a hex string (\"0x10de\") or a number",
            self.what
        )
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<u64, E> {
        if v > self.max {
            return Err(E::custom(format!("PCI {} {v} is out of range", self.what)));
        }
        Ok(v)
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<u64, E> {
        match u64::try_from(v) {
            Ok(v) => self.visit_u64(v),
            Err(_) => Err(E::custom(format!("PCI {} {v} is negative", self.what))),
        }
    }

    fn visit_str<E: de::Error>(self, s: &str) -> Result<u64, E> {
        let digits = s
            .strip_prefix("0x")
            .or_else(|| s.strip_prefix("0X"))
            .filter(|d| !d.is_empty() && d.len() <= 8 && d.bytes().all(|b| b.is_ascii_hexdigit()))
            .ok_or_else(|| {
                E::custom(format!(
                    "PCI {} {s:?} is not 0x followed by hex digits",
                    self.what
                ))
            })?;
        let v = u64::from_str_radix(digits, 16).map_err(E::custom)?;
        self.visit_u64(v)
    }
}

fn read<'de, D: Deserializer<'de>>(d: D, max: u64, what: &'static str) -> Result<u64, D::Error> {
    d.deserialize_any(HexOrNumber { max, what })
}

/// A 16-bit id as `"0x10de"`.
pub(crate) mod id {
    use super::*;

    pub fn serialize<S: Serializer>(v: &u16, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format!("0x{v:0ID_DIGITS$x}"))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u16, D::Error> {
        read(d, u16::MAX.into(), "id").map(|v| v as u16)
    }
}

/// An optional 16-bit id as `"0x10de"` or `null`.
pub(crate) mod optional_id {
    use super::*;

    pub fn serialize<S: Serializer>(v: &Option<u16>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(v) => id::serialize(v, s),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u16>, D::Error> {
        #[derive(Deserialize)]
        struct Wrapped(#[serde(with = "id")] u16);
        Ok(Option::<Wrapped>::deserialize(d)?.map(|Wrapped(v)| v))
    }
}

/// A 24-bit class code as `"0x030200"`.
pub(crate) mod class {
    use super::*;

    pub fn serialize<S: Serializer>(v: &u32, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format!("0x{v:0CLASS_DIGITS$x}"))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
        read(d, 0xff_ffff, "class").map(|v| v as u32)
    }
}

#[cfg(test)]
mod tests {
    use serde::{Deserialize, Serialize};

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Ids {
        #[serde(with = "super::class")]
        class: u32,
        #[serde(with = "super::id")]
        vendor: u16,
        #[serde(with = "super::optional_id")]
        subsystem_vendor: Option<u16>,
    }

    #[test]
    fn writes_the_sysfs_spelling() {
        let ids = Ids {
            class: 0x020700,
            vendor: 0x15b3,
            subsystem_vendor: None,
        };
        let text = serde_json::to_string(&ids).unwrap();
        assert_eq!(
            text,
            r#"{"class":"0x020700","vendor":"0x15b3","subsystem_vendor":null}"#
        );
        assert_eq!(serde_json::from_str::<Ids>(&text).unwrap(), ids);
        let small = Ids {
            class: 0x000001,
            vendor: 0x0001,
            subsystem_vendor: Some(0x00a0),
        };
        let text = serde_json::to_string(&small).unwrap();
        assert!(
            text.contains(r#""class":"0x000001""#)
                && text.contains(r#""subsystem_vendor":"0x00a0""#)
        );
    }

    #[test]
    fn reads_hex_and_the_old_numbers() {
        let old = r#"{"class": 394240, "vendor": 4277, "subsystem_vendor": 4318}"#;
        let hex = r#"{"class": "0x060400", "vendor": "0x10B5", "subsystem_vendor": "0x10de"}"#;
        let want = Ids {
            class: 0x060400,
            vendor: 0x10b5,
            subsystem_vendor: Some(0x10de),
        };
        assert_eq!(serde_json::from_str::<Ids>(old).unwrap(), want);
        assert_eq!(serde_json::from_str::<Ids>(hex).unwrap(), want);
    }

    #[test]
    fn refuses_what_no_sysfs_file_holds() {
        for bad in [
            r#"{"class": "0x1000000", "vendor": "0x10de", "subsystem_vendor": null}"#,
            r#"{"class": 1, "vendor": 65536, "subsystem_vendor": null}"#,
            r#"{"class": 1, "vendor": -1, "subsystem_vendor": null}"#,
            r#"{"class": 1, "vendor": "10de", "subsystem_vendor": null}"#,
            r#"{"class": 1, "vendor": "0x", "subsystem_vendor": null}"#,
            r#"{"class": 1, "vendor": "0xzz", "subsystem_vendor": null}"#,
            r#"{"class": 1, "vendor": 1.5, "subsystem_vendor": null}"#,
        ] {
            let err = serde_json::from_str::<Ids>(bad).unwrap_err().to_string();
            assert!(err.contains("PCI"), "{bad}: {err}");
        }
    }
}
