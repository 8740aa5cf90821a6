//! Discovery on several threads must give the model of a sequential read, byte for
//! byte, diagnostics and their order included.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;
use std::path::Path;
use std::process::Command;

fn inventory(root: &Path, threads: &str) -> Vec<u8> {
    let out = Command::new(env!("CARGO_BIN_EXE_rdmatopo"))
        .args(["inventory", "--format", "json", "--root"])
        .arg(root)
        .env("RDMATOPO_THREADS", threads)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

#[test]
fn threaded_and_sequential_discovery_agree() {
    let fixtures = support::fixtures_dir();
    // The largest trees (most functions, RDMA devices and netdevs per thread); each
    // has diagnostics (two to five), whose order must not change either.
    for name in [
        "pod-sriov",
        "h100-dgx",
        "host-h100-sriov",
        "azure-ndv5",
        "dual-socket-pcie",
    ] {
        let root = fixtures.join(name).join("root.tar.gz");
        let one = inventory(&root, "1");
        assert!(one.len() > 1000, "{name}");
        assert!(
            one == inventory(&root, "8"),
            "{name}: threads changed the model"
        );
    }
}
