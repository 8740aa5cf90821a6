//! Write a generated fleet of N node reports (inventory JSON, a few nodes broken in
//! known ways; see `tests/fleet/mod.rs`) into DIR, for `rdmatopo cluster DIR`:
//!
//!     cargo run --release -p rdmatopo --example fleet -- DIR N
//!
//! `scripts/bench-cluster` uses it to time the fleet check.

#[allow(dead_code)]
#[path = "../tests/fleet/mod.rs"]
mod fleet;

use std::path::PathBuf;

fn main() -> Result<(), String> {
    let mut args = std::env::args().skip(1);
    let usage = "usage: fleet DIR N";
    let dir = PathBuf::from(args.next().ok_or(usage)?);
    let n: usize = args
        .next()
        .ok_or(usage)?
        .parse()
        .map_err(|_| format!("N must be a number; {usage}"))?;
    if n < 12 {
        return Err("N must be at least 12 (room for every fault)".into());
    }
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let base = fleet::base()?;
    let nodes = fleet::fleet(&base, n).ok_or("the base report lacks a rail the faults need")?;
    for (name, v) in nodes {
        let path = dir.join(format!("{name}.json"));
        let text = serde_json::to_vec(&v).map_err(|e| e.to_string())?;
        std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    println!("wrote {n} node reports to {}", dir.display());
    Ok(())
}
