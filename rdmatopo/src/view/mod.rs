//! The view: the facts every answer builds on, as pure functions of a
//! [`crate::model::Topology`] (no I/O, no environment, no clock): path classes and the
//! nvidia-smi matrix ([`affinity`]), which devices this process owns ([`container`]),
//! the devices being judged ([`scope`]), one name per GPU ([`naming`]) and the NICs' order
//! ([`nic_order`]), GID choice
//! ([`gid`]), RoCE QoS facts ([`qos`]), the per-rank NCCL plan ([`plan`]), the node's
//! rails ([`rails`]), and the facade the CLI, Python and C call ([`devices`]).

pub mod affinity;
pub mod container;
pub mod devices;
pub mod dra;
mod error;
pub mod gid;
pub mod naming;
pub mod nic_order;
pub mod plan;
pub mod qos;
pub mod rails;
pub mod scope;
mod words;

pub use affinity::{MatrixDevice, PathClass, TopoMatrix, path_class};
pub use devices::{Devices, RankChoice, RankOutcome, RankRequest, WhenNoRank};
pub use error::ViewError;
pub use naming::GpuNames;
pub use scope::{CheckedDevices, Context, GpuNics, Scope};
