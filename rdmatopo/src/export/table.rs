//! The `nvidia-smi topo -m` table of a [`TopoMatrix`], byte for byte as nvidia-smi
//! prints it (the `rdmatopo topo` goldens compare it with captured nvidia-smi output).

use crate::view::{MatrixDevice, PathClass, TopoMatrix};
use std::fmt::Write;

/// nvidia-smi's legend, verbatim.
pub const LEGEND: &str = "Legend:

  X    = Self
  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)
  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node
  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)
  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)
  PIX  = Connection traversing at most a single PCIe bridge
  NV#  = Connection traversing a bonded set of # NVLinks
";

/// `matrix` in `nvidia-smi topo -m`'s layout: tab-separated, ` X ` on the diagonal,
/// GPU rows ending in CPU affinity, NUMA affinity and GPU NUMA ID, the legend, and
/// the NIC legend when there are NICs. `underline` adds the header's terminal
/// underline, as nvidia-smi does on a terminal.
pub fn nvidia_smi_table(matrix: &TopoMatrix, underline: bool) -> String {
    let mut out = String::new();
    let names: Vec<&str> = matrix.devices().iter().map(|d| d.name.as_str()).collect();
    let (on, off) = if underline {
        ("\x1b[4m", "\x1b[0m")
    } else {
        ("", "")
    };
    out.push('\t');
    out.push_str(on);
    out.push_str(&names.join("\t"));
    out.push_str("\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID");
    out.push_str(off);
    out.push('\n');
    for (i, d) in matrix.devices().iter().enumerate() {
        out.push_str(&d.name);
        for j in 0..names.len() {
            let cell = matrix.class(i, j).unwrap_or(PathClass::Sys);
            out.push('\t');
            if cell == PathClass::X {
                out.push_str(" X ")
            } else {
                let _ = write!(out, "{cell}");
            }
        }
        match d.kind.as_str() {
            "gpu" => {
                let cpus = matrix.cpu_affinity.get(&d.name).map_or("", String::as_str);
                let numa = matrix
                    .numa_affinity
                    .get(&d.name)
                    .map_or("N/A", String::as_str);
                out.push_str(&format!("\t{cpus}\t{numa}\t\tN/A\n"));
            }
            _ => out.push_str("\t\t\t\t\n"),
        }
    }
    out.push('\n');
    out.push_str(LEGEND);
    let nics: Vec<&MatrixDevice> = matrix
        .devices()
        .iter()
        .filter(|d| d.kind == "nic")
        .collect();
    if !nics.is_empty() {
        out.push_str("\nNIC Legend:\n\n");
        for n in nics {
            out.push_str(&format!(
                "  {}: {}\n",
                n.name,
                n.rdma.as_deref().unwrap_or("?")
            ));
        }
        out.push('\n');
    }
    out
}
