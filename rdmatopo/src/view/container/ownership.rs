//! What a view says of one device: whether it is this container's, and the facts
//! behind that.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Whether a device is this container's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Ownership {
    /// Given to this container (or, on a host, part of the machine).
    Owned,
    /// Listed here, but given to someone else: never the subject of this container's
    /// advice or findings.
    Visible,
    /// The sources say nothing or disagree.
    Unknown,
}

impl fmt::Display for Ownership {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Owned => "owned",
            Self::Visible => "visible",
            Self::Unknown => "unknown",
        })
    }
}

/// One fact behind a conclusion.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Evidence {
    /// A path (`/dev/nvidia3`) or an environment variable (`NVIDIA_VISIBLE_DEVICES`).
    pub source: String,
    /// What it showed.
    pub value: String,
}

impl Evidence {
    pub(super) fn new(source: impl Into<String>, value: impl Into<String>) -> Self {
        Self {
            source: source.into(),
            value: value.into(),
        }
    }
}

impl fmt::Display for Evidence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.source, self.value)
    }
}

/// A device and whether it is this container's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Owned<K> {
    /// The device: a PCI address (GPUs) or a name (RDMA devices, netdevs).
    #[serde(rename = "device")]
    pub key: K,
    pub state: Ownership,
    pub evidence: Vec<Evidence>,
}

pub(super) fn state_of<K: PartialEq>(list: &[Owned<K>], key: &K) -> Ownership {
    list.iter()
        .find(|o| &o.key == key)
        .map_or(Ownership::Unknown, |o| o.state)
}

pub(super) fn keys_in<K: Clone>(list: &[Owned<K>], keep: impl Fn(Ownership) -> bool) -> Vec<K> {
    list.iter()
        .filter(|o| keep(o.state))
        .map(|o| o.key.clone())
        .collect()
}
