//! `Topology.doctor()`: the findings of `rdmatopo::Topology::doctor`.

use crate::model::{enum_text, py_opt, py_str};
use pyo3::prelude::*;
use pyo3::types::PyTuple;

/// One problem (or one check that could not run), with the evidence read and the fix.
#[pyclass(frozen, eq, module = "rdmatopo")]
#[derive(Debug, Clone, PartialEq)]
pub struct Finding(rdmatopo::Finding);

#[pymethods]
impl Finding {
    /// Stable kebab-case id of the check (`"numa-affinity"`).
    #[getter]
    fn check(&self) -> &str {
        &self.0.check
    }
    /// `"info"`, `"warning"` or `"error"`.
    #[getter]
    fn severity(&self) -> String {
        enum_text(&self.0.severity)
    }
    /// One line: what is wrong, naming the devices.
    #[getter]
    fn summary(&self) -> &str {
        &self.0.summary
    }
    /// `(path, value)` pairs: each logical sysfs/procfs path read and what it held.
    #[getter]
    fn evidence<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(
            py,
            self.0
                .evidence
                .iter()
                .map(|e| (e.path.as_str(), e.value.as_str())),
        )
    }
    /// Why it costs performance (or why the check could not run).
    #[getter]
    fn why(&self) -> &str {
        &self.0.why
    }
    /// The concrete fix: a Kubernetes setting, a command, or a variable.
    #[getter]
    fn fix(&self) -> &str {
        &self.0.fix
    }
    /// The check could not run (missing file, no privilege).
    #[getter]
    fn skipped(&self) -> bool {
        self.0.skipped
    }
    fn __repr__(&self) -> String {
        format!(
            "Finding(check={}, severity={}, summary={})",
            py_str(&self.0.check),
            py_str(&self.severity()),
            py_str(&self.0.summary),
        )
    }
}

/// How one check ended.
#[pyclass(frozen, eq, module = "rdmatopo")]
#[derive(Debug, Clone, PartialEq)]
pub struct CheckResult(rdmatopo::CheckResult);

#[pymethods]
impl CheckResult {
    #[getter]
    fn check(&self) -> &str {
        &self.0.check
    }
    /// `"ok"`, `"not-applicable"`, `"skipped"`, `"info"`, `"warning"` or `"error"`.
    #[getter]
    fn outcome(&self) -> String {
        enum_text(&self.0.outcome)
    }
    /// What the check looked at.
    #[getter]
    fn note(&self) -> &str {
        &self.0.note
    }
    fn __repr__(&self) -> String {
        format!(
            "CheckResult(check={}, outcome={}, note={})",
            py_str(&self.0.check),
            py_str(&self.outcome()),
            py_str(&self.0.note),
        )
    }
}

/// What `rdmatopo doctor` finds: why RDMA would be slow here.
#[pyclass(frozen, eq, module = "rdmatopo")]
#[derive(Debug, Clone, PartialEq)]
pub struct DoctorReport(pub(crate) rdmatopo::DoctorReport);

#[pymethods]
impl DoctorReport {
    /// `"host"`, `"pod"`, `"pod-host-network"` or `"container"`.
    #[getter]
    fn context(&self) -> String {
        enum_text(&self.0.context)
    }
    /// Every finding, by check, worst first within a check.
    #[getter]
    fn findings<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.0.findings.iter().cloned().map(Finding))
    }
    /// Every check, in the order run.
    #[getter]
    fn checks<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.0.checks.iter().cloned().map(CheckResult))
    }
    /// The worst severity among real (not skipped) findings, or `None`.
    #[getter]
    fn worst(&self) -> Option<String> {
        self.0.worst().map(|s| enum_text(&s))
    }
    /// `rdmatopo doctor`'s exit code: 0 clean, 1 warnings, 2 errors.
    #[getter]
    fn exit_code(&self) -> i32 {
        self.0.exit_code()
    }
    /// The same JSON as `rdmatopo doctor --format json` (`rdmatopo.doctor/1`).
    fn to_json(&self) -> String {
        serde_json::to_string_pretty(&self.0).unwrap_or_default()
    }
    fn __repr__(&self) -> String {
        format!(
            "<DoctorReport context={} findings={} worst={}>",
            py_str(&self.context()),
            self.0.findings.len(),
            py_opt(self.worst().as_deref()),
        )
    }
}
