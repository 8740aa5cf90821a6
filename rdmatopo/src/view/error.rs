//! What the view answers when a question about the model has no answer.

/// A question about the model that it cannot answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ViewError {
    #[error(
        "no device {0:?} in this topology (use a PCI address, GPU<n>, NIC<n> or an RDMA device name)"
    )]
    UnknownDevice(String),
    #[error("{0}")]
    Invalid(String),
    /// An argument the caller gave that this machine cannot satisfy (a local rank
    /// beyond the local world size, more GPUs than the node has): a usage error, exit 2
    /// on the command line and `ArgumentError` in Python.
    #[error("{0}")]
    Argument(String),
    /// A fact this topology's view left out (see [`crate::model::DetailView`]): a device
    /// another container owns, only named, or one its answers place, read in part (a PF
    /// of its VFs, without whole GID tables; a NIC beside one of its GPUs, by name and
    /// function).
    #[error(
        "{0} is outside this topology's view: this container does not own it (another container's RDMA device is only named; one its answers place, a PF of its VFs or a NIC beside one of its GPUs, is read in part); discover the whole machine (view \"all\", CLI --all) to read it in full"
    )]
    OutsideView(String),
}

/// The public kind of each (`rdmatopo::Error`).
#[doc(hidden)]
impl From<ViewError> for crate::error::Error {
    fn from(e: ViewError) -> Self {
        use crate::error::Error;
        let message = e.to_string();
        match e {
            ViewError::UnknownDevice(name) => Error::UnknownDevice { name, message },
            ViewError::OutsideView(name) => Error::OutsideView { name, message },
            ViewError::Argument(m) => Error::Argument(m),
            _ => Error::Analysis(message),
        }
    }
}
