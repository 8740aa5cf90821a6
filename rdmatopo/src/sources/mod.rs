//! Facts that sysfs cannot show (NVLink, GPU UUIDs, MIG; QP limits, active MTU) come
//! from NVML and libibverbs. Each has a live source and a snapshot source that replays
//! the JSON a snapshot stored beside the tree (`rdmatopo/nvml.json`,
//! `rdmatopo/verbs.json`), so a capture replays offline with the same facts. The kernel's
//! RDMA device index comes from its RDMA netlink ([`rdma_netlink`], every build) and is
//! replayed from `rdmatopo/device-index.json`.

mod driver;
mod facts;

pub use driver::{DATA_DIRECT_DRIVER_DIR, NVIDIA_DRIVER, NVIDIA_DRIVER_DIR};

pub use facts::{FactSource, Facts, SourceError};

use crate::sysfs::Sysfs;

#[cfg(feature = "apiserver")]
pub mod apiserver;
#[cfg(feature = "kubelet")]
pub mod kubelet;
#[cfg(all(feature = "nvml", not(target_env = "musl")))]
pub mod nvml;
pub mod nvml_helper;
pub mod rdma_netlink;
#[cfg(feature = "verbs")]
pub mod verbs;

/// Logical path of the NVML snapshot inside a root.
pub const NVML_SNAPSHOT_PATH: &str = "/rdmatopo/nvml.json";
/// Logical path of the verbs snapshot inside a root.
pub const VERBS_SNAPSHOT_PATH: &str = "/rdmatopo/verbs.json";
/// Logical path of the RDMA device index snapshot inside a root.
pub const DEVICE_INDEX_SNAPSHOT_PATH: &str = "/rdmatopo/device-index.json";

/// Replays `rdmatopo/nvml.json` from the root.
#[derive(Debug, Clone, Copy, Default)]
pub struct NvmlSnapshotSource;

/// Replays `rdmatopo/verbs.json` from the root.
#[derive(Debug, Clone, Copy, Default)]
pub struct VerbsSnapshotSource;

/// Replays `rdmatopo/device-index.json` from the root.
#[derive(Debug, Clone, Copy, Default)]
pub struct DeviceIndexSnapshotSource;

fn read_snapshot<T: serde::de::DeserializeOwned>(
    fs: &Sysfs,
    path: &str,
    name: &'static str,
) -> Result<T, SourceError> {
    let bytes = match fs.read_bytes(path, 8 << 20) {
        Ok(b) => b,
        Err(e) if e.is_not_found() => {
            return Err(SourceError::Unavailable(format!(
                "{path}: no {name} snapshot"
            )));
        }
        Err(e) => {
            return Err(SourceError::Failed {
                source_name: name,
                message: e.to_string(),
            });
        }
    };
    serde_json::from_slice(&bytes).map_err(|e| SourceError::Failed {
        source_name: name,
        message: format!("{path}: {e}"),
    })
}

impl FactSource for NvmlSnapshotSource {
    fn collect(&self, fs: &Sysfs) -> Result<Facts, SourceError> {
        read_snapshot(fs, NVML_SNAPSHOT_PATH, "NVML").map(Facts::Nvml)
    }
}

impl FactSource for VerbsSnapshotSource {
    fn collect(&self, fs: &Sysfs) -> Result<Facts, SourceError> {
        read_snapshot(fs, VERBS_SNAPSHOT_PATH, "verbs").map(Facts::Verbs)
    }
}

impl FactSource for DeviceIndexSnapshotSource {
    fn collect(&self, fs: &Sysfs) -> Result<Facts, SourceError> {
        read_snapshot(fs, DEVICE_INDEX_SNAPSHOT_PATH, "device index").map(Facts::DeviceIndex)
    }
}

/// The sources that suit a root: snapshots when the root holds them, else the live
/// libraries when the root is the running system and the feature is built in.
pub fn default_sources(fs: &Sysfs) -> Vec<Box<dyn FactSource>> {
    let mut out: Vec<Box<dyn FactSource>> = Vec::new();
    if fs.exists(NVML_SNAPSHOT_PATH) || !fs.is_live() {
        out.push(Box::new(NvmlSnapshotSource));
    } else {
        #[cfg(all(feature = "nvml", not(target_env = "musl")))]
        out.push(Box::new(nvml::LiveNvml));
        // A static program cannot load the driver's glibc library: a helper reads it.
        #[cfg(all(feature = "nvml", target_env = "musl"))]
        out.push(Box::new(nvml_helper::NvmlHelper::default()));
    }
    if fs.exists(VERBS_SNAPSHOT_PATH) || !fs.is_live() {
        out.push(Box::new(VerbsSnapshotSource));
    } else {
        #[cfg(feature = "verbs")]
        out.push(Box::new(verbs::LiveVerbs));
    }
    // The device indices: a capture's where it recorded them (a capture without them
    // is no fault: the verbs snapshot may hold them); live, the kernel's RDMA netlink.
    if fs.exists(DEVICE_INDEX_SNAPSHOT_PATH) {
        out.push(Box::new(DeviceIndexSnapshotSource));
    } else if fs.is_live() {
        out.push(Box::new(rdma_netlink::LiveRdmaNetlink));
    }
    out
}
