//! Python bindings of rdmatopo: the private `rdmatopo._rdmatopo` extension module that
//! `python/rdmatopo/__init__.py` re-exports. No domain logic lives here: each function
//! converts arguments, calls the `rdmatopo` crate, and converts the result; errors are
//! mapped in `errors.rs` only.

mod doctor;
mod errors;
mod model;
mod plan;
mod topology;

use pyo3::prelude::*;

/// The JSON Schema (draft 2020-12) of the document whose `"schema"` field is `id`
/// (`"rdmatopo.topo/1"`), as text. Raises `ArgumentError` for an id rdmatopo has none of.
#[pyfunction]
fn json_schema(id: &str) -> PyResult<&'static str> {
    rdmatopo::json_schema(id)
        .ok_or_else(|| errors::Error::argument(format!("no JSON schema {id:?}")).into())
}

/// Every schema id `json_schema()` knows, sorted.
#[pyfunction]
fn json_schema_ids() -> Vec<&'static str> {
    rdmatopo::json_schema_ids().collect()
}

#[pymodule]
mod _rdmatopo {
    #[pymodule_export]
    use crate::doctor::{CheckResult, DoctorReport, Finding};
    #[pymodule_export]
    use crate::errors::{
        AnalysisError, ArgumentError, DiscoveryError, OutsideViewError, ParseError, RdmaTopoError,
        UnknownDeviceError,
    };
    #[pymodule_export]
    use crate::model::{Diagnostic, Gid, Gpu, Nic, NumaNode, Port, format_cpulist, parse_cpus};
    #[pymodule_export]
    use crate::plan::{Applied, RankPlan};
    #[pymodule_export]
    use crate::topology::{Matrix, PyMatrixDevice, Topology, discover};
    #[pymodule_export]
    use crate::{json_schema, json_schema_ids};

    use pyo3::prelude::*;

    #[pymodule_init]
    fn init(m: &Bound<'_, PyModule>) -> PyResult<()> {
        m.add("__version__", env!("CARGO_PKG_VERSION"))
    }
}
