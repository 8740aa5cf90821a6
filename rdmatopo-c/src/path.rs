//! nvidia-smi path classes between devices, and the RDMA devices nearest a GPU.

use crate::args::{arg_bus_id, arg_out, arg_out_opt, arg_ref};
use crate::error::{FfiError, ffi_call, rdmatopo_status};
use crate::topology::rdmatopo_topology;
use rdmatopo::PathClass;
use std::ffi::c_char;

/// nvidia-smi `topo -m` classes, nearest first: a smaller value is a closer path.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum rdmatopo_path_class {
    /// The same device.
    X = 0,
    /// GPU to GPU over a bonded set of NVLinks (the count is in `nvlinks`).
    Nv = 1,
    /// At most one PCIe bridge.
    Pix = 2,
    /// Several PCIe bridges, without the host bridge.
    Pxb = 3,
    /// Through a PCIe host bridge (typically the CPU).
    Phb = 4,
    /// Across host bridges within a NUMA node.
    Node = 5,
    /// Across NUMA nodes (QPI/UPI, Infinity Fabric).
    Sys = 6,
}

/// A path between two devices.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct rdmatopo_path {
    pub path_class: rdmatopo_path_class,
    /// Number of NVLinks for RDMATOPO_PATH_CLASS_NV, else 0.
    pub nvlinks: u32,
    /// The class as `nvidia-smi topo -m` prints it (`PIX`, `NV18`), NUL-terminated.
    pub name: [c_char; 16],
}

impl From<PathClass> for rdmatopo_path {
    fn from(class: PathClass) -> Self {
        let (path_class, nvlinks) = match class {
            PathClass::X => (rdmatopo_path_class::X, 0),
            PathClass::Nv(n) => (rdmatopo_path_class::Nv, n),
            PathClass::Pix => (rdmatopo_path_class::Pix, 0),
            PathClass::Pxb => (rdmatopo_path_class::Pxb, 0),
            PathClass::Phb => (rdmatopo_path_class::Phb, 0),
            PathClass::Node => (rdmatopo_path_class::Node, 0),
            PathClass::Sys => (rdmatopo_path_class::Sys, 0),
        };
        // The longest is "NV4294967295" (12 bytes), so the NUL always fits.
        let mut name = [0 as c_char; 16];
        for (dst, src) in name.iter_mut().zip(class.to_string().bytes().take(15)) {
            *dst = src as c_char;
        }
        Self {
            path_class,
            nvlinks,
            name,
        }
    }
}

/// The path class between the devices at `bus_id_a` and `bus_id_b` (any PCI
/// functions; sysfs `0000:3b:00.0` or NVML `00000000:3B:00.0` form), as
/// `nvidia-smi topo -m` would print it, into `*out`.
/// Errors: RDMATOPO_STATUS_INVALID_ARGUMENT (not a bus id), RDMATOPO_STATUS_NOT_FOUND
/// (no PCI function there).
///
/// # Safety
/// `topo` is a live handle; the bus ids NUL-terminated strings; `out` valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdmatopo_path_type(
    topo: *const rdmatopo_topology,
    bus_id_a: *const c_char,
    bus_id_b: *const c_char,
    out: *mut rdmatopo_path,
) -> rdmatopo_status {
    ffi_call("rdmatopo_path_type", || {
        // SAFETY: the caller's promise.
        let topo = unsafe { arg_ref(topo, "topo") }?;
        // SAFETY: the caller's promise.
        let a = unsafe { arg_bus_id(bus_id_a, "bus_id_a") }?;
        // SAFETY: the caller's promise.
        let b = unsafe { arg_bus_id(bus_id_b, "bus_id_b") }?;
        let out = arg_out(out, "out")?;
        let class = topo.devices().class_between(a, b)?;
        // SAFETY: checked non-NULL.
        unsafe { out.write(class.into()) };
        Ok(())
    })
}

/// The RDMA devices nearest the GPU at `gpu_bus_id` by PCIe path class (PIX before
/// PXB before PHB, NODE, SYS), all those that tie, as NIC indices in NIC order. Port
/// state is not considered here (see rdmatopo_topology_nic_port); the rank plan is
/// NCCL's full choice.
///
/// `nic_indices` has room for `capacity` entries (it may be NULL when `capacity` is
/// 0). On success `*count` receives the number written and `*path` (may be NULL) the
/// class they share. With RDMATOPO_STATUS_BUFFER_TOO_SMALL only `*count` is written:
/// the capacity needed. Errors: RDMATOPO_STATUS_INVALID_ARGUMENT (not a bus id),
/// RDMATOPO_STATUS_NOT_FOUND (no GPU there, or no PCI RDMA device at all).
///
/// # Safety
/// `topo` is a live handle; `gpu_bus_id` a NUL-terminated string; `nic_indices` NULL
/// or valid for `capacity` writes; `count` valid for a write; `path` NULL or valid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdmatopo_nearest_nics(
    topo: *const rdmatopo_topology,
    gpu_bus_id: *const c_char,
    nic_indices: *mut usize,
    capacity: usize,
    count: *mut usize,
    path: *mut rdmatopo_path,
) -> rdmatopo_status {
    ffi_call("rdmatopo_nearest_nics", || {
        // SAFETY: the caller's promise.
        let topo = unsafe { arg_ref(topo, "topo") }?;
        // SAFETY: the caller's promise.
        let gpu = unsafe { arg_bus_id(gpu_bus_id, "gpu_bus_id") }?;
        if nic_indices.is_null() && capacity > 0 {
            arg_out(nic_indices, "nic_indices")?;
        }
        let count = arg_out(count, "count")?;
        let path = arg_out_opt(path);
        let (nearest, class) = topo.devices().nearest_nics(gpu)?;
        if nearest.len() > capacity {
            // SAFETY: checked non-NULL.
            unsafe { count.write(nearest.len()) };
            return Err(FfiError::new(
                rdmatopo_status::BufferTooSmall,
                format!("room for {capacity} indices; {} are needed", nearest.len()),
            ));
        }
        // SAFETY: `nic_indices` holds `capacity` >= nearest.len() entries (non-NULL
        // whenever nearest is non-empty, since capacity > 0 then).
        unsafe {
            std::ptr::copy_nonoverlapping(nearest.as_ptr(), nic_indices, nearest.len());
            count.write(nearest.len());
            if let Some(p) = path {
                p.write(class.into());
            }
        }
        Ok(())
    })
}
