//! `rdmatopo nccl-topo`: write an NCCL topology file for this root, or read one (an
//! NCCL dump, a cloud vendor's file) and show the GPU–NIC classes and pairing it implies.

use super::args::{Format, RootArgs};
use super::output::{Output, json};
use crate::export::nccl_xml::{self, XmlOptions};
use crate::model::Diagnostic;
use crate::view::container::DisplayedDevices;
use crate::view::plan::{DataDirect, Plan, PlanOptions, preferred_hcas};
use crate::view::{PathClass, TopoMatrix};
use clap::Args;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write;
use std::io::Read;
use std::path::PathBuf;

/// Largest topology file read (NCCL's own files are a few KiB).
const MAX_INPUT_BYTES: u64 = 16 << 20;

#[derive(Args, Debug)]
pub struct NcclTopoArgs {
    #[command(flatten)]
    pub root: RootArgs,
    /// Write the file here instead of standard output.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Also write `<nic><net name dev speed port/></nic>` under each HCA.
    #[arg(long)]
    pub nets: bool,
    /// Read this topology file instead and show what it says about GPUs and NICs.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["output", "nets"])]
    pub input: Option<PathBuf>,
    /// Output of --input.
    #[arg(long, value_enum, default_value = "table", requires = "input")]
    pub format: Format,
    /// Every GPU and HCA visible, even inside a container (whose own devices, those its
    /// NCCL finds, are the default where they are certain).
    #[arg(long, conflicts_with = "input")]
    pub all: bool,
}

pub fn run(args: &NcclTopoArgs) -> Result<Output, String> {
    match &args.input {
        Some(path) => analyse(path, args.format),
        None => write(args),
    }
}

fn write(args: &NcclTopoArgs) -> Result<Output, String> {
    let topo = args.root.discover_owned(crate::Needs::ALL, args.all)?;
    let shown = DisplayedDevices::of(&topo, args.all);
    // The file must use the bus ids NCCL will compute: VF merging is off when the
    // environment or the plan turns it off.
    let env_off = topo
        .process
        .env
        .get("NCCL_IB_MERGE_VFS")
        .map(String::as_str)
        == Some("0");
    let plan_off = Plan::compute(&topo, &PlanOptions::default())
        .ok()
        .and_then(|p| p.env.get("NCCL_IB_MERGE_VFS").cloned())
        .as_deref()
        == Some("0");
    let opts = XmlOptions {
        merge_vfs: !(env_off || plan_off),
        nets: args.nets,
        data_direct: DataDirect::from_env(&topo.process.env),
    };
    let xml = nccl_xml::write_shown(&topo, &opts, &shown);
    match &args.output {
        None => Ok(Output::ok(xml)),
        Some(path) => {
            std::fs::write(path, &xml)
                .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
            let hcas = topo
                .rdma_devices
                .iter()
                .filter(|d| d.pci.is_some() && shown.shows(&d.name))
                .count();
            let gpus = topo.gpus.iter().filter(|g| shown.shows_gpu(g.pci)).count();
            let mut text = format!(
                "wrote {} ({gpus} GPU{}, {hcas} HCA{}); use it with NCCL_TOPO_FILE={}\n",
                path.display(),
                if gpus == 1 { "" } else { "s" },
                if hcas == 1 { "" } else { "s" },
                path.display()
            );
            if let Some(note) = shown.note() {
                let _ = writeln!(text, "note: {note}");
            }
            // What was done, not an answer: stderr, as the notes of the other commands.
            Ok(Output::ok(String::new()).with_notes(text))
        }
    }
}

#[derive(Debug, Serialize)]
struct Preferred {
    hcas: Vec<String>,
    class: PathClass,
}

#[derive(Debug, Serialize)]
struct Analysis {
    schema: &'static str,
    source: String,
    matrix: TopoMatrix,
    /// Per GPU (by PCI address): the NICs NCCL prefers and their class.
    preferred: BTreeMap<String, Preferred>,
    diagnostics: Vec<Diagnostic>,
}

fn analyse(path: &PathBuf, format: Format) -> Result<Output, String> {
    let mut text = String::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_INPUT_BYTES).read_to_string(&mut text))
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let label = path.display().to_string();
    let topo = nccl_xml::read(&text, &label).map_err(|e| format!("{label}: {e}"))?;
    let matrix = TopoMatrix::for_topology(&topo);
    let preferred: BTreeMap<String, Preferred> = preferred_hcas(&topo)
        .into_iter()
        .map(|(g, (hcas, class))| (g.to_string(), Preferred { hcas, class }))
        .collect();
    Ok(Output::ok(match format {
        Format::Json => json(&Analysis {
            schema: "rdmatopo.nccl-topo-analysis/1",
            source: label,
            matrix,
            preferred,
            diagnostics: topo.diagnostics.clone(),
        }),
        Format::Table => {
            let mut s = String::new();
            let _ = writeln!(
                s,
                "{label}: {} GPU{}, {} NIC{}, {} CPU node{} (NCCL merges the host bridges of a NUMA node: PHB here includes nvidia-smi's NODE)\n",
                topo.gpus.len(),
                if topo.gpus.len() == 1 { "" } else { "s" },
                topo.rdma_devices.len(),
                if topo.rdma_devices.len() == 1 {
                    ""
                } else {
                    "s"
                },
                topo.host_bridges.len(),
                if topo.host_bridges.len() == 1 {
                    ""
                } else {
                    "s"
                },
            );
            if topo.gpus.is_empty() && topo.rdma_devices.is_empty() {
                s.push_str("no GPU and no NIC in this file\n");
            } else {
                s.push_str(&crate::export::table::nvidia_smi_table(&matrix, false));
            }
            if !preferred.is_empty() {
                s.push_str("NICs NCCL prefers per GPU:\n");
                for d in matrix.devices().iter().filter(|d| d.kind == "gpu") {
                    if let Some(p) = preferred.get(&d.pci.to_string()) {
                        let _ = writeln!(
                            s,
                            "  {} {}: {} ({})",
                            d.name,
                            d.pci,
                            p.hcas.join(", "),
                            p.class
                        );
                    }
                }
            }
            for d in &topo.diagnostics {
                let _ = writeln!(s, "warning: {}", d.message);
            }
            s
        }
    }))
}
