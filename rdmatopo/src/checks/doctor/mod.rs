//! `rdmatopo doctor`: why RDMA is slow in this pod (or on this host).
//!
//! Each check looks at the model only and reports [`Finding`]s that name the check, a
//! severity, the evidence (logical sysfs/procfs paths and the values read there), why
//! it costs performance, and the fix. A check that cannot run says so with an `info`
//! finding marked `skipped`; it is never silently left out. In a container, only the
//! devices this container owns are judged when ownership is known: an unassigned VF
//! with its port down is not this pod's problem.
//!
//! ```no_run
//! let topo = rdmatopo::discover(None)?;
//! let report = rdmatopo::checks::doctor::run(&topo);
//! std::process::exit(report.exit_code());
//! # Ok::<(), rdmatopo::Error>(())
//! ```

mod devices;
mod distance;
mod limits;
mod network;
mod numa;
mod pcie;
mod qos;
mod rails;

use crate::view::scope::{Context, Scope};
pub use network::roce_mtu;
pub(crate) use network::{active_mtu, uplink};

use crate::model::{Severity, Topology};
use serde::{Deserialize, Serialize};

/// Schema tag of the report's JSON.
pub const SCHEMA: &str = "rdmatopo.doctor/1";

/// A value read, and where.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Evidence {
    /// Logical path (`/sys/bus/pci/devices/0000:18:00.0/numa_node`), or a named fact
    /// (`verbs: mlx5_0 port 1 active_mtu`) when it did not come from a file.
    pub path: String,
    pub value: String,
}

/// One problem (or one check that could not run).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    /// Stable kebab-case id of the check (`numa-affinity`).
    pub check: String,
    pub severity: Severity,
    /// One line: what is wrong, naming the devices.
    pub summary: String,
    pub evidence: Vec<Evidence>,
    /// Why it costs performance (or why the check could not run).
    pub why: String,
    /// The concrete fix: a Kubernetes setting, a command, or a variable.
    pub fix: String,
    /// The check could not run (missing file, no privilege); `severity` is `info`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub skipped: bool,
}

impl Finding {
    pub fn new(check: &str, severity: Severity, summary: impl Into<String>) -> Self {
        Self {
            check: check.to_string(),
            severity,
            summary: summary.into(),
            evidence: Vec::new(),
            why: String::new(),
            fix: String::new(),
            skipped: false,
        }
    }

    pub fn with(mut self, path: impl Into<String>, value: impl ToString) -> Self {
        let path = path.into();
        let value = value.to_string();
        if !self
            .evidence
            .iter()
            .any(|e| e.path == path && e.value == value)
        {
            self.evidence.push(Evidence { path, value });
        }
        self
    }

    pub fn why(mut self, why: impl Into<String>) -> Self {
        self.why = why.into();
        self
    }

    pub fn fix(mut self, fix: impl Into<String>) -> Self {
        self.fix = fix.into();
        self
    }
}

/// How one check ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// Ran and found nothing.
    Ok,
    /// Nothing to judge here (no RoCE port for the MTU check, no container for netns).
    NotApplicable,
    /// Could not run; a skipped finding says why.
    Skipped,
    Info,
    Warning,
    Error,
}

/// The outcome of one check, with a short note on what it looked at.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckResult {
    pub check: String,
    pub outcome: Outcome,
    pub note: String,
}

/// The devices the checks looked at.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Judged {
    pub gpus: Vec<crate::parse::PciAddr>,
    pub rdma_devices: Vec<String>,
}

/// What `doctor` found (`rdmatopo.doctor/1`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Report {
    pub schema: String,
    /// `host`, `pod`, `pod-host-network` or `container`.
    pub context: Context,
    /// The devices judged: this container's (and those whose owner is unknown).
    pub judged: Judged,
    /// Every finding, by check then severity (worst first).
    pub findings: Vec<Finding>,
    /// Every check, in the order run, with its outcome.
    pub checks: Vec<CheckResult>,
}

impl Report {
    /// The worst severity among real (not skipped) findings.
    pub fn worst(&self) -> Option<Severity> {
        self.findings
            .iter()
            .filter(|f| !f.skipped)
            .map(|f| f.severity)
            .max()
    }

    /// 0 clean (infos at most), 1 warnings, 2 errors: usable as a Kubernetes init
    /// container or preflight.
    pub fn exit_code(&self) -> i32 {
        match self.worst() {
            Some(Severity::Error) => 2,
            Some(Severity::Warning) => 1,
            _ => 0,
        }
    }

    /// Number of findings of `severity` (skipped checks excluded).
    pub fn count(&self, severity: Severity) -> usize {
        self.findings
            .iter()
            .filter(|f| !f.skipped && f.severity == severity)
            .count()
    }
}

/// Collects the findings of one check.
struct Sink {
    check: &'static str,
    findings: Vec<Finding>,
    note: Option<String>,
    not_applicable: bool,
}

impl Sink {
    fn new(check: &'static str) -> Self {
        Self {
            check,
            findings: Vec::new(),
            note: None,
            not_applicable: false,
        }
    }

    fn finding(&self, severity: Severity, summary: impl Into<String>) -> Finding {
        Finding::new(self.check, severity, summary)
    }

    fn error(&self, summary: impl Into<String>) -> Finding {
        self.finding(Severity::Error, summary)
    }

    fn warning(&self, summary: impl Into<String>) -> Finding {
        self.finding(Severity::Warning, summary)
    }

    fn info(&self, summary: impl Into<String>) -> Finding {
        self.finding(Severity::Info, summary)
    }

    fn push(&mut self, f: Finding) {
        self.findings.push(f);
    }

    /// The check (or part of it) cannot run: say why and what would let it.
    fn skip(&mut self, summary: impl Into<String>, why: impl Into<String>, fix: impl Into<String>) {
        let mut f = self
            .info(format!("check skipped: {}", summary.into()))
            .why(why)
            .fix(fix);
        f.skipped = true;
        self.findings.push(f);
    }

    fn skip_with(&mut self, mut f: Finding) {
        f.severity = Severity::Info;
        f.skipped = true;
        if !f.summary.starts_with("check skipped") {
            f.summary = format!("check skipped: {}", f.summary);
        }
        self.findings.push(f);
    }

    /// Nothing to judge.
    fn not_applicable(&mut self, note: impl Into<String>) {
        self.not_applicable = true;
        self.note = Some(note.into());
    }

    /// What the check looked at (shown with an `ok` outcome).
    fn note(&mut self, note: impl Into<String>) {
        self.note = Some(note.into());
    }

    fn outcome(&self) -> Outcome {
        let real = self.findings.iter().filter(|f| !f.skipped);
        match real.map(|f| f.severity).max() {
            Some(Severity::Error) => Outcome::Error,
            Some(Severity::Warning) => Outcome::Warning,
            Some(Severity::Info) => Outcome::Info,
            None if self.findings.iter().any(|f| f.skipped) => Outcome::Skipped,
            None if self.not_applicable => Outcome::NotApplicable,
            None => Outcome::Ok,
        }
    }
}

type CheckFn = fn(&Scope, &mut Sink);

/// Every check, in report order: id, what it looks at, and the function.
const CHECKS: &[(&str, &str, CheckFn)] = &[
    (
        "numa-affinity",
        "CPUs this process may use vs the NUMA nodes of its GPUs and NICs",
        numa::check,
    ),
    (
        "gpu-nic-distance",
        "PCIe distance from each GPU to the NIC it would use",
        distance::check,
    ),
    (
        "gpu-driver",
        "NVIDIA GPUs the nvidia driver does not hold (nvidia-smi, CUDA and NCCL skip them)",
        devices::gpu_driver,
    ),
    (
        "sriov",
        "virtual functions in use: limits and port state",
        devices::sriov,
    ),
    (
        "mtu",
        "netdev MTU vs RoCE active MTU on the NICs in use",
        network::mtu,
    ),
    (
        "netns",
        "network namespace, RDMA netns mode and the GID index that is right here",
        network::netns,
    ),
    (
        "rdma-cgroup",
        "rdma cgroup limits (rdma.max, rdma.current)",
        limits::rdma_cgroup,
    ),
    (
        "multi-rail",
        "usable rails vs GPUs: count, speed, link layer, port state",
        rails::check,
    ),
    (
        "pcie-link",
        "PCIe links trained below their maximum on GPU-NIC paths",
        pcie::link,
    ),
    (
        "acs-redirect",
        "ACS peer-to-peer redirect on bridges between GPU and NIC",
        pcie::acs,
    ),
    (
        "gpudirect-rdma",
        "GPUDirect RDMA prerequisites (peer memory module, DMA-BUF)",
        devices::gpudirect,
    ),
    ("memlock", "RLIMIT_MEMLOCK of this process", limits::memlock),
    (
        "rdma-devices",
        "/dev/infiniband/uverbs* and rdma_cm in this container",
        devices::char_devices,
    ),
    (
        "roce-netfilter",
        "netfilter/conntrack on RoCE v2 traffic (UDP 4791)",
        network::netfilter,
    ),
    (
        "roce-gid",
        "a RoCE v2 IPv4 GID on every RoCE port in use",
        network::roce_gid,
    ),
    (
        "roce-qos",
        "RoCE traffic class, ECN (DCQCN) and PFC on every rail, VF and PF alike",
        qos::check,
    ),
];

/// Id and description of every check, in report order.
pub fn check_list() -> impl Iterator<Item = (&'static str, &'static str)> {
    CHECKS.iter().map(|(id, what, _)| (*id, *what))
}

/// Run every check on what this process owns in `topo`.
pub fn run(topo: &Topology) -> Report {
    judge(&Scope::of(topo))
}

/// Run every check on `scope`: this process's devices ([`Scope::of`]) or any other set
/// ([`Scope::judging`], e.g. a pod's allocation seen from its node).
pub fn judge(scope: &Scope) -> Report {
    judge_only(scope, |_| true)
}

/// Run the checks `wanted` picks (by id) on `scope`, in report order. `k8s audit`
/// picks those that judge a container's placement.
pub fn judge_only(scope: &Scope, wanted: impl Fn(&str) -> bool) -> Report {
    let mut findings = Vec::new();
    let mut checks = Vec::new();
    for (id, _, f) in CHECKS.iter().filter(|(id, _, _)| wanted(id)) {
        let mut sink = Sink::new(id);
        f(scope, &mut sink);
        let outcome = sink.outcome();
        let note = sink.note.clone().unwrap_or_else(|| match outcome {
            Outcome::Ok => "nothing wrong found".into(),
            _ => String::new(),
        });
        checks.push(CheckResult {
            check: id.to_string(),
            outcome,
            note,
        });
        let mut fs = sink.findings;
        // Worst first within a check; stable otherwise (device order).
        fs.sort_by_key(|f| std::cmp::Reverse(f.severity));
        findings.extend(fs);
    }
    Report {
        schema: SCHEMA.to_string(),
        context: scope.context,
        judged: Judged {
            gpus: scope.gpus.iter().map(|g| g.pci).collect(),
            rdma_devices: scope.hcas.iter().map(|d| d.name.clone()).collect(),
        },
        findings,
        checks,
    }
}

/// `mlx5_0`, `mlx5_0 port 2` (port shown only on multi-port devices).
fn port_name(dev: &crate::model::RdmaDevice, port: u32) -> String {
    if dev.ports.len() > 1 {
        format!("{} port {port}", dev.name)
    } else {
        dev.name.clone()
    }
}

/// A port state as the kernel prints it (`4: ACTIVE`).
fn state_text(port: &crate::model::Port) -> String {
    use crate::parse::PortState as S;
    match port.state {
        Some(S::Nop) => "0: NOP",
        Some(S::Down) => "1: DOWN",
        Some(S::Init) => "2: INIT",
        Some(S::Armed) => "3: ARMED",
        Some(S::Active) => "4: ACTIVE",
        Some(S::ActiveDefer) => "5: ACTIVE_DEFER",
        Some(S::Unknown) => "UNKNOWN",
        None => "unreadable",
    }
    .to_string()
}

/// Logical sysfs directory of a PCI function (`/sys/bus/pci/devices/<bdf>`).
fn pci_dir(addr: crate::parse::PciAddr) -> String {
    format!("/sys/bus/pci/devices/{addr}")
}

/// Logical sysfs directory of an RDMA port.
fn port_dir(dev: &str, port: u32) -> String {
    format!("/sys/class/infiniband/{dev}/ports/{port}")
}

/// Join at most `max` names, then say how many there are in all.
fn short_list<S: AsRef<str>>(names: &[S], max: usize) -> String {
    let first: Vec<String> = names
        .iter()
        .take(max)
        .map(|n| n.as_ref().to_string())
        .collect();
    if names.len() <= max {
        return list(&first);
    }
    format!("{}, … ({} in all)", first.join(", "), names.len())
}

/// Join names: `a, b and c`.
fn list(names: &[String]) -> String {
    match names {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

#[cfg(test)]
mod tests;
