//! The Python exception hierarchy and the one place where Rust errors become Python
//! exceptions.
//!
//! Everything rdmatopo raises on purpose derives from `RdmaTopoError`, except failed
//! file operations, which are the builtin `OSError` subclasses Python code already
//! catches (`FileNotFoundError`, `PermissionError`) with `filename` set to the path.

use pyo3::exceptions::{PyException, PyFileNotFoundError, PyOSError, PyPermissionError};
use pyo3::{PyErr, create_exception};

create_exception!(
    rdmatopo,
    RdmaTopoError,
    PyException,
    "Base class of every error rdmatopo raises (file errors are builtin OSError subclasses)."
);
create_exception!(
    rdmatopo,
    DiscoveryError,
    RdmaTopoError,
    "The root holds no sysfs tree, or is a snapshot that cannot be read (corrupt, truncated, unsafe or too large), so no topology could be built."
);
create_exception!(
    rdmatopo,
    ParseError,
    RdmaTopoError,
    "Text that is not what it should be: model JSON, a PCI address, a cpulist."
);
create_exception!(
    rdmatopo,
    AnalysisError,
    RdmaTopoError,
    "The topology cannot answer the question (no GPU for this rank), or the environment contradicts it (LOCAL_RANK not a number, CUDA_VISIBLE_DEVICES naming unknown UUIDs)."
);
create_exception!(
    rdmatopo,
    UnknownDeviceError,
    AnalysisError,
    "A device named in a call (PCI address, GPU<n>, NIC<n>, RDMA or netdev name) is not in the topology."
);
create_exception!(
    rdmatopo,
    OutsideViewError,
    AnalysisError,
    "A fact of a device outside the topology's view: in a container's owned view (discover(view=\"owned\")), another container's RDMA device is only named (Topology.other_nics), and a device its answers place without owning it (a PF of its VFs, a NIC beside one of its GPUs) is read in part (Nic.partial): it answers only its name, PCI address and uverbs node."
);
create_exception!(
    rdmatopo,
    ArgumentError,
    RdmaTopoError,
    "An argument is out of range (a negative rank, a rank not below the world size)."
);

/// A failure of the library, on its way to Python.
#[derive(Debug)]
pub(crate) enum Error {
    Core(rdmatopo::Error),
    Argument(String),
}

impl Error {
    pub(crate) fn argument(message: impl Into<String>) -> Self {
        Self::Argument(message.into())
    }
}

impl From<rdmatopo::Error> for Error {
    fn from(e: rdmatopo::Error) -> Self {
        Self::Core(e)
    }
}

impl From<Error> for PyErr {
    fn from(e: Error) -> PyErr {
        match e {
            Error::Argument(message) => ArgumentError::new_err(message),
            Error::Core(e) => core_error(e),
        }
    }
}

/// Each kind of the library's error is one exception class.
fn core_error(e: rdmatopo::Error) -> PyErr {
    use rdmatopo::Error as E;
    let message = e.to_string();
    match e {
        E::Io {
            path,
            kind,
            os_code,
            reason,
        } => os_error(kind, os_code, &reason, &path),
        E::Discovery(_) => DiscoveryError::new_err(message),
        E::Parse(_) => ParseError::new_err(message),
        E::UnknownDevice { .. } => UnknownDeviceError::new_err(message),
        E::OutsideView { .. } => OutsideViewError::new_err(message),
        E::Argument(_) => ArgumentError::new_err(message),
        E::Analysis(_) => AnalysisError::new_err(message),
        _ => RdmaTopoError::new_err(message),
    }
}

/// `OSError(errno, strerror, filename)`, so `e.errno` and `e.filename` are set, as for
/// the builtin file functions.
fn os_error(kind: std::io::ErrorKind, errno: Option<i32>, message: &str, path: &str) -> PyErr {
    use std::io::ErrorKind;
    let args = |default_errno: i32| {
        (
            errno.unwrap_or(default_errno),
            message.to_string(),
            path.to_string(),
        )
    };
    match kind {
        ErrorKind::NotFound => PyFileNotFoundError::new_err(args(libc::ENOENT)),
        ErrorKind::PermissionDenied => PyPermissionError::new_err(args(libc::EACCES)),
        _ => PyOSError::new_err(args(libc::EIO)),
    }
}
