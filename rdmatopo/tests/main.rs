//! The crate's integration tests, one module a file, built as one test program: the
//! crate and its dependencies are linked once, and a fixture read by several tests is
//! unpacked into memory once (`support::open`).
//!
//! `cargo test -p rdmatopo --test integration golden::` runs one module's tests.
//! tests/hostile.rs is a program of its own: it measures the command's peak memory
//! (`ru_maxrss`), which counts a parent's memory where the child was forked from one as
//! large as this program's fixture cache.

mod fleet;
mod support;

mod apiserver;
mod archives;
mod audit;
mod cluster;
mod data_direct;
mod doctor_fixtures;
mod doctor_output;
mod dra;
mod exit_codes;
mod fuzz_regressions;
mod golden;
mod gpu_names;
mod layers;
mod live_sources;
mod model_json;
mod needs;
mod nic_order;
mod oracle;
mod owned_view;
mod parsers;
mod published;
mod qos;
mod recommend;
mod schemas;
mod ship;
mod snapshot_roundtrip;
mod sriov;
mod storage_rails;
mod threads;
mod trust;
