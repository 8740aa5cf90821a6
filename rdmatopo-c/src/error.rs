//! Status codes, the thread-local last error message, and the panic boundary. Every
//! rdmatopo error becomes a status here and nowhere else ([`FfiError::from`]).

use std::cell::RefCell;
use std::ffi::{CString, c_char, c_int};
use std::panic::{AssertUnwindSafe, catch_unwind};

/// What a call did. 0 is success; the others fall in ranges by kind: 1xx a bad
/// argument, 2xx I/O, 3xx unparsable input, 4xx something not in the topology, 9xx a
/// bug in rdmatopo. Codes are never renumbered or reused.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum rdmatopo_status {
    /// Success.
    Ok = 0,
    /// A required pointer argument was NULL.
    NullArgument = 100,
    /// An argument is malformed: a string that is not UTF-8, a bus id that does not
    /// parse, a port number of 0.
    InvalidArgument = 101,
    /// The caller's buffer is too small; the required size was reported.
    BufferTooSmall = 102,
    /// An index is not below the matching count.
    IndexOutOfRange = 103,
    /// The root could not be read: missing, not a directory, or holding no sysfs.
    Io = 200,
    /// The text is not an rdmatopo model (`rdmatopo inventory --format json`).
    Parse = 300,
    /// No such device or port in this topology.
    NotFound = 400,
    /// The device exists but the value is not known (a software RDMA device has no
    /// PCI address; a port has no usable GID).
    NoValue = 401,
    /// A fact of a device outside the topology's view: in a container's owned view
    /// (rdmatopo_topology_discover), another container's RDMA device is only named,
    /// and a PF of its VFs is read without its GIDs.
    OutsideView = 402,
    /// An internal error (a bug in rdmatopo).
    Internal = 900,
    /// rdmatopo panicked; the call was stopped at the boundary (a bug in rdmatopo).
    Panic = 901,
}

impl rdmatopo_status {
    const ALL: [Self; 12] = [
        Self::Ok,
        Self::NullArgument,
        Self::InvalidArgument,
        Self::BufferTooSmall,
        Self::IndexOutOfRange,
        Self::Io,
        Self::Parse,
        Self::NotFound,
        Self::NoValue,
        Self::OutsideView,
        Self::Internal,
        Self::Panic,
    ];

    /// The C name of the status, NUL-terminated.
    fn c_name(self) -> &'static str {
        match self {
            Self::Ok => "RDMATOPO_STATUS_OK\0",
            Self::NullArgument => "RDMATOPO_STATUS_NULL_ARGUMENT\0",
            Self::InvalidArgument => "RDMATOPO_STATUS_INVALID_ARGUMENT\0",
            Self::BufferTooSmall => "RDMATOPO_STATUS_BUFFER_TOO_SMALL\0",
            Self::IndexOutOfRange => "RDMATOPO_STATUS_INDEX_OUT_OF_RANGE\0",
            Self::Io => "RDMATOPO_STATUS_IO\0",
            Self::Parse => "RDMATOPO_STATUS_PARSE\0",
            Self::NotFound => "RDMATOPO_STATUS_NOT_FOUND\0",
            Self::NoValue => "RDMATOPO_STATUS_NO_VALUE\0",
            Self::OutsideView => "RDMATOPO_STATUS_OUTSIDE_VIEW\0",
            Self::Internal => "RDMATOPO_STATUS_INTERNAL\0",
            Self::Panic => "RDMATOPO_STATUS_PANIC\0",
        }
    }
}

/// A failed call: its status and the message for `rdmatopo_last_error_message`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FfiError {
    pub status: rdmatopo_status,
    pub message: String,
}

impl FfiError {
    pub fn new(status: rdmatopo_status, message: impl Into<String>) -> Self {
        Self {
            status,
            message: message.into(),
        }
    }

    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(rdmatopo_status::InvalidArgument, message)
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(rdmatopo_status::NotFound, message)
    }
}

impl From<rdmatopo::Error> for FfiError {
    fn from(e: rdmatopo::Error) -> Self {
        use rdmatopo::Error as E;
        let status = match &e {
            E::Io { .. } | E::Discovery(_) => rdmatopo_status::Io,
            E::Parse(_) => rdmatopo_status::Parse,
            E::UnknownDevice { .. } => rdmatopo_status::NotFound,
            E::OutsideView { .. } => rdmatopo_status::OutsideView,
            E::Argument(_) | E::Analysis(_) => rdmatopo_status::InvalidArgument,
            _ => rdmatopo_status::Internal,
        };
        Self::new(status, e.to_string())
    }
}

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

fn set_last_error(function: &str, message: &str) {
    // A message never holds a NUL in practice (they come from Display impls); if one
    // did, cut it there rather than lose the whole message.
    let text = format!("{function}: {message}");
    let text = text.split('\0').next().unwrap_or_default().to_string();
    let c = CString::new(text).unwrap_or_default();
    LAST_ERROR.with(|cell| *cell.borrow_mut() = c);
}

/// Run the body of exported function `function`: a panic becomes
/// [`rdmatopo_status::Panic`], an error is recorded for the calling thread.
pub fn ffi_call(function: &str, body: impl FnOnce() -> Result<(), FfiError>) -> rdmatopo_status {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => rdmatopo_status::Ok,
        Ok(Err(e)) => {
            set_last_error(function, &e.message);
            e.status
        }
        Err(payload) => {
            let what = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            set_last_error(
                function,
                &format!("internal error: {what} (this is a bug in rdmatopo; please report it)"),
            );
            rdmatopo_status::Panic
        }
    }
}

/// The message of the most recent failed rdmatopo call on the calling thread, or ""
/// when none has failed. Successful calls leave it as it was. The pointer stays valid
/// until the next failed call on this thread; do not free it.
#[unsafe(no_mangle)]
pub extern "C" fn rdmatopo_last_error_message() -> *const c_char {
    // `with` only fails while the thread is being torn down.
    LAST_ERROR
        .try_with(|cell| cell.borrow().as_ptr())
        .unwrap_or(c"".as_ptr())
}

/// The name of a status code (`"RDMATOPO_STATUS_NOT_FOUND"`), or
/// `"RDMATOPO_STATUS_UNKNOWN"` for a number that is not one. The string is static.
#[unsafe(no_mangle)]
pub extern "C" fn rdmatopo_status_name(status: c_int) -> *const c_char {
    rdmatopo_status::ALL
        .iter()
        .find(|s| **s as c_int == status)
        .map_or("RDMATOPO_STATUS_UNKNOWN\0", |s| s.c_name())
        .as_ptr()
        .cast()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CStr;

    fn last() -> String {
        // SAFETY: the pointer is valid until the next failing call on this thread.
        unsafe { CStr::from_ptr(rdmatopo_last_error_message()) }
            .to_string_lossy()
            .into_owned()
    }

    #[test]
    fn a_panic_becomes_a_status_and_a_message() {
        let status = ffi_call("f", || panic!("boom"));
        assert_eq!(status, rdmatopo_status::Panic);
        assert!(last().starts_with("f: internal error: boom"), "{}", last());
    }

    #[test]
    fn success_keeps_the_previous_message() {
        let _ = ffi_call("g", || Err(FfiError::not_found("no mlx5_9")));
        assert_eq!(ffi_call("h", || Ok(())), rdmatopo_status::Ok);
        assert_eq!(last(), "g: no mlx5_9");
    }

    #[test]
    fn every_status_has_its_own_c_name() {
        // The exact names are checked against the header's enum in tests/c/test_api.c.
        let mut names = Vec::new();
        for s in rdmatopo_status::ALL {
            // SAFETY: static NUL-terminated strings.
            let name = unsafe { CStr::from_ptr(rdmatopo_status_name(s as c_int)) };
            let name = name.to_str().unwrap().to_string();
            assert!(name.starts_with("RDMATOPO_STATUS_"), "{name}");
            assert_ne!(name, "RDMATOPO_STATUS_UNKNOWN");
            names.push(name);
        }
        names.sort();
        names.dedup();
        assert_eq!(names.len(), rdmatopo_status::ALL.len());
        // SAFETY: static string.
        let unknown = unsafe { CStr::from_ptr(rdmatopo_status_name(12345)) };
        assert_eq!(unknown.to_str().unwrap(), "RDMATOPO_STATUS_UNKNOWN");
    }
}
