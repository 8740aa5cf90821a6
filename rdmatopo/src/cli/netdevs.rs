//! `rdmatopo netdevs`: the `ibdev2netdev` view (`mlx5_0 port 1 ==> ens18np0 (Up)`),
//! including bonds, and ports whose netdev is not in this network namespace (which
//! `ibdev2netdev` drops silently).

use super::args::{Format, RootArgs};
use super::output::{Output, json};
use clap::Args;
use rdmatopo::Topology;
use rdmatopo::model::{Netdev, Port, RdmaDevice};
use rdmatopo::parse::ls_cmp;
use rdmatopo::view::container::Shown;
use rdmatopo::view::gid::is_roce;
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
    let topo = args
        .root
        .discover_owned(rdmatopo::Needs::NETDEVS, args.all)?;
    let shown = Shown::of(&topo, args.all);
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
    Ok(Output::ok(match args.format {
        Format::Json => {
            #[derive(Serialize)]
            struct Doc<'a> {
                schema: &'static str,
                ports: Vec<Row>,
                /// Inside a container, the other containers' RDMA devices, left out.
                #[serde(skip_serializing_if = "<[String]>::is_empty")]
                left_out: &'a [String],
            }
            json(&Doc {
                schema: "rdmatopo.netdevs/1",
                ports: rows,
                left_out: &shown.left_out,
            })
        }
        Format::Table => table(&topo, &rows, &shown),
    }))
}

fn table(topo: &Topology, rows: &[Row], shown: &Shown) -> String {
    let mut s = String::new();
    if rows.is_empty() && shown.left_out.is_empty() {
        let _ = writeln!(s, "no RDMA device under {}", topo.root);
    }
    for r in rows {
        let _ = write!(s, "{} port {} ==> ", r.device, r.port);
        match (&r.netdev, &r.state, &r.note) {
            (Some(n), Some(st), _) => {
                let _ = write!(s, "{n} ({st})");
            }
            (Some(n), None, Some(note)) => {
                let _ = write!(s, "{n} ({note})");
            }
            (_, _, note) => {
                let _ = write!(s, "- ({})", note.as_deref().unwrap_or("no netdev"));
            }
        }
        if !r.slaves.is_empty() {
            let mode = r
                .bond_mode
                .as_deref()
                .map(|m| format!(", {m}"))
                .unwrap_or_default();
            let _ = write!(s, "  [bond of {}{mode}]", r.slaves.join(" "));
        }
        if let Some(m) = &r.master {
            let _ = write!(s, "  [slave of {m}]");
        }
        s.push('\n');
    }
    // After the lines, which stay `ibdev2netdev`'s.
    if let Some(note) = shown.note() {
        let _ = writeln!(s, "note: {note}");
    }
    s
}
