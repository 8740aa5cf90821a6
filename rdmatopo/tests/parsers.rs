//! Stdout of `topo`, `netdevs` and `gids` on every fixture (the goldens the command is
//! held to by tests/golden.rs), read by parsers written
//! for the output of the tools they mirror: what a script written for `nvidia-smi topo
//! -m`, `ibdev2netdev` or `show_gids` does with our stdout. Each parser follows the
//! documented layout of the real tool (sources at each), not our own code, and what it
//! reads is checked against the command's JSON, so that a table that parses but says
//! something else fails too.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use regex::Regex;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn fixtures() -> Vec<PathBuf> {
    support::fixture_dirs()
}

/// Stdout of `rdmatopo ARGS --root <fixture>` (exit 0 asserted), as the fixture's
/// golden file holds it: tests/golden.rs keeps that file equal to the command's answer.
fn stdout(fixture: &Path, args: &[&str]) -> String {
    let answer = support::goldens::answer(fixture, args);
    assert_eq!(
        answer.exit,
        0,
        "{} {args:?}: {}",
        fixture.display(),
        answer.stderr
    );
    answer.stdout
}

fn json(fixture: &Path, args: &[&str]) -> serde_json::Value {
    let mut args = args.to_vec();
    args.extend(["--format", "json"]);
    serde_json::from_str(&stdout(fixture, &args)).unwrap()
}

// ---------------------------------------------------------------------------------
// nvidia-smi topo -m
// ---------------------------------------------------------------------------------

/// What a `nvidia-smi topo -m` parser reads: the column labels, the cell of each row
/// and column, and the NIC legend (`NIC0` -> `mlx5_0`).
#[derive(Debug, Default)]
struct TopoM {
    labels: Vec<String>,
    cells: BTreeMap<(String, String), String>,
    nic_legend: BTreeMap<String, String>,
}

/// A parser for `nvidia-smi topo -m`'s stdout, as scripts written for it read it: the
/// first line is the header (a tab, then the GPU and NIC column labels, then `CPU
/// Affinity` and the other affinity columns), one row per label in the same order up to
/// the first empty line, then `Legend:`, and where NICs are named `NIC<n>`, a `NIC
/// Legend:` block of `  NIC<n>: <rdma device>` lines. The tokens are the ones
/// NVIDIA/NVSentinel's parser accepts (metadata-collector/pkg/nic/topo_parser.go at
/// 86be53260cfe: `^GPU\d+$` and `NIC\d+`/`mlx5_\d+` labels, cells `X|PIX|PXB|PHB|NODE|SYS|NV\d+`,
/// legend entries `^NIC\d+\s*:\s*\S+$`, ANSI escapes stripped first); where it scans for
/// a header anywhere, `head -1`/`awk 'NR==1'` scripts and this parser take line one.
fn parse_topo_m(text: &str) -> Result<TopoM, String> {
    let ansi = Regex::new(r"\x1b\[[0-9;]*[A-Za-z]").unwrap();
    let text = ansi.replace_all(text, "");
    let label = Regex::new(r"^(GPU\d+|NIC\d+|mlx5_\d+)$").unwrap();
    let cell = Regex::new(r"^(X|PIX|PXB|PHB|NODE|SYS|NV\d+)$").unwrap();
    let legend_entry = Regex::new(r"^(NIC\d+)\s*:\s*(\S+)$").unwrap();
    let mut lines = text.lines();
    let header = lines.next().ok_or("empty output")?;
    if !header.starts_with('\t') {
        return Err(format!("line 1 is not the header: {header:?}"));
    }
    let mut m = TopoM::default();
    for h in header[1..].split('\t') {
        if label.is_match(h) {
            m.labels.push(h.to_string());
        } else if h == "CPU Affinity" {
            break;
        } else {
            return Err(format!(
                "header field {h:?} is neither a label nor CPU Affinity"
            ));
        }
    }
    if m.labels.is_empty() {
        return Err("no GPU or NIC column".into());
    }
    for want in &m.labels {
        let row = lines.next().ok_or("rows end early")?;
        let fields: Vec<&str> = row.split('\t').collect();
        if fields[0] != want {
            return Err(format!("row {:?} where {want:?} belongs", fields[0]));
        }
        for (i, col) in m.labels.iter().enumerate() {
            let c = fields.get(i + 1).ok_or("row too short")?.trim();
            if !cell.is_match(c) {
                return Err(format!("cell {want}/{col} is {c:?}"));
            }
            if (c == "X") != (col == want) {
                return Err(format!("X off the diagonal at {want}/{col}"));
            }
            m.cells.insert((want.clone(), col.clone()), c.to_string());
        }
    }
    if lines.next() != Some("") || lines.next() != Some("Legend:") {
        return Err("no empty line and Legend: after the rows".into());
    }
    let rest: Vec<&str> = lines.collect();
    if let Some(at) = rest.iter().position(|l| *l == "NIC Legend:") {
        for l in &rest[at + 1..] {
            if let Some(c) = legend_entry.captures(l.trim()) {
                m.nic_legend.insert(c[1].to_string(), c[2].to_string());
            }
        }
    }
    for l in m.labels.iter().filter(|l| l.starts_with("NIC")) {
        if !m.nic_legend.contains_key(l) {
            return Err(format!("{l} is not in the NIC Legend"));
        }
    }
    Ok(m)
}

#[test]
fn topo_stdout_reads_as_nvidia_smi_topo_m() {
    let mut checked = 0;
    for f in fixtures() {
        for view in [None, Some("--all"), Some("--owned")] {
            let mut args = vec!["topo"];
            args.extend(view);
            let text = stdout(&f, &args);
            let doc = json(&f, &args);
            let devices = doc["devices"].as_array().unwrap();
            if devices.is_empty() {
                // Nothing to show: stdout is empty, what is said goes to stderr.
                assert_eq!(text, "", "{} {args:?}", f.display());
                continue;
            }
            let m = parse_topo_m(&text)
                .unwrap_or_else(|e| panic!("{} {args:?}: {e}\n{text}", f.display()));
            let names: Vec<&str> = devices
                .iter()
                .map(|d| d["name"].as_str().unwrap())
                .collect();
            assert_eq!(m.labels, names, "{} {args:?}", f.display());
            for ((row, col), c) in &m.cells {
                assert_eq!(
                    doc["matrix"][row][col].as_str(),
                    Some(c.as_str()),
                    "{} {args:?} {row}/{col}",
                    f.display()
                );
            }
            for d in devices.iter().filter(|d| d["kind"] == "nic") {
                assert_eq!(
                    m.nic_legend
                        .get(d["name"].as_str().unwrap())
                        .map(String::as_str),
                    d["rdma"].as_str(),
                    "{}",
                    f.display()
                );
            }
            checked += 1;
        }
    }
    assert!(checked > 20, "only {checked} matrices read");
}

#[test]
fn topo_m_parser_refuses_a_line_before_the_header() {
    let good = "\tGPU0\tNIC0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\nGPU0\t X \tPXB\t0-7\t0\t\tN/A\nNIC0\tPXB\t X \t\t\t\t\n\nLegend:\n\n  X    = Self\n\nNIC Legend:\n\n  NIC0: mlx5_0\n\n";
    assert!(parse_topo_m(good).is_ok());
    assert!(parse_topo_m(&format!("View: devices owned by this pod\n\n{good}")).is_err());
}

// ---------------------------------------------------------------------------------
// ibdev2netdev
// ---------------------------------------------------------------------------------

/// A parser for `ibdev2netdev`'s stdout: every line is `<ibdev> port <n> ==> <netdev>
/// (<Up|Down>)`, the only line the tool's new-style branch echoes (Mellanox/mlnx-tools
/// `sbin/ibdev2netdev`, last at 290a843^, and its MLNX_OFED copy in mlx-ofa_kernel
/// `ofed_scripts/ibdev2netdev`; state from the netdev's `carrier`, `1` Up, else Down).
/// Scripts match the line whole or take `$1`, `$3` and `$5` of it.
fn parse_ibdev2netdev(text: &str) -> Result<Vec<(String, u32, String, String)>, String> {
    let line = Regex::new(r"^(\S+) port (\d+) ==> (\S+) \((Up|Down)\)$").unwrap();
    text.lines()
        .map(|l| {
            let c = line
                .captures(l)
                .ok_or_else(|| format!("not an ibdev2netdev line: {l:?}"))?;
            Ok((
                c[1].to_string(),
                c[2].parse().unwrap(),
                c[3].to_string(),
                c[4].to_string(),
            ))
        })
        .collect()
}

#[test]
fn netdevs_stdout_reads_as_ibdev2netdev() {
    for f in fixtures() {
        for all in [false, true] {
            let mut args = vec!["netdevs"];
            if all {
                args.push("--all");
            }
            let text = stdout(&f, &args);
            let lines = parse_ibdev2netdev(&text)
                .unwrap_or_else(|e| panic!("{} {args:?}: {e}\n{text}", f.display()));
            // Each port whose netdev is in this namespace, in order, and no other.
            let doc = json(&f, &args);
            let want: Vec<(String, u32, String, String)> = doc["ports"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|p| p["in_namespace"] == true)
                .map(|p| {
                    (
                        p["device"].as_str().unwrap().to_string(),
                        u32::try_from(p["port"].as_u64().unwrap()).unwrap(),
                        p["netdev"].as_str().unwrap().to_string(),
                        p["state"].as_str().unwrap().to_string(),
                    )
                })
                .collect();
            assert_eq!(lines, want, "{} {args:?}", f.display());
        }
    }
}

// ---------------------------------------------------------------------------------
// show_gids
// ---------------------------------------------------------------------------------

/// One row as a `show_gids` parser reads it: device, port, index, GID, IPv4, version,
/// netdev.
type GidRow = (String, u32, u32, String, String, String, String);

/// A parser for `show_gids`'s stdout (Mellanox/mlnx-tools `sbin/show_gids` at 8fbfd9c):
/// the header `DEV\tPORT\tINDEX\tGID\t\t\t\t\tIPv4  \t\tVER\tDEV` and its dashes, then
/// rows `dev\tport\tindex\tgid\tipv4  \tver\tndev` (no IPv4: `gid\t\t\tver`), and last
/// the count, `n_gids_found=<n>`, which scripts read with `tail -1`. Fields after the
/// seventh are left alone, as `awk` or `cut -f1-7` leave them.
fn parse_show_gids(text: &str) -> Result<Vec<GidRow>, String> {
    let lines: Vec<&str> = text.lines().collect();
    if lines.first() != Some(&"DEV\tPORT\tINDEX\tGID\t\t\t\t\tIPv4  \t\tVER\tDEV")
        || lines.get(1) != Some(&"---\t----\t-----\t---\t\t\t\t\t------------  \t---\t---")
    {
        return Err("no show_gids header".into());
    }
    let last = lines.last().ok_or("empty")?;
    let count: usize = last
        .strip_prefix("n_gids_found=")
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| format!("the last line is not n_gids_found=<n>: {last:?}"))?;
    let rows: Vec<GidRow> = lines[2..lines.len() - 1]
        .iter()
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            // With an IPv4: 7 fields; without: the IPv4 and its padding are two empty ones.
            let (ipv4, rest) = match f.get(4) {
                Some(&"") if f.get(5) == Some(&"") => (String::new(), &f[6..]),
                Some(ip) => (ip.trim_end().to_string(), &f[5..]),
                None => return Err(format!("short row {l:?}")),
            };
            if rest.len() < 2 {
                return Err(format!("short row {l:?}"));
            }
            Ok((
                f[0].to_string(),
                f[1].parse().map_err(|_| format!("port of {l:?}"))?,
                f[2].parse().map_err(|_| format!("index of {l:?}"))?,
                f[3].to_string(),
                ipv4,
                rest[0].to_string(),
                rest[1].to_string(),
            ))
        })
        .collect::<Result<_, String>>()?;
    if rows.len() != count {
        return Err(format!("{} rows, n_gids_found={count}", rows.len()));
    }
    Ok(rows)
}

#[test]
fn gids_stdout_reads_as_show_gids() {
    for f in fixtures() {
        for all in [false, true] {
            let mut args = vec!["gids"];
            if all {
                args.push("--all");
            }
            let text = stdout(&f, &args);
            let rows = parse_show_gids(&text)
                .unwrap_or_else(|e| panic!("{} {args:?}: {e}\n{text}", f.display()));
            let doc = json(&f, &args);
            let gids = doc["gids"].as_array().unwrap();
            assert_eq!(rows.len(), gids.len(), "{}", f.display());
            for (r, g) in rows.iter().zip(gids) {
                assert_eq!(r.0, g["device"].as_str().unwrap());
                assert_eq!(u64::from(r.2), g["index"].as_u64().unwrap());
                assert_eq!(r.3, g["gid"].as_str().unwrap());
                assert_eq!(r.4, g["ipv4"].as_str().unwrap_or(""));
            }
        }
    }
}
