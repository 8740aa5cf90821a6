//! The public API: one way to discover ([`Discovery`]), the model's device types, the
//! questions a topology answers (methods of [`Topology`] and [`Devices`]), and one
//! [`Error`]. Everything here is re-exported at the crate root; it calls the layers
//! below and answers nothing itself.

use crate::entry::{self, CoreError};
use crate::sysfs::Sysfs;
use crate::{checks, export, snapshot, view};
use std::path::{Path, PathBuf};

pub use crate::checks::doctor::{
    CheckResult, Evidence, Finding, Judged, Outcome, Report as DoctorReport,
};
pub use crate::discover::Needs;
pub use crate::export::nccl_xml::XmlOptions;
pub use crate::model::LOCAL_RANK_VARS;
pub use crate::model::{
    Bond, DetailView, Diagnostic, Gid, Gpu, Netdev, NetdevKind, NumaNode, PciFunction, PciRole,
    PcieLink, Port, RdmaDevice, Severity, Sriov, Topology,
};
pub use crate::parse::{
    CpuSet, GidType, LinkLayer, LinkSpeed, PciAddr, PhysState, PortState, Rate,
};
pub use crate::view::gid::GidChoice;
pub use crate::view::plan::{DataDirect, Exclusion, Plan, PlanOptions, RankPlan};
pub use crate::view::{
    Devices, GpuNames, MatrixDevice, PathClass, RankChoice, RankOutcome, RankRequest, TopoMatrix,
    WhenNoRank,
};

pub use crate::error::Error;

/// The version of this library (`CARGO_PKG_VERSION`).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

impl Error {
    /// [`Error::UnknownDevice`] for `name`, with the message the library gives it.
    pub fn unknown_device(name: impl Into<String>) -> Self {
        view::ViewError::UnknownDevice(name.into()).into()
    }

    /// [`Error::OutsideView`] for `name`, with the message the library gives it.
    pub fn outside_view(name: impl Into<String>) -> Self {
        view::ViewError::OutsideView(name.into()).into()
    }
}

#[doc(hidden)]
impl From<CoreError> for Error {
    fn from(e: CoreError) -> Self {
        match e {
            CoreError::Discover(crate::discover::DiscoverError::Sysfs(e)) => e.into(),
            CoreError::Discover(e) => Error::Discovery(e.to_string()),
            CoreError::View(e) => e.into(),
            CoreError::Json(e) => Error::Parse(CoreError::Json(e).to_string()),
            // A snapshot that is not there, or not readable, is a file error as any other;
            // one that does not unpack is no machine.
            CoreError::Snapshot(snapshot::SnapshotError::Io { path, source })
                if !matches!(
                    source.kind(),
                    std::io::ErrorKind::NotFound | std::io::ErrorKind::PermissionDenied
                ) =>
            {
                Error::Discovery(
                    CoreError::Snapshot(snapshot::SnapshotError::Io { path, source }).to_string(),
                )
            }
            CoreError::Io { path, source }
            | CoreError::Snapshot(snapshot::SnapshotError::Io { path, source }) => Error::Io {
                path,
                kind: source.kind(),
                os_code: source.raw_os_error(),
                reason: source.to_string(),
            },
            CoreError::Snapshot(e) => Error::Discovery(e.to_string()),
        }
    }
}

/// Which devices a model read inside a container holds in full.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum View {
    /// The devices this container owns, when that is certain: every other device is a
    /// partial read ([`Topology::view`] says which are whole). On a host, or where
    /// ownership is uncertain, every device.
    #[default]
    Owned,
    /// Every device visible, read in full (a host's read, the command's `--all`).
    All,
}

/// Where NVML's and libibverbs' facts come from, beside sysfs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Sources {
    /// Those that suit the root: on `/`, libnvidia-ml (feature `nvml`), libibverbs
    /// (feature `verbs`) and the kernel's RDMA netlink when present; in a snapshot,
    /// the facts it recorded (`/rdmatopo/nvml.json`, `verbs.json`, `device-index.json`).
    #[default]
    Default,
    /// Sysfs and procfs only: nothing loaded, nothing replayed.
    SysfsOnly,
}

/// How to discover a topology: the root, the view, the sources, and how much to read.
/// The one entry point of this library.
///
/// ```
/// use rdmatopo::{Discovery, Needs, View};
///
/// let topo = Discovery::root("../fixtures/h100-dgx/root.tar.gz")
///     .view(View::All)
///     .needs(Needs::ALL)
///     .run()?;
/// assert_eq!(topo.gpus.len(), 8);
/// assert_eq!(topo.rdma_devices.len(), 12);
/// # Ok::<(), rdmatopo::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct Discovery {
    root: Option<PathBuf>,
    view: View,
    sources: Sources,
    needs: Needs,
}

impl Discovery {
    /// Discover this machine (`/`), as seen from this process.
    pub fn live() -> Self {
        Self {
            root: None,
            view: View::default(),
            sources: Sources::default(),
            needs: Needs::ALL,
        }
    }

    /// Discover `root`: a directory holding `sys/` (and `proc/`, `dev/`: a captured
    /// tree, an untarred `hwloc-gather-topology` or `rdmatopo snapshot`), a `.tar`,
    /// `.tar.gz` or `.tgz` snapshot read into memory, or `/` (this machine).
    pub fn root(root: impl AsRef<Path>) -> Self {
        Self {
            root: Some(root.as_ref().to_path_buf()),
            ..Self::live()
        }
    }

    /// Which devices to read in full inside a container (default [`View::Owned`]).
    pub fn view(mut self, view: View) -> Self {
        self.view = view;
        self
    }

    /// Where NVML and verbs facts come from (default [`Sources::Default`]).
    pub fn sources(mut self, sources: Sources) -> Self {
        self.sources = sources;
        self
    }

    /// How much to read (default [`Needs::ALL`]): a question about path classes alone
    /// reads less ([`Needs::TOPO`]).
    pub fn needs(mut self, needs: Needs) -> Self {
        self.needs = needs;
        self
    }

    /// Read the root into a [`Topology`]. What could not be read is a
    /// [`Diagnostic`] of it, not an error.
    ///
    /// # Errors
    /// [`Error::Io`] when the root is missing or unreadable; [`Error::Discovery`] when
    /// it holds no sysfs or is a refused archive.
    pub fn run(&self) -> Result<Topology, Error> {
        let fs = entry::open_root(self.root.as_deref())?;
        let topo = match self.sources {
            Sources::Default => entry::discover_view(&fs, self.needs, self.view)?,
            Sources::SysfsOnly => discover_sysfs_only(&fs, self.needs, self.view)?,
        };
        Ok(topo)
    }
}

fn discover_sysfs_only(fs: &Sysfs, needs: Needs, view: View) -> Result<Topology, CoreError> {
    let needs = Needs {
        sources: false,
        ..needs
    };
    entry::discover_view(fs, needs, view)
}

/// The JSON Schema (draft 2020-12) of the document with schema id `id`
/// (`rdmatopo.inventory/2`, `rdmatopo.topo/1`, `rdmatopo.doctor/1`, …), as carried in
/// `rdmatopo/schemas/`; `None` for an id this build does not write.
///
/// ```
/// let schema = rdmatopo::json_schema("rdmatopo.inventory/2").expect("carried");
/// assert!(schema.contains("\"$schema\""));
/// ```
pub fn json_schema(id: &str) -> Option<&'static str> {
    crate::schemas::get(id)
}

/// The schema ids [`json_schema`] knows, in order.
pub fn json_schema_ids() -> impl Iterator<Item = &'static str> {
    crate::schemas::ALL.iter().map(|(id, _)| *id)
}

/// A Kubernetes object [`Topology::k8s`] writes, as the JSON its API takes (YAML is
/// the same document).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum K8sObject {
    /// The RDMA shared device plugin's `config.json` (k8s-rdma-shared-dev-plugin): one
    /// pool per compute rail, each selecting its netdev by name, default options
    /// (`rdmatopo k8s rdma-shared-dev-plugin --config-json`).
    RdmaSharedDevPluginConfig,
    /// The SR-IOV network device plugin's `config.json`: one pool per rail of VFs
    /// (`rdmatopo k8s sriov-device-plugin --config-json`).
    SriovDevicePluginConfig,
    /// The DRA `ResourceSlice`s the NVIDIA GPU driver and DRANET would publish for node
    /// `node`, with rdmatopo's PCIe attributes (`resource.kubernetes.io/pcieRoot`, …).
    ResourceSlices {
        /// The node's name (`spec.nodeName`).
        node: String,
    },
}

impl TopoMatrix {
    /// The `nvidia-smi topo -m` table of this matrix with its legend, as `rdmatopo
    /// topo` prints it.
    pub fn nvidia_smi_table(&self) -> String {
        export::table::nvidia_smi_table(self, false)
    }
}

impl Port {
    /// Whether this is a RoCE port (`link_layer` `Ethernet`, or an unknown link layer
    /// with RoCE GID types), where a GID index is chosen; InfiniBand ports use GID
    /// index 0.
    pub fn is_roce(&self) -> bool {
        view::gid::is_roce(self)
    }
}

impl Topology {
    /// This topology's devices as the command line names them (`GPU0`, `NIC3`, an RDMA
    /// device, a PCI address): finding, comparing and planning. The matrix behind the
    /// names is built on first use.
    ///
    /// ```
    /// let topo = rdmatopo::Discovery::root("../fixtures/h100-dgx/root.tar.gz").run()?;
    /// let gpu = topo.devices().pci_of("GPU3")?;
    /// assert_eq!(gpu.to_string(), "0000:61:00.0");
    /// # Ok::<(), rdmatopo::Error>(())
    /// ```
    pub fn devices(&self) -> Devices<'_> {
        Devices::of(self)
    }

    /// The `nvidia-smi topo -m` matrix: every GPU and NIC of this view, the class of
    /// each pair ([`PathClass`], NVIDIA's computation from the PCI tree and NUMA), CPU
    /// and NUMA affinity of each GPU.
    ///
    /// ```
    /// let topo = rdmatopo::Discovery::root("../fixtures/h100-dgx/root.tar.gz").run()?;
    /// let m = topo.matrix();
    /// assert_eq!(m.get("GPU0", "GPU0"), Some(rdmatopo::PathClass::X));
    /// assert_eq!(m.get("GPU0", "GPU1"), Some(rdmatopo::PathClass::Nv(18)));
    /// # Ok::<(), rdmatopo::Error>(())
    /// ```
    pub fn matrix(&self) -> TopoMatrix {
        TopoMatrix::for_topology(self)
    }

    /// The NCCL plan of this node ([`Plan`]): the variables common to every local rank
    /// and each rank's GPU, HCAs, GID index and CPUs, for the ranks `options` asks.
    ///
    /// ```
    /// let topo = rdmatopo::Discovery::root("../fixtures/h100-dgx/root.tar.gz").run()?;
    /// let plan = topo.plan(&rdmatopo::PlanOptions::default())?;
    /// assert_eq!(plan.ranks.len(), 8);
    /// # Ok::<(), rdmatopo::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::Argument`] for a rank not below the world size or a malformed
    /// launcher variable or `CUDA_VISIBLE_DEVICES`.
    pub fn plan(&self, options: &PlanOptions) -> Result<Plan, Error> {
        Ok(Plan::compute(self, options)?)
    }

    /// The GID NCCL would use on RoCE port `port` of RDMA device `device`: the
    /// RoCE v2 entry of the port's GID table (`ports/<p>/gids/<i>`,
    /// `gid_attrs/types/<i>`, `gid_attrs/ndevs/<i>`) of this network namespace, IPv4
    /// first; `None` on InfiniBand, or when no entry is usable.
    ///
    /// ```
    /// let topo = rdmatopo::Discovery::root("../fixtures/h100-dgx/root.tar.gz").run()?;
    /// // The DGX's compute NICs are InfiniBand: no RoCE GID to choose.
    /// assert_eq!(topo.choose_gid("mlx5_0", 1), None);
    /// # Ok::<(), rdmatopo::Error>(())
    /// ```
    pub fn choose_gid(&self, device: &str, port: u32) -> Option<GidChoice> {
        view::gid::choose_gid(self, device, port)
    }

    /// Run every doctor check (what `rdmatopo doctor` prints): container, driver,
    /// NCCL, GPUDirect RDMA and PCIe findings with the sysfs evidence behind each.
    ///
    /// ```
    /// let topo = rdmatopo::Discovery::root("../fixtures/h100-dgx/root.tar.gz").run()?;
    /// let report = topo.doctor();
    /// for f in &report.findings {
    ///     println!("{:?} {}: {}", f.severity, f.check, f.summary);
    /// }
    /// # Ok::<(), rdmatopo::Error>(())
    /// ```
    pub fn doctor(&self) -> DoctorReport {
        checks::doctor::run(self)
    }

    /// The NCCL topology file (`NCCL_TOPO_FILE`) of this view's GPUs and HCAs: the PCI
    /// tree from sysfs as NCCL's `ncclTopoGetXml` writes it (`rdmatopo nccl-topo`).
    ///
    /// ```
    /// let topo = rdmatopo::Discovery::root("../fixtures/h100-dgx/root.tar.gz").run()?;
    /// let xml = topo.nccl_topo_xml(&rdmatopo::XmlOptions::default());
    /// assert!(xml.starts_with("<system version=\"1\">"));
    /// # Ok::<(), rdmatopo::Error>(())
    /// ```
    pub fn nccl_topo_xml(&self, options: &XmlOptions) -> String {
        export::nccl_xml::write(self, options)
    }

    /// The matrix of the devices this container owns (`rdmatopo topo --owned`): its
    /// GPUs and RDMA devices as the container view judges them (device nodes,
    /// `/proc/driver/nvidia/gpus`, `PCIDEVICE_*`, this namespace's netdevs); every
    /// device on a host.
    pub fn owned_matrix(&self) -> TopoMatrix {
        let owned = view::container::ContainerView::of(self);
        let nics = owned.owned_rdma();
        let nics: Vec<&str> = nics.iter().map(String::as_str).collect();
        TopoMatrix::build(self, &owned.owned_gpus(), &nics)
    }

    /// Why GID table entry `gid` is not usable from this network namespace (`empty`,
    /// `link-local`, `netdev in another network namespace`, …), `None` when it is: the
    /// test [`Topology::choose_gid`] applies to each entry.
    pub fn gid_unusable_reason(&self, gid: &Gid) -> Option<&'static str> {
        view::gid::unusable_reason(self, gid).map(|u| u.as_str())
    }

    /// A Kubernetes object for this node, as JSON (`rdmatopo k8s …` writes the same
    /// objects, as YAML by default).
    ///
    /// ```
    /// use rdmatopo::K8sObject;
    /// let topo = rdmatopo::Discovery::root("../fixtures/h100-dgx/root.tar.gz").run()?;
    /// let slices = topo.k8s(&K8sObject::ResourceSlices { node: "node-a".into() })?;
    /// // A `List` of ResourceSlices: one per DRA driver.
    /// assert_eq!(slices["kind"], "List");
    /// assert_eq!(slices["items"][0]["kind"], "ResourceSlice");
    /// # Ok::<(), rdmatopo::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::Analysis`] when the node has nothing the object describes (no RDMA
    /// device for a device plugin, no VF for SR-IOV).
    pub fn k8s(&self, object: &K8sObject) -> Result<serde_json::Value, Error> {
        use export::k8s;
        let to_json = |v: Result<serde_json::Value, serde_json::Error>| {
            v.map_err(|e| Error::Analysis(e.to_string()))
        };
        match object {
            K8sObject::RdmaSharedDevPluginConfig => {
                let g = k8s::rdma_shared_dev_plugin(self, &Default::default())?;
                to_json(serde_json::to_value(&g.value))
            }
            K8sObject::SriovDevicePluginConfig => {
                let g = k8s::sriov_device_plugin(self, &Default::default())?;
                to_json(serde_json::to_value(&g.value))
            }
            K8sObject::ResourceSlices { node } => Ok(export::dra::resource_slices(self, node)),
        }
    }

    /// The inventory document (`rdmatopo.inventory/2`): [`Topology::to_json`]'s fields
    /// plus the `container` view beside them, as `rdmatopo inventory --format json`,
    /// Python's `Topology.to_json()` and C's `rdmatopo_topology_to_json` write it.
    pub fn inventory_json(&self) -> String {
        entry::inventory_json(self)
    }

    /// Read an inventory document (or the bare model JSON) back, in this schema or the
    /// previous one.
    ///
    /// ```
    /// let topo = rdmatopo::Discovery::root("../fixtures/h100-dgx/root.tar.gz").run()?;
    /// let back = rdmatopo::Topology::from_json(&topo.inventory_json())?;
    /// assert_eq!(back.gpus, topo.gpus);
    /// # Ok::<(), rdmatopo::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::Parse`] when `text` is not a model of either schema.
    pub fn from_json(text: &str) -> Result<Topology, Error> {
        Topology::read_json(text).map_err(|e| Error::from(CoreError::Json(e)))
    }
}

/// Judge every container of the kubelet's allocation on this node (`rdmatopo k8s
/// audit`): the GPUs, NICs and CPUs each was given, their NUMA nodes and the worst
/// path between them, as the `rdmatopo.audit/1` JSON document. Reads the kubelet's
/// PodResources API at `socket` (`/var/lib/kubelet/pod-resources/kubelet.sock`).
///
/// # Errors
/// [`Error::Io`] when the kubelet does not answer within `timeout`.
#[cfg(feature = "kubelet")]
pub fn audit(
    topo: &Topology,
    socket: &Path,
    timeout: std::time::Duration,
) -> Result<serde_json::Value, Error> {
    let allocation = crate::sources::kubelet::read(socket, timeout).map_err(|e| Error::Io {
        path: socket.display().to_string(),
        kind: std::io::ErrorKind::Other,
        os_code: None,
        reason: e.to_string(),
    })?;
    let report = checks::audit::audit(topo, &allocation, &Default::default());
    serde_json::to_value(&report).map_err(|e| Error::Analysis(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const DGX: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../fixtures/h100-dgx/root.tar.gz"
    );

    #[test]
    fn sysfs_only_reads_no_source() {
        let with = Discovery::root(DGX).view(View::All).run().unwrap();
        let without = Discovery::root(DGX)
            .view(View::All)
            .sources(Sources::SysfsOnly)
            .run()
            .unwrap();
        // The fixture carries the NVML facts its machine gave (its NVLinks).
        assert!(with.nvml.is_some());
        assert_eq!(with.matrix().get("GPU0", "GPU1"), Some(PathClass::Nv(18)));
        assert_ne!(
            without.matrix().get("GPU0", "GPU1"),
            Some(PathClass::Nv(18))
        );
        assert!(without.nvml.is_none() && without.verbs.is_none());
        assert_eq!(with.gpus.len(), without.gpus.len());
        assert_eq!(with.rdma_devices.len(), without.rdma_devices.len());
    }

    #[test]
    fn each_failure_is_its_kind() {
        let missing = Discovery::root("/nonexistent/rdmatopo-root")
            .run()
            .unwrap_err();
        assert!(
            matches!(&missing, Error::Io { kind: std::io::ErrorKind::NotFound, path, .. } if path == "/nonexistent/rdmatopo-root"),
            "{missing:?}"
        );
        assert_eq!(
            missing.to_string(),
            "/nonexistent/rdmatopo-root: no such directory"
        );
        let empty = tempfile::tempdir().unwrap();
        let no_sysfs = Discovery::root(empty.path()).run().unwrap_err();
        assert!(matches!(no_sysfs, Error::Discovery(ref m) if m.contains("no sysfs")));
        assert!(matches!(
            Topology::from_json("{}"),
            Err(Error::Parse(m)) if m.starts_with("invalid model JSON")
        ));
        let topo = Discovery::root(DGX).run().unwrap();
        let unknown = topo.devices().pci_of("GPU99").unwrap_err();
        assert!(matches!(&unknown, Error::UnknownDevice { name, .. } if name == "GPU99"));
        assert_eq!(unknown, Error::unknown_device("GPU99"));
        assert!(matches!(
            "0000:zz:00.0".parse::<PciAddr>(),
            Err(Error::Parse(_))
        ));
        assert!(matches!(
            topo.plan(&PlanOptions {
                local_rank: Some(8),
                local_world_size: Some(8),
                ..Default::default()
            }),
            Err(Error::Argument(_))
        ));
    }
}
