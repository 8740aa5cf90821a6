//! Times `doctor`, `diff` and `snapshot` on a root (for BENCHMARKS.md):
//!
//!     python3 fixtures/tools/unpack.py pod-sriov   # the directory form of the fixture
//!     cargo run --release --example bench_doctor -- fixtures/pod-sriov/root [ROUNDS]
//!
//! Discovery runs once; then each analysis runs ROUNDS times (default 200) and the
//! minimum, median and maximum wall time per run are printed. The snapshot line counts
//! the files discovery read and the files the capture read again to store them.

use rdmatopo::checks::{diff, doctor};
use rdmatopo::snapshot::{Capture, Options};
#[path = "common/timing.rs"]
mod timing;
use std::time::Instant;
use timing::time;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let root = args.next().unwrap_or_else(|| "/".to_string());
    let rounds: usize = args.next().map_or(Ok(200), |r| r.parse())?;
    let path = std::path::PathBuf::from(&root);
    let t = Instant::now();
    let fs = rdmatopo::open_root(Some(&path))?.recording();
    let topo = rdmatopo::discover_fs(&fs)?;
    let discover = t.elapsed();
    println!(
        "root {root}: {} GPUs, {} RDMA devices, {} PCI functions",
        topo.gpus.len(),
        topo.rdma_devices.len(),
        topo.pci.len()
    );
    println!(
        "discover (once, cold caches of this process): {:.3} ms, {} files read",
        discover.as_secs_f64() * 1e3,
        fs.files_read()
    );
    println!("doctor::run: {}", time(rounds, || doctor::run(&topo)));
    println!(
        "diff::diff (root against itself): {}",
        time(rounds.min(50), || diff::diff(&topo, &topo))
    );
    let t = Instant::now();
    let capture = Capture::from_journal(&fs, &topo);
    let bytes = capture.to_tar_gz(&Options::default())?;
    let s = capture.stats();
    println!(
        "snapshot: {:.3} ms capture+gzip; {} files, {} symlinks, {} dirs, {} bytes content, {} bytes .tar.gz; discovery read {} files ({} paths), the capture read {} again",
        t.elapsed().as_secs_f64() * 1e3,
        s.files,
        s.symlinks,
        s.dirs,
        s.bytes,
        bytes.len(),
        s.discovery_reads,
        s.journal_paths,
        s.capture_reads
    );
    Ok(())
}
