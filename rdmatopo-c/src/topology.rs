//! The opaque topology handle: discovery, JSON in and out, and freeing.

use crate::args::{OutBuf, arg_out, arg_ref, arg_str};
use crate::error::{FfiError, ffi_call, rdmatopo_status};
use rdmatopo::GpuNames;
use rdmatopo::Topology;
use std::ffi::{CStr, CString, OsStr, c_char, c_int};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// A discovered (or loaded) topology. Immutable: any number of threads may read one
/// handle at once. Free it with `rdmatopo_topology_free`.
#[derive(Debug)]
pub struct rdmatopo_topology {
    pub(crate) topo: Topology,
    pub(crate) gpus: Vec<GpuStrings>,
    pub(crate) nics: Vec<NicStrings>,
}

// C threads share one handle: it must stay Send + Sync (no interior mutability).
const _: fn() = || {
    fn shareable<T: Send + Sync>() {}
    shareable::<rdmatopo_topology>();
};

/// NUL-terminated copies of a GPU's strings, handed out as `const char *`.
#[derive(Debug)]
pub(crate) struct GpuStrings {
    pub pci: CString,
    pub nvml_bus_id: CString,
    pub uuid: Option<CString>,
    pub name: Option<CString>,
    /// Its name in this view and the index in it (`rdmatopo::GpuNames`).
    pub view_name: CString,
    pub view_index: Option<u32>,
}

/// NUL-terminated copies of an RDMA device's strings.
#[derive(Debug)]
pub(crate) struct NicStrings {
    pub name: CString,
    pub pci: Option<CString>,
    /// Per port, in the model's order: its netdev.
    pub port_netdevs: Vec<Option<CString>>,
}

fn c_string(field: &str, value: &str) -> Result<CString, FfiError> {
    CString::new(value).map_err(|_| {
        FfiError::new(
            rdmatopo_status::Parse,
            format!("{field} {value:?} contains a NUL byte"),
        )
    })
}

fn c_string_opt(field: &str, value: Option<&str>) -> Result<Option<CString>, FfiError> {
    value.map(|v| c_string(field, v)).transpose()
}

impl rdmatopo_topology {
    /// Wrap a model, copying the strings C will borrow.
    pub fn new(topo: Topology) -> Result<Self, FfiError> {
        let names = GpuNames::of(&topo);
        let gpus = topo
            .gpus
            .iter()
            .map(|g| {
                Ok(GpuStrings {
                    pci: c_string("GPU PCI address", &g.pci.to_string())?,
                    nvml_bus_id: c_string("GPU bus id", &g.pci.nvml())?,
                    uuid: c_string_opt("GPU UUID", g.uuid.as_deref())?,
                    name: c_string_opt("GPU name", g.name.as_deref())?,
                    view_name: c_string("GPU view name", &names.name(g))?,
                    view_index: names.index(g),
                })
            })
            .collect::<Result<_, FfiError>>()?;
        let nics = topo
            .rdma_devices
            .iter()
            .map(|d| {
                Ok(NicStrings {
                    name: c_string("RDMA device name", &d.name)?,
                    pci: c_string_opt(
                        "RDMA device PCI address",
                        d.pci.map(|a| a.to_string()).as_deref(),
                    )?,
                    port_netdevs: d
                        .ports
                        .iter()
                        .map(|p| c_string_opt("port netdev", p.netdev.as_deref()))
                        .collect::<Result<_, FfiError>>()?,
                })
            })
            .collect::<Result<_, FfiError>>()?;
        Ok(Self { topo, gpus, nics })
    }

    /// The model.
    pub fn topology(&self) -> &Topology {
        &self.topo
    }

    /// The JSON that `rdmatopo inventory --format json` prints, final newline included:
    /// the model's fields with the container view beside them (as `cli/inventory.rs`
    /// composes it; `make -C rdmatopo-c json-check` compares the two on every fixture).
    pub fn json(&self) -> Result<String, FfiError> {
        Ok(self.topo.inventory_json())
    }
}

/// Which devices a topology holds in full.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum rdmatopo_view {
    /// Every device (a host, or RDMATOPO_VIEW_ALL asked for, or a container whose
    /// devices could not be told apart).
    All = 0,
    /// A container's own devices, and in part the PFs of its VFs (their GIDs answer
    /// RDMATOPO_STATUS_OUTSIDE_VIEW); other containers' RDMA devices are only named:
    /// looking one up answers RDMATOPO_STATUS_OUTSIDE_VIEW.
    Owned = 1,
}

/// Read the topology of `root`: a directory holding `sys/`, `proc/` and `dev/` (a
/// captured tree, like `rdmatopo inventory --root`), or NULL (or "/") for this machine.
/// NVML and libibverbs facts come from the snapshot files in a captured tree and from
/// the live libraries otherwise. Inside a container whose devices are certain, only
/// those are read in full, as the CLI does (RDMATOPO_VIEW_OWNED; see
/// rdmatopo_topology_discover_view and rdmatopo_topology_view).
///
/// On success `*out` receives a new handle; free it with rdmatopo_topology_free.
/// Errors: RDMATOPO_STATUS_NULL_ARGUMENT (`out`), RDMATOPO_STATUS_IO (no such
/// directory, or no sysfs in it).
///
/// # Safety
/// `root` is NULL or a NUL-terminated string; `out` is valid for a pointer write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdmatopo_topology_discover(
    root: *const c_char,
    out: *mut *mut rdmatopo_topology,
) -> rdmatopo_status {
    // SAFETY: the caller's promise, passed on.
    unsafe {
        discover_view(
            "rdmatopo_topology_discover",
            root,
            rdmatopo_view::Owned,
            out,
        )
    }
}

/// rdmatopo_topology_discover with the view asked for: RDMATOPO_VIEW_ALL reads every
/// device in full even inside a container. Errors: as rdmatopo_topology_discover, and
/// RDMATOPO_STATUS_INVALID_ARGUMENT for a `view` that is no rdmatopo_view.
///
/// # Safety
/// As rdmatopo_topology_discover.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdmatopo_topology_discover_view(
    root: *const c_char,
    view: c_int,
    out: *mut *mut rdmatopo_topology,
) -> rdmatopo_status {
    let name = "rdmatopo_topology_discover_view";
    let view = match view {
        0 => rdmatopo_view::All,
        1 => rdmatopo_view::Owned,
        other => {
            return ffi_call(name, || {
                Err(FfiError::invalid(format!(
                    "view {other} is no rdmatopo_view"
                )))
            });
        }
    };
    // SAFETY: the caller's promise, passed on.
    unsafe { discover_view(name, root, view, out) }
}

/// The view `topo` holds (RDMATOPO_VIEW_ALL for a NULL handle).
///
/// # Safety
/// `topo` is NULL or a live handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdmatopo_topology_view(topo: *const rdmatopo_topology) -> rdmatopo_view {
    // SAFETY: NULL or live, as the caller promises.
    match unsafe { topo.as_ref() } {
        Some(t) if t.topo.view.is_some() => rdmatopo_view::Owned,
        _ => rdmatopo_view::All,
    }
}

/// # Safety
/// `root` is NULL or a NUL-terminated string; `out` is valid for a pointer write.
unsafe fn discover_view(
    function: &str,
    root: *const c_char,
    view: rdmatopo_view,
    out: *mut *mut rdmatopo_topology,
) -> rdmatopo_status {
    ffi_call(function, || {
        let out = arg_out(out, "out")?;
        // A path is bytes on Linux: no UTF-8 requirement.
        let root = (!root.is_null())
            // SAFETY: non-NULL and NUL-terminated, as the caller promises.
            .then(|| {
                Path::new(OsStr::from_bytes(
                    unsafe { CStr::from_ptr(root) }.to_bytes(),
                ))
            });
        let view = match view {
            rdmatopo_view::All => rdmatopo::View::All,
            rdmatopo_view::Owned => rdmatopo::View::Owned,
        };
        let discovery = match root {
            Some(root) => rdmatopo::Discovery::root(root),
            None => rdmatopo::Discovery::live(),
        };
        let topo = discovery.view(view).run()?;
        let handle = Box::new(rdmatopo_topology::new(topo)?);
        // SAFETY: checked non-NULL; writable as the caller promises.
        unsafe { out.write(Box::into_raw(handle)) };
        Ok(())
    })
}

/// Load a topology from its JSON (what `rdmatopo inventory --format json` or
/// rdmatopo_topology_to_json wrote), for example one captured on another machine.
///
/// On success `*out` receives a new handle; free it with rdmatopo_topology_free.
/// Errors: RDMATOPO_STATUS_NULL_ARGUMENT, RDMATOPO_STATUS_INVALID_ARGUMENT (not
/// UTF-8), RDMATOPO_STATUS_PARSE (not a model).
///
/// # Safety
/// `json` is a NUL-terminated string; `out` is valid for a pointer write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdmatopo_topology_from_json(
    json: *const c_char,
    out: *mut *mut rdmatopo_topology,
) -> rdmatopo_status {
    ffi_call("rdmatopo_topology_from_json", || {
        let out = arg_out(out, "out")?;
        // SAFETY: the caller's promise.
        let text = unsafe { arg_str(json, "json") }?;
        let topo = Topology::from_json(text)?;
        let handle = Box::new(rdmatopo_topology::new(topo)?);
        // SAFETY: checked non-NULL; writable as the caller promises.
        unsafe { out.write(Box::into_raw(handle)) };
        Ok(())
    })
}

/// Write the topology's JSON, the same text `rdmatopo inventory --format json` prints,
/// NUL-terminated, into `buf` of `buf_len` bytes.
///
/// `*required` (may be NULL) receives the size needed, NUL included, both on success
/// and with RDMATOPO_STATUS_BUFFER_TOO_SMALL (then `buf` is left untouched). Pass
/// `buf` NULL and `buf_len` 0 to learn the size.
///
/// # Safety
/// `topo` is a live handle; `buf` is NULL or valid for `buf_len` bytes; `required` is
/// NULL or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdmatopo_topology_to_json(
    topo: *const rdmatopo_topology,
    buf: *mut c_char,
    buf_len: usize,
    required: *mut usize,
) -> rdmatopo_status {
    ffi_call("rdmatopo_topology_to_json", || {
        // SAFETY: the caller's promise.
        let topo = unsafe { arg_ref(topo, "topo") }?;
        let out = OutBuf::new(buf, buf_len, required)?;
        let json = topo.json()?;
        // SAFETY: the caller's promise about `buf` and `required`.
        unsafe { out.put(&json) }
    })
}

/// Free a topology and every string it handed out. NULL is ignored.
///
/// # Safety
/// `topo` is NULL or a handle from this library that has not been freed; no other
/// thread may be using it.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdmatopo_topology_free(topo: *mut rdmatopo_topology) {
    let _ = ffi_call("rdmatopo_topology_free", || {
        if !topo.is_null() {
            // SAFETY: a pointer from Box::into_raw in this module, freed once.
            drop(unsafe { Box::from_raw(topo) });
        }
        Ok(())
    });
}
