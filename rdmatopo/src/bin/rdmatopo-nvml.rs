//! `rdmatopo-nvml`: NVML's view of this machine, printed as the JSON that a snapshot keeps
//! in `rdmatopo/nvml.json`. The static (musl) build of `rdmatopo` cannot load the NVIDIA
//! driver's glibc library and runs this helper instead (`src/sources/nvml_helper.rs`).
//!
//! Exit status: 0 with the JSON on standard output; 3 when NVML is not there (no driver
//! library, no GPU), the reason on standard error; 1 when it failed.

use std::process::ExitCode;

#[cfg(not(target_env = "musl"))]
fn main() -> ExitCode {
    use rdmatopo::Sysfs;
    use rdmatopo::sources::nvml::LiveNvml;
    use rdmatopo::sources::nvml_helper::HELPER_UNAVAILABLE;
    use rdmatopo::sources::{FactSource, Facts, SourceError};

    match LiveNvml.collect(&Sysfs::live()) {
        Ok(Facts::Nvml(snapshot)) => match serde_json::to_string(&snapshot) {
            Ok(json) => {
                println!("{json}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("rdmatopo-nvml: {e}");
                ExitCode::FAILURE
            }
        },
        Ok(_) => ExitCode::FAILURE,
        Err(SourceError::Unavailable(reason)) => {
            eprintln!("{reason}");
            ExitCode::from(HELPER_UNAVAILABLE as u8)
        }
        Err(e) => {
            eprintln!("{e}");
            ExitCode::FAILURE
        }
    }
}

/// A static program cannot load NVML, this helper's whole purpose.
#[cfg(target_env = "musl")]
fn main() -> ExitCode {
    eprintln!("rdmatopo-nvml: build it for glibc (scripts/build-static.sh does)");
    ExitCode::FAILURE
}
