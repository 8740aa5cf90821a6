//! What a check reports: findings with the evidence behind them, each check's outcome,
//! the report of a run; and the sink a check writes its findings into.

use crate::model::Severity;
use crate::view::scope::Context;
use serde::{Deserialize, Serialize};

/// Schema tag of the report's JSON.
pub const SCHEMA: &str = "rdmatopo.doctor/1";

/// A value read, and where.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Evidence {
    /// Logical path (`/sys/bus/pci/devices/0000:18:00.0/numa_node`), or a named fact
    /// (`verbs: mlx5_0 port 1 active_mtu`) when it did not come from a file.
    pub path: String,
    /// The value read there.
    pub value: String,
}

/// One problem (or one check that could not run).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Finding {
    /// Stable kebab-case id of the check (`numa-affinity`).
    pub check: String,
    /// How much it matters.
    pub severity: Severity,
    /// One line: what is wrong, naming the devices.
    pub summary: String,
    /// The files read and what they held, each once.
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
    #[doc(hidden)]
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

    #[doc(hidden)]
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

    #[doc(hidden)]
    pub fn why(mut self, why: impl Into<String>) -> Self {
        self.why = why.into();
        self
    }

    #[doc(hidden)]
    pub fn fix(mut self, fix: impl Into<String>) -> Self {
        self.fix = fix.into();
        self
    }
}

/// How one check ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Outcome {
    /// Ran and found nothing.
    Ok,
    /// Nothing to judge here (no RoCE port for the MTU check, no container for netns).
    NotApplicable,
    /// Could not run; a skipped finding says why.
    Skipped,
    /// Findings at most of severity info.
    Info,
    /// A warning: something NCCL or the workload will do worse, or may fail at.
    Warning,
    /// An error: something will fail.
    Error,
}

/// The outcome of one check, with a short note on what it looked at.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct CheckResult {
    /// The check's id (`rdmatopo doctor --list` lists them).
    pub check: String,
    /// What it found.
    pub outcome: Outcome,
    /// One line on the outcome (why not applicable, skipped).
    pub note: String,
}

/// The devices the checks looked at.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Judged {
    /// The GPUs judged (a container's own, else every one), in PCI order.
    pub gpus: Vec<crate::parse::PciAddr>,
    /// The RDMA devices judged, in model order.
    pub rdma_devices: Vec<String>,
}

/// What `doctor` found (`rdmatopo.doctor/1`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Report {
    /// `rdmatopo.doctor/1`.
    pub schema: String,
    /// `host`, `pod`, `pod-host-network` or `container`.
    #[doc(hidden)]
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
        exit_code(self.worst())
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
pub(super) struct Sink {
    check: &'static str,
    pub(super) findings: Vec<Finding>,
    pub(super) note: Option<String>,
    not_applicable: bool,
}

impl Sink {
    pub(super) fn new(check: &'static str) -> Self {
        Self {
            check,
            findings: Vec::new(),
            note: None,
            not_applicable: false,
        }
    }

    pub(super) fn finding(&self, severity: Severity, summary: impl Into<String>) -> Finding {
        Finding::new(self.check, severity, summary)
    }

    pub(super) fn error(&self, summary: impl Into<String>) -> Finding {
        self.finding(Severity::Error, summary)
    }

    pub(super) fn warning(&self, summary: impl Into<String>) -> Finding {
        self.finding(Severity::Warning, summary)
    }

    pub(super) fn info(&self, summary: impl Into<String>) -> Finding {
        self.finding(Severity::Info, summary)
    }

    pub(super) fn push(&mut self, f: Finding) {
        self.findings.push(f);
    }

    /// The check (or part of it) cannot run: say why and what would let it.
    pub(super) fn skip(
        &mut self,
        summary: impl Into<String>,
        why: impl Into<String>,
        fix: impl Into<String>,
    ) {
        let mut f = self
            .info(format!("check skipped: {}", summary.into()))
            .why(why)
            .fix(fix);
        f.skipped = true;
        self.findings.push(f);
    }

    pub(super) fn skip_with(&mut self, mut f: Finding) {
        f.severity = Severity::Info;
        f.skipped = true;
        if !f.summary.starts_with("check skipped") {
            f.summary = format!("check skipped: {}", f.summary);
        }
        self.findings.push(f);
    }

    /// Nothing to judge.
    pub(super) fn not_applicable(&mut self, note: impl Into<String>) {
        self.not_applicable = true;
        self.note = Some(note.into());
    }

    /// What the check looked at (shown with an `ok` outcome).
    pub(super) fn note(&mut self, note: impl Into<String>) {
        self.note = Some(note.into());
    }

    pub(super) fn outcome(&self) -> Outcome {
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

/// The exit code of a run whose worst finding is `worst` (skipped ones left out): 0
/// clean (infos at most), 1 warnings, 2 errors. `doctor`'s and `k8s audit`'s.
pub(crate) fn exit_code(worst: Option<Severity>) -> i32 {
    match worst {
        Some(Severity::Error) => 2,
        Some(Severity::Warning) => 1,
        _ => 0,
    }
}
