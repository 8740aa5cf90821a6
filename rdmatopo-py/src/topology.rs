//! `discover()`, `Topology` and the affinity `Matrix`.

use crate::doctor::DoctorReport;
use crate::errors::Error;
use crate::model::{Diagnostic, Gpu, Nic, NumaNode, py_opt, py_str};
use crate::plan::RankPlan;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use rdmatopo::{Devices, MatrixDevice, PciAddr, TopoMatrix};
use std::path::PathBuf;
use std::sync::OnceLock;

/// Read the topology of `root` (default: `$RDMATOPO_ROOT`, else `/`, this machine).
///
/// `view="owned"` (the default, as the CLI's): inside a container whose devices are
/// certain, only its own GPUs and RDMA devices are read in full; other containers'
/// RDMA devices are only named (`Topology.other_nics`), and those its answers place
/// (a PF of its VFs, a NIC beside one of its GPUs) are read in part (`Nic.partial`).
/// `Topology.view` says which view it holds; facts of a device only named or an
/// partial read raise `OutsideViewError`. On a host, or where ownership is uncertain, and with
/// `view="all"`, every device is read.
///
/// The GIL is released while sysfs is read, so other Python threads keep running.
///
/// Raises `FileNotFoundError` when `root` is not a directory, `DiscoveryError` when
/// it holds no sysfs tree, and `ArgumentError` for another `view`.
#[pyfunction]
#[pyo3(signature = (root = None, view = "owned"))]
pub fn discover(py: Python<'_>, root: Option<PathBuf>, view: &str) -> PyResult<Topology> {
    let view = match view {
        "owned" => rdmatopo::View::Owned,
        "all" => rdmatopo::View::All,
        other => {
            return Err(Error::argument(format!(
                "view must be \"owned\" or \"all\", not {other:?}"
            ))
            .into());
        }
    };
    let root = root.or_else(|| std::env::var_os("RDMATOPO_ROOT").map(PathBuf::from));
    let discovery = match root {
        Some(root) => rdmatopo::Discovery::root(root),
        None => rdmatopo::Discovery::live(),
    };
    let topo = py.detach(|| discovery.view(view).run().map_err(Error::from))?;
    Ok(Topology::new(topo))
}

/// Everything rdmatopo learned about one machine (or one container's view of it).
#[pyclass(frozen, module = "rdmatopo")]
#[derive(Debug)]
pub struct Topology {
    pub(crate) topo: rdmatopo::Topology,
    matrix: OnceLock<TopoMatrix>,
}

impl Topology {
    pub(crate) fn new(topo: rdmatopo::Topology) -> Self {
        Self {
            topo,
            matrix: OnceLock::new(),
        }
    }

    fn topo_matrix(&self) -> &TopoMatrix {
        self.matrix
            .get_or_init(|| TopoMatrix::for_topology(&self.topo))
    }

    /// The facade over this topology, with the matrix this object caches.
    pub(crate) fn devices(&self) -> Devices<'_> {
        Devices::with_matrix(&self.topo, self.topo_matrix())
    }

    /// The PCI address a device argument names.
    fn resolve(&self, device: &DeviceRef) -> std::result::Result<PciAddr, rdmatopo::Error> {
        let devices = self.devices();
        match device {
            // The numbering the CLI shows: a container's own, as its nvidia-smi's.
            DeviceRef::Index(i) => {
                let names = devices.gpu_names();
                self.topo
                    .gpus
                    .iter()
                    .find(|g| names.index(g).is_some_and(|n| i64::from(n) == *i))
                    .map(|g| g.pci)
                    .ok_or_else(|| rdmatopo::Error::unknown_device(format!("GPU index {i}")))
            }
            DeviceRef::Gpu(g) => Ok(g.pci_addr()),
            DeviceRef::Nic(n) => devices
                .rdma_in_full(&n.0.name)
                .and_then(|d| devices.nic_pci(d)),
            DeviceRef::Name(name) => devices.pci_of(name),
        }
    }
}

/// A device argument: `GPU0` / `NIC0`, an RDMA or netdev name, a PCI address in sysfs or
/// NVML form, a GPU index, or a `Gpu` / `Nic` object.
#[derive(FromPyObject)]
pub(crate) enum DeviceRef {
    Gpu(Gpu),
    Nic(Nic),
    Index(i64),
    Name(String),
}

#[pymethods]
impl Topology {
    /// The root the facts were read from (`/` when live).
    #[getter]
    fn root(&self) -> &str {
        &self.topo.root
    }
    /// The GPUs of this view, in its numbering (`Gpu.view_index`, the CLI's `GPU<n>`):
    /// in a container's owned view its own, as its nvidia-smi numbers them; on a host, or
    /// in the view `"all"`, every GPU, in PCI bus order. `all_gpus` has every visible one.
    #[getter]
    fn gpus<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let devices = self.devices();
        let names = devices.gpu_names();
        let mut gpus: Vec<(u32, &rdmatopo::Gpu)> = if self.topo.view.is_none() {
            self.topo.gpus.iter().map(|g| (g.index, g)).collect()
        } else {
            self.topo
                .gpus
                .iter()
                .filter_map(|g| Some((names.index(g)?, g)))
                .collect()
        };
        gpus.sort_by_key(|(i, _)| *i);
        PyTuple::new(py, gpus.into_iter().map(|(_, g)| Gpu::new(g, &devices)))
    }
    /// Every visible GPU, in PCI bus order (another container's too).
    #[getter]
    fn all_gpus<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let devices = self.devices();
        PyTuple::new(py, self.topo.gpus.iter().map(|g| Gpu::new(g, &devices)))
    }
    /// The RDMA devices of this view (HCAs, their VFs, bonds, software devices), in
    /// natural name order: in a container's owned view those it holds in full (not the
    /// partial reads of a PF of its VFs or a NIC beside its GPUs; `all_nics` has them).
    #[getter]
    fn nics<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(
            py,
            self.topo
                .rdma_devices
                .iter()
                .filter(|d| self.topo.holds_rdma_details(&d.name))
                .map(|d| Nic(d.clone(), false))
                .collect::<Vec<_>>(),
        )
    }
    /// Every RDMA device this topology holds, partial reads included (`Nic.partial`; facts
    /// of one beyond its name, PCI address and uverbs node raise `OutsideViewError`).
    #[getter]
    fn all_nics<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(
            py,
            self.topo
                .rdma_devices
                .iter()
                .map(|d| Nic(d.clone(), !self.topo.holds_rdma_details(&d.name))),
        )
    }
    /// The RDMA devices of other containers that an owned view names but does not hold
    /// (looking one up raises `OutsideViewError`); empty when the view is `"all"`.
    #[getter]
    fn other_nics<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.topo.other_rdma_devices())
    }
    #[getter]
    fn numa_nodes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.topo.numa_nodes.iter().cloned().map(NumaNode))
    }
    /// Which devices this topology holds in full: `"all"`, or `"owned"` (a container's
    /// own devices; the others are named or partial reads, see `discover`).
    #[getter]
    fn view(&self) -> &'static str {
        if self.topo.view.is_some() {
            "owned"
        } else {
            "all"
        }
    }
    /// What discovery could not read or make sense of, each naming its path.
    #[getter]
    fn diagnostics<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.topo.diagnostics.iter().cloned().map(Diagnostic))
    }

    /// The `nvidia-smi topo -m` class between two devices (`"PIX"`, `"NV18"`, `"SYS"`).
    ///
    /// A device is `"GPU0"` / `"NIC0"` (the matrix names), an RDMA or netdev name, a PCI
    /// address in sysfs or NVML form, a GPU index, or a `Gpu` / `Nic` object.
    fn path(&self, a: DeviceRef, b: DeviceRef) -> PyResult<String> {
        let (pa, pb) = (
            self.resolve(&a).map_err(Error::from)?,
            self.resolve(&b).map_err(Error::from)?,
        );
        let class = self.devices().class_between(pa, pb).map_err(Error::from)?;
        Ok(class.to_string())
    }

    /// The RDMA NICs nearest a GPU and their class (`"PIX"`, …): those of the best class
    /// in the GPU's row of the matrix, in matrix order, as C's `rdmatopo_nearest_nics`
    /// and Rust's `Devices::nearest_nics` answer.
    ///
    /// Raises `UnknownDeviceError` when `gpu` names no GPU, or no NIC has a PCI function.
    fn nearest_nics<'py>(
        &self,
        py: Python<'py>,
        gpu: DeviceRef,
    ) -> PyResult<(Bound<'py, PyTuple>, String)> {
        let addr = self.resolve(&gpu).map_err(Error::from)?;
        let (nics, class) = self.devices().nearest_nics(addr).map_err(Error::from)?;
        let nics = nics.into_iter().map(|i| {
            let d = &self.topo.rdma_devices[i];
            Nic(d.clone(), !self.topo.holds_rdma_details(&d.name))
        });
        Ok((PyTuple::new(py, nics)?, class.to_string()))
    }

    /// The plan of one local rank: its GPU, the HCA ports NCCL will prefer, the RoCE
    /// GID index, the CPUs to bind to, and the NCCL variables the facts justify, each
    /// with its reason.
    ///
    /// `local_rank` and `local_world_size` default to the launcher's variables in
    /// `os.environ` (`LOCAL_RANK` / `LOCAL_WORLD_SIZE` from torchrun, or Open MPI's,
    /// Slurm's, MPICH's); a process started without a launcher is rank 0 of 1.
    /// `CUDA_VISIBLE_DEVICES` in `os.environ` narrows the GPUs.
    ///
    /// Raises `ArgumentError` for a negative or out-of-range rank and `AnalysisError`
    /// when the environment contradicts the topology or the rank has no GPU.
    #[pyo3(signature = (local_rank = None, local_world_size = None))]
    fn plan(
        &self,
        py: Python<'_>,
        local_rank: Option<i64>,
        local_world_size: Option<i64>,
    ) -> PyResult<RankPlan> {
        crate::plan::plan(py, &self.devices(), local_rank, local_world_size)
    }

    /// The `rdmatopo doctor` checks on this topology: why RDMA would be slow here,
    /// each finding with its evidence (paths and values) and the fix.
    fn doctor(&self) -> DoctorReport {
        DoctorReport(self.topo.doctor())
    }

    /// The GPU/NIC affinity matrix (`rdmatopo topo --all`): every GPU and PCI-backed
    /// RDMA device. With `owned=True`, only those this container owns
    /// (`rdmatopo topo --owned`).
    #[pyo3(signature = (*, owned = false))]
    fn matrix(&self, owned: bool) -> Matrix {
        if !owned {
            return Matrix(self.topo_matrix().clone());
        }
        Matrix(self.topo.owned_matrix())
    }

    /// The model as JSON, with the container view beside it: the same text as
    /// `rdmatopo inventory --format json`.
    fn to_json(&self) -> PyResult<String> {
        let mut text = self.topo.inventory_json();
        // The document without the newline a file or terminal ends with.
        text.truncate(text.trim_end_matches('\n').len());
        Ok(text)
    }

    /// Read a model back from `to_json()` / `rdmatopo inventory --format json` output
    /// (the container view in it is recomputed from the model, not read).
    ///
    /// Raises `ParseError` when the text is not such a model.
    #[staticmethod]
    fn from_json(text: &str) -> PyResult<Topology> {
        let topo = rdmatopo::Topology::from_json(text).map_err(Error::from)?;
        Ok(Topology::new(topo))
    }

    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        other
            .cast::<Topology>()
            .is_ok_and(|o| o.get().topo == self.topo)
    }

    /// Pickles as its JSON, so a topology can be sent to worker processes.
    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<(Bound<'py, PyAny>, (String,))> {
        let from_json = slf.get_type().getattr("from_json")?;
        Ok((from_json, (slf.get().topo.to_json(),)))
    }

    fn __repr__(&self) -> String {
        format!(
            "<Topology root={} gpus={} nics={} numa_nodes={} diagnostics={}>",
            py_str(&self.topo.root),
            self.topo.gpus.len(),
            self.topo.rdma_devices.len(),
            self.topo.numa_nodes.len(),
            self.topo.diagnostics.len(),
        )
    }
}

/// One row/column of the matrix.
#[pyclass(frozen, eq, module = "rdmatopo", name = "MatrixDevice")]
#[derive(Debug, Clone, PartialEq)]
pub struct PyMatrixDevice(MatrixDevice);

#[pymethods]
impl PyMatrixDevice {
    /// `"GPU0"`, `"NIC0"`.
    #[getter]
    fn name(&self) -> &str {
        &self.0.name
    }
    /// `"gpu"` or `"nic"`.
    #[getter]
    fn kind(&self) -> &str {
        &self.0.kind
    }
    #[getter]
    fn pci(&self) -> String {
        self.0.pci.to_string()
    }
    /// RDMA device name of a NIC.
    #[getter]
    fn rdma(&self) -> Option<&str> {
        self.0.rdma.as_deref()
    }
    fn __repr__(&self) -> String {
        format!(
            "MatrixDevice(name={}, kind={}, pci={}, rdma={})",
            py_str(&self.0.name),
            py_str(&self.0.kind),
            py_str(&self.0.pci.to_string()),
            py_opt(self.0.rdma.as_deref()),
        )
    }
}

/// The `nvidia-smi topo -m` matrix over every GPU and PCI-backed RDMA device.
#[pyclass(frozen, eq, module = "rdmatopo")]
#[derive(Debug, Clone, PartialEq)]
pub struct Matrix(TopoMatrix);

#[pymethods]
impl Matrix {
    /// Rows and columns, in order: GPUs, then NICs.
    #[getter]
    fn devices<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.0.devices().iter().cloned().map(PyMatrixDevice))
    }
    /// Per GPU name: its local CPUs that this process may use, as a cpulist.
    #[getter]
    fn cpu_affinity<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        self.by_gpu(py, |name| self.0.cpu_affinity.get(name))
    }
    /// Per GPU name: its NUMA node, `"N/A"` when unknown.
    #[getter]
    fn numa_affinity<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        self.by_gpu(py, |name| self.0.numa_affinity.get(name))
    }
    /// The class between two matrix names (`m["GPU0", "NIC0"]`).
    fn __getitem__(&self, key: (String, String)) -> PyResult<String> {
        self.0
            .get(&key.0, &key.1)
            .map(|c| c.to_string())
            .ok_or_else(|| pyo3::exceptions::PyKeyError::new_err((key.0.clone(), key.1.clone())))
    }
    fn __len__(&self) -> usize {
        self.0.devices().len()
    }
    /// `{row: {column: class}}` in matrix order.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let out = PyDict::new(py);
        let devices = self.0.devices();
        for (i, a) in devices.iter().enumerate() {
            let row = PyDict::new(py);
            for (j, b) in devices.iter().enumerate() {
                if let Some(c) = self.0.class(i, j) {
                    row.set_item(&b.name, c.to_string())?;
                }
            }
            out.set_item(&a.name, row)?;
        }
        Ok(out)
    }
    /// The table as `nvidia-smi topo -m` prints it (legends included).
    fn to_table(&self) -> String {
        self.0.nvidia_smi_table()
    }
    /// The same JSON as `rdmatopo topo --format json` (`rdmatopo.topo/1`).
    fn to_json(&self) -> String {
        serde_json::to_string_pretty(&self.0).unwrap_or_default()
    }
    fn __repr__(&self) -> String {
        let names: Vec<&str> = self.0.devices().iter().map(|d| d.name.as_str()).collect();
        format!("<Matrix {}>", names.join(" "))
    }
}

impl Matrix {
    fn by_gpu<'py, 'a>(
        &'a self,
        py: Python<'py>,
        value: impl Fn(&str) -> Option<&'a String>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let out = PyDict::new(py);
        for d in self.0.devices().iter().filter(|d| d.kind == "gpu") {
            if let Some(v) = value(&d.name) {
                out.set_item(&d.name, v)?;
            }
        }
        Ok(out)
    }
}
