//! `rdmatopo netdevs`: the `ibdev2netdev` view (`mlx5_0 port 1 ==> ens18np0 (Up)`),
//! on stdout; bonds, and ports whose netdev is not in this network namespace (which
//! `ibdev2netdev` drops silently), on stderr.

use super::args::{Format, RootArgs};
use super::output::{Output, json};
use crate::Topology;
use crate::model::{Netdev, Port, RdmaDevice};
use crate::parse::ls_cmp;
use crate::view::container::DisplayedDevices;
use crate::view::gid::is_roce;
use clap::Args;
use serde::Serialize;
use std::fmt::Write;

#[derive(Args, Debug)]
pub struct NetdevsArgs {
    #[command(flatten)]
    pub root: RootArgs,
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
    /// Every RDMA device visible, as `ibdev2netdev` lists them, even inside a container
    /// (whose own devices are the default where they are certain).
    #[arg(long)]
    pub all: bool,
}

/// One port (`rdmatopo.netdevs/1`).
#[derive(Debug, Serialize)]
struct Row {
    device: String,
    port: u32,
    /// The netdev named for the port, when any.
    netdev: Option<String>,
    /// Whether that netdev is in this network namespace.
    in_namespace: bool,
    /// `Up` / `Down` from the netdev's `carrier`, as ibdev2netdev prints it.
    state: Option<String>,
    /// The bond this netdev is a slave of.
    master: Option<String>,
    /// The slaves, when the netdev is a bond.
    slaves: Vec<String>,
    bond_mode: Option<String>,
    /// What the line says when there is no netdev here.
    note: Option<String>,
}

fn row(topo: &Topology, dev: &RdmaDevice, port: &Port) -> Row {
    let visible: Option<&Netdev> = port.netdev.as_deref().and_then(|n| topo.netdev(n));
    let note = match (&port.netdev, visible) {
        (_, Some(_)) => None,
        (Some(_), None) => Some("not in this network namespace".to_string()),
        (None, None) if is_roce(port) => Some("netdev in another network namespace".to_string()),
        (None, None) if dev.pci.is_none() => Some("no netdev".to_string()),
        (None, None) => Some("no IPoIB netdev in this namespace".to_string()),
    };
    Row {
        device: dev.name.clone(),
        port: port.number,
        netdev: port.netdev.clone(),
        in_namespace: visible.is_some(),
        state: visible.map(|n| {
            if n.carrier == Some(true) {
                "Up"
            } else {
                "Down"
            }
            .to_string()
        }),
        master: visible.and_then(|n| n.master.clone()),
        slaves: visible
            .and_then(|n| n.bond.as_ref())
            .map(|b| b.slaves.clone())
            .unwrap_or_default(),
        bond_mode: visible
            .and_then(|n| n.bond.as_ref())
            .and_then(|b| b.mode.clone()),
        note,
    }
}

pub fn run(args: &NetdevsArgs) -> Result<Output, String> {
    let topo = args.root.discover_owned(crate::Needs::NETDEVS, args.all)?;
    let shown = DisplayedDevices::of(&topo, args.all);
    // In `ibdev2netdev`'s order: `ls` of the devices, then of each one's ports.
    let mut devices: Vec<&RdmaDevice> = topo
        .rdma_devices
        .iter()
        .filter(|d| shown.shows(&d.name))
        .collect();
    devices.sort_by(|a, b| ls_cmp(&a.name, &b.name));
    let rows: Vec<Row> = devices
        .into_iter()
        .flat_map(|d| {
            let mut ports: Vec<&Port> = d.ports.iter().collect();
            ports.sort_by_cached_key(|p| p.number.to_string());
            ports.into_iter().map(|p| row(&topo, d, p))
        })
        .collect();
    Ok(match args.format {
        Format::Json => {
            #[derive(Serialize)]
            struct Doc<'a> {
                schema: &'static str,
                ports: Vec<Row>,
                /// Inside a container, the other containers' RDMA devices, left out.
                #[serde(skip_serializing_if = "<[String]>::is_empty")]
                left_out: &'a [String],
            }
            Output::ok(json(&Doc {
                schema: "rdmatopo.netdevs/1",
                ports: rows,
                left_out: &shown.left_out,
            }))
        }
        Format::Table => {
            let (text, notes) = table(&topo, &rows, &shown);
            Output::ok(text).with_notes(notes)
        }
    })
}

/// `ibdev2netdev`'s lines (stdout) and what they leave out (stderr). Stdout holds only
/// `<ibdev> port <n> ==> <netdev> (<Up|Down>)`, the line mlnx-tools' `sbin/ibdev2netdev`
/// prints (Mellanox/mlnx-tools at 290a843^), so scripts that split it on spaces or match
/// it whole read it as they read the tool's. A port with no netdev in this namespace,
/// which the tool drops silently, and a bond's slaves are said on stderr.
fn table(topo: &Topology, rows: &[Row], shown: &DisplayedDevices) -> (String, String) {
    let mut s = String::new();
    let mut notes = String::new();
    if rows.is_empty() && shown.left_out.is_empty() {
        let _ = writeln!(notes, "rdmatopo: no RDMA device under {}", topo.root);
    }
    // Ports left out, one line per reason (in a pod, seventy ports share one).
    let mut left_out: Vec<(String, Vec<String>)> = Vec::new();
    for r in rows {
        let port = format!("{} port {}", r.device, r.port);
        let reason = match (&r.netdev, &r.state, &r.note) {
            (Some(n), Some(st), _) => {
                let _ = writeln!(s, "{port} ==> {n} ({st})");
                None
            }
            (Some(n), None, Some(note)) => Some((note.clone(), format!("{port} ({n})"))),
            (_, _, note) => Some((
                note.clone().unwrap_or_else(|| "no netdev".into()),
                port.clone(),
            )),
        };
        if let Some((why, port)) = reason {
            match left_out.iter_mut().find(|(w, _)| *w == why) {
                Some((_, ports)) => ports.push(port),
                None => left_out.push((why, vec![port])),
            }
        }
        if !r.slaves.is_empty() {
            let mode = r
                .bond_mode
                .as_deref()
                .map(|m| format!(", {m}"))
                .unwrap_or_default();
            let _ = writeln!(
                notes,
                "note: {port}: {} is a bond of {}{mode}",
                r.netdev.as_deref().unwrap_or("-"),
                r.slaves.join(" ")
            );
        }
        if let Some(m) = &r.master {
            let _ = writeln!(
                notes,
                "note: {port}: {} is a slave of {m}",
                r.netdev.as_deref().unwrap_or("-")
            );
        }
    }
    for (why, ports) in left_out {
        let _ = writeln!(
            notes,
            "note: left out as ibdev2netdev leaves them ({why}): {}",
            ports.join(", ")
        );
    }
    if let Some(note) = shown.note() {
        let _ = writeln!(notes, "note: {note}");
    }
    (s, notes)
}
