//! `rdmatopo cluster FILE…|DIR`: do the rails of many nodes line up? Reads node
//! reports (`rdmatopo inventory --format json`, snapshot archives, captured roots),
//! prints the reference most nodes share and every node that differs; with
//! `k8s audit --format json` reports among them, also the fleet's misaligned pods.
//! Exit 0: all agree; 1: some differ or could not be read; 3: none could be read.

use super::args::Format;
use super::output::{Output, json};
use crate::Topology;
use crate::checks::audit::AuditReport;
use crate::checks::cluster::{self, FleetReport, Unreadable};
use crate::view::rails::NodeRails;
use clap::Args;
use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::{Path, PathBuf};

#[derive(Args, Debug)]
pub struct ClusterArgs {
    /// Node reports: `inventory --format json` files, snapshot archives (.tar, .tar.gz,
    /// .tgz), captured roots (a directory with sys/), or directories holding them.
    #[arg(value_name = "FILE|DIR", required = true)]
    pub paths: Vec<PathBuf>,
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
}

/// Largest report read (a DGX inventory is about 250 KB).
const MAX_REPORT_BYTES: u64 = 64 << 20;

fn is_report_file(p: &Path) -> bool {
    let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
    [".json", ".tar", ".tar.gz", ".tgz"]
        .iter()
        .any(|ext| name.ends_with(ext))
}

fn is_root(p: &Path) -> bool {
    p.join("sys").is_dir()
}

/// The node name: the file name without its report extension.
fn node_name(p: &Path) -> String {
    let name = p
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| p.display().to_string());
    for ext in [".tar.gz", ".tgz", ".tar", ".json"] {
        if let Some(stem) = name.strip_suffix(ext)
            && !stem.is_empty()
        {
            return stem.to_string();
        }
    }
    name
}

/// Every input, directories expanded one level, in name order within a directory.
fn inputs(paths: &[PathBuf]) -> Result<Vec<PathBuf>, String> {
    let mut out = Vec::new();
    for p in paths {
        if p.is_dir() && !is_root(p) {
            let mut entries: Vec<PathBuf> = std::fs::read_dir(p)
                .map_err(|e| format!("{}: {e}", p.display()))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|e| (e.is_file() && is_report_file(e)) || (e.is_dir() && is_root(e)))
                .collect();
            entries.sort();
            if entries.is_empty() {
                return Err(format!(
                    "{}: no node reports (*.json, *.tar, *.tar.gz, *.tgz, or directories with sys/)",
                    p.display()
                ));
            }
            out.extend(entries);
        } else {
            out.push(p.clone());
        }
    }
    Ok(out)
}

/// What one input holds.
enum NodeInput {
    Rails(NodeRails),
    Audit(Box<AuditReport>),
}

/// The `schema` of a JSON report, read without parsing the rest.
fn schema_of(text: &str) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Tag {
        schema: Option<String>,
    }
    serde_json::from_str::<Tag>(text).ok()?.schema
}

fn read_node(p: &Path) -> Result<NodeInput, String> {
    let topo = if p.is_file() && p.to_string_lossy().ends_with(".json") {
        let len = std::fs::metadata(p).map_err(|e| e.to_string())?.len();
        if len > MAX_REPORT_BYTES {
            return Err(format!("{len} bytes, more than a node report can be"));
        }
        let text = std::fs::read_to_string(p).map_err(|e| e.to_string())?;
        if schema_of(&text).as_deref() == Some(crate::checks::audit::SCHEMA) {
            return serde_json::from_str(&text)
                .map(|r| NodeInput::Audit(Box::new(r)))
                .map_err(|e| format!("not a k8s audit JSON report: {e}"));
        }
        Topology::read_json(&text).map_err(|e| format!("not an inventory JSON report: {e}"))?
    } else {
        crate::discover(Some(p)).map_err(|e| e.to_string())?
    };
    NodeRails::of(&topo)
        .map(NodeInput::Rails)
        .map_err(|e| e.to_string())
}

pub fn run(args: &ClusterArgs) -> Result<Output, String> {
    let files = inputs(&args.paths)?;
    let mut names: Vec<String> = files.iter().map(|p| node_name(p)).collect();
    // Two inputs with one name keep their paths apart.
    let mut count: BTreeMap<&str, usize> = BTreeMap::new();
    for n in &names {
        *count.entry(n.as_str()).or_default() += 1;
    }
    let dup: Vec<bool> = names.iter().map(|n| count[n.as_str()] > 1).collect();
    for (i, p) in files.iter().enumerate() {
        if dup[i] {
            names[i] = p.display().to_string();
        }
    }

    let mut nodes = Vec::new();
    let mut audits = Vec::new();
    let mut unreadable = Vec::new();
    for (p, name) in files.iter().zip(names) {
        match read_node(p) {
            Ok(NodeInput::Rails(rails)) => nodes.push((name, rails)),
            Ok(NodeInput::Audit(report)) => audits.push((name, *report)),
            Err(error) => unreadable.push(Unreadable {
                node: name,
                error: format!("{}: {error}", p.display()),
            }),
        }
    }
    if nodes.is_empty() && audits.is_empty() {
        let why: Vec<String> = unreadable.iter().map(|u| u.error.clone()).collect();
        return Err(format!("no node report could be read: {}", why.join("; ")));
    }
    let mut report = cluster::check(&nodes);
    report.unreadable = unreadable;
    report.misaligned_pods = cluster::misaligned_pods(&audits);
    let code = if report.odd.is_empty()
        && report.unreadable.is_empty()
        && report.misaligned_pods.is_empty()
    {
        0
    } else {
        1
    };
    let text = match args.format {
        Format::Json => json(&report),
        Format::Table => table(&report),
    };
    Ok(Output::with_code(text, code))
}

/// Columns padded to their widest cell; the last column is not padded.
fn columns(rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = Vec::new();
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            let w = c.chars().count();
            match widths.get_mut(i) {
                Some(x) => *x = (*x).max(w),
                None => widths.push(w),
            }
        }
    }
    let mut s = String::new();
    for r in rows {
        let mut line = String::from("  ");
        for (i, c) in r.iter().enumerate() {
            if i + 1 == r.len() {
                line.push_str(c);
            } else {
                let _ = write!(line, "{c:<w$}  ", w = widths[i]);
            }
        }
        s.push_str(line.trim_end());
        s.push('\n');
    }
    s
}

/// The containers audit reports found misplaced.
fn misaligned_table(r: &FleetReport, s: &mut String) {
    if !r.misaligned_pods.is_empty() {
        s.push_str("\nMisaligned pods (k8s audit):\n");
        let mut rows = vec![
            [
                "NODE",
                "POD",
                "CONTAINER",
                "PATH",
                "NUMA",
                "SEVERITY",
                "CHECKS",
            ]
            .map(String::from)
            .to_vec(),
        ];
        for m in &r.misaligned_pods {
            rows.push(vec![
                m.node.clone(),
                format!("{}/{}", m.namespace, m.pod),
                m.container.clone(),
                m.worst_path.clone().unwrap_or_else(|| "-".into()),
                if m.numa_misaligned {
                    "misaligned"
                } else {
                    "ok"
                }
                .into(),
                format!("{:?}", m.severity).to_lowercase(),
                m.checks.join(","),
            ]);
        }
        s.push_str(&columns(&rows));
    }
}

fn table(r: &FleetReport) -> String {
    let mut s = String::new();
    if r.nodes == 0 {
        // Audit reports only: no rails to compare.
        let _ = writeln!(
            s,
            "rdmatopo cluster: {} misaligned container(s) in the k8s audit reports",
            r.misaligned_pods.len()
        );
        misaligned_table(r, &mut s);
        return s;
    }
    let differ = r.odd.len();
    let _ = writeln!(
        s,
        "rdmatopo cluster: {} node{}, {} agree, {differ} differ{}",
        r.nodes,
        if r.nodes == 1 { "" } else { "s" },
        r.agreeing,
        if r.unreadable.is_empty() {
            String::new()
        } else {
            format!(", {} unreadable", r.unreadable.len())
        }
    );
    let _ = writeln!(
        s,
        "\nReference (the value most nodes share): {} rail{} on {} of {} nodes",
        r.reference.rails.value,
        if r.reference.rails.value == "1" {
            ""
        } else {
            "s"
        },
        r.reference.rails.nodes,
        r.nodes
    );
    let fact_names = [
        ("link-layer", "LINK"),
        ("speed-gbps", "GB/S"),
        ("mtu", "MTU"),
        ("active-mtu", "ACTIVE-MTU"),
        ("gid-index", "GID"),
        ("subnet", "SUBNET"),
    ];
    let shown: Vec<(&str, &str)> = fact_names
        .iter()
        .copied()
        .filter(|(k, _)| {
            r.reference
                .per_rail
                .iter()
                .any(|x| x.facts.contains_key(*k))
        })
        .collect();
    if !r.reference.per_rail.is_empty() {
        let mut rows = vec![
            std::iter::once("RAIL".to_string())
                .chain(std::iter::once("NODES".to_string()))
                .chain(shown.iter().map(|(_, h)| h.to_string()))
                .collect::<Vec<_>>(),
        ];
        for rail in &r.reference.per_rail {
            let mut row = vec![rail.rail.clone(), rail.nodes.to_string()];
            for (k, _) in &shown {
                row.push(
                    rail.facts
                        .get(*k)
                        .map_or("-".to_string(), |a| a.value.clone()),
                );
            }
            rows.push(row);
        }
        s.push_str(&columns(&rows));
    }
    for (var, a) in &r.reference.nccl_env {
        let _ = writeln!(s, "  {var}={} ({} of {} nodes)", a.value, a.nodes, r.nodes);
    }
    if !r.odd.is_empty() {
        s.push_str("\nNodes that differ:\n");
        let mut rows = vec![
            ["NODE", "CHECK", "SUBJECT", "VALUE", "EXPECTED"]
                .map(String::from)
                .to_vec(),
        ];
        for o in &r.odd {
            for (i, f) in o.findings.iter().enumerate() {
                rows.push(vec![
                    if i == 0 {
                        o.node.clone()
                    } else {
                        String::new()
                    },
                    f.check.clone(),
                    f.subject.clone().unwrap_or_else(|| "-".into()),
                    f.value.clone(),
                    format!(
                        "{} ({} node{})",
                        f.expected,
                        f.expected_nodes,
                        if f.expected_nodes == 1 { "" } else { "s" }
                    ),
                ]);
            }
        }
        s.push_str(&columns(&rows));
    }
    misaligned_table(r, &mut s);
    if !r.unreadable.is_empty() {
        s.push_str("\nCould not read:\n");
        for u in &r.unreadable {
            let _ = writeln!(s, "  {}: {}", u.node, u.error);
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_names_drop_report_extensions() {
        assert_eq!(node_name(Path::new("/x/gpu-017.json")), "gpu-017");
        assert_eq!(node_name(Path::new("gpu-017.tar.gz")), "gpu-017");
        assert_eq!(node_name(Path::new("gpu-017.tgz")), "gpu-017");
        assert_eq!(node_name(Path::new("roots/gpu-017")), "gpu-017");
        assert_eq!(node_name(Path::new(".json")), ".json");
    }

    #[test]
    fn columns_pad_all_but_the_last() {
        let rows = vec![
            vec!["a".to_string(), "bb".to_string(), "c".to_string()],
            vec!["aaa".to_string(), "b".to_string(), "cc".to_string()],
        ];
        assert_eq!(columns(&rows), "  a    bb  c\n  aaa  b   cc\n");
    }
}
