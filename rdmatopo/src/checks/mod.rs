//! Checks: judgements of a view, pure functions (no I/O, no environment, no clock).
//! [`doctor`] judges the devices a [`crate::view::Scope`] holds; [`audit`] judges each
//! container of the kubelet's allocation with the doctor's checks; [`sources_check`]
//! cross-checks NVML and verbs facts against sysfs (discovery is handed it by its
//! caller); [`diff`] compares two nodes; [`cluster`] compares a fleet's rails.

pub mod audit;
pub mod cluster;
pub mod diff;
pub mod doctor;
pub mod sources_check;
