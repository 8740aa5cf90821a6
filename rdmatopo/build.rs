//! Links the `rdmatopo` binary as a fixed-address (non-PIE) executable on Linux.
//!
//! The bundled PCI name table (`pci-ids`) is about 45 000 pointers; in a PIE binary the
//! dynamic loader rewrites every one of them at each start, which costs 0.6 ms of a
//! 1.6 ms start-up (see BENCHMARKS.md). A fixed-address binary needs no such pass. The
//! library, the C and Python bindings are unaffected. `RDMATOPO_PIE=1` at build time
//! keeps the binary position-independent (for ASLR of the executable itself).

fn main() {
    println!("cargo:rerun-if-env-changed=RDMATOPO_PIE");
    let linux = std::env::var("CARGO_CFG_TARGET_OS").is_ok_and(|os| os == "linux");
    let pie_asked = std::env::var_os("RDMATOPO_PIE").is_some_and(|v| v == "1");
    if linux && !pie_asked {
        println!("cargo:rustc-link-arg-bin=rdmatopo=-no-pie");
    }
}
