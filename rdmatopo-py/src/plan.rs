//! `Topology.plan()` and the `RankPlan` it returns: a view of one rank of
//! `rdmatopo::Plan`, plus what `rdmatopo.apply()` did with it.

use crate::errors::Error;
use crate::model::{Gpu, cpu_set, py_opt, py_str};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyFrozenSet, PyTuple};
use rdmatopo::{CpuSet, Devices, Plan, RankChoice, RankOutcome, RankRequest, WhenNoRank};
use std::collections::BTreeMap;

/// A rank number from Python: a non-negative `int`.
fn rank_arg(name: &str, value: Option<i64>) -> Result<Option<u32>, Error> {
    value
        .map(|v| {
            u32::try_from(v).map_err(|_| {
                Error::argument(format!("{name}={v} is not a non-negative rank number"))
            })
        })
        .transpose()
}

/// The caller's rank arguments, checked: explicit arguments win over the launcher's
/// variables; which rank applies when none is given is the facade's decision
/// ([`Devices::rank_plan`](rdmatopo::Devices::rank_plan)).
fn rank_request(
    local_rank: Option<i64>,
    local_world_size: Option<i64>,
    env: BTreeMap<String, String>,
) -> Result<RankRequest, Error> {
    let local_rank = rank_arg("local_rank", local_rank)?;
    let local_world_size = rank_arg("local_world_size", local_world_size)?;
    if local_world_size == Some(0) {
        return Err(Error::argument(
            "local_world_size=0: there must be at least one rank",
        ));
    }
    if let (Some(r), Some(n)) = (local_rank, local_world_size)
        && r >= n
    {
        return Err(Error::argument(format!(
            "local_rank={r} is not below local_world_size={n}"
        )));
    }
    Ok(RankRequest {
        local_rank,
        local_world_size,
        env,
    })
}

/// `Topology.plan()` of the topology `devices` answers for; see its docstring in
/// `topology.rs`.
pub(crate) fn plan(
    py: Python<'_>,
    devices: &Devices<'_>,
    local_rank: Option<i64>,
    local_world_size: Option<i64>,
) -> PyResult<RankPlan> {
    // The environment of this process, the one NCCL will run in, whatever the root:
    // as `rdmatopo exec --root` plans (doctor, on the other hand, judges the root's).
    let env: BTreeMap<String, String> = py
        .import("os")?
        .getattr("environ")?
        .call_method0("copy")?
        .extract()?;
    let request = rank_request(local_rank, local_world_size, env)?;
    let RankOutcome { plan, choice, .. } = devices
        .rank_plan(request, WhenNoRank::SingleProcess)
        .map_err(Error::from)?;
    let RankChoice::Planned(rank_plan) = choice else {
        let why = match plan.notes.as_slice() {
            [] => "no GPU is visible".to_string(),
            notes => notes.join("; "),
        };
        return Err(Error::from(rdmatopo::Error::Analysis(format!(
            "no plan for this rank: {why}"
        )))
        .into());
    };
    let gpu = devices
        .topology()
        .gpus
        .iter()
        .find(|g| g.pci == rank_plan.gpu)
        .map(|g| Gpu::new(g, devices))
        .ok_or_else(|| Error::from(rdmatopo::Error::unknown_device(rank_plan.gpu.to_string())))?;
    Ok(RankPlan {
        rank: rank_plan,
        gpu,
        plan,
        applied: None,
    })
}

/// What `rdmatopo.apply()` changed in this process.
#[pyclass(frozen, eq, module = "rdmatopo")]
#[derive(Debug, Clone, PartialEq)]
pub struct Applied {
    env_set: BTreeMap<String, String>,
    env_kept: BTreeMap<String, String>,
    cpus: Option<CpuSet>,
}

#[pymethods]
impl Applied {
    /// Variables written to `os.environ`, with their new values.
    #[getter]
    fn env_set<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        str_dict(py, &self.env_set)
    }
    /// Variables the plan has a value for that were already set and left alone (their
    /// current value).
    #[getter]
    fn env_kept<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        str_dict(py, &self.env_kept)
    }
    /// The CPU affinity of the process after binding (`os.sched_getaffinity(0)`), or
    /// `None` when it was not changed.
    #[getter]
    fn cpus<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyFrozenSet>>> {
        self.cpus.as_ref().map(|c| cpu_set(py, c)).transpose()
    }
    fn __repr__(&self) -> String {
        format!(
            "Applied(env_set=[{}], env_kept=[{}], cpus={})",
            names(&self.env_set),
            names(&self.env_kept),
            py_opt(self.cpus.as_ref().map(ToString::to_string).as_deref()),
        )
    }
}

/// One local rank's share of the node, and the node-wide NCCL variables.
#[pyclass(frozen, module = "rdmatopo")]
#[derive(Debug, Clone)]
pub struct RankPlan {
    rank: rdmatopo::RankPlan,
    gpu: Gpu,
    plan: Plan,
    applied: Option<Applied>,
}

#[pymethods]
impl RankPlan {
    #[getter]
    fn local_rank(&self) -> u32 {
        self.rank.local_rank
    }
    /// The rank's GPU.
    #[getter]
    fn gpu(&self) -> Gpu {
        self.gpu.clone()
    }
    /// HCA ports NCCL will prefer for this GPU (`"mlx5_0:1"`).
    #[getter]
    fn hcas<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, &self.rank.hcas)
    }
    /// The RoCE GID index of those ports, when they agree (`None` on InfiniBand).
    #[getter]
    fn gid_index(&self) -> Option<u32> {
        self.rank.gid_index
    }
    /// CPUs to bind this rank to.
    #[getter]
    fn cpus<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyFrozenSet>> {
        cpu_set(py, &self.rank.cpus)
    }
    /// NUMA node of the GPU.
    #[getter]
    fn numa_node(&self) -> Option<u32> {
        self.rank.numa_node
    }
    /// The facts behind each choice for this rank.
    #[getter]
    fn reasons<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, &self.rank.reasons)
    }
    /// NCCL variables to set (the same on every rank of the node).
    #[getter]
    fn env<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        str_dict(py, &self.plan.env)
    }
    /// Why each variable of `env` is set.
    #[getter]
    fn env_reasons<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        str_dict(py, &self.plan.env_reasons)
    }
    /// RDMA devices (or `device:port`) left out of `NCCL_IB_HCA`, with the reason.
    #[getter]
    fn excluded<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let out = PyDict::new(py);
        for e in &self.plan.excluded {
            out.set_item(&e.device, &e.reason)?;
        }
        Ok(out)
    }
    /// Assumptions and fallbacks of the plan, each said once.
    #[getter]
    fn notes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, &self.plan.notes)
    }
    /// What `rdmatopo.apply()` did; `None` for a plan that was only computed.
    #[getter]
    fn applied(&self) -> Option<Applied> {
        self.applied.clone()
    }
    /// The plan as JSON (`rdmatopo.nccl-env/1`): the node-wide variables and this
    /// rank.
    fn to_json(&self) -> String {
        self.plan.to_json().trim_end().to_string()
    }

    /// This plan with a record of what was applied (used by `rdmatopo.apply()`).
    fn _with_applied(
        &self,
        env_set: BTreeMap<String, String>,
        env_kept: BTreeMap<String, String>,
        cpus: Option<Vec<u32>>,
    ) -> RankPlan {
        RankPlan {
            applied: Some(Applied {
                env_set,
                env_kept,
                cpus: cpus.map(CpuSet::from_cpus),
            }),
            ..self.clone()
        }
    }

    fn __repr__(&self) -> String {
        format!(
            "RankPlan(local_rank={}, gpu={}, hcas={}, gid_index={}, cpus={})",
            self.rank.local_rank,
            py_str(&self.rank.gpu.to_string()),
            py_tuple(&self.rank.hcas),
            self.rank.gid_index.map_or("None".into(), |g| g.to_string()),
            py_str(&self.rank.cpus.to_string()),
        )
    }
}

fn str_dict<'py>(py: Python<'py>, map: &BTreeMap<String, String>) -> PyResult<Bound<'py, PyDict>> {
    let out = PyDict::new(py);
    for (k, v) in map {
        out.set_item(k, v)?;
    }
    Ok(out)
}

/// A tuple of strings as Python's `repr` writes it.
fn py_tuple(items: &[String]) -> String {
    match items {
        [one] => format!("({},)", py_str(one)),
        _ => format!(
            "({})",
            items
                .iter()
                .map(|s| py_str(s))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

fn names(map: &BTreeMap<String, String>) -> String {
    map.keys().map(|k| py_str(k)).collect::<Vec<_>>().join(", ")
}
