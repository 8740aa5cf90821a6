//! The one public error: the kinds a caller acts on. The layers' own errors become one
//! of these where they cross into the public API (each layer says how, beside its
//! error).

/// Any failure of this library, sorted into the kinds a caller acts on. The same kinds
/// are the Python exceptions (`rdmatopo.UnknownDeviceError`, …) and the C status codes
/// (`RDMATOPO_NOT_FOUND`, …).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A file could not be read: the root, a snapshot archive, or a sysfs file
    /// discovery cannot do without (`/sys/class/infiniband`, …).
    #[error("{path}: {reason}")]
    Io {
        /// The path, as given or as read under the root (`/sys/...`).
        path: String,
        /// What the operating system said, as [`std::io::ErrorKind`].
        kind: std::io::ErrorKind,
        /// The OS error number, where one was given.
        os_code: Option<i32>,
        /// The reason, without the path (`not found`, `permission denied`, …).
        reason: String,
    },
    /// The root is no machine this library can read: no `sys/devices` or `sys/class`
    /// under it, an archive that is not a snapshot or is refused (too large, an entry
    /// outside the tree), a symlink loop.
    #[error("{0}")]
    Discovery(String),
    /// A text that does not parse: model JSON (`Topology::from_json`), a PCI address, a
    /// CPU list.
    #[error("{0}")]
    Parse(String),
    /// No device of this topology has the name given (`GPU<n>`, `NIC<n>`, an RDMA
    /// device, a netdev, a UUID or a PCI address).
    #[error("{message}")]
    UnknownDevice {
        /// The name asked for.
        name: String,
        /// What to say.
        message: String,
    },
    /// The device is outside this topology's view: another container's, named but not
    /// read (see `View::Owned`); discover with `View::All` to read it in full.
    #[error("{message}")]
    OutsideView {
        /// The device asked for.
        name: String,
        /// What to say.
        message: String,
    },
    /// An argument this machine cannot satisfy: a local rank not below the local world
    /// size, more GPUs than the node has, a malformed launcher variable.
    #[error("{0}")]
    Argument(String),
    /// A question the topology cannot answer (a device without a PCI function, an
    /// object without the devices it needs).
    #[error("{0}")]
    Analysis(String),
}
