//! # rdmatopo
//!
//! GPU, RDMA NIC, PCIe and NUMA topology from Linux sysfs, in one model: the
//! nvidia-smi affinity classes exactly as NVIDIA computes them, per-rank NCCL settings
//! and CPU binding, container diagnostics, NCCL topology files and Kubernetes
//! configuration.
//!
//! Every read goes through one root directory (`/` live, or a captured tree such as an
//! untarred `hwloc-gather-topology` or `rdmatopo snapshot`):
//!
//! ```no_run
//! let topo = rdmatopo::discover(Some(std::path::Path::new("fixtures/h100-dgx/root")))?;
//! let matrix = rdmatopo::view::TopoMatrix::for_topology(&topo);
//! println!("{:?}", matrix.get("GPU0", "NIC0"));
//! # Ok::<(), rdmatopo::Error>(())
//! ```
//!
//! Layers, each importing only those below it (ARCHITECTURE.md): [`sysfs`] is the only
//! code that reads the filesystem; [`parse`] turns text into values; [`model`] is the
//! plain data; [`sources`] brings NVML and libibverbs facts, live or replayed;
//! [`snapshot`] reads and writes captured roots; [`discover`](mod@discover) builds the
//! [`Topology`]; [`view`] holds the facts every answer builds on (path classes, the
//! devices judged, the rank plan, GID choice) and the facade the front ends call;
//! [`checks`] judges a view (doctor, the sources cross-check, diff, cluster);
//! [`export`] writes other tools' formats (the nvidia-smi table, NCCL XML, Kubernetes).

pub mod checks;
pub mod discover;
pub mod export;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
pub mod model;
pub mod parse;
pub mod schemas;
pub mod snapshot;
pub mod sources;
pub mod sysfs;
pub mod view;

pub use discover::{
    CrossCheck, DeviceFacts, DiscoverError, Discoverer, Focus, GidFacts, HostFacts, Narrowing,
    Needs, NetdevFacts, OtherNames, PciFacts,
};
pub use model::Topology;
pub use sysfs::Sysfs;

use std::path::Path;

/// The version of this library.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Any rdmatopo failure.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    #[error(transparent)]
    Discover(#[from] DiscoverError),
    #[error(transparent)]
    View(#[from] view::ViewError),
    #[error("invalid model JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error(transparent)]
    Snapshot(#[from] snapshot::SnapshotError),
}

/// Open a root: `None` or `/` is the live system, a directory is a captured tree, and
/// a `.tar`, `.tar.gz` or `.tgz` file is a snapshot read into memory
/// ([`snapshot::load`]).
pub fn open_root(root: Option<&Path>) -> Result<Sysfs, Error> {
    match root {
        None => Ok(Sysfs::live()),
        Some(p) if p == Path::new("/") => Ok(Sysfs::live()),
        Some(p) if !p.is_dir() && snapshot::is_archive(p) => {
            Ok(Sysfs::memory(snapshot::load(p)?, p.display().to_string()))
        }
        Some(p) => {
            if !p.is_dir() {
                // Not found either way (what a caller catches), said as it is.
                let what = if p.exists() {
                    "not a directory, nor a .tar, .tar.gz or .tgz snapshot"
                } else {
                    "no such directory"
                };
                return Err(Error::Io {
                    path: p.display().to_string(),
                    source: std::io::Error::new(std::io::ErrorKind::NotFound, what),
                });
            }
            Ok(Sysfs::at(p))
        }
    }
}

/// Discover `root` (`None` = `/`) with the NVML and verbs sources that suit it.
///
/// # Errors
/// When the root is missing or holds no sysfs.
pub fn discover(root: Option<&Path>) -> Result<Topology, Error> {
    let fs = open_root(root)?;
    discover_fs(&fs)
}

/// Discover `root` (`None`: this machine) with the default sources, inside a container
/// narrowed to `view` (see [`discover_view`]).
///
/// # Errors
/// As [`discover()`].
pub fn discover_in(root: Option<&Path>, view: View) -> Result<Topology, Error> {
    discover_view(&open_root(root)?, Needs::ALL, view)
}

/// Discover an opened root with the default sources.
///
/// # Errors
/// When the root holds no sysfs.
pub fn discover_fs(fs: &Sysfs) -> Result<Topology, Error> {
    discover_needs(fs, Needs::ALL)
}

/// Discover an opened root with the default sources, reading only what `needs` asks for.
///
/// # Errors
/// When the root holds no sysfs.
pub fn discover_needs(fs: &Sysfs, needs: Needs) -> Result<Topology, Error> {
    discover_view(fs, needs, View::All)
}

/// Which devices a model read inside a container holds in full.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum View {
    /// The devices this container owns, when that is certain: every other device is an
    /// partial read (`Topology::view` says which are whole). On a host, or where ownership is
    /// uncertain, every device.
    #[default]
    Owned,
    /// Every device visible, read in full (a host's read, `--all`).
    All,
}

/// Discover an opened root for `scope`, inside a container narrowed to `view`: the
/// view is decided first from cheap evidence (device nodes, `PCIDEVICE_*`, this
/// namespace's netdevs, the driver's GPU list), then only its devices are read in full.
/// A container is read for what the answer needs there ([`Needs::in_container`]:
/// `topo`'s ownership header needs the netdevs).
///
/// # Errors
/// When the root holds no sysfs.
pub fn discover_view(fs: &Sysfs, needs: Needs, view: View) -> Result<Topology, Error> {
    let sources = sources::default_sources(fs);
    let mut d = Discoverer::new(fs)
        .needs(needs)
        .cross_check(checks::sources_check::check_sources);
    if view == View::Owned {
        d = d.narrow(discover::Narrowing {
            in_container: |topo| view::Context::of(topo).is_container(),
            focus: owned_focus,
        });
    }
    for s in &sources {
        d = d.source(s.as_ref());
    }
    Ok(d.discover()?)
}

/// The devices a container certainly owns, from a partial read of the machine.
fn owned_focus(topo: &Topology) -> Option<discover::Focus> {
    let owned = view::container::ContainerView::of(topo);
    // The devices only named are another container's only if `/dev` was listed: it
    // holds no uverbs node of theirs (each node present was traced to a candidate).
    // A container that owns none is read whole: why none opens (no node, no ib_uverbs)
    // is told by the other devices' verbs devices.
    let others_told = topo.other_rdma_device_count() == 0
        || (topo.process.dev_listed && !owned.owned_rdma().is_empty());
    (owned.context.is_container() && owned.certain && others_told).then(|| discover::Focus {
        rdma_devices: owned.owned_rdma().into_iter().collect(),
        functions: owned.owned_gpus().into_iter().collect(),
        reason: format!(
            "{}: the devices it owns are certain",
            owned.context.describe()
        ),
    })
}

/// The inventory document (`rdmatopo.inventory/2`): the model's fields plus the
/// `container` view beside them, as `rdmatopo inventory --format json` prints it and as
/// the Python and C bindings return it. [`Topology::from_json`] reads it back (the
/// view is derived, so it is ignored on input).
pub fn inventory_json(topo: &Topology) -> String {
    let mut value = serde_json::to_value(topo).unwrap_or_default();
    if let Some(obj) = value.as_object_mut()
        && let Ok(container) = serde_json::to_value(view::container::ContainerView::of(topo))
    {
        obj.insert("container".into(), container);
    }
    let mut text = serde_json::to_string_pretty(&value).unwrap_or_default();
    text.push('\n');
    text
}
