//! # rdmatopo
//!
//! GPU, RDMA NIC, PCIe and NUMA topology from Linux sysfs, in one model: the
//! nvidia-smi path classes exactly as NVIDIA computes them, per-rank NCCL settings and
//! CPU binding, container diagnostics, NCCL topology files and Kubernetes
//! configuration.
//!
//! ## Start here
//!
//! [`Discovery`] reads one root (`/` live, a captured directory, or a `.tar.gz`
//! snapshot) into a [`Topology`]; every answer is a method of the topology, or of
//! [`Devices`], its devices as the command line names them:
//!
//! ```
//! use rdmatopo::{Discovery, PathClass};
//!
//! // A captured DGX H100 (the bundled fixture); `Discovery::live()` reads this machine.
//! let topo = Discovery::root("../fixtures/h100-dgx/root.tar.gz").run()?;
//! let devices = topo.devices();
//! let gpu0 = devices.pci_of("GPU0")?;
//! let (nics, class) = devices.nearest_nics(gpu0)?;
//! assert_eq!(class, PathClass::Pxb); // two PCIe switch bridges between them
//! println!("GPU0 -> {} ({class})", topo.rdma_devices[nics[0]].name);
//! # Ok::<(), rdmatopo::Error>(())
//! ```
//!
//! A launcher's question, the plan of one local rank (what `rdmatopo exec` applies):
//!
//! ```
//! use rdmatopo::{Discovery, RankChoice, RankRequest, View, WhenNoRank};
//!
//! let topo = Discovery::root("../fixtures/h100-dgx/root.tar.gz").view(View::All).run()?;
//! let request = RankRequest {
//!     local_rank: Some(3),
//!     local_world_size: Some(8),
//!     ..RankRequest::default() // the environment discovery captured
//! };
//! let outcome = topo.devices().rank_plan(request, WhenNoRank::PlanTheNode)?;
//! let RankChoice::Planned(rank) = outcome.choice else { panic!("rank 3 has a GPU") };
//! assert_eq!(rank.gpu.to_string(), "0000:61:00.0");
//! assert_eq!(rank.hcas, ["mlx5_5:1"]);
//! println!("taskset -c {} ... with {:?}", rank.cpus, outcome.plan.env);
//! # Ok::<(), rdmatopo::Error>(())
//! ```
//!
//! What a tool asks, and where to find it:
//!
//! | Question | Answer |
//! |---|---|
//! | The devices: GPUs, RDMA NICs and ports, netdevs, NUMA nodes, PCI functions | the fields of [`Topology`] |
//! | A device by any of its names (`GPU0`, `mlx5_0`, a PCI address, a UUID) | [`Devices::pci_of`] |
//! | The nvidia-smi class between two devices, the nearest NICs of a GPU | [`Devices::class_between`], [`Devices::nearest_nics`], [`PathClass`] |
//! | The `nvidia-smi topo -m` matrix | [`Topology::matrix`], [`TopoMatrix`] |
//! | Per-rank NCCL settings and CPU binding | [`Devices::rank_plan`], [`Plan`], [`RankPlan`] |
//! | The RoCE GID NCCL would choose | [`Topology::choose_gid`], [`GidChoice`] |
//! | What is wrong with this machine or container | [`Topology::doctor`], [`DoctorReport`] |
//! | NCCL's topology XML (`NCCL_TOPO_FILE`) | [`Topology::nccl_topo_xml`] |
//! | Kubernetes objects (DRA ResourceSlices, device-plugin configs) | [`Topology::k8s`], [`K8sObject`] |
//! | The kubelet audit (what a node's pods were given against its topology) | `audit` (feature `kubelet`) |
//! | The JSON documents and their schemas | [`Topology::to_json`], [`Topology::inventory_json`], [`json_schema`] |
//!
//! Every value says in its documentation which sysfs file or computation it comes
//! from. The model is plain owned data whose JSON (`rdmatopo.inventory/2`) is the
//! contract shared with the command line, Python and C.
//!
//! ## Stability
//!
//! This crate follows semantic versioning (README.md, "Stability"): in 0.x a minor
//! release (0.2 -> 0.3) may break the Rust API, a patch release does not. Items marked
//! `#[non_exhaustive]` may gain fields or variants in any minor release. Items hidden from
//! this documentation are not part of the API.
#![deny(missing_docs)]
// What only the command or the integration tests use of the layers is dead code to a
// library build without them (the Python and C bindings'); as when every layer was
// public, no lint judges it there. Builds with `internals` (the tests) are linted.
#![cfg_attr(not(feature = "internals"), allow(dead_code, unused_imports))]

// The layers are the crate's own: only the API below is public. The `internals`
// feature (for this crate's integration tests and benchmarks only, hidden, no
// stability) makes them reachable from outside.
macro_rules! layers {
    ($($name:ident),*) => {$(
        #[cfg(feature = "internals")]
        #[doc(hidden)]
        #[allow(missing_docs)]
        pub mod $name;
        #[cfg(not(feature = "internals"))]
        mod $name;
    )*};
}
layers!(
    checks, discover, export, model, parse, schemas, snapshot, sources, sysfs, view
);
mod api;
#[cfg(feature = "cli")]
pub mod cli;
mod error;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
#[allow(missing_docs)]
pub mod fuzzing;

// The body of the `rdmatopo-nvml` program beside the command, kept with the NVML source
// it runs; no API.
#[cfg(all(feature = "nvml", not(target_env = "musl")))]
#[doc(hidden)]
pub use sources::nvml_helper::helper_main as nvml_helper_main;

pub use api::*;

#[cfg(feature = "internals")]
#[doc(hidden)]
pub use internal::*;
#[cfg(not(feature = "internals"))]
#[allow(unused_imports)]
pub(crate) use internal::*;

/// What the command, the tests and the benchmarks reach below the public API.
mod internal {
    pub use crate::discover::{
        CrossCheck, DeviceFacts, DiscoverError, Discoverer, Focus, GidFacts, HostFacts, Narrowing,
        NetdevFacts, OtherNames, PciFacts,
    };
    pub use crate::entry::{
        CoreError, discover, discover_fs, discover_in, discover_needs, discover_view,
        inventory_json, open_root,
    };
    pub use crate::sysfs::Sysfs;
}

/// The entry points the command and the public API share, over the layers' own types.
#[allow(missing_docs)] // reached from outside only with `internals`
mod entry {
    use crate::discover::{self, Discoverer};
    use crate::model::Topology;
    use crate::sysfs::Sysfs;
    use crate::{Needs, View, checks, snapshot, sources, view};
    use std::path::Path;

    /// Any failure of the layers, as the command reports it; the public [`Error`]
    /// sorts it into kinds.
    #[derive(Debug, thiserror::Error)]
    pub enum CoreError {
        #[error(transparent)]
        Discover(#[from] discover::DiscoverError),
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
    pub fn open_root(root: Option<&Path>) -> Result<Sysfs, CoreError> {
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
                    return Err(CoreError::Io {
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
    pub fn discover(root: Option<&Path>) -> Result<Topology, CoreError> {
        let fs = open_root(root)?;
        discover_fs(&fs)
    }

    /// Discover `root` (`None`: this machine) with the default sources, inside a container
    /// narrowed to `view` (see [`discover_view`]).
    ///
    /// # Errors
    /// As [`discover()`].
    pub fn discover_in(root: Option<&Path>, view: View) -> Result<Topology, CoreError> {
        discover_view(&open_root(root)?, Needs::ALL, view)
    }

    /// Discover an opened root with the default sources.
    ///
    /// # Errors
    /// When the root holds no sysfs.
    pub fn discover_fs(fs: &Sysfs) -> Result<Topology, CoreError> {
        discover_needs(fs, Needs::ALL)
    }

    /// Discover an opened root with the default sources, reading only what `needs` asks for.
    ///
    /// # Errors
    /// When the root holds no sysfs.
    pub fn discover_needs(fs: &Sysfs, needs: Needs) -> Result<Topology, CoreError> {
        discover_view(fs, needs, View::All)
    }

    /// Discover an opened root for `scope`, inside a container narrowed to `view`: the
    /// view is decided first from cheap evidence (device nodes, `PCIDEVICE_*`, this
    /// namespace's netdevs, the driver's GPU list), then only its devices are read in full.
    /// A container is read for what the answer needs there ([`Needs::in_container`]:
    /// `topo`'s ownership header needs the netdevs).
    ///
    /// # Errors
    /// When the root holds no sysfs.
    pub fn discover_view(fs: &Sysfs, needs: Needs, view: View) -> Result<Topology, CoreError> {
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
}
