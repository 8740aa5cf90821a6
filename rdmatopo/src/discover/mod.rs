//! Discovery: read a root through [`Sysfs`], parse with [`crate::parse`], and build a
//! [`Topology`]. Odd or missing attributes become [`Diagnostic`]s; the only error is a
//! root that holds no sysfs at all.

mod host;
mod net;
mod pci;
mod qos;
mod rdma;

use crate::model::{DetailView, Diagnostic, Process, Severity, Topology};
use crate::parse::{ParseError, PciAddr};
use crate::sources::{FactSource, SourceError};
use crate::sysfs::{DirFiles, Sysfs, SysfsError};
use std::collections::BTreeSet;

/// Discovery could not build any model.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DiscoverError {
    #[error(
        "{root}: no sysfs here (expected {root}/sys/devices or {root}/sys/class); pass --root a captured tree or a snapshot"
    )]
    NoSysfs { root: String },
    #[error(transparent)]
    Sysfs(#[from] SysfsError),
}

/// What an answer needs read. Each field is one kind of fact and alone decides the
/// reads of it; each answer states its needs once, as one of the constants below
/// (`topo`, `gids`, `netdevs`, `nccl-env`, and [`Needs::ALL`] for `doctor`, `inventory`
/// and the faces). Inside a container the same needs hold for the devices it owns
/// (see [`Narrowing`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Needs {
    /// NUMA nodes and their CPUs (`/sys/devices/system/node`), the PCI tree and the
    /// process view. Without them a read holds RDMA devices and netdevs only.
    pub machine: bool,
    /// The NVML and verbs facts ([`crate::sources`]; with `machine` only): loading
    /// libnvidia-ml can cost more than a whole read, so an answer about RDMA devices
    /// alone goes without.
    pub sources: bool,
    /// How much of each PCI function.
    pub pci: PciFacts,
    /// `node<N>/distance` of each NUMA node.
    pub numa_distances: bool,
    /// How much of the host.
    pub host: HostFacts,
    /// The whole process view (device nodes, the driver's GPU list, runtime mounts),
    /// not only its CPU mask and container evidence (status, cgroups, environment).
    pub process_whole: bool,
    /// The process's limits: `RLIMIT_MEMLOCK` (`/proc/self/limits`) and the rdma
    /// cgroup's `rdma.max` and `rdma.current`.
    pub limits: bool,
    /// RDMA devices' ports (`ports/<p>`); without them a device is its name and
    /// function.
    pub ports: bool,
    /// Each RDMA device's verbs node (`/sys/class/infiniband_verbs/uverbs<N>/ibdev`).
    pub uverbs: bool,
    /// How much of RDMA devices' adapter facts and ports' link state.
    pub device: DeviceFacts,
    /// How much of each port's GID table.
    pub gids: GidFacts,
    /// How much of each netdev of this namespace.
    pub netdevs: NetdevFacts,
    /// The QoS of RoCE ports and their netdevs (`tc/`, `qos/`, `ecn/`).
    pub qos: bool,
    /// The sources' facts checked against sysfs (needs [`DeviceFacts::Whole`]).
    pub cross_check: bool,
    /// Inside a container, the functions below the root port of an owned GPU whose NICs
    /// are all elsewhere (the nearer NIC and the switch ports a distance check weighs).
    pub beside: bool,
}

/// How much of a PCI function a read takes ([`Needs::pci`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum PciFacts {
    /// Placement: each function's class and parent (a function with functions below it
    /// is a PCI-to-PCI bridge by the tree: `0x060400` without reading); vendor and
    /// device ids of display functions and RDMA devices' functions (0 elsewhere), from
    /// `uevent` where it states them, with their `physfn` link; `numa_node` of GPUs and
    /// of RDMA devices' functions, `local_cpulist` of GPUs and of those functions that
    /// know no node, and the node of each host bridge holding such a GPU or function.
    /// Where the `nvidia` driver holds functions, only its, the RDMA devices'
    /// functions (with their PFs) and the bridges above them are read: a host's other
    /// functions place nothing the answers show. A function's driver comes from its
    /// `uevent` (`DRIVER=`).
    Placement,
    /// As [`PciFacts::Placement`], with each GPU's name from the bundled PCI ID table
    /// (what the plan's reasons call a GPU where NVML does not name it).
    Named,
    /// Every function's ids, subsystem ids, names, driver, `numa_node`,
    /// `local_cpulist` and SR-IOV (`sriov_*`, `virtfn<N>`).
    Identity,
    /// Also each function's PCIe link (`*_link_speed`, `*_link_width`), IOMMU group and
    /// a bridge's ACS (`config`).
    Whole,
}

/// How much of the host's facts a read takes ([`Needs::host`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum HostFacts {
    /// None.
    None,
    /// What a container's ownership needs: `ib_core`'s `netns_mode` and the default route.
    Ownership,
    /// Also the online CPUs (`/sys/devices/system/cpu/online`: what a rank is bound
    /// within where this process's own CPUs are unknown).
    Cpus,
    /// Also `/proc/cpuinfo`, the peer-memory module and the NVIDIA driver's version.
    Whole,
}

/// How much of an RDMA device's adapter facts and its ports' link state a read takes
/// ([`Needs::device`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum DeviceFacts {
    /// None: a device is its name, function, verbs node and ports.
    None,
    /// What tells a usable port and groups ports into adapters: each port's `state` and
    /// the device's `sys_image_guid`.
    Usable,
    /// Every adapter fact (`node_type`, `node_guid`, `sys_image_guid`, `fw_ver`,
    /// `hca_type`, `board_id`) and the ports' link state (`state`, `phys_state`, `rate`,
    /// `lid`).
    Whole,
}

/// How much of each port's GID table a read takes ([`Needs::gids`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum GidFacts {
    /// None.
    None,
    /// The slots up to the first that names a netdev of this namespace, without types
    /// (the ibdev2netdev relation; none on InfiniBand, whose GIDs name no netdev).
    UpToNetdev,
    /// On an Ethernet port, the slots up to the first GID that NCCL's automatic choice
    /// cannot better (IPv4, RoCE v2, with a netdev of this namespace), with types and
    /// netdevs, every slot where there is none; none on InfiniBand (NCCL uses index 0
    /// there); every slot on a port of unknown link layer.
    UpToChoice,
    /// Every slot: GIDs, types and netdevs.
    Whole,
}

/// How much of each netdev of this namespace a read takes ([`Needs::netdevs`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum NetdevFacts {
    /// None.
    None,
    /// Name, function and kind; a VF is told by its `device/physfn` link only, so a VF
    /// whose PF is not visible (a VM) reads as physical.
    Outline,
    /// As [`NetdevFacts::Outline`], with `carrier`, `master` and bond for the netdevs
    /// named by a port's GIDs or on an RDMA device's function (what `netdevs` prints).
    Printed,
    /// Name, function, kind and master of every netdev, and the type, index and link
    /// of the virtual ones but `lo` (a container's network by kinds and links: a veth
    /// tells a pod's own namespace).
    Links,
    /// As [`NetdevFacts::Links`]; where the default route names no netdev of this
    /// namespace, also every netdev's `operstate` and IPv4 addresses (the interfaces
    /// NCCL's bootstrap could use instead).
    Routed,
    /// Also MTU, state, carrier, speed, address and IPv4 addresses.
    Whole,
}

impl Needs {
    /// Everything the model holds: `doctor`, `inventory`, `snapshot`, the faces.
    pub const ALL: Self = Self {
        machine: true,
        sources: true,
        pci: PciFacts::Whole,
        numa_distances: true,
        host: HostFacts::Whole,
        process_whole: true,
        limits: true,
        ports: true,
        uverbs: true,
        device: DeviceFacts::Whole,
        gids: GidFacts::Whole,
        netdevs: NetdevFacts::Whole,
        qos: true,
        cross_check: true,
        beside: true,
    };

    /// Nothing: a start for stating needs field by field.
    pub const NONE: Self = Self {
        machine: false,
        sources: false,
        pci: PciFacts::Placement,
        numa_distances: false,
        host: HostFacts::None,
        process_whole: false,
        limits: false,
        ports: false,
        uverbs: false,
        device: DeviceFacts::None,
        gids: GidFacts::None,
        netdevs: NetdevFacts::None,
        qos: false,
        cross_check: false,
        beside: false,
    };

    /// `topo` on a host: the GPU/NIC affinity matrix and the host/container decision.
    /// On a DGX-class tree this opens about a fifteenth of the files of [`Needs::ALL`].
    pub const TOPO: Self = Self {
        machine: true,
        sources: true,
        ..Self::NONE
    };

    /// `topo` inside a container, where it shows the devices this process owns: the
    /// ownership view (uverbs nodes, this namespace's netdevs and the ports they are
    /// on, the process view, the RDMA netns mode and the default route) and the matrix.
    pub const TOPO_IN_CONTAINER: Self = Self {
        host: HostFacts::Ownership,
        process_whole: true,
        ports: true,
        uverbs: true,
        gids: GidFacts::UpToNetdev,
        netdevs: NetdevFacts::Links,
        ..Self::TOPO
    };

    /// `gids` (show_gids): RDMA devices with their function, each port's `link_layer`
    /// and whole GID table, and this namespace's netdevs in outline.
    pub const GIDS: Self = Self {
        ports: true,
        gids: GidFacts::Whole,
        netdevs: NetdevFacts::Outline,
        ..Self::NONE
    };

    /// `netdevs` (ibdev2netdev): RDMA devices with their function, each port's
    /// `link_layer` and GIDs up to the first naming a netdev, the netdevs it prints.
    pub const NETDEVS: Self = Self {
        ports: true,
        gids: GidFacts::UpToNetdev,
        netdevs: NetdevFacts::Printed,
        ..Self::NONE
    };

    /// `nccl-env` and the rank plan: the placement of GPUs and RDMA devices' functions
    /// (with the GPUs' names), GID slots up to NCCL's choice, ports' state and adapters'
    /// `sys_image_guid`, this namespace's netdevs by kind and link (and their state and
    /// addresses where no default route names one), the online CPUs, QoS. Not what only
    /// `doctor` or `inventory` shows (NUMA distances, the process's limits, other
    /// functions' identity, PCIe links, ACS and IOMMU groups, the functions beside a
    /// GPU, firmware and board ids, the MTU, the CPU model, the driver's version) nor
    /// the sources' cross-check. `tests/needs.rs` holds the plan read so equal to the
    /// plan of [`Needs::ALL`] on every fixture, and on edited ones for the fallbacks
    /// (no default route, no CPU mask, no NUMA locality).
    pub const NCCL_ENV: Self = Self {
        pci: PciFacts::Named,
        device: DeviceFacts::Usable,
        netdevs: NetdevFacts::Routed,
        host: HostFacts::Cpus,
        gids: GidFacts::UpToChoice,
        numa_distances: false,
        limits: false,
        cross_check: false,
        beside: false,
        ..Self::ALL
    };

    /// What this answer reads inside a container: its own needs and the ownership view
    /// (the process view, uverbs nodes, the RDMA netns mode and the default route, this
    /// namespace's netdevs by kind and link, the ports they are on and the GID slots up
    /// to the first naming one of them, and the PCI placement). `topo` becomes
    /// [`Needs::TOPO_IN_CONTAINER`]; `doctor`'s and `nccl-env`'s hold it already.
    pub fn in_container(self) -> Self {
        let netdevs = match self.netdevs {
            // The printed netdevs' carrier and bonds are no part of `Links`.
            NetdevFacts::Printed => NetdevFacts::Whole,
            other => other.max(NetdevFacts::Links),
        };
        Self {
            machine: true,
            host: self.host.max(HostFacts::Ownership),
            process_whole: true,
            ports: true,
            uverbs: true,
            gids: self.gids.max(GidFacts::UpToNetdev),
            netdevs,
            ..self
        }
    }
}

impl Default for Needs {
    fn default() -> Self {
        Self::ALL
    }
}

/// The devices a container's answer is about, read in full while every other device
/// stays an outline (see [`crate::model::DetailView`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Focus {
    /// RDMA devices by name.
    pub rdma_devices: BTreeSet<String>,
    /// PCI functions (GPUs); the RDMA devices' functions, the PFs of VFs and the bridges
    /// above them all are added by discovery.
    pub functions: BTreeSet<PciAddr>,
    /// Why, for the model's [`crate::model::DetailView::reason`].
    pub reason: String,
}

/// How a container's read is narrowed to what it owns: decide the view first, then
/// read. Discovery cannot judge ownership itself (that is the view floor's), so the
/// caller hands the two questions in (`rdmatopo::discover_view` passes the container
/// view's answers).
#[derive(Debug, Clone, Copy)]
pub struct Narrowing {
    /// From the process facts alone: whether this is a container (else the read is
    /// as the needs say, unchanged).
    pub in_container: fn(&Topology) -> bool,
    /// From an outline of every device (names, functions, uverbs nodes, this
    /// namespace's netdevs, the process view): the devices to read in full, or `None`
    /// when ownership is not certain, and everything is read.
    pub focus: fn(&Topology) -> Option<Focus>,
}

/// Builds a [`Topology`] from a root and optional NVML / verbs sources.
pub struct Discoverer<'a> {
    fs: &'a Sysfs,
    sources: Vec<&'a dyn FactSource>,
    needs: Needs,
    cross_check: Option<CrossCheck>,
    narrowing: Option<Narrowing>,
}

/// A check of the sources' facts against sysfs, run on the finished model of a read
/// that needs it ([`Needs::cross_check`]); its diagnostics join the model's. The
/// caller hands it in (`rdmatopo::discover_needs` passes the sources cross-check of
/// `checks`), so discovery never imports the floors that judge its output.
pub type CrossCheck = fn(&Topology) -> Vec<Diagnostic>;

impl std::fmt::Debug for Discoverer<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Discoverer")
            .field("fs", &self.fs)
            .field("sources", &self.sources.len())
            .field("cross_check", &self.cross_check.is_some())
            .finish()
    }
}

impl<'a> Discoverer<'a> {
    pub fn new(fs: &'a Sysfs) -> Self {
        Self {
            fs,
            sources: Vec::new(),
            needs: Needs::ALL,
            cross_check: None,
            narrowing: None,
        }
    }

    /// Inside a container, read only what it owns (see [`Narrowing`]); on a host, or
    /// where ownership is uncertain, the read is unchanged.
    pub fn narrow(mut self, narrowing: Narrowing) -> Self {
        self.narrowing = Some(narrowing);
        self
    }

    /// Check the sources' facts against sysfs with `check` once a model whose needs
    /// ask for it is built (none by default).
    pub fn cross_check(mut self, check: CrossCheck) -> Self {
        self.cross_check = Some(check);
        self
    }

    /// Read only what `needs` asks for ([`Needs::ALL`] by default).
    pub fn needs(mut self, needs: Needs) -> Self {
        self.needs = needs;
        self
    }

    /// Add a source of NVML or verbs facts.
    pub fn source(mut self, source: &'a dyn FactSource) -> Self {
        self.sources.push(source);
        self
    }

    /// Read everything.
    ///
    /// # Errors
    /// [`DiscoverError::NoSysfs`] when the root has neither `sys/devices` nor `sys/class`.
    pub fn discover(&self) -> Result<Topology, DiscoverError> {
        if !self.fs.exists("/sys/devices") && !self.fs.exists("/sys/class") {
            return Err(DiscoverError::NoSysfs {
                root: self.fs.label().to_string(),
            });
        }
        let Some(narrowing) = self.narrowing else {
            return Ok(self.read(self.needs, false, None));
        };
        // The process view first: it alone tells a container from a host.
        let mut probe = Topology::empty(self.fs.label());
        let mut ctx = Ctx::new(self.fs, self.needs);
        ctx.rdma_limits_later = true;
        host::read_process(&mut ctx, &mut probe);
        let in_container = (narrowing.in_container)(&probe);
        if !in_container {
            if self.needs.limits {
                host::read_rdma_limits(&mut ctx, &mut probe.process, None);
            }
            return Ok(self.read(self.needs, false, Some((probe.process, ctx.diags))));
        }
        let needs = self.needs.in_container();
        // The probe read the process view as this answer needs it; a container may
        // need the rest of it.
        if needs.process_whole && !self.needs.process_whole {
            ctx.needs = needs;
            host::read_process_rest(&mut ctx, &mut probe.process);
        }
        let mut outline = self.read(needs, true, Some((probe.process, ctx.diags)));
        let mut doubts = doubts(&outline);
        if doubts.is_empty()
            && let Some(focus) = (narrowing.focus)(&outline)
        {
            match self.complete(&mut outline, needs, &focus) {
                Ok(()) => return Ok(outline),
                Err(more) => doubts.extend(more),
            }
        }
        // Uncertain: the whole machine, as without narrowing, saying why. The sources'
        // facts are the outline's: NVML's initialisation can cost more than the read.
        let mut ctx = Ctx::new(self.fs, needs);
        let mut topo = Self::read_sysfs(&mut ctx, None);
        topo.nvml = outline.nvml;
        topo.verbs = outline.verbs;
        ctx.diags.extend(
            outline
                .diagnostics
                .into_iter()
                .filter(|d| SOURCE_CODES.contains(&d.code.as_str())),
        );
        let mut topo = self.finish(ctx, topo);
        topo.diagnostics.extend(doubts);
        Ok(topo)
    }

    /// Read the root for `needs`: every device in full, or (`outline`) every device in
    /// outline for [`Narrowing::focus`] to choose from. `process`: the process view and
    /// its diagnostics, already read for these needs.
    fn read(
        &self,
        needs: Needs,
        outline: bool,
        process: Option<(Process, Vec<Diagnostic>)>,
    ) -> Topology {
        let mut ctx = Ctx::new(self.fs, needs);
        ctx.outline = outline;
        ctx.rdma_limits_later = outline;
        // Only where the answer needs them ([`Needs::sources`]).
        let sources: &[&dyn FactSource] = if needs.machine && needs.sources {
            &self.sources
        } else {
            &[]
        };
        // Sources that wait on a driver are collected on a thread of their own while
        // sysfs is read here (NVML's initialisation alone can take longer than the
        // whole tree); the others after sysfs, in line (quicker than starting a thread).
        let collect = |blocking: bool| {
            sources
                .iter()
                .enumerate()
                .filter(|(_, source)| source.blocks() == blocking)
                .map(|(i, source)| (i, source.collect(self.fs)))
                .collect::<Vec<_>>()
        };
        std::thread::scope(|s| {
            let helper = (sources.iter().any(|source| source.blocks())
                && worker_threads(2, 1, None) > 1)
                .then(|| {
                    std::thread::Builder::new()
                        .spawn_scoped(s, move || collect(true))
                        .ok()
                })
                .flatten();
            let mut topo = Self::read_sysfs(&mut ctx, process);
            let mut collected = match helper {
                Some(helper) => helper
                    .join()
                    .unwrap_or_else(|p| std::panic::resume_unwind(p)),
                None => collect(true),
            };
            collected.extend(collect(false));
            // In the sources' order, whichever thread collected them.
            collected.sort_by_key(|(i, _)| *i);
            for (_, result) in collected {
                match result {
                    Ok(facts) => facts.apply(&mut topo),
                    Err(SourceError::Unavailable(why)) => {
                        ctx.diags
                            .push(Diagnostic::new(Severity::Info, SOURCE_CODES[0], None, why));
                    }
                    Err(e) => ctx.diags.push(Diagnostic::new(
                        Severity::Warning,
                        SOURCE_CODES[1],
                        None,
                        e.to_string(),
                    )),
                }
            }
            self.finish(ctx, topo)
        })
    }

    /// Everything sysfs and procfs hold for the needs (`process`: read already).
    fn read_sysfs(ctx: &mut Ctx, process: Option<(Process, Vec<Diagnostic>)>) -> Topology {
        let mut topo = Topology::empty(ctx.fs.label());
        if ctx.needs.machine {
            host::read_numa(ctx, &mut topo);
            host::read_host(ctx, &mut topo);
            match process {
                Some((process, diags)) => {
                    topo.process = process;
                    ctx.diags.extend(diags);
                }
                None => host::read_process(ctx, &mut topo),
            }
        }
        // RDMA devices before the PCI tree: a placement read takes their functions in
        // detail.
        rdma::read_rdma(ctx, &mut topo);
        if ctx.needs.machine {
            pci::read_pci(ctx, &mut topo);
        }
        net::read_netdevs(ctx, &mut topo);
        rdma::link_port_netdevs(&mut topo);
        if ctx.needs.qos && !ctx.outline {
            qos::read_qos(ctx, &mut topo);
        }
        topo
    }

    /// GPUs from the PCI tree and the sources' facts, then the cross-checks (of a
    /// complete model: an outline is completed first).
    fn finish(&self, mut ctx: Ctx, mut topo: Topology) -> Topology {
        pci::fill_gpus(&mut topo);
        if !ctx.outline {
            self.run_cross_check(&mut ctx, &topo);
        }
        topo.diagnostics = ctx.diags;
        topo
    }

    fn run_cross_check(&self, ctx: &mut Ctx, topo: &Topology) {
        if ctx.needs.cross_check
            && let Some(check) = self.cross_check
        {
            ctx.diags.extend(check(topo));
        }
    }

    /// Read the devices of `focus` in full into an outline: RDMA devices' ports, GIDs
    /// and attributes, their functions, the PFs of VFs and the bridges above them, and
    /// (when needed) the QoS of those ports and netdevs.
    /// `Err`: diagnostics saying why the outline cannot be trusted after all (a uverbs
    /// node whose `ibdev` does not name its device).
    fn complete(
        &self,
        topo: &mut Topology,
        needs: Needs,
        focus: &Focus,
    ) -> Result<(), Vec<Diagnostic>> {
        let mut ctx = Ctx::new(self.fs, needs);
        ctx.diags = std::mem::take(&mut topo.diagnostics);
        let unconfirmed = rdma::read_focus(&mut ctx, topo, &focus.rdma_devices, needs.gids);
        if !unconfirmed.is_empty() {
            topo.diagnostics = ctx.diags;
            return Err(unconfirmed);
        }
        let mut functions = focus.functions.clone();
        functions.extend(
            topo.rdma_devices
                .iter()
                .filter(|d| focus.rdma_devices.contains(&d.name))
                .filter_map(|d| d.pci),
        );
        // A placement read's functions are whole in the outline already, but for the
        // GPUs' nodes.
        let detailed = if needs.pci <= PciFacts::Named {
            pci::place_gpus(&mut ctx, topo, &focus.functions);
            BTreeSet::new()
        } else {
            // A GPU whose NICs are all elsewhere: what sits beside it, so that the
            // checks can name a nearer NIC and the switch ports on the way to it.
            let nics = functions
                .iter()
                .filter(|a| !focus.functions.contains(a))
                .copied()
                .collect();
            let beside = if needs.beside {
                pci::read_beside(&mut ctx, topo, &focus.functions, &nics)
            } else {
                Default::default()
            };
            rdma::hold_others(topo, &beside.devices);
            functions.extend(beside.placed);
            let mut detailed = pci::read_focus(&mut ctx, topo, functions);
            detailed.extend(beside.read);
            detailed
        };
        // The RDMA devices of the PFs of its VFs: their ports carry the VFs' traffic
        // (QoS, link state), read where either is needed. Their GID tables name a netdev of this namespace only when
        // one sits on the PF's function or bonds it; else they are not read at all.
        let pfs: BTreeSet<PciAddr> = topo
            .rdma_devices
            .iter()
            .filter(|d| focus.rdma_devices.contains(&d.name))
            .filter_map(|d| topo.pci_function(d.pci?)?.physfn)
            .collect();
        // A PF's devices are those under its function; the outline only named them.
        let under_pfs: Vec<(String, PciAddr)> = pfs
            .iter()
            .filter(|_| needs.qos || needs.device > DeviceFacts::None)
            .filter_map(|a| topo.pci_function(*a))
            .flat_map(|f| {
                let names = ctx.list(&format!("{}/infiniband", f.path));
                names.into_iter().map(move |n| (n, f.address))
            })
            .filter(|(name, _)| !focus.rdma_devices.contains(name))
            .collect();
        rdma::hold_others(topo, &under_pfs);
        let pf_devices: BTreeSet<String> = under_pfs
            .into_iter()
            .map(|(name, _)| name)
            .filter(|name| topo.rdma_device(name).is_some())
            .collect();
        let pf_netdev_here = topo
            .netdevs
            .iter()
            .any(|n| n.bond.is_some() || n.pci.is_some_and(|a| pfs.contains(&a)));
        let pf_gids = if pf_netdev_here {
            needs.gids.min(GidFacts::UpToNetdev)
        } else {
            GidFacts::None
        };
        let unconfirmed = rdma::read_focus(&mut ctx, topo, &pf_devices, pf_gids);
        if !unconfirmed.is_empty() {
            topo.diagnostics = ctx.diags;
            return Err(unconfirmed);
        }
        rdma::link_port_netdevs(topo);
        // As the process view of a whole read, for the devices held.
        if needs.limits {
            let held = topo.rdma_devices.iter().map(|d| d.name.clone()).collect();
            host::read_rdma_limits(&mut ctx, &mut topo.process, Some(&held));
        }
        if needs.qos {
            qos::read_qos(&mut ctx, topo);
        }
        pci::fill_gpus(topo);
        self.run_cross_check(&mut ctx, topo);
        topo.view = Some(DetailView {
            rdma_devices: topo
                .rdma_devices
                .iter()
                .filter(|d| focus.rdma_devices.contains(&d.name))
                .map(|d| d.name.clone())
                .collect(),
            gpus: topo
                .gpus
                .iter()
                .map(|g| g.pci)
                .filter(|a| focus.functions.contains(a))
                .collect(),
            pf_rdma_devices: pf_devices.into_iter().collect(),
            pci: detailed.into_iter().collect(),
            reason: focus.reason.clone(),
            other_rdma_devices: topo
                .view
                .take()
                .map(|v| v.other_rdma_devices)
                .unwrap_or_default(),
        });
        topo.diagnostics = ctx.diags;
        Ok(())
    }
}

/// The diagnostics of the sources: unavailable, failed.
const SOURCE_CODES: [&str; 2] = ["source-unavailable", "source-failed"];

/// What in an outline says the container's evidence does not hold together, so that its
/// view must not be narrowed: a uverbs node in `/dev/infiniband` that no RDMA device's
/// verbs device is, a `PCIDEVICE_*` function missing from sysfs. Each a diagnostic
/// naming the path.
fn doubts(outline: &Topology) -> Vec<Diagnostic> {
    let widened = |path: &str, why: String| {
        Diagnostic::new(
            Severity::Warning,
            "view-widened",
            Some(path),
            format!("{why}; the whole machine is read instead of this container's devices"),
        )
    };
    let mut out = Vec::new();
    for node in outline
        .process
        .dev_infiniband
        .iter()
        .filter(|n| n.starts_with("uverbs"))
    {
        if !outline
            .rdma_devices
            .iter()
            .any(|d| d.uverbs.as_deref() == Some(node.as_str()))
        {
            out.push(widened(
                &format!("/dev/infiniband/{node}"),
                format!("no RDMA device in /sys/class/infiniband has the verbs device {node}"),
            ));
        }
    }
    for (key, item) in outline.process.pcidevice_items() {
        if let Ok(addr) = item.parse::<PciAddr>()
            && outline.pci_function(addr).is_none()
        {
            out.push(widened(
                &format!("/sys/bus/pci/devices/{addr}"),
                format!("{key} names {addr}, which is not a PCI function here"),
            ));
        }
    }
    out
}

/// State shared by the readers: the root and the diagnostics collected so far.
pub(crate) struct Ctx<'a> {
    pub fs: &'a Sysfs,
    pub diags: Vec<Diagnostic>,
    pub needs: Needs,
    /// Reading every device in outline, for a [`Narrowing`] to choose from.
    pub outline: bool,
    /// In an outline, the functions this container names (its netdevs', `PCIDEVICE_*`)
    /// and those of its candidate RDMA devices: found by the RDMA outline, placed by the
    /// PCI one.
    pub named_functions: BTreeSet<PciAddr>,
    /// On a reading thread of [`Ctx::par_filter_map`], the threads its share of the
    /// work may spread over, itself included: a device's GID table while devices are
    /// read side by side gets the CPUs the devices leave. `None`: all of them.
    threads: Option<usize>,
    /// The process view leaves the rdma cgroup's limits to be read once the devices
    /// are known (a pod's files list every device of the host).
    pub rdma_limits_later: bool,
    /// The length of the last kernel table read ([`Ctx::table_len`]), tried first for the
    /// next: a host's ports are alike.
    last_table_len: usize,
}

impl<'a> Ctx<'a> {
    fn new(fs: &'a Sysfs, needs: Needs) -> Self {
        Self {
            fs,
            diags: Vec::new(),
            needs,
            outline: false,
            named_functions: BTreeSet::new(),
            threads: None,
            rdma_limits_later: false,
            last_table_len: 0,
        }
    }

    /// Read and parse an attribute. Missing: `None`, silently when `optional`.
    /// Unreadable or unparsable: `None` and a diagnostic naming the path.
    pub fn attr<T>(
        &mut self,
        path: &str,
        optional: bool,
        parse: impl FnOnce(&str) -> Result<T, ParseError>,
    ) -> Option<T> {
        // Parsed where it was read: no copy of the text.
        match self.fs.read_with(path, |text| parse(trim_attr(text))) {
            Ok(parsed) => self.accept(path, parsed),
            Err(e) if e.is_not_found() && optional => None,
            Err(e) => {
                self.unreadable(&e);
                None
            }
        }
    }

    /// As [`Ctx::attr`] of a required attribute, for `name` among `files` (a table's
    /// slots).
    pub fn attr_in<T>(
        &mut self,
        files: &DirFiles,
        name: &str,
        parse: impl FnOnce(&str) -> Result<T, ParseError>,
    ) -> Option<T> {
        match files.read_with(name, |text| parse(trim_attr(text))) {
            Ok(Ok(v)) => Some(v),
            Ok(refused) => self.accept(&files.path_of(name), refused),
            Err(e) => {
                self.unreadable(&e);
                None
            }
        }
    }

    /// The value parsed from the attribute at `path`; refused: `None` and a diagnostic
    /// naming the path.
    pub fn accept<T>(&mut self, path: &str, parsed: Result<T, ParseError>) -> Option<T> {
        match parsed {
            Ok(v) => Some(v),
            Err(e) => {
                self.diags.push(Diagnostic::new(
                    Severity::Warning,
                    "unparsable-attribute",
                    Some(path),
                    e.to_string(),
                ));
                None
            }
        }
    }

    /// Read an attribute's text, trimmed of its newline.
    pub fn text(&mut self, path: &str, optional: bool) -> Option<String> {
        match self.fs.read_with(path, |t| trim_attr(t).to_owned()) {
            Ok(t) => Some(t),
            Err(e) if e.is_not_found() && optional => None,
            Err(e) => {
                self.unreadable(&e);
                None
            }
        }
    }

    /// Read an attribute that legitimately fails on some kernels or slots (EINVAL on
    /// empty GID slots): any error is `None` without a diagnostic; empty text too.
    pub fn text_quiet(&self, path: &str) -> Option<String> {
        let t = self.fs.read_with(path, |t| trim_attr(t).to_owned()).ok()?;
        (!t.is_empty()).then_some(t)
    }

    pub fn unreadable(&mut self, e: &SysfsError) {
        let severity = if e.is_not_found() {
            Severity::Info
        } else {
            Severity::Warning
        };
        let code = if e.is_not_found() {
            "missing-attribute"
        } else {
            "unreadable-attribute"
        };
        self.diags.push(Diagnostic::new(
            severity,
            code,
            Some(e.path()),
            e.to_string(),
        ));
    }

    /// The results `f` gives over `items`, in order, spread over a few threads when
    /// each would get at least `per_thread` items: sysfs reads are system calls, and
    /// the machines this runs on have many cores. The threads take the next few items
    /// as they finish (items differ in cost: a bridge is not read at all in a
    /// [`PciFacts::Placement`] read); this one waits for them, which lets the scheduler give them
    /// every CPU at once (measured: working here too left one waiting). Each item's
    /// diagnostics are kept with it and appended in item order, so the result is the
    /// same as a sequential run's. Results are moved once more after `f` returns them
    /// (PCI functions are a few hundred bytes each).
    pub fn par_filter_map<T: Sync, R: Send>(
        &mut self,
        items: &[T],
        per_thread: usize,
        f: impl Fn(&mut Ctx, &T) -> Option<R> + Sync,
    ) -> Vec<R> {
        let threads = worker_threads(items.len(), per_thread, self.threads);
        if threads <= 1 {
            // Room for every item: untouched capacity costs no memory, growing copies.
            let mut out = Vec::with_capacity(items.len());
            out.extend(items.iter().filter_map(|item| f(self, item)));
            return out;
        }
        let limit = self.threads.unwrap_or_else(thread_limit);
        let (fs, needs, outline, last_table_len) =
            (self.fs, self.needs, self.outline, self.last_table_len);
        let next = std::sync::atomic::AtomicUsize::new(0);
        // A quarter of what makes a thread worth starting: one GID-table-sized device,
        // or a few PCI functions.
        let take = (per_thread / 4).max(1);
        // Each thread's chunks: where a chunk starts, and each item's result and
        // diagnostics.
        let work = || {
            let mut ctx = Ctx {
                outline,
                threads: Some((limit / threads).max(1)),
                last_table_len,
                ..Ctx::new(fs, needs)
            };
            let mut chunks = Vec::new();
            loop {
                let start = next.fetch_add(take, std::sync::atomic::Ordering::Relaxed);
                let Some(taken) = items.get(start..(start + take).min(items.len())) else {
                    break;
                };
                let chunk: Vec<_> = taken
                    .iter()
                    .map(|item| (f(&mut ctx, item), std::mem::take(&mut ctx.diags)))
                    .collect();
                chunks.push((start, chunk));
            }
            chunks
        };
        let work = &work;
        let mut chunks = std::thread::scope(|s| {
            // This thread takes its share too. A pod at its pids limit cannot start a
            // thread: then this one does it all.
            let helpers: Vec<_> = (1..threads)
                .filter_map(|_| std::thread::Builder::new().spawn_scoped(s, work).ok())
                .collect();
            let mut chunks = work();
            for helper in helpers {
                chunks.extend(
                    helper
                        .join()
                        .unwrap_or_else(|p| std::panic::resume_unwind(p)),
                );
            }
            chunks
        });
        chunks.sort_unstable_by_key(|(start, _)| *start);
        let found = chunks
            .iter()
            .flat_map(|(_, chunk)| chunk)
            .filter(|(result, _)| result.is_some())
            .count();
        let mut out = Vec::with_capacity(found);
        for (result, diags) in chunks.into_iter().flat_map(|(_, chunk)| chunk) {
            out.extend(result);
            self.diags.extend(diags);
        }
        out
    }

    pub fn list(&mut self, path: &str) -> Vec<String> {
        match self.fs.list_opt(path) {
            Ok(v) => v,
            Err(e) => {
                self.unreadable(&e);
                Vec::new()
            }
        }
    }

    /// How many entries a kernel table numbered from 0 holds (a port's GID slots): none
    /// where the table is missing or unreadable (a diagnostic says which).
    pub fn table_len(&mut self, path: &str) -> u32 {
        match self.fs.table_len(path, self.last_table_len) {
            Ok(len) => {
                self.last_table_len = len;
                u32::try_from(len).unwrap_or(u32::MAX)
            }
            Err(e) if e.is_not_found() => 0,
            Err(e) => {
                self.unreadable(&e);
                0
            }
        }
    }
}

/// An attribute's text without the newline (or NUL padding) the kernel ends it with.
fn trim_attr(text: &str) -> &str {
    text.trim_end_matches(['\n', '\0'])
}

/// PCI functions per thread below which another thread costs more than it saves (a
/// thread starts in tens of microseconds; a sysfs file takes a few to read). Half of
/// what it was while the calling thread only waited: now it takes a share.
pub(crate) const FUNCTIONS_PER_THREAD: usize = 8;
/// Bus links per thread below which another thread costs more than it saves: a link
/// is one `readlink` and a little string work, and on a VM a thread's start and join
/// cost a few hundred microseconds (measured on the shared 2-core VM: h100-dgx's 174
/// links on one thread take 0.3 ms less CPU than on two, and no more time).
pub(crate) const LINKS_PER_THREAD: usize = 128;
/// Most reading threads: sysfs lookups share kernel locks, so more stop paying.
const MAX_THREADS: usize = 8;

/// Threads for `items`: `limit` ([`thread_limit`] where `None`), and fewer where each
/// would get less than `per_thread` items. One without asking the limit, whose first
/// answer costs reads of the cgroup's CPU quota.
fn worker_threads(items: usize, per_thread: usize, limit: Option<usize>) -> usize {
    match items / per_thread.max(1) {
        0 | 1 => 1,
        wanted => limit.unwrap_or_else(thread_limit).min(wanted),
    }
}

/// The most threads a read spreads over: the CPUs this process may use, at most
/// [`MAX_THREADS`] or `RDMATOPO_THREADS` (1: read on the calling thread only).
fn thread_limit() -> usize {
    // Asked once: on Linux the answer costs reads of the cgroup's CPU quota.
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    let cores = *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, usize::from));
    let cap = std::env::var("RDMATOPO_THREADS")
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .unwrap_or(MAX_THREADS);
    cores.min(MAX_THREADS).min(cap).max(1)
}

#[cfg(test)]
mod tests;
