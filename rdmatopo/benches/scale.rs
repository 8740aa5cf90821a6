//! Discovery and analysis cost on one root, for `scripts/bench-scale.sh`:
//!
//! ```sh
//! cargo bench -p rdmatopo --bench scale -- ROOT [RUNS]
//! ```
//!
//! Prints one tab-separated line: PCI functions, RDMA devices, GID slots, valid GIDs,
//! files read, median discovery ms, median analysis ms (the affinity matrix and the
//! NCCL plan), this process's peak RSS in KiB after the first discovery, and at the end.
//! One root per process, so the peaks belong to that root alone.

use rdmatopo::view::TopoMatrix;
use rdmatopo::view::plan::{Plan, PlanOptions};
use std::time::{Duration, Instant};

fn median(mut v: Vec<Duration>) -> f64 {
    v.sort();
    v[v.len() / 2].as_secs_f64() * 1e3
}

/// `VmHWM` of this process (the bench reads its own `/proc`, not a root's).
fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let Some(root) = args.first() else {
        eprintln!("usage: scale ROOT [RUNS]");
        std::process::exit(2);
    };
    let runs: usize = args.get(1).and_then(|r| r.parse().ok()).unwrap_or(5);
    let (mut discovery, mut analysis) = (Vec::new(), Vec::new());
    let mut last = None;
    let mut discovered_peak = 0; // peak RSS before the first analysis
    for _ in 0..runs.max(1) {
        drop(last.take()); // one model alive at a time: the peak is one run's
        let start = Instant::now();
        let fs = rdmatopo::Sysfs::at(root);
        let topo = match rdmatopo::discover_fs(&fs) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("{root}: {e}");
                std::process::exit(3);
            }
        };
        discovery.push(start.elapsed());
        if discovered_peak == 0 {
            discovered_peak = peak_rss_kib();
        }
        let start = Instant::now();
        let matrix = TopoMatrix::for_topology(&topo);
        let plan = Plan::compute(&topo, &PlanOptions::default());
        std::hint::black_box((&matrix, &plan));
        analysis.push(start.elapsed());
        last = Some((topo, fs.files_read()));
    }
    let Some((topo, files)) = last else { return };
    let ports = topo.rdma_devices.iter().flat_map(|d| &d.ports);
    let slots: u64 = ports.clone().map(|p| u64::from(p.gid_table_len)).sum();
    let gids: usize = ports.map(|p| p.gids.len()).sum();
    println!(
        "{}\t{}\t{}\t{}\t{}\t{:.2}\t{:.2}\t{}\t{}",
        topo.pci.len(),
        topo.rdma_devices.len(),
        slots,
        gids,
        files,
        median(discovery),
        median(analysis),
        discovered_peak,
        peak_rss_kib()
    );
}
