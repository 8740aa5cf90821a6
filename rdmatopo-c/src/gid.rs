//! The RoCE GID index of a port, as NCCL's automatic choice would be from this
//! network namespace (`rdmatopo::Topology::choose_gid`).

use crate::args::{arg_out, arg_ref, arg_str};
use crate::error::{FfiError, ffi_call, rdmatopo_status};
use crate::topology::rdmatopo_topology;
use std::ffi::c_char;

impl rdmatopo_topology {
    /// The GID index for `device` port `port`, or why there is none.
    pub(crate) fn gid_index(&self, device: &str, port: u32) -> Result<u32, FfiError> {
        let topo = &self.topo;
        // Unknown, only named, or held in part: the facade says which.
        let dev = self.devices().rdma_in_full(device)?;
        let p = dev
            .ports
            .iter()
            .find(|p| p.number == port)
            .ok_or_else(|| FfiError::not_found(format!("{device} has no port {port}")))?;
        if let Some(choice) = topo.choose_gid(device, port) {
            return Ok(choice.index);
        }
        let why = if !p.is_roce() {
            "it is an InfiniBand port: NCCL uses GID index 0 there and ignores NCCL_IB_GID_INDEX"
                .to_string()
        } else if p.gids.is_empty() {
            "its GID table holds no valid entry".to_string()
        } else {
            let each: Vec<String> = p
                .gids
                .iter()
                .filter_map(|g| {
                    topo.gid_unusable_reason(g)
                        .map(|r| format!("{}: {r}", g.index))
                })
                .collect();
            format!("no GID is usable from here ({})", each.join("; "))
        };
        Err(FfiError::new(
            rdmatopo_status::NoValue,
            format!("{device} port {port} has no RoCE GID to choose: {why}"),
        ))
    }
}

/// The GID index NCCL should use on RoCE port `port` (counted from 1) of RDMA device
/// `device`, among the GIDs usable from this network namespace: RoCE v2 before v1,
/// IPv4-mapped before IPv6, never all-zero or link-local, only addresses of interfaces
/// visible here. Inside a pod this differs from the host's index.
///
/// Errors: RDMATOPO_STATUS_INVALID_ARGUMENT (port 0), RDMATOPO_STATUS_NOT_FOUND (no
/// such device or port), RDMATOPO_STATUS_NO_VALUE (an InfiniBand port, where NCCL
/// ignores GID indices, or a RoCE port with no usable GID; the message says which),
/// RDMATOPO_STATUS_OUTSIDE_VIEW (another container's device, in an owned view).
///
/// # Safety
/// `topo` is a live handle; `device` a NUL-terminated string; `out` valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdmatopo_gid_index(
    topo: *const rdmatopo_topology,
    device: *const c_char,
    port: u32,
    out: *mut u32,
) -> rdmatopo_status {
    ffi_call("rdmatopo_gid_index", || {
        // SAFETY: the caller's promise.
        let topo = unsafe { arg_ref(topo, "topo") }?;
        // SAFETY: the caller's promise.
        let device = unsafe { arg_str(device, "device") }?;
        let out = arg_out(out, "out")?;
        if port == 0 {
            return Err(FfiError::invalid("port numbers start at 1"));
        }
        let index = topo.gid_index(device, port)?;
        // SAFETY: checked non-NULL.
        unsafe { out.write(index) };
        Ok(())
    })
}
