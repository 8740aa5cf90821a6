//! `rdmatopo topo` against what `nvidia-smi topo -m` printed on real machines (issue 49).
//!
//! Each `fixtures/pub-*` fixture is a machine rebuilt from a published capture; its
//! `published-topo.txt` holds the capture verbatim and its README cites the source. The
//! test compares every cell, the CPU and NUMA affinity of every GPU, the column order and
//! the NIC legend. Published text was pasted through web pages, so whitespace is not
//! compared, and class names that lost the tab between them (`PXBNODE`) are read as two.
//! A capture from a driver without the `GPU NUMA ID` column is compared without ours.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use regex::Regex;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::LazyLock;

/// Every published capture; a `pub-*` directory missing from this list, or a listed one
/// missing on disk, fails [`every_published_fixture_is_listed`].
const CAPTURES: &[&str] = &[
    "pub-a100-oci-nps4",
    "pub-b200-nccltests333",
    "pub-b300-cx8-bond-deepep590",
    "pub-h100-pcie-deepep397",
];

fn fixtures() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures"))
}

/// A matrix as compared: column names, each row's label and tokens, the NIC legend.
#[derive(Debug, PartialEq)]
struct Matrix {
    columns: Vec<String>,
    rows: Vec<(String, Vec<String>)>,
    legend: Vec<(String, String)>,
    gpu_numa_id: bool,
}

static DEVICE: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"(?:GPU|NIC)\d+").unwrap());
static ROW: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"^\s*((?:GPU|NIC)\d+)(\s.*)?$").unwrap());
static CELL: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"NV\d+|PIX|PXB|PHB|NODE|SYS|X|N/A|\d[\d,\-]*").unwrap());
static LEGEND: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^\s*(NIC\d+):\s*(\S+)\s*$").unwrap());

fn parse(text: &str) -> Matrix {
    // ANSI underline of the header, as nvidia-smi prints it on a terminal
    let text = Regex::new("\x1b\\[[0-9;]*m").unwrap().replace_all(text, "");
    let lines: Vec<&str> = text.lines().collect();
    let h = lines
        .iter()
        .position(|l| l.contains("GPU0") && l.contains("CPU Affinity"))
        .expect("a header line naming GPU0 and CPU Affinity");
    let columns: Vec<String> = DEVICE
        .find_iter(lines[h])
        .map(|m| m.as_str().to_string())
        .collect();
    let mut rows = Vec::new();
    for l in &lines[h + 1..] {
        if l.trim().is_empty() || l.trim_start().starts_with("Legend") {
            break;
        }
        let Some(c) = ROW.captures(l) else { continue };
        let cells = c.get(2).map_or("", |m| m.as_str());
        let tokens = CELL
            .find_iter(cells)
            .map(|m| m.as_str().to_string())
            .collect();
        rows.push((c[1].to_string(), tokens));
    }
    let legend = lines
        .iter()
        .filter_map(|l| LEGEND.captures(l))
        .map(|c| (c[1].to_string(), c[2].to_string()))
        .collect();
    Matrix {
        columns,
        rows,
        legend,
        gpu_numa_id: lines[h].contains("GPU NUMA"),
    }
}

fn topo(archive: &Path) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_rdmatopo"))
        .arg("topo")
        .arg("--root")
        .arg(archive)
        .env_clear()
        .output()
        .expect("run rdmatopo");
    assert!(
        out.status.success(),
        "rdmatopo topo --root {}: {}",
        archive.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn compare(name: &str) -> Result<(), String> {
    let dir = fixtures().join(name);
    let published = std::fs::read_to_string(dir.join("published-topo.txt"))
        .map_err(|e| format!("{name}: published-topo.txt: {e}"))?;
    let want = parse(&published);
    let text = topo(&dir.join("root.tar.gz"));
    let mut got = parse(&text);
    if !want.gpu_numa_id {
        // A driver before the column: ours ends every GPU row with it.
        for (label, tokens) in &mut got.rows {
            if label.starts_with("GPU") {
                assert_eq!(tokens.pop().as_deref(), Some("N/A"), "{name}: {label}");
            }
        }
        got.gpu_numa_id = false;
    }
    let mut diffs = Vec::new();
    if want.columns != got.columns {
        diffs.push(format!(
            "columns: published {:?}, ours {:?}",
            want.columns, got.columns
        ));
    }
    for (i, (label, tokens)) in want.rows.iter().enumerate() {
        match got.rows.get(i) {
            Some((l, t)) if l == label && t == tokens => {}
            Some((l, t)) => diffs.push(format!(
                "row {label}: published {tokens:?}\n        ours {l} {t:?}"
            )),
            None => diffs.push(format!("row {label}: missing in ours")),
        }
    }
    if got.rows.len() != want.rows.len() {
        diffs.push(format!(
            "{} rows published, {} ours",
            want.rows.len(),
            got.rows.len()
        ));
    }
    if want.legend != got.legend {
        diffs.push(format!(
            "NIC legend: published {:?}, ours {:?}",
            want.legend, got.legend
        ));
    }
    if want.rows.is_empty() || want.legend.is_empty() {
        diffs.push("the published text has no matrix rows or no NIC legend".into());
    }
    if diffs.is_empty() {
        Ok(())
    } else {
        Err(format!("{name}:\n  {}\nours:\n{text}", diffs.join("\n  ")))
    }
}

#[test]
fn every_published_fixture_is_listed() {
    let mut found: Vec<String> = std::fs::read_dir(fixtures())
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("pub-"))
        .collect();
    found.sort();
    assert_eq!(found, CAPTURES, "fixtures/pub-* and CAPTURES differ");
    for name in CAPTURES {
        let dir = fixtures().join(name);
        for f in ["README.md", "published-topo.txt", "root.tar.gz"] {
            assert!(dir.join(f).is_file(), "{name}: {f} missing");
        }
    }
}

#[test]
fn topo_matches_every_published_capture() {
    let failures: Vec<String> = CAPTURES.iter().filter_map(|n| compare(n).err()).collect();
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn parser_reads_glued_and_tabbed_rows_alike() {
    let tabbed = parse("\tGPU0\tNIC0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\nGPU0\t X \tPXB\t0-3\t0\t\tN/A\nNIC0\tPXB\t X \t\t\t\t\n\nNIC Legend:\n\n  NIC0: mlx5_0\n");
    let glued = parse("GPU0NIC0CPU AffinityNUMA AffinityGPU NUMA ID\nGPU0  X PXB 0-3 0 N/A\nNIC0 PXB X\n\nNIC Legend:\n  NIC0: mlx5_0\n");
    assert_eq!(tabbed, glued);
    assert_eq!(tabbed.rows[0].1, ["X", "PXB", "0-3", "0", "N/A"]);
    let split = parse("\tGPU0\tNIC0\tNIC1\tCPU Affinity\nGPU0\t X \tPXBNODE\t0-3\n\nNIC Legend:\n  NIC0: a\n");
    assert_eq!(split.rows[0].1, ["X", "PXB", "NODE", "0-3"]);
}
