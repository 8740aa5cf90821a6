//! GPUs, RDMA devices ("NICs") and their ports, by index or by name. The strings in
//! the info structs are borrowed from the handle and live until it is freed.

use crate::args::{arg_bus_id, arg_out, arg_ref, arg_str};
use crate::error::{FfiError, ffi_call, rdmatopo_status};
use crate::topology::rdmatopo_topology;
use rdmatopo::{Devices, LinkLayer, PortState};
use std::ffi::{CStr, c_char};
use std::ptr;

/// A GPU: an NVIDIA PCI function of VGA or 3D class.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct rdmatopo_gpu_info {
    /// Position in PCI bus order: CUDA's index under CUDA_DEVICE_ORDER=PCI_BUS_ID.
    pub index: usize,
    /// PCI address in sysfs form (`0000:18:00.0`).
    pub pci_address: *const c_char,
    /// The same address in NVML form (`00000000:18:00.0`).
    pub nvml_bus_id: *const c_char,
    /// NVML UUID (`GPU-…`), or NULL when unknown.
    pub uuid: *const c_char,
    /// Product name (NVML's, else the pci.ids name), or NULL when unknown.
    pub name: *const c_char,
    /// NUMA node: `numa_node` of the function, else of its host bridge, else the one
    /// node its `local_cpulist` covers; -1 when unknown or when that is several nodes.
    pub numa_node: i32,
}

/// An RDMA device (`/sys/class/infiniband/<name>`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct rdmatopo_nic_info {
    /// RDMA device name (`mlx5_0`), the name NCCL_IB_HCA uses.
    pub name: *const c_char,
    /// PCI address (`0000:18:00.1`), or NULL for a software device (rxe, siw).
    pub pci_address: *const c_char,
    /// NUMA node of its PCI function (the rule of `rdmatopo_gpu_info.numa_node`), -1
    /// when unknown, several, or without a function.
    pub numa_node: i32,
    /// Whether the PCI function is an SR-IOV virtual function.
    pub is_virtual_function: bool,
    /// Number of ports; rdmatopo_topology_nic_port takes 0 to port_count - 1.
    pub port_count: usize,
}

/// A port's logical state (`ports/<n>/state`); 0 to 5 are the numbers of
/// `enum ibv_port_state`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum rdmatopo_port_state {
    Nop = 0,
    Down = 1,
    Init = 2,
    Armed = 3,
    Active = 4,
    ActiveDefer = 5,
    /// A number the kernel did not define, or the file could not be read.
    Unknown = 6,
}

/// A port of an RDMA device (`/sys/class/infiniband/<dev>/ports/<n>/`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct rdmatopo_port_info {
    /// Port number as verbs counts it (from 1).
    pub number: u32,
    /// `state`.
    pub state: rdmatopo_port_state,
    /// `link_layer`: "InfiniBand" or "Ethernet" (static strings), NULL when unknown.
    pub link_layer: *const c_char,
    /// `rate` in Gb/s, 0 when unknown.
    pub rate_gbps: f64,
    /// The netdev of this port (the ibdev2netdev relation), NULL when none is visible.
    pub netdev: *const c_char,
    /// Number of valid (non-zero) GID table entries.
    pub gid_count: usize,
}

fn opt_ptr(s: Option<&std::ffi::CString>) -> *const c_char {
    s.map_or(ptr::null(), |c| c.as_ptr())
}

fn numa(n: Option<u32>) -> i32 {
    n.and_then(|n| i32::try_from(n).ok()).unwrap_or(-1)
}

fn index_error(what: &str, index: usize, count: usize) -> FfiError {
    FfiError::new(
        rdmatopo_status::IndexOutOfRange,
        format!("{what} index {index} is out of range (the topology has {count})"),
    )
}

fn link_layer_str(l: LinkLayer) -> *const c_char {
    let s: &'static CStr = match l {
        LinkLayer::InfiniBand => c"InfiniBand",
        LinkLayer::Ethernet => c"Ethernet",
        LinkLayer::Unknown => return ptr::null(),
    };
    s.as_ptr()
}

fn port_state(s: Option<PortState>) -> rdmatopo_port_state {
    match s {
        Some(PortState::Nop) => rdmatopo_port_state::Nop,
        Some(PortState::Down) => rdmatopo_port_state::Down,
        Some(PortState::Init) => rdmatopo_port_state::Init,
        Some(PortState::Armed) => rdmatopo_port_state::Armed,
        Some(PortState::Active) => rdmatopo_port_state::Active,
        Some(PortState::ActiveDefer) => rdmatopo_port_state::ActiveDefer,
        Some(PortState::Unknown) | None => rdmatopo_port_state::Unknown,
    }
}

impl rdmatopo_topology {
    /// The facade over this handle's topology.
    pub(crate) fn devices(&self) -> Devices<'_> {
        Devices::of(&self.topo)
    }

    pub(crate) fn gpu_info(&self, index: usize) -> Result<rdmatopo_gpu_info, FfiError> {
        let (g, s) = self
            .topo
            .gpus
            .get(index)
            .zip(self.gpus.get(index))
            .ok_or_else(|| index_error("GPU", index, self.gpus.len()))?;
        let numa_node = self.devices().gpu_numa(g);
        Ok(rdmatopo_gpu_info {
            index,
            pci_address: s.pci.as_ptr(),
            nvml_bus_id: s.nvml_bus_id.as_ptr(),
            uuid: opt_ptr(s.uuid.as_ref()),
            name: opt_ptr(s.name.as_ref()),
            numa_node: numa(numa_node),
        })
    }

    fn nic_info(&self, index: usize) -> Result<rdmatopo_nic_info, FfiError> {
        let (d, s) = self
            .topo
            .rdma_devices
            .get(index)
            .zip(self.nics.get(index))
            .ok_or_else(|| index_error("NIC", index, self.nics.len()))?;
        let f = d.pci.and_then(|a| self.topo.pci_function(a));
        Ok(rdmatopo_nic_info {
            name: s.name.as_ptr(),
            pci_address: opt_ptr(s.pci.as_ref()),
            numa_node: numa(self.devices().nic_numa(d)),
            is_virtual_function: f.is_some_and(|f| f.is_vf),
            port_count: d.ports.len(),
        })
    }

    fn port_info(&self, nic: usize, port: usize) -> Result<rdmatopo_port_info, FfiError> {
        let (d, s) = self
            .topo
            .rdma_devices
            .get(nic)
            .zip(self.nics.get(nic))
            .ok_or_else(|| index_error("NIC", nic, self.nics.len()))?;
        self.devices().rdma_in_full(&d.name)?;
        let (p, netdev) = d
            .ports
            .get(port)
            .zip(s.port_netdevs.get(port))
            .ok_or_else(|| index_error(&format!("{} port", d.name), port, d.ports.len()))?;
        Ok(rdmatopo_port_info {
            number: p.number,
            state: port_state(p.state),
            link_layer: p.link_layer.map_or(ptr::null(), link_layer_str),
            rate_gbps: p.rate.as_ref().map_or(0.0, |r| r.gbps),
            netdev: opt_ptr(netdev.as_ref()),
            gid_count: p.gids.len(),
        })
    }
}

/// Number of GPUs, into `*out`.
///
/// # Safety
/// `topo` is a live handle; `out` is valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdmatopo_topology_gpu_count(
    topo: *const rdmatopo_topology,
    out: *mut usize,
) -> rdmatopo_status {
    ffi_call("rdmatopo_topology_gpu_count", || {
        // SAFETY: the caller's promise.
        let topo = unsafe { arg_ref(topo, "topo") }?;
        let out = arg_out(out, "out")?;
        // SAFETY: checked non-NULL.
        unsafe { out.write(topo.gpus.len()) };
        Ok(())
    })
}

/// Number of RDMA devices (PCI-backed and software ones), into `*out`.
///
/// # Safety
/// `topo` is a live handle; `out` is valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdmatopo_topology_nic_count(
    topo: *const rdmatopo_topology,
    out: *mut usize,
) -> rdmatopo_status {
    ffi_call("rdmatopo_topology_nic_count", || {
        // SAFETY: the caller's promise.
        let topo = unsafe { arg_ref(topo, "topo") }?;
        let out = arg_out(out, "out")?;
        // SAFETY: checked non-NULL.
        unsafe { out.write(topo.nics.len()) };
        Ok(())
    })
}

/// The GPU at `index` (0 to count - 1, PCI bus order), into `*out`.
/// Errors: RDMATOPO_STATUS_INDEX_OUT_OF_RANGE.
///
/// # Safety
/// `topo` is a live handle; `out` is valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdmatopo_topology_gpu(
    topo: *const rdmatopo_topology,
    index: usize,
    out: *mut rdmatopo_gpu_info,
) -> rdmatopo_status {
    ffi_call("rdmatopo_topology_gpu", || {
        // SAFETY: the caller's promise.
        let topo = unsafe { arg_ref(topo, "topo") }?;
        let out = arg_out(out, "out")?;
        let info = topo.gpu_info(index)?;
        // SAFETY: checked non-NULL.
        unsafe { out.write(info) };
        Ok(())
    })
}

/// What every answer calls the GPU at `index` (0 to count - 1, the host's PCI bus
/// order, as rdmatopo_topology_gpu): its index into `*view_index`, as this container's
/// nvidia-smi and CUDA number it (from 0 among the container's GPUs in PCI bus order;
/// the host's index on a host), -1 for a GPU another container owns; its name into
/// `*view_name` ("GPU0", or "host GPU5" for another container's), borrowed from the
/// handle. Errors: RDMATOPO_STATUS_INDEX_OUT_OF_RANGE.
///
/// # Safety
/// `topo` is a live handle; `view_index` and `view_name` are valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdmatopo_topology_gpu_view_name(
    topo: *const rdmatopo_topology,
    index: usize,
    view_index: *mut i64,
    view_name: *mut *const c_char,
) -> rdmatopo_status {
    ffi_call("rdmatopo_topology_gpu_view_name", || {
        // SAFETY: the caller's promise.
        let topo = unsafe { arg_ref(topo, "topo") }?;
        let out_index = arg_out(view_index, "view_index")?;
        let out_name = arg_out(view_name, "view_name")?;
        let s = topo
            .gpus
            .get(index)
            .ok_or_else(|| index_error("GPU", index, topo.gpus.len()))?;
        // SAFETY: checked non-NULL.
        unsafe { out_index.write(s.view_index.map_or(-1, i64::from)) };
        // SAFETY: checked non-NULL.
        unsafe { out_name.write(s.view_name.as_ptr()) };
        Ok(())
    })
}

/// The RDMA device at `index` (0 to count - 1, in name order), into `*out`.
/// Errors: RDMATOPO_STATUS_INDEX_OUT_OF_RANGE.
///
/// # Safety
/// `topo` is a live handle; `out` is valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdmatopo_topology_nic(
    topo: *const rdmatopo_topology,
    index: usize,
    out: *mut rdmatopo_nic_info,
) -> rdmatopo_status {
    ffi_call("rdmatopo_topology_nic", || {
        // SAFETY: the caller's promise.
        let topo = unsafe { arg_ref(topo, "topo") }?;
        let out = arg_out(out, "out")?;
        let info = topo.nic_info(index)?;
        // SAFETY: checked non-NULL.
        unsafe { out.write(info) };
        Ok(())
    })
}

/// Port `port_index` (0 to port_count - 1; not the port number) of the RDMA device
/// at `nic_index`, into `*out`. Errors: RDMATOPO_STATUS_INDEX_OUT_OF_RANGE,
/// RDMATOPO_STATUS_OUTSIDE_VIEW (another container's device, in an owned view).
///
/// # Safety
/// `topo` is a live handle; `out` is valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdmatopo_topology_nic_port(
    topo: *const rdmatopo_topology,
    nic_index: usize,
    port_index: usize,
    out: *mut rdmatopo_port_info,
) -> rdmatopo_status {
    ffi_call("rdmatopo_topology_nic_port", || {
        // SAFETY: the caller's promise.
        let topo = unsafe { arg_ref(topo, "topo") }?;
        let out = arg_out(out, "out")?;
        let info = topo.port_info(nic_index, port_index)?;
        // SAFETY: checked non-NULL.
        unsafe { out.write(info) };
        Ok(())
    })
}

/// The index of the GPU at `bus_id` (sysfs `0000:3b:00.0` or NVML `00000000:3B:00.0`
/// form), into `*out`. Errors: RDMATOPO_STATUS_INVALID_ARGUMENT (not a bus id),
/// RDMATOPO_STATUS_NOT_FOUND (no GPU there).
///
/// # Safety
/// `topo` is a live handle; `bus_id` a NUL-terminated string; `out` valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdmatopo_topology_find_gpu(
    topo: *const rdmatopo_topology,
    bus_id: *const c_char,
    out: *mut usize,
) -> rdmatopo_status {
    ffi_call("rdmatopo_topology_find_gpu", || {
        // SAFETY: the caller's promise.
        let topo = unsafe { arg_ref(topo, "topo") }?;
        // SAFETY: the caller's promise.
        let addr = unsafe { arg_bus_id(bus_id, "bus_id") }?;
        let out = arg_out(out, "out")?;
        let index = topo.devices().gpu_position(addr)?;
        // SAFETY: checked non-NULL.
        unsafe { out.write(index) };
        Ok(())
    })
}

/// The index of the RDMA device named `name_or_bus_id` (`mlx5_0`), or whose PCI
/// function is at that bus id, into `*out`. Errors: RDMATOPO_STATUS_NOT_FOUND;
/// RDMATOPO_STATUS_OUTSIDE_VIEW for another container's device in an owned view.
///
/// # Safety
/// `topo` is a live handle; `name_or_bus_id` a NUL-terminated string; `out` valid
/// for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdmatopo_topology_find_nic(
    topo: *const rdmatopo_topology,
    name_or_bus_id: *const c_char,
    out: *mut usize,
) -> rdmatopo_status {
    ffi_call("rdmatopo_topology_find_nic", || {
        // SAFETY: the caller's promise.
        let topo = unsafe { arg_ref(topo, "topo") }?;
        // SAFETY: the caller's promise.
        let key = unsafe { arg_str(name_or_bus_id, "name_or_bus_id") }?;
        let out = arg_out(out, "out")?;
        let index = topo.devices().nic_position(key)?;
        // SAFETY: checked non-NULL.
        unsafe { out.write(index) };
        Ok(())
    })
}
