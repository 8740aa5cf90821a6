//! What an NCCL net plugin or a device plugin asks: for a GPU, by its PCI address (or
//! `GPU<n>`, its UUID), the nearest RDMA NICs, how near (the nvidia-smi class), their
//! netdevs and port states, and the GID each port would use.
//!
//!     cargo run -p rdmatopo --example nic_lookup -- --root fixtures/h100-dgx/root.tar.gz 0000:1b:00.0
//!
//! `--root` defaults to this machine (`/`). Exit status 1 when the GPU is not found.

use rdmatopo::{Discovery, RdmaDevice, Topology};
use std::process::ExitCode;

fn describe_port(topo: &Topology, nic: &RdmaDevice) {
    for port in &nic.ports {
        let state = port
            .state
            .map_or("?".to_string(), |s| format!("{s:?}").to_uppercase());
        let rate = port
            .rate
            .as_ref()
            .map_or("?".to_string(), |r| format!("{} Gb/s", r.gbps));
        let netdev = port.netdev.as_deref().unwrap_or("-");
        println!(
            "  {}:{} {state} {rate} netdev {netdev}",
            nic.name, port.number
        );
        if port.is_roce() {
            match topo.choose_gid(&nic.name, port.number) {
                Some(g) => println!(
                    "    RoCE GID index {} ({}{})",
                    g.index,
                    g.gid,
                    g.netdev
                        .as_deref()
                        .map_or(String::new(), |n| format!(" on {n}"))
                ),
                None => {
                    let why: Vec<String> = port
                        .gids
                        .iter()
                        .filter_map(|g| {
                            let r = topo.gid_unusable_reason(g)?;
                            Some(format!("{}: {r}", g.index))
                        })
                        .collect();
                    println!("    no usable RoCE GID ({})", why.join("; "));
                }
            }
        } else {
            // InfiniBand: NCCL uses GID index 0, the port GID.
            let gid0 = port.gids.iter().find(|g| g.index == 0);
            println!(
                "    InfiniBand, LID {}, GID 0 {}",
                port.lid.as_deref().unwrap_or("?"),
                gid0.map_or("?", |g| g.gid.as_str())
            );
        }
    }
}

fn run() -> Result<(), String> {
    let usage = "usage: nic_lookup [--root ROOT] GPU";
    let mut root = None;
    let mut gpu = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--root" => root = Some(args.next().ok_or(usage)?),
            _ if gpu.is_none() => gpu = Some(a),
            _ => return Err(usage.into()),
        }
    }
    let gpu = gpu.ok_or(usage)?;
    let topo = match root {
        Some(root) => Discovery::root(root),
        None => Discovery::live(),
    }
    .run()
    .map_err(|e| e.to_string())?;
    let devices = topo.devices();
    let addr = devices.pci_of(&gpu).map_err(|e| e.to_string())?;
    let index = devices.gpu_position(addr).map_err(|e| e.to_string())?;
    let g = &topo.gpus[index];
    println!(
        "{} {} ({}), NUMA node {}",
        devices.gpu_names().name(g),
        g.pci,
        g.name.as_deref().unwrap_or("unknown"),
        devices.gpu_numa(g).map_or("?".into(), |n| n.to_string())
    );
    let (nearest, class) = devices.nearest_nics(addr).map_err(|e| e.to_string())?;
    println!("nearest NICs ({class}):");
    for i in nearest {
        let nic = &topo.rdma_devices[i];
        let numa = devices.nic_numa(nic).map_or("?".into(), |n| n.to_string());
        println!(
            "{} at {}, NUMA node {numa}",
            nic.name,
            nic.pci.map_or("-".to_string(), |p| p.to_string())
        );
        describe_port(&topo, nic);
    }
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("nic_lookup: {e}");
            ExitCode::FAILURE
        }
    }
}
