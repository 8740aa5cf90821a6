//! A fleet check over snapshots: read each node's capture (a `rdmatopo snapshot`
//! archive, a captured directory, or an inventory JSON), and report the nodes whose
//! shape differs from the fleet's most common one (GPU and NIC counts, the class
//! between each GPU and its nearest NICs, port states and rates) and those doctor
//! finds errors on.
//!
//!     cargo run -p rdmatopo --example fleet_check -- \
//!         fixtures/h100-dgx/root.tar.gz fixtures/h100-dgx-ib-storage/root.tar.gz
//!
//! Exit status 0 when every node has the fleet's shape and no doctor error, 1 when
//! one does not, 2 on a usage error or an unreadable capture. (`rdmatopo cluster DIR`
//! is the command's fuller check of rails across a fleet's inventory reports.)

use rdmatopo::{Discovery, Severity, Topology, View};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::ExitCode;

/// What should be alike on every node of a fleet.
fn shape(topo: &Topology) -> Vec<String> {
    let devices = topo.devices();
    let mut out = vec![format!(
        "{} GPUs, {} RDMA devices",
        topo.gpus.len(),
        topo.rdma_devices.len()
    )];
    for g in &topo.gpus {
        let name = devices.gpu_names().name(g);
        match devices.nearest_nics(g.pci) {
            Ok((nics, class)) => out.push(format!("{name}: {} NICs at {class}", nics.len())),
            Err(e) => out.push(format!("{name}: {e}")),
        }
    }
    for nic in &topo.rdma_devices {
        for p in &nic.ports {
            let state = p.state.map_or("state unknown".into(), |s| format!("{s:?}"));
            let rate = p
                .rate
                .as_ref()
                .map_or("rate unknown".into(), |r| format!("{} Gb/s", r.gbps));
            out.push(format!("{}:{} {state}, {rate}", nic.name, p.number));
        }
    }
    out
}

fn read(path: &Path) -> Result<Topology, String> {
    let named = |e: String| format!("{}: {e}", path.display());
    if path.extension().is_some_and(|e| e == "json") {
        let text = std::fs::read_to_string(path).map_err(|e| named(e.to_string()))?;
        return Topology::from_json(&text).map_err(|e| named(e.to_string()));
    }
    // A node's capture is judged whole, not as one container's view of it.
    Discovery::root(path)
        .view(View::All)
        .run()
        .map_err(|e| e.to_string())
}

fn main() -> ExitCode {
    let paths: Vec<String> = std::env::args().skip(1).collect();
    if paths.is_empty() {
        eprintln!("usage: fleet_check SNAPSHOT...");
        return ExitCode::from(2);
    }
    let mut nodes = Vec::new();
    for p in &paths {
        match read(Path::new(p)) {
            Ok(t) => nodes.push((p.as_str(), t)),
            Err(e) => {
                eprintln!("fleet_check: {e}");
                return ExitCode::from(2);
            }
        }
    }
    let shapes: Vec<Vec<String>> = nodes.iter().map(|(_, t)| shape(t)).collect();
    let mut count: BTreeMap<&Vec<String>, usize> = BTreeMap::new();
    for s in &shapes {
        *count.entry(s).or_default() += 1;
    }
    let Some((common, n)) = count.iter().max_by_key(|(_, n)| **n) else {
        return ExitCode::from(2);
    };
    println!(
        "{} nodes; {n} have the fleet's shape: {}",
        nodes.len(),
        common[0]
    );
    let mut bad = 0;
    for ((path, topo), s) in nodes.iter().zip(&shapes) {
        let mut lines = Vec::new();
        if s != *common {
            for l in s.iter().filter(|l| !common.contains(l)) {
                lines.push(format!("has    {l}"));
            }
            for l in common.iter().filter(|l| !s.contains(l)) {
                lines.push(format!("lacks  {l}"));
            }
        }
        let report = topo.doctor();
        for f in report
            .findings
            .iter()
            .filter(|f| f.severity == Severity::Error && !f.skipped)
        {
            lines.push(format!("doctor {}: {}", f.check, f.summary));
        }
        if lines.is_empty() {
            println!("ok     {path}");
        } else {
            bad += 1;
            println!("DIFFER {path}");
            for l in lines {
                println!("    {l}");
            }
        }
    }
    if bad == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
