//! `rdmatopo cluster` on a generated fleet (`tests/fleet`): hundreds of copies of one
//! node with their own addresses, a few broken in known ways. Every broken node, and
//! only those, must come out odd, each with exactly the findings its fault causes.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::fleet;
use crate::support;

use fleet::Fault;
use rdmatopo::Topology;
use rdmatopo::checks::cluster::{FleetReport, check};
use rdmatopo::view::rails::NodeRails;
use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

/// node name → the `(check, subject)` findings it must have.
fn expected(n: usize) -> BTreeMap<String, BTreeSet<(String, Option<String>)>> {
    let mut out: BTreeMap<String, BTreeSet<(String, Option<String>)>> = BTreeMap::new();
    for (at, fault, victim) in fleet::faults(n) {
        let set = out.entry(fleet::name(at)).or_default();
        for (c, s) in fault.findings() {
            set.insert((c.to_string(), s.map(str::to_string)));
        }
        if fault == Fault::DuplicateAddress {
            out.entry(fleet::name(victim))
                .or_default()
                .insert(("duplicate-address".into(), Some("mlx5_11:1".into())));
        }
    }
    out
}

fn found(r: &FleetReport) -> BTreeMap<String, BTreeSet<(String, Option<String>)>> {
    r.odd
        .iter()
        .map(|o| {
            (
                o.node.clone(),
                o.findings
                    .iter()
                    .map(|f| (f.check.clone(), f.subject.clone()))
                    .collect(),
            )
        })
        .collect()
}

#[test]
fn a_fleet_of_300_finds_exactly_the_broken_nodes() {
    let n = 300;
    let base = fleet::base().unwrap();
    let nodes: Vec<(String, NodeRails)> = fleet::fleet(&base, n)
        .unwrap()
        .into_iter()
        .map(|(name, v)| {
            let topo: Topology = serde_json::from_value(v).unwrap();
            (name, NodeRails::of(&topo).unwrap())
        })
        .collect();
    let r = check(&nodes);
    let want = expected(n);
    assert_eq!(found(&r), want, "{:#?}", r.odd);
    assert_eq!(r.nodes, n);
    assert_eq!(r.agreeing, n - want.len());
    // The reference is the healthy node's.
    assert_eq!(r.reference.rails.value, "8");
    assert_eq!(r.reference.rails.nodes, n - 1);
    // NCCL's own GID choice is right on every rail: no NCCL_IB_GID_INDEX.
    assert!(!r.reference.nccl_env.contains_key("NCCL_IB_GID_INDEX"));
    let mlx5_9 = r
        .reference
        .per_rail
        .iter()
        .find(|x| x.rail == "mlx5_9:1")
        .unwrap();
    assert_eq!(mlx5_9.facts["subnet"].value, "10.109.0.0/16");
    assert_eq!(mlx5_9.facts["mtu"].value, "9000");
    // The down port says why it is missing.
    let down = &r
        .odd
        .iter()
        .find(|o| o.findings.iter().any(|f| f.check == "missing-rail"))
        .unwrap();
    let f = down
        .findings
        .iter()
        .find(|f| f.check == "missing-rail")
        .unwrap();
    assert!(f.value.contains("not ACTIVE"), "{}", f.value);
}

#[test]
fn healthy_fleet_agrees() {
    let base = fleet::base().unwrap();
    let nodes: Vec<(String, NodeRails)> = (0..20)
        .map(|i| {
            let v = fleet::node(&base, i, 20, None).unwrap();
            let topo: Topology = serde_json::from_value(v).unwrap();
            (fleet::name(i), NodeRails::of(&topo).unwrap())
        })
        .collect();
    let r = check(&nodes);
    assert!(r.odd.is_empty(), "{:#?}", r.odd);
    assert_eq!(r.reference.per_rail.len(), 8);
    assert!(
        r.reference
            .per_rail
            .iter()
            .all(|x| x.facts["subnet"].value.ends_with(".0/24") && x.nodes == 20)
    );
}

/// The command on files: inventory reports in a directory, plus one unreadable file.
#[test]
fn cli_reads_a_directory_of_reports() {
    let n = 120;
    let base = fleet::base().unwrap();
    let dir = tempfile::tempdir().unwrap();
    for (name, v) in fleet::fleet(&base, n).unwrap() {
        std::fs::write(
            dir.path().join(format!("{name}.json")),
            serde_json::to_vec(&v).unwrap(),
        )
        .unwrap();
    }
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_rdmatopo"))
            .arg("cluster")
            .args(args)
            .env_remove("RDMATOPO_ROOT")
            .output()
            .unwrap()
    };
    let dir_arg = dir.path().to_str().unwrap();
    let out = run(&[dir_arg, "--format", "json"]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: FleetReport = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(found(&r), expected(n));
    assert!(r.unreadable.is_empty());

    let table = run(&[dir_arg]);
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(
        text.starts_with(&format!(
            "rdmatopo cluster: {n} nodes, {} agree, {} differ\n",
            n - expected(n).len(),
            expected(n).len()
        )),
        "{text}"
    );
    for node in expected(n).keys() {
        assert!(text.contains(node.as_str()), "{node} not in\n{text}");
    }

    // A broken file is reported, the others still compared.
    std::fs::write(dir.path().join("zz-broken.json"), "{\"schema\": 1").unwrap();
    let out = run(&[dir_arg, "--format", "json"]);
    assert_eq!(out.status.code(), Some(1));
    let r: FleetReport = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r.unreadable.len(), 1);
    assert_eq!(r.unreadable[0].node, "zz-broken");
    assert_eq!(r.nodes, n);

    // Nothing readable: could not run.
    let lone = tempfile::tempdir().unwrap();
    std::fs::write(lone.path().join("a.json"), "[]").unwrap();
    let out = run(&[lone.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(3));
}

/// Snapshot-style inputs: captured roots (directories with sys/) work as nodes.
#[test]
fn cli_takes_captured_roots() {
    let root = support::root("h100-dgx");
    let out = Command::new(env!("CARGO_BIN_EXE_rdmatopo"))
        .args(["cluster", "--format", "json"])
        .arg(&root)
        .arg(&root)
        .output()
        .unwrap();
    let r: FleetReport = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r.nodes, 2);
    assert_eq!(r.reference.rails.value, "8");
    // The same root twice: same rails, but every rail address is on both nodes, and
    // the two inputs keep their paths as names.
    assert_eq!(r.odd.len(), 2);
    for o in &r.odd {
        assert_eq!(o.node, root.display().to_string());
        assert!(!o.findings.is_empty());
        assert!(
            o.findings.iter().all(|f| f.check == "duplicate-address"),
            "{:#?}",
            o.findings
        );
    }
}

/// Snapshot archives (`rdmatopo snapshot`) are nodes too, named after the file.
#[test]
fn cli_takes_snapshot_archives() {
    let root = support::root("workstation-2gpu");
    let dir = tempfile::tempdir().unwrap();
    let bin = env!("CARGO_BIN_EXE_rdmatopo");
    for name in ["ws-a", "ws-b"] {
        let out = Command::new(bin)
            .args(["snapshot", "--scrub", "--root"])
            .arg(&root)
            .arg("-o")
            .arg(dir.path().join(format!("{name}.tar.gz")))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let out = Command::new(bin)
        .args(["cluster", "--format", "json"])
        .arg(dir.path())
        .output()
        .unwrap();
    let r: FleetReport = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r.nodes, 2, "{:#?}", r.unreadable);
    assert!(r.unreadable.is_empty(), "{:#?}", r.unreadable);
    assert_eq!(r.reference.rails.value, "1");
    // Scrubbing maps addresses the same way in both, so each holds the other's.
    let found: Vec<(&str, &str)> = r
        .odd
        .iter()
        .flat_map(|o| {
            o.findings
                .iter()
                .map(|f| (o.node.as_str(), f.check.as_str()))
        })
        .collect();
    assert_eq!(
        found,
        [("ws-a", "duplicate-address"), ("ws-b", "duplicate-address")]
    );
}
