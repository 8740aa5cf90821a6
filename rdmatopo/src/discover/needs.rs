//! What an answer needs read: one field per kind of fact, each alone deciding its
//! reads, and one constant per answer.

/// What an answer needs read. Each field is one kind of fact and alone decides the
/// reads of it; each answer states its needs once, as one of the constants below
/// (`topo`, `gids`, `netdevs`, `nccl-env`, and [`Needs::ALL`] for `doctor`, `inventory`
/// and the front ends). Inside a container the same needs hold for the devices it owns
/// (see `Narrowing`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Needs {
    /// NUMA nodes and their CPUs (`/sys/devices/system/node`), the PCI tree and the
    /// process view. Without them a read holds RDMA devices and netdevs only.
    pub(crate) machine: bool,
    /// The NVML and verbs facts ([`crate::sources`]; with `machine` only): loading
    /// libnvidia-ml can cost more than a whole read, so an answer about RDMA devices
    /// alone goes without.
    pub(crate) sources: bool,
    /// How much of each PCI function.
    pub(crate) pci: PciFacts,
    /// `node<N>/distance` of each NUMA node.
    pub(crate) numa_distances: bool,
    /// `node<N>/meminfo`'s `MemTotal` of each NUMA node.
    pub(crate) numa_memory: bool,
    /// How much of the host.
    pub(crate) host: HostFacts,
    /// The whole process view (device nodes, the driver's GPU list, runtime mounts),
    /// not only its CPU mask and container evidence (status, cgroups, environment).
    pub(crate) process_whole: bool,
    /// The process's limits: `RLIMIT_MEMLOCK` (`/proc/self/limits`) and the rdma
    /// cgroup's `rdma.max` and `rdma.current`.
    pub(crate) limits: bool,
    /// RDMA devices' ports (`ports/<p>`); without them a device is its name and
    /// function.
    pub(crate) ports: bool,
    /// Each RDMA device's verbs node (`/sys/class/infiniband_verbs/uverbs<N>/ibdev`).
    pub(crate) uverbs: bool,
    /// How much of RDMA devices' adapter facts and ports' link state.
    pub(crate) device: DeviceFacts,
    /// How much of each port's GID table.
    pub(crate) gids: GidFacts,
    /// How much of each netdev of this namespace.
    pub(crate) netdevs: NetdevFacts,
    /// The QoS of RoCE ports and their netdevs (`tc/`, `qos/`, `ecn/`).
    pub(crate) qos: bool,
    /// The sources' facts checked against sysfs (needs [`DeviceFacts::Whole`]).
    pub(crate) cross_check: bool,
    /// Inside a container, the functions below the root port of an owned GPU whose NICs
    /// are all elsewhere (the nearer NIC and the switch ports a distance check weighs).
    pub(crate) far_gpu_neighbours: bool,
    /// Inside a container, which names of the RDMA devices it does not own an owned
    /// view keeps (it always knows how many there are).
    pub(crate) others: OtherNames,
}

/// Which names of the RDMA devices a container does not own its owned view keeps
/// ([`Needs::others`], [`crate::model::DetailView::other_rdma_devices`]). Each is an
/// entry of the host's `/sys/class/infiniband`, hundreds on a host of SR-IOV pods: a
/// name kept costs a `String` and its place in a sort, a name counted costs neither.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OtherNames {
    /// None: how many there are (`topo`'s header, "2 of 28 RDMA devices").
    None,
    /// The first `n` in natural order, and how many (a note that names a few, as
    /// `nccl-env`'s does).
    First(usize),
    /// Every one: what asks about a device by name (`gids --device`) and what lists
    /// them all (`doctor`, `inventory`, the front ends).
    All,
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
    Identity,
    /// As [`NetdevFacts::Identity`], with `carrier`, `master` and bond for the netdevs
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
    /// Everything the model holds: `doctor`, `inventory`, `snapshot`, the front ends.
    pub const ALL: Self = Self {
        machine: true,
        sources: true,
        pci: PciFacts::Whole,
        numa_distances: true,
        numa_memory: true,
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
        far_gpu_neighbours: true,
        others: OtherNames::All,
    };

    /// Nothing: a start for stating needs field by field.
    pub const NONE: Self = Self {
        machine: false,
        sources: false,
        pci: PciFacts::Placement,
        numa_distances: false,
        numa_memory: false,
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
        far_gpu_neighbours: false,
        others: OtherNames::None,
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
    /// and whole GID table, and this namespace's netdevs in part.
    pub const GIDS: Self = Self {
        ports: true,
        gids: GidFacts::Whole,
        netdevs: NetdevFacts::Identity,
        others: OtherNames::All,
        ..Self::NONE
    };

    /// `netdevs` (ibdev2netdev): RDMA devices with their function, each port's
    /// `link_layer` and GIDs up to the first naming a netdev, the netdevs it prints.
    pub const NETDEVS: Self = Self {
        ports: true,
        gids: GidFacts::UpToNetdev,
        netdevs: NetdevFacts::Printed,
        others: OtherNames::All,
        ..Self::NONE
    };

    /// `nccl-env` and the rank plan: the placement of GPUs and RDMA devices' functions
    /// (with the GPUs' names), GID slots up to NCCL's choice, ports' state and adapters'
    /// `sys_image_guid`, this namespace's netdevs by kind and link (and their state and
    /// addresses where no default route names one), the online CPUs, QoS. Not what only
    /// `doctor` or `inventory` shows (NUMA distances and memory, the process's limits, other
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
        numa_memory: false,
        limits: false,
        cross_check: false,
        far_gpu_neighbours: false,
        // Its note names the first four of the devices left out
        // (`view::words::SHORT_LIST`).
        others: OtherNames::First(4),
        ..Self::ALL
    };

    /// The `k8s` generators (device plugin configs, node labels, pods, DRA claims): the
    /// whole model but each port's GID table past NCCL's choice, which no generated
    /// object states (a label names the rails' GID index, that choice). On an SR-IOV
    /// host the tables are most of the files. The tests of `export::k8s` hold every
    /// generator's output so read equal to its output from [`Needs::ALL`] on every
    /// fixture.
    pub(crate) const K8S: Self = Self {
        gids: GidFacts::UpToChoice,
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
