//! `rdmatopo gids`: the `show_gids` table (mlnx-tools), in `ls` order (index 10 before
//! 2), on stdout; the GID to use per RoCE port, on stderr.
//!
//! Rows of other network namespaces: the upstream kernel lists every namespace's GIDs
//! in a pod's table (with the host's netdev names), MLNX_OFED hides them. They stay in
//! the table, as `show_gids` prints them, but carry one trailing field, `[other netns]`,
//! after the show_gids columns, and a note on stderr says what it means; in
//! JSON they have `"other_netns": true`. Rows of this namespace (all of them on a host)
//! are exactly show_gids's. Whether a row is another namespace's is
//! `view::gid::of_other_namespace`, the rule every command chooses GIDs by.

use super::args::{Format, RootArgs};
use super::output::{Output, json};
use crate::Topology;
use crate::model::{Gid, Port, RdmaDevice};
use crate::parse::{gid_is_link_local, ls_cmp, parse_gid};
use crate::view::container::DisplayedDevices;
use crate::view::gid::{GidChoice, NcclGidEnv, choose_gid, nccl_gid_index, of_other_namespace};
use clap::Args;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write;

#[derive(Args, Debug)]
pub struct GidsArgs {
    #[command(flatten)]
    pub root: RootArgs,
    /// Only this RDMA device.
    #[arg(value_name = "DEV")]
    pub device: Option<String>,
    /// Only this port of DEV.
    #[arg(value_name = "PORT", requires = "device")]
    pub port: Option<u32>,
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
    /// Every RDMA device visible, as `show_gids` lists them, even inside a container
    /// (whose own devices are the default where they are certain).
    #[arg(long)]
    pub all: bool,
}

/// One row (`rdmatopo.gids/1`).
#[derive(Debug, Serialize)]
struct Row<'a> {
    device: &'a str,
    port: u32,
    index: u32,
    gid: &'a str,
    ipv4: Option<&'a str>,
    #[serde(rename = "type")]
    gid_type: Option<&'static str>,
    netdev: Option<&'a str>,
    /// The GID's netdev is in another network namespace: listed (the upstream kernel
    /// shows it here) but not usable from here. Absent when false.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    other_netns: bool,
}

#[derive(Debug, Serialize)]
struct Doc<'a> {
    schema: &'static str,
    gids: Vec<Row<'a>>,
    /// NCCL's choice per RoCE port: keyed by device, or `device:port` on multi-port
    /// devices.
    recommended: BTreeMap<String, u32>,
    /// Inside a container, the other containers' RDMA devices, left out (`--all`
    /// lists them). Absent when none is.
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    left_out: &'a [String],
}

/// What `show_gids` prints: every GID except the all-zero ones and the bare `fe80::`.
fn shown(g: &Gid) -> bool {
    parse_gid(&g.gid).is_ok_and(|a| {
        !(a.is_unspecified()
            || (gid_is_link_local(&a) && a.segments()[4..].iter().all(|s| *s == 0)))
    })
}

fn key(dev: &RdmaDevice, port: u32) -> String {
    if dev.ports.len() == 1 {
        dev.name.clone()
    } else {
        format!("{}:{port}", dev.name)
    }
}

pub fn run(args: &GidsArgs) -> Result<Output, String> {
    let topo = args.root.discover_owned(crate::Needs::GIDS, args.all)?;
    let shown = DisplayedDevices::of(&topo, args.all);
    let devices: Vec<&RdmaDevice> = match &args.device {
        Some(name) if shown.left_out.contains(name) => {
            return Err(format!(
                "{name} is another container's RDMA device ({}); `rdmatopo gids --all {name}` shows its GIDs",
                shown.context
            ));
        }
        Some(name) => {
            let d = topo.rdma_device(name).ok_or_else(|| {
                let names: Vec<&str> = topo.rdma_devices.iter().map(|d| d.name.as_str()).collect();
                format!(
                    "no RDMA device {name:?} under {} (devices: {})",
                    topo.root,
                    if names.is_empty() {
                        "none".to_string()
                    } else {
                        names.join(", ")
                    }
                )
            })?;
            if let Some(p) = args.port
                && !d.ports.iter().any(|q| q.number == p)
            {
                return Err(format!("{name} has no port {p}"));
            }
            vec![d]
        }
        None => {
            let mut all: Vec<&RdmaDevice> = topo
                .rdma_devices
                .iter()
                .filter(|d| shown.shows(&d.name))
                .collect();
            all.sort_by(|a, b| ls_cmp(&a.name, &b.name));
            all
        }
    };
    let (rows, choices) = show_gids_rows(&topo, &devices, args.port);
    Ok(match args.format {
        Format::Json => Output::ok(json(&Doc {
            schema: "rdmatopo.gids/1",
            gids: rows,
            recommended: choices.iter().map(|(k, c)| (k.clone(), c.index)).collect(),
            left_out: if args.device.is_none() {
                &shown.left_out
            } else {
                &[]
            },
        })),
        Format::Table => {
            let (text, mut notes) = table(&topo, &rows, &choices);
            if let Some(note) = shown.note().filter(|_| args.device.is_none()) {
                let _ = writeln!(notes, "note: {note}");
            }
            Output::ok(text).with_notes(notes)
        }
    })
}

/// The rows `show_gids` prints for `devices` (in the order given) and the GID NCCL would
/// choose per port: ports and GID indices in `ls` order (`0, 1, 10, 11, 2`), as its
/// `$(ls .../ports/)` and `$(ls .../gids/)` give them.
fn show_gids_rows<'t>(
    topo: &'t Topology,
    devices: &[&'t RdmaDevice],
    port: Option<u32>,
) -> (Vec<Row<'t>>, Vec<(String, GidChoice)>) {
    let mut rows = Vec::new();
    let mut choices: Vec<(String, GidChoice)> = Vec::new();
    for d in devices {
        let mut ports: Vec<&Port> = d
            .ports
            .iter()
            .filter(|p| port.is_none_or(|n| n == p.number))
            .collect();
        ports.sort_by_cached_key(|p| p.number.to_string());
        for p in ports {
            let mut gids: Vec<&Gid> = p.gids.iter().filter(|g| shown(g)).collect();
            gids.sort_by_cached_key(|g| g.index.to_string());
            for g in gids {
                rows.push(Row {
                    device: &d.name,
                    port: p.number,
                    index: g.index,
                    gid: &g.gid,
                    ipv4: g.ipv4.as_deref(),
                    gid_type: g.gid_type.map(|t| t.as_str()),
                    netdev: g.netdev.as_deref(),
                    other_netns: of_other_namespace(topo, g),
                });
            }
            if let Some(c) = choose_gid(topo, &d.name, p.number) {
                choices.push((key(d, p.number), c));
            }
        }
    }
    (rows, choices)
}

/// The trailing field of a row whose netdev is in another network namespace.
const OTHER_NETNS_MARK: &str = "\t[other netns]";

/// `show_gids`'s table, through its `n_gids_found=` line (stdout), and what rdmatopo
/// adds (stderr): the `[other netns]` legend and the GID to use.
fn table(topo: &Topology, rows: &[Row], choices: &[(String, GidChoice)]) -> (String, String) {
    let mut s = String::new();
    let mut notes = String::new();
    s.push_str("DEV\tPORT\tINDEX\tGID\t\t\t\t\tIPv4  \t\tVER\tDEV\n");
    s.push_str("---\t----\t-----\t---\t\t\t\t\t------------  \t---\t---\n");
    for r in rows {
        let ver = r
            .gid_type
            .and_then(|t| t.find(['v', 'V']).map(|i| &t[i..]))
            .unwrap_or("");
        let ndev = r.netdev.unwrap_or("");
        // After show_gids's last column, so this namespace's rows stay show_gids's.
        let mark = if r.other_netns { OTHER_NETNS_MARK } else { "" };
        match r.ipv4 {
            Some(ip) => {
                let _ = writeln!(
                    s,
                    "{}\t{}\t{}\t{}\t{ip}  \t{ver}\t{ndev}{mark}",
                    r.device, r.port, r.index, r.gid
                );
            }
            None => {
                let _ = writeln!(
                    s,
                    "{}\t{}\t{}\t{}\t\t\t{ver}\t{ndev}{mark}",
                    r.device, r.port, r.index, r.gid
                );
            }
        }
    }
    let _ = writeln!(s, "n_gids_found={}", rows.len());
    let other = rows.iter().filter(|r| r.other_netns).count();
    if other > 0 {
        let _ = writeln!(
            notes,
            "[other netns]: {other} GID{} of netdevs outside this network namespace (the upstream kernel lists them here, MLNX_OFED hides them); not usable from here",
            if other == 1 { "" } else { "s" }
        );
    }
    if choices.is_empty() {
        if topo.rdma_devices.is_empty() {
            let _ = writeln!(notes, "rdmatopo: no RDMA device under {}", topo.root);
        }
        return (s, notes);
    }
    notes.push_str("The GID to use (RoCE v2 and IPv4 first, netdev in this namespace):\n");
    // NCCL's own scan under this process's NCCL_IB_ADDR_* variables, where it differs.
    let mut nccl_env = NcclGidEnv::from_env(&topo.process.env);
    nccl_env.gid_index = -1;
    for (k, c) in choices {
        let addr = c.ipv4.as_deref().unwrap_or(&c.gid);
        let nccl = topo
            .rdma_device(&c.device)
            .and_then(|d| d.ports.iter().find(|p| p.number == c.port))
            .and_then(|p| nccl_gid_index(p, &nccl_env))
            .filter(|n| *n != c.index)
            .map_or(String::new(), |n| {
                format!("\t(NCCL by itself would take index {n}: set NCCL_IB_GID_INDEX)")
            });
        let _ = writeln!(
            notes,
            "  {k}\tindex {}\t{addr} on {}{nccl}",
            c.index,
            c.netdev.as_deref().unwrap_or("?")
        );
    }
    (s, notes)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `show_gids` walks `$(ls gids/)`: index 10 comes before 2.
    #[test]
    fn gid_indices_in_ls_order() {
        let mut topo = Topology::empty("t");
        let mut port = Port::numbered(1);
        port.gids = (0..12)
            .map(|i| Gid {
                index: i,
                gid: format!("fe80:0000:0000:0000:0000:0000:0000:{:04x}", i + 1),
                ipv4: None,
                gid_type: None,
                netdev: None,
            })
            .collect();
        let mut dev = RdmaDevice::named("mlx5_0".into(), None);
        dev.ports = vec![port];
        topo.rdma_devices = vec![dev];
        let devices: Vec<&RdmaDevice> = topo.rdma_devices.iter().collect();
        let (rows, _) = show_gids_rows(&topo, &devices, None);
        let order: Vec<u32> = rows.iter().map(|r| r.index).collect();
        assert_eq!(order, [0, 1, 10, 11, 2, 3, 4, 5, 6, 7, 8, 9]);
    }
}
