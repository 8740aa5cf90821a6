//! Analysis: pure functions of a [`crate::Topology`]. No I/O, no clock.

pub mod affinity;
pub mod cluster;
pub mod container;
pub mod diff;
pub mod doctor;
pub mod gid;
pub mod k8s;
pub mod plan;
pub mod qos;
pub mod rails;
pub mod sources_check;

pub use affinity::{MatrixDevice, PathClass, TopoMatrix, path_class};

/// An analysis question the model cannot answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AnalysisError {
    #[error(
        "no device {0:?} in this topology (use a PCI address, GPU<n>, NIC<n> or an RDMA device name)"
    )]
    UnknownDevice(String),
    #[error("{0}")]
    Invalid(String),
}
