//! What a source of facts is: what it gives, how it fails, and the trait the live and
//! the snapshot sources share.

use crate::model::{DeviceIndexSnapshot, NvmlSnapshot, Topology, VerbsSnapshot};
use crate::sysfs::Sysfs;

/// Why a source gave nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SourceError {
    /// The library, driver, device or snapshot is not there: expected, not a fault.
    #[error("{0}")]
    Unavailable(String),
    /// It was there but failed.
    #[error("{source_name}: {message}")]
    Failed {
        source_name: &'static str,
        message: String,
    },
}

/// Facts from one source.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Facts {
    Nvml(NvmlSnapshot),
    Verbs(VerbsSnapshot),
    /// The kernel's RDMA device indices; none known is no facts.
    DeviceIndex(DeviceIndexSnapshot),
}

impl Facts {
    /// Put the facts into the model.
    pub fn apply(self, topo: &mut Topology) {
        match self {
            Facts::Nvml(s) => topo.nvml = Some(s),
            Facts::Verbs(s) => topo.verbs = Some(s),
            Facts::DeviceIndex(s) => {
                topo.device_index = (!s.device_index.is_empty()).then_some(s);
            }
        }
    }
}

/// A provider of NVML or verbs facts.
pub trait FactSource: Send + Sync {
    /// Gather the facts. `fs` is the root being read (snapshot sources read from it).
    ///
    /// # Errors
    /// [`SourceError::Unavailable`] when there is nothing to read.
    fn collect(&self, fs: &Sysfs) -> Result<Facts, SourceError>;

    /// Whether collecting waits on something outside this process (a driver library's
    /// initialisation): discovery then collects on a thread of its own while it reads
    /// sysfs. Snapshots are quicker read in line than a thread is started.
    fn blocks(&self) -> bool {
        false
    }
}
