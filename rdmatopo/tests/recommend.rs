//! End-to-end checks of the recommendation commands on the fixtures: `exec` really
//! sets the environment of the program it runs, and an NCCL topology file written from
//! each fixture reads back with the same GPU–NIC classes and pairing.

// Helpers outside #[test] functions panic on purpose too.
#![allow(clippy::unwrap_used)]

use crate::support;
use rdmatopo::export::nccl_xml::{self, XmlOptions};
use rdmatopo::view::plan::preferred_hcas;
use rdmatopo::view::{PathClass, TopoMatrix};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

fn fixtures() -> Vec<PathBuf> {
    support::fixture_roots()
}

/// `rdmatopo exec` with a clean environment plus `env`.
fn exec(root: &Path, extra: &[&str], env: &[(&str, &str)]) -> (String, String, i32) {
    let mut c = Command::new(env!("CARGO_BIN_EXE_rdmatopo"));
    c.env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default());
    for (k, v) in env {
        c.env(k, v);
    }
    c.arg("exec").arg("--root").arg(root).args(extra);
    let out = c.output().unwrap();
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        out.status.code().unwrap_or(-1),
    )
}

const SHOW: &[&str] = &[
    "--",
    "sh",
    "-c",
    "echo \"$NCCL_IB_HCA|$NCCL_SOCKET_IFNAME\"",
];

#[test]
fn exec_sets_the_plan_and_keeps_what_the_user_set() {
    let root = support::root("h100-dgx");
    let plan = rdmatopo::view::plan::Plan::compute(&support::discover(&root), &Default::default())
        .unwrap();
    let hca = plan.env["NCCL_IB_HCA"].clone();
    let sock = plan.env["NCCL_SOCKET_IFNAME"].clone();

    let mut args = vec!["--local-rank", "2", "--print"];
    args.extend_from_slice(SHOW);
    let (out, err, code) = exec(&root, &args, &[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, format!("{hca}|{sock}\n"));
    let rank = plan.rank(2).unwrap();
    assert!(
        err.contains(&format!("local rank 2: GPU {}", rank.gpu)),
        "{err}"
    );
    assert!(err.contains(&format!("set NCCL_IB_HCA='{hca}'")), "{err}");
    assert!(
        err.contains("not applied: --root is a captured tree"),
        "{err}"
    );

    // Already set: kept, and said even without --print.
    let mut args = vec!["--local-rank", "2"];
    args.extend_from_slice(SHOW);
    let (out, err, _) = exec(&root, &args, &[("NCCL_SOCKET_IFNAME", "ib0")]);
    assert_eq!(out, format!("{hca}|ib0\n"));
    assert!(err.contains("kept NCCL_SOCKET_IFNAME='ib0'"), "{err}");
    let mut args = vec!["--local-rank", "2", "--override"];
    args.extend_from_slice(SHOW);
    let (out, _, _) = exec(&root, &args, &[("NCCL_SOCKET_IFNAME", "ib0")]);
    assert_eq!(out, format!("{hca}|{sock}\n"));

    // Without a rank: the node-wide variables, and a warning.
    let (out, err, _) = exec(&root, SHOW, &[]);
    assert_eq!(out, format!("{hca}|{sock}\n"));
    assert!(err.contains("no local rank given"), "{err}");
}

#[test]
fn exec_warns_of_nccl_variables_that_leave_the_rails_unused() {
    let root = support::root("h100-dgx");
    let run = |extra: &[&str], env: &[(&str, &str)]| {
        let mut args = vec!["--local-rank", "0"];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["--", "true"]);
        let (_, err, code) = exec(&root, &args, env);
        assert_eq!(code, 0, "{err}");
        err
    };
    assert!(!run(&[], &[]).contains("warning:"));
    // Another machine's NCCL_IB_HCA, kept: NCCL would find no device.
    let err = run(&[], &[("NCCL_IB_HCA", "mlx5_99")]);
    assert!(
        err.contains("warning: NCCL_IB_HCA=mlx5_99 selects none of the 10 ACTIVE RDMA port(s)"),
        "{err}"
    );
    // --override puts the plan's in its place: nothing to warn of.
    let err = run(&["--override"], &[("NCCL_IB_HCA", "mlx5_99")]);
    assert!(!err.contains("warning:"), "{err}");
    // A variable exec never sets is warned of even then.
    let err = run(&["--override"], &[("NCCL_IB_DISABLE", "1")]);
    assert!(
        err.contains("warning: NCCL_IB_DISABLE=1: NCCL leaves"),
        "{err}"
    );
}

#[test]
fn exec_reports_a_missing_command() {
    let root = support::root("no-devices");
    let (_, err, code) = exec(&root, &["--", "/nonexistent/rdmatopo-test-cmd"], &[]);
    assert_eq!(code, 127, "{err}");
    assert!(
        err.contains("cannot run /nonexistent/rdmatopo-test-cmd"),
        "{err}"
    );
}

/// NCCL has no NODE level: host bridges of one NUMA node are one CPU node.
fn nccl_view(k: PathClass) -> PathClass {
    if k == PathClass::Node {
        PathClass::Phb
    } else {
        k
    }
}

fn gpu_nic_classes(t: &rdmatopo::Topology) -> BTreeMap<(String, String), PathClass> {
    let m = TopoMatrix::for_topology(t);
    let mut out = BTreeMap::new();
    for g in m.devices().iter().filter(|d| d.kind == "gpu") {
        for n in m.devices().iter().filter(|d| d.kind == "nic") {
            out.insert(
                (g.pci.to_string(), n.rdma.clone().unwrap_or_default()),
                nccl_view(m.get(&g.name, &n.name).unwrap()),
            );
        }
    }
    out
}

fn pairing(t: &rdmatopo::Topology) -> BTreeMap<String, (Vec<String>, PathClass)> {
    preferred_hcas(t)
        .into_iter()
        .map(|(g, (ports, k))| {
            let devs = ports
                .iter()
                .map(|p| p.rsplit_once(':').map_or(p.as_str(), |x| x.0).to_string())
                .collect();
            (g.to_string(), (devs, nccl_view(k)))
        })
        .collect()
}

#[test]
fn topology_files_of_every_fixture_read_back_the_same() {
    for root in fixtures() {
        let t = support::discover(&root);
        // The PFs' names and places, as the model has them: a Data Direct device's
        // `_dma` entry is NCCL's other name for it (tests/data_direct.rs).
        let x = nccl_xml::write(
            &t,
            &XmlOptions {
                nets: true,
                data_direct: rdmatopo::view::plan::DataDirect::Off,
                ..Default::default()
            },
        );
        assert!(x.starts_with("<system version=\"1\""), "{}", root.display());
        let back = nccl_xml::read(&x, "round-trip").unwrap();
        assert_eq!(back.gpus.len(), t.gpus.len(), "{}", root.display());
        // Classes between GPUs and the HCAs NCCL would list (an ACTIVE port).
        let listed = |name: &str| {
            t.rdma_device(name)
                .is_some_and(|d| d.ports.iter().any(|p| p.is_active()))
        };
        let before: BTreeMap<_, _> = gpu_nic_classes(&t)
            .into_iter()
            .filter(|((_, n), _)| listed(n))
            .collect();
        let after: BTreeMap<_, _> = gpu_nic_classes(&back)
            .into_iter()
            .filter(|((_, n), _)| listed(n))
            .collect();
        assert_eq!(after, before, "{}\n{x}", root.display());
        assert_eq!(pairing(&back), pairing(&t), "{}\n{x}", root.display());
    }
}
