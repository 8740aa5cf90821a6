//! `rdmatopo-nvml`: NVML's view of this machine, printed as the JSON that a snapshot keeps
//! in `rdmatopo/nvml.json`. The static (musl) build of `rdmatopo` cannot load the NVIDIA
//! driver's glibc library and runs this helper instead (`src/sources/nvml_helper.rs`, where its body is).
//!
//! Exit status: 0 with the JSON on standard output; 3 when NVML is not there (no driver
//! library, no GPU), the reason on standard error; 1 when it failed.

use std::process::ExitCode;

#[cfg(not(target_env = "musl"))]
fn main() -> ExitCode {
    rdmatopo::nvml_helper_main()
}

/// A static program cannot load NVML, this helper's whole purpose.
#[cfg(target_env = "musl")]
fn main() -> ExitCode {
    eprintln!("rdmatopo-nvml: build it for glibc (scripts/build-static.sh does)");
    ExitCode::FAILURE
}
