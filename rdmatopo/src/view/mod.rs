//! The view: the facts every answer builds on, as pure functions of a
//! [`crate::Topology`] (no I/O, no environment, no clock): path classes and the
//! nvidia-smi matrix ([`affinity`]), which devices this process owns ([`container`]),
//! the devices being judged ([`scope`]), one name per GPU ([`naming`]), GID choice
//! ([`gid`]), RoCE QoS facts ([`qos`]), the per-rank NCCL plan ([`plan`]), the node's
//! rails ([`rails`]), and the facade the CLI, Python and C call ([`devices`]).

pub mod affinity;
pub mod container;
pub mod devices;
pub mod gid;
pub mod naming;
pub mod plan;
pub mod qos;
pub mod rails;
pub mod scope;

pub use affinity::{MatrixDevice, PathClass, TopoMatrix, path_class};
pub use devices::{Devices, RankChoice, RankOutcome, RankRequest, WhenUnnamed};
pub use naming::GpuNames;
pub use scope::{Context, GpuNics, Judging, Scope};

/// `a, b, c` or `a, b, … (n in all)`: a list of device names in one line.
pub(crate) fn list_short(names: &[&str]) -> String {
    let mut v: Vec<&str> = names.to_vec();
    v.dedup();
    if v.len() <= 4 {
        v.join(", ")
    } else {
        format!("{}, … ({} in all)", v[..3].join(", "), v.len())
    }
}

/// A question about the model that it cannot answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ViewError {
    #[error(
        "no device {0:?} in this topology (use a PCI address, GPU<n>, NIC<n> or an RDMA device name)"
    )]
    UnknownDevice(String),
    #[error("{0}")]
    Invalid(String),
    /// A fact this topology's view left out (see [`crate::model::DetailView`]): a device
    /// another container owns, only named, or one its answers place, read in part (a PF
    /// of its VFs, without whole GID tables; a NIC beside one of its GPUs, by name and
    /// function).
    #[error(
        "{0} is outside this topology's view: this container does not own it (another container's RDMA device is only named; one its answers place, a PF of its VFs or a NIC beside one of its GPUs, is read in part); discover the whole machine (view \"all\", CLI --all) to read it in full"
    )]
    OutsideView(String),
}
