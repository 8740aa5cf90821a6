//! Immutable Python views of the model's devices. Each holds the Rust value and
//! converts a field when it is read: CPU sets become `frozenset[int]`, lists become
//! tuples, enums become the strings the JSON uses.

use pyo3::prelude::*;
use pyo3::types::{PyFrozenSet, PyTuple};
use rdmatopo::Devices;
use rdmatopo::{CpuSet, PciAddr};

use crate::errors::Error;

pub(crate) fn cpu_set<'py>(py: Python<'py>, cpus: &CpuSet) -> PyResult<Bound<'py, PyFrozenSet>> {
    PyFrozenSet::new(py, cpus.iter())
}

fn opt_cpu_set<'py>(
    py: Python<'py>,
    cpus: Option<&CpuSet>,
) -> PyResult<Option<Bound<'py, PyFrozenSet>>> {
    cpus.map(|c| cpu_set(py, c)).transpose()
}

/// The kernel's cpulist text of a set of CPUs (`{0, 1, 2, 3, 8}` → `"0-3,8"`).
#[pyfunction]
pub fn format_cpulist(cpus: &Bound<'_, PyAny>) -> PyResult<String> {
    let cpus = cpus
        .try_iter()?
        .map(|c| c?.extract::<u32>())
        .collect::<PyResult<Vec<u32>>>()?;
    Ok(CpuSet::from_cpus(cpus).to_string())
}

/// The CPUs of a kernel cpulist (`"0-3,8"` → `frozenset({0, 1, 2, 3, 8})`).
///
/// Raises `ParseError` when the text is not a cpulist.
#[pyfunction(name = "parse_cpulist")]
pub fn parse_cpus<'py>(py: Python<'py>, text: &str) -> PyResult<Bound<'py, PyFrozenSet>> {
    let cpus: CpuSet = text.parse().map_err(Error::from)?;
    cpu_set(py, &cpus)
}

/// A string literal as Python's `repr` writes it.
pub(crate) fn py_str(s: &str) -> String {
    format!("'{}'", s.replace('\\', "\\\\").replace('\'', "\\'"))
}

/// `repr` of an optional string, Python style.
pub(crate) fn py_opt(v: Option<&str>) -> String {
    v.map_or("None".to_string(), py_str)
}

/// An NVIDIA GPU (a PCI function of VGA or 3D class), plus NVML facts when known.
#[pyclass(frozen, eq, from_py_object, module = "rdmatopo")]
#[derive(Debug, Clone, PartialEq)]
pub struct Gpu {
    gpu: rdmatopo::Gpu,
    /// [`Devices::gpu_numa`]: the function's node, else its host bridge's.
    numa_node: Option<u32>,
    /// [`Devices::gpu_names`]: its index and name in this view.
    view_index: Option<u32>,
    view_name: String,
}

impl Gpu {
    pub(crate) fn new(gpu: &rdmatopo::Gpu, devices: &Devices<'_>) -> Self {
        let names = devices.gpu_names();
        Self {
            gpu: gpu.clone(),
            numa_node: devices.gpu_numa(gpu),
            view_index: names.index(gpu),
            view_name: names.name(gpu),
        }
    }

    pub(crate) fn pci_addr(&self) -> PciAddr {
        self.gpu.pci
    }
}

#[pymethods]
impl Gpu {
    /// The host's index: position among the machine's GPUs in PCI bus order (CUDA's
    /// `CUDA_DEVICE_ORDER=PCI_BUS_ID` order on the host).
    #[getter]
    fn index(&self) -> u32 {
        self.gpu.index
    }
    /// The index every answer gives it here, as this container's nvidia-smi and CUDA
    /// number it (from 0 among the container's GPUs, in PCI bus order); the host's
    /// index on a host; `None` for a GPU another container owns.
    #[getter]
    fn view_index(&self) -> Option<u32> {
        self.view_index
    }
    /// The name every answer gives it here: `"GPU0"`, or `"host GPU5"` for a GPU
    /// another container owns.
    #[getter]
    fn view_name(&self) -> &str {
        &self.view_name
    }
    /// PCI address in sysfs form (`0000:18:00.0`).
    #[getter]
    fn pci(&self) -> String {
        self.gpu.pci.to_string()
    }
    /// NVML's product name, else the pci.ids name.
    #[getter]
    fn name(&self) -> Option<&str> {
        self.gpu.name.as_deref()
    }
    /// NVML UUID (`GPU-…`).
    #[getter]
    fn uuid(&self) -> Option<&str> {
        self.gpu.uuid.as_deref()
    }
    /// `numa_node` of the function, else of its host bridge, else the one node its
    /// `local_cpulist` covers; `None` when unknown or several.
    #[getter]
    fn numa_node(&self) -> Option<u32> {
        self.numa_node
    }
    /// `local_cpulist` of the function.
    #[getter]
    fn local_cpus<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyFrozenSet>>> {
        opt_cpu_set(py, self.gpu.local_cpus.as_ref())
    }
    /// `/dev/nvidia<minor>` number.
    #[getter]
    fn minor(&self) -> Option<u32> {
        self.gpu.minor
    }
    fn __repr__(&self) -> String {
        format!(
            "Gpu(index={}, pci={}, name={}, numa_node={})",
            self.gpu.index,
            py_str(&self.gpu.pci.to_string()),
            py_opt(self.gpu.name.as_deref()),
            self.numa_node.map_or("None".into(), |n| n.to_string()),
        )
    }
}

/// One valid entry of a port's GID table (`ports/<n>/gids/<i>`).
#[pyclass(frozen, eq, module = "rdmatopo")]
#[derive(Debug, Clone, PartialEq)]
pub struct Gid(pub(crate) rdmatopo::Gid);

#[pymethods]
impl Gid {
    #[getter]
    fn index(&self) -> u32 {
        self.0.index
    }
    /// The GID as the kernel prints it.
    #[getter]
    fn gid(&self) -> &str {
        &self.0.gid
    }
    /// The IPv4 address of an IPv4-mapped GID.
    #[getter]
    fn ipv4(&self) -> Option<&str> {
        self.0.ipv4.as_deref()
    }
    /// `gid_attrs/types/<i>`: `"IB/RoCE v1"` or `"RoCE v2"`.
    #[getter]
    fn gid_type(&self) -> Option<&'static str> {
        self.0.gid_type.map(|t| t.as_str())
    }
    /// `gid_attrs/ndevs/<i>`.
    #[getter]
    fn netdev(&self) -> Option<&str> {
        self.0.netdev.as_deref()
    }
    fn __repr__(&self) -> String {
        format!(
            "Gid(index={}, gid={}, gid_type={}, netdev={})",
            self.0.index,
            py_str(&self.0.gid),
            py_opt(self.0.gid_type.map(|t| t.as_str())),
            py_opt(self.0.netdev.as_deref()),
        )
    }
}

/// A port of an RDMA device (`/sys/class/infiniband/<dev>/ports/<n>/`).
#[pyclass(frozen, eq, module = "rdmatopo")]
#[derive(Debug, Clone, PartialEq)]
pub struct Port(pub(crate) rdmatopo::Port);

#[pymethods]
impl Port {
    #[getter]
    fn number(&self) -> u32 {
        self.0.number
    }
    /// `state`, as the JSON spells it (`"ACTIVE"`, `"DOWN"`).
    #[getter]
    fn state(&self) -> Option<String> {
        self.0.state.map(|s| enum_text(&s))
    }
    /// Name part of `phys_state` (`"LinkUp"`).
    #[getter]
    fn phys_state(&self) -> Option<&str> {
        self.0.phys_state.as_ref().map(|p| p.name.as_str())
    }
    /// `rate` in Gb/s.
    #[getter]
    fn rate_gbps(&self) -> Option<f64> {
        self.0.rate.as_ref().map(|r| r.gbps)
    }
    /// `rate` as the kernel prints it (`"400 Gb/sec (4X NDR)"`).
    #[getter]
    fn rate(&self) -> Option<String> {
        self.0
            .rate
            .as_ref()
            .map(|r| format!("{} Gb/sec ({}X {})", r.gbps, r.lanes, r.speed))
    }
    /// `link_layer`: `"InfiniBand"` or `"Ethernet"`.
    #[getter]
    fn link_layer(&self) -> Option<&'static str> {
        self.0.link_layer.map(|l| l.as_str())
    }
    /// `lid` (`"0x1a"`).
    #[getter]
    fn lid(&self) -> Option<&str> {
        self.0.lid.as_deref()
    }
    /// Number of `gids/<i>` slots.
    #[getter]
    fn gid_table_len(&self) -> u32 {
        self.0.gid_table_len
    }
    /// The non-zero GID slots.
    #[getter]
    fn gids<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.0.gids.iter().cloned().map(Gid))
    }
    /// The netdev of this port (the ibdev2netdev relation).
    #[getter]
    fn netdev(&self) -> Option<&str> {
        self.0.netdev.as_deref()
    }
    /// True when `state` is ACTIVE.
    #[getter]
    fn is_active(&self) -> bool {
        self.0.is_active()
    }
    fn __repr__(&self) -> String {
        format!(
            "Port(number={}, state={}, link_layer={}, rate={}, netdev={})",
            self.0.number,
            py_opt(self.state().as_deref()),
            py_opt(self.link_layer()),
            py_opt(self.rate().as_deref()),
            py_opt(self.0.netdev.as_deref()),
        )
    }
}

/// An RDMA device (`/sys/class/infiniband/<name>/`): an HCA, or one function of it.
#[pyclass(frozen, eq, from_py_object, module = "rdmatopo")]
#[derive(Debug, Clone, PartialEq)]
pub struct Nic(pub(crate) rdmatopo::RdmaDevice, pub(crate) bool);

impl Nic {
    /// The device, when read in full; its partial read (in an owned view, a device the
    /// container's answers place without owning it) answers only name, PCI address and
    /// uverbs node.
    fn whole(&self) -> PyResult<&rdmatopo::RdmaDevice> {
        if self.1 {
            Err(crate::errors::OutsideViewError::new_err(
                rdmatopo::Error::outside_view(self.0.name.clone()).to_string(),
            ))
        } else {
            Ok(&self.0)
        }
    }
}

#[pymethods]
impl Nic {
    /// RDMA device name (`mlx5_0`).
    #[getter]
    fn name(&self) -> &str {
        &self.0.name
    }
    /// PCI address of the `device` link; `None` for software devices (rxe, siw).
    #[getter]
    fn pci(&self) -> Option<String> {
        self.0.pci.map(|a| a.to_string())
    }
    /// `node_type` (`"1: CA"`).
    #[getter]
    fn node_type(&self) -> PyResult<Option<&str>> {
        Ok(self.whole()?.node_type.as_deref())
    }
    /// `node_guid`.
    #[getter]
    fn node_guid(&self) -> PyResult<Option<&str>> {
        Ok(self.whole()?.node_guid.as_deref())
    }
    /// `sys_image_guid`: the same on every function of one adapter.
    #[getter]
    fn sys_image_guid(&self) -> PyResult<Option<&str>> {
        Ok(self.whole()?.sys_image_guid.as_deref())
    }
    /// `fw_ver`.
    #[getter]
    fn fw_ver(&self) -> PyResult<Option<&str>> {
        Ok(self.whole()?.fw_ver.as_deref())
    }
    /// `hca_type` (`"MT4129"`).
    #[getter]
    fn hca_type(&self) -> PyResult<Option<&str>> {
        Ok(self.whole()?.hca_type.as_deref())
    }
    /// `board_id` (the PSID on mlx5).
    #[getter]
    fn board_id(&self) -> PyResult<Option<&str>> {
        Ok(self.whole()?.board_id.as_deref())
    }
    #[getter]
    fn ports<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.whole()?.ports.iter().cloned().map(Port))
    }
    /// Whether this device was read only in part (in an owned view, a device
    /// the container's answers place without owning it: a PF of its VFs, a NIC beside
    /// one of its GPUs): its other facts raise `OutsideViewError`.
    #[getter]
    fn partial(&self) -> bool {
        self.1
    }
    /// `uverbs<N>` character device of this device.
    #[getter]
    fn uverbs(&self) -> Option<&str> {
        self.0.uverbs.as_deref()
    }
    fn __repr__(&self) -> String {
        format!(
            "Nic(name={}, pci={}, ports={})",
            py_str(&self.0.name),
            py_opt(self.pci().as_deref()),
            self.0.ports.len(),
        )
    }
}

/// A NUMA node (`/sys/devices/system/node/node<N>/`).
#[pyclass(frozen, eq, module = "rdmatopo")]
#[derive(Debug, Clone, PartialEq)]
pub struct NumaNode(pub(crate) rdmatopo::NumaNode);

#[pymethods]
impl NumaNode {
    #[getter]
    fn id(&self) -> u32 {
        self.0.id
    }
    /// `cpulist` (empty for memory-only nodes).
    #[getter]
    fn cpus<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyFrozenSet>> {
        cpu_set(py, &self.0.cpus)
    }
    /// `distance`: SLIT distances to every node, in node order.
    #[getter]
    fn distances<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, &self.0.distances)
    }
    /// `MemTotal` of `meminfo`, in KiB; `None` where the root does not show it.
    #[getter]
    fn memory_kib(&self) -> Option<u64> {
        self.0.memory_kib
    }
    fn __repr__(&self) -> String {
        format!(
            "NumaNode(id={}, cpus={})",
            self.0.id,
            py_str(&self.0.cpus.to_string())
        )
    }
}

/// Something discovery could not read or make sense of, naming the path.
#[pyclass(frozen, eq, module = "rdmatopo")]
#[derive(Debug, Clone, PartialEq)]
pub struct Diagnostic(pub(crate) rdmatopo::Diagnostic);

#[pymethods]
impl Diagnostic {
    /// `"info"`, `"warning"` or `"error"`.
    #[getter]
    fn severity(&self) -> String {
        enum_text(&self.0.severity)
    }
    /// Stable kebab-case code (`"unreadable-attribute"`).
    #[getter]
    fn code(&self) -> &str {
        &self.0.code
    }
    /// The logical path concerned.
    #[getter]
    fn path(&self) -> Option<&str> {
        self.0.path.as_deref()
    }
    #[getter]
    fn message(&self) -> &str {
        &self.0.message
    }
    fn __repr__(&self) -> String {
        format!(
            "Diagnostic(severity={}, code={}, path={}, message={})",
            py_str(&self.severity()),
            py_str(&self.0.code),
            py_opt(self.0.path.as_deref()),
            py_str(&self.0.message),
        )
    }
}

/// The JSON spelling of a unit-variant enum (`PortState::Active` → `ACTIVE`), so Python
/// sees the same strings as the JSON.
pub(crate) fn enum_text<T: serde::Serialize>(value: &T) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(s)) => s,
        Ok(other) => other.to_string(),
        Err(e) => e.to_string(),
    }
}
