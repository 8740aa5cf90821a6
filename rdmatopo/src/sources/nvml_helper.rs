//! NVML through a helper process, for the static (musl) build of the command.
//!
//! A statically linked program cannot load `libnvidia-ml.so.1`, a glibc library. The
//! static `rdmatopo` therefore runs `rdmatopo-nvml` (built for glibc with the `nvml`
//! feature, shipped beside it by `scripts/build-static.sh`), which reads NVML in its own
//! process and prints the snapshot JSON that `rdmatopo/nvml.json` holds. The helper runs
//! only on a live root whose sysfs shows the NVIDIA driver, so a machine without one pays
//! nothing for it.

use super::driver::NVIDIA_DRIVER_DIR;
use super::facts::{FactSource, Facts, SourceError};
use crate::model::NvmlSnapshot;
use crate::sysfs::Sysfs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The helper's file name, looked for beside the running program.
pub const HELPER_NAME: &str = "rdmatopo-nvml";
/// Names the helper to run instead (a path).
pub const HELPER_ENV: &str = "RDMATOPO_NVML_HELPER";
/// Exit status of the helper when NVML is not there (no driver library, no GPU): its
/// standard error says why.
pub const HELPER_UNAVAILABLE: i32 = 3;
/// How long the helper may take: `nvmlInit` waits on the kernel driver, which on a
/// healthy node answers within seconds, and never at all for a GPU fallen off the bus.
const HELPER_TIMEOUT: Duration = Duration::from_secs(30);

/// NVML facts from the helper process.
#[derive(Debug, Clone, Default)]
pub struct NvmlHelper {
    /// The helper to run; `None` finds it (`RDMATOPO_NVML_HELPER`, else beside this program).
    pub program: Option<PathBuf>,
    /// How long to wait for it; `None` is 30 s.
    pub timeout: Option<Duration>,
}

impl FactSource for NvmlHelper {
    fn collect(&self, fs: &Sysfs) -> Result<Facts, SourceError> {
        if !fs.exists(NVIDIA_DRIVER_DIR) {
            return Err(SourceError::Unavailable(format!(
                "NVML: {NVIDIA_DRIVER_DIR} is absent (the NVIDIA driver is not loaded); the matrix is PCIe-only"
            )));
        }
        let program = match &self.program {
            Some(p) => p.clone(),
            None => find_helper()?,
        };
        run_helper(&program, self.timeout.unwrap_or(HELPER_TIMEOUT)).map(Facts::Nvml)
    }
    fn blocks(&self) -> bool {
        true
    }
}

/// `RDMATOPO_NVML_HELPER`, else `rdmatopo-nvml` in the running program's directory.
/// Whether it is there is left to starting it ([`run_helper`]).
fn find_helper() -> Result<PathBuf, SourceError> {
    if let Some(p) = std::env::var_os(HELPER_ENV) {
        return Ok(PathBuf::from(p));
    }
    std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|d| d.join(HELPER_NAME)))
        .ok_or_else(|| {
            SourceError::Unavailable(format!(
                "NVML: this static build reads NVML through {HELPER_NAME}, and the running program's directory is unknown (name the helper in {HELPER_ENV})"
            ))
        })
}

/// Run the helper and read its snapshot. Its output is read while it runs (a pipe holds
/// only 64 KiB); past `timeout` it is killed.
fn run_helper(program: &Path, timeout: Duration) -> Result<NvmlSnapshot, SourceError> {
    let failed = |message: String| SourceError::Failed {
        source_name: "NVML",
        message,
    };
    let shown = program.display();
    let mut child = Command::new(program)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => SourceError::Unavailable(format!(
                "NVML: this static build reads NVML through {shown}, which cannot run: {e} (install it beside rdmatopo, or name it in {HELPER_ENV}); GPU names, UUIDs, MIG and NVLink are unknown, the matrix is PCIe-only"
            )),
            _ => failed(format!("cannot run {shown}: {e}")),
        })?;
    let stdout = drain(child.stdout.take());
    let stderr = drain(child.stderr.take());
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(2)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(failed(format!(
                    "{shown} gave no answer in {} s and was stopped (nvmlInit waits on the driver: check `nvidia-smi`)",
                    timeout.as_secs()
                )));
            }
            Err(e) => return Err(failed(format!("waiting for {shown}: {e}"))),
        }
    };
    let (stdout, stderr) = (
        stdout.join().unwrap_or_default(),
        stderr.join().unwrap_or_default(),
    );
    let reason = String::from_utf8_lossy(&stderr).trim().to_string();
    match status.code() {
        Some(0) => serde_json::from_slice(&stdout)
            .map_err(|e| failed(format!("{shown} printed no NVML snapshot: {e}"))),
        Some(HELPER_UNAVAILABLE) => Err(SourceError::Unavailable(reason)),
        _ => Err(failed(format!("{shown} failed ({status}): {reason}"))),
    }
}

/// Read a pipe to its end on a thread of its own.
fn drain(pipe: Option<impl Read + Send + 'static>) -> std::thread::JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut out = Vec::new();
        if let Some(mut p) = pipe {
            // Bounded as `rdmatopo/nvml.json` is read (8 GPUs take 28 KB). Past the
            // bound the pipe closes and the helper fails writing.
            let _ = p.by_ref().take(8 << 20).read_to_end(&mut out);
        }
        out
    })
}

/// The body of `rdmatopo-nvml`: NVML's view of this machine on standard output, as
/// the JSON a snapshot keeps in `rdmatopo/nvml.json`; `HELPER_UNAVAILABLE` when NVML
/// is not there.
#[cfg(all(feature = "nvml", not(target_env = "musl")))]
pub fn helper_main() -> std::process::ExitCode {
    use std::process::ExitCode;
    match super::nvml::LiveNvml.collect(&Sysfs::live()) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// A shell script standing in for the helper.
    fn script(dir: &Path, body: &str) -> PathBuf {
        let path = dir.join("helper.sh");
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    /// What running `helper` fails with, as a diagnostic would say it.
    fn error_of(helper: &Path) -> String {
        run_helper(helper, Duration::from_secs(60))
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn a_snapshot_printed_by_the_helper_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let dir = dir.path();
        let json =
            r#"{"schema":"rdmatopo.nvml/1","gpus":[{"index":0,"bus_id":"00000000:18:00.0"}]}"#;
        std::fs::write(dir.join("nvml.json"), json).unwrap();
        let helper = script(dir, &format!("cat '{}'", dir.join("nvml.json").display()));
        let snap = run_helper(&helper, Duration::from_secs(10)).unwrap();
        assert_eq!(snap.gpus.len(), 1);
        assert_eq!(snap.gpus[0].bus_id, "00000000:18:00.0");
    }

    #[test]
    fn unavailable_from_the_helper_carries_its_reason() {
        let dir = tempfile::tempdir().unwrap();
        let helper = script(
            dir.path(),
            "echo 'NVML: libnvidia-ml.so.1 was not found' >&2; exit 3",
        );
        let e = run_helper(&helper, Duration::from_secs(10)).unwrap_err();
        assert_eq!(
            e,
            SourceError::Unavailable("NVML: libnvidia-ml.so.1 was not found".into())
        );
    }

    #[test]
    fn garbage_and_failures_name_the_helper() {
        let dir = tempfile::tempdir().unwrap();
        let dir = dir.path();
        let e = error_of(&script(dir, "echo '{not json'"));
        assert!(e.contains("helper.sh printed no NVML snapshot"), "{e}");
        let e = error_of(&script(dir, "echo boom >&2; exit 1"));
        assert!(e.contains("helper.sh failed") && e.contains("boom"), "{e}");
        let e = run_helper(&dir.join("absent"), Duration::from_secs(10)).unwrap_err();
        assert!(matches!(e, SourceError::Unavailable(_)), "{e:?}");
        let e = e.to_string();
        assert!(e.contains("cannot run") && e.contains("absent"), "{e}");
    }

    #[test]
    fn a_helper_that_never_stops_writing_fails_at_the_bound() {
        let dir = tempfile::tempdir().unwrap();
        let e = error_of(&script(dir.path(), "exec yes"));
        assert!(e.contains("helper.sh failed"), "{e}");
    }

    #[test]
    fn a_helper_that_never_answers_is_stopped() {
        let dir = tempfile::tempdir().unwrap();
        let helper = script(dir.path(), "exec sleep 600");
        let started = Instant::now();
        let e = run_helper(&helper, Duration::from_millis(300))
            .unwrap_err()
            .to_string();
        assert!(e.contains("gave no answer"), "{e}");
        assert!(started.elapsed() < Duration::from_secs(60));
    }

    #[test]
    fn no_helper_runs_without_the_nvidia_driver() {
        let dir = tempfile::tempdir().unwrap();
        let dir = dir.path();
        std::fs::create_dir_all(dir.join("sys/bus/pci/drivers")).unwrap();
        let ran = dir.join("ran");
        let helper = script(dir, &format!("touch '{}'; exit 1", ran.display()));
        let source = NvmlHelper {
            program: Some(helper),
            timeout: None,
        };
        let e = source.collect(&Sysfs::at(dir)).unwrap_err();
        assert!(matches!(e, SourceError::Unavailable(_)), "{e:?}");
        assert!(!ran.exists());
        // With the driver's directory the same helper runs (and fails).
        std::fs::create_dir_all(dir.join("sys/bus/pci/drivers/nvidia")).unwrap();
        let e = source.collect(&Sysfs::at(dir)).unwrap_err();
        assert!(matches!(e, SourceError::Failed { .. }), "{e:?}");
        assert!(ran.exists());
    }
}
