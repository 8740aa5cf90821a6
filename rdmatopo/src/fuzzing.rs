//! Fuzz target bodies. The targets in `fuzz/fuzz_targets/` are one-line calls into
//! this module, so `tests/fuzz_regressions.rs` replays every crash file through the
//! very same code in the normal test suite. Not part of the public API.
//!
//! Each parser body checks a round trip (`parse(format(parse(x))) == parse(x)`) where
//! the value has a canonical text form, and otherwise only that the parser returns.
//! The discovery body builds an in-memory tree from structured input and checks that
//! discovery returns, that its output stays bounded by the size of the tree, and that
//! the model's JSON reads back into the same model.

#![allow(clippy::panic, clippy::unwrap_used, clippy::expect_used)]

use crate::parse::{self, CpuSet, PciAddr};
use crate::sysfs::{MemEntry, MemTree, Sysfs};
use crate::view::TopoMatrix;
use crate::{Topology, model::NvmlSnapshot};
use arbitrary::{Arbitrary, Unstructured};
use std::collections::BTreeMap;

/// A fuzz target's body.
pub type FuzzBody = fn(&[u8]);

/// Every target: its name (as in `fuzz/fuzz_targets/<name>.rs`) and its body.
pub const TARGETS: &[(&str, FuzzBody)] = &[
    ("cpulist", cpulist),
    ("cpumask", cpumask),
    ("pci_addr", pci_addr),
    ("link_speed", link_speed),
    ("port_state", port_state),
    ("rate", rate),
    ("gid", gid),
    ("rdma_max", rdma_max),
    ("proc_status", proc_status),
    ("nccl_ib_hca", nccl_ib_hca),
    ("pcicfg", pcicfg),
    ("pci_uevent", pci_uevent),
    ("discover", discover),
    ("discover_full", discover_full),
    ("archive", archive),
];

/// Run the target called `name` on `data`; `false` when there is no such target.
pub fn run(name: &str, data: &[u8]) -> bool {
    match TARGETS.iter().find(|(n, _)| *n == name) {
        Some((_, body)) => {
            body(data);
            true
        }
        None => false,
    }
}

fn text(data: &[u8]) -> Option<&str> {
    std::str::from_utf8(data).ok()
}

/// The kernel's cpumask text for a set (`%*pb`: 32-bit words, most significant first).
fn cpumask_text(set: &CpuSet) -> String {
    let top = set.iter().last().unwrap_or(0);
    let mut words = vec![0u32; top as usize / 32 + 1];
    for cpu in set.iter() {
        words[cpu as usize / 32] |= 1 << (cpu % 32);
    }
    words
        .iter()
        .rev()
        .map(|w| format!("{w:08x}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// Both CPU-set forms of `set` parse back to `set`.
fn check_cpuset(set: &CpuSet) {
    let list = set.to_string();
    assert_eq!(
        &parse::parse_cpulist(&list).unwrap(),
        set,
        "cpulist {list:?}"
    );
    let mask = cpumask_text(set);
    assert_eq!(
        &parse::parse_cpumask(&mask).unwrap(),
        set,
        "cpumask {mask:?}"
    );
    assert_eq!(set.len(), set.iter().count());
}

/// `local_cpulist`, `cpulist`, `Cpus_allowed_list`.
pub fn cpulist(data: &[u8]) {
    if let Some(Ok(set)) = text(data).map(parse::parse_cpulist) {
        check_cpuset(&set);
    }
}

/// `local_cpus`, `cpumap`.
pub fn cpumask(data: &[u8]) {
    if let Some(Ok(set)) = text(data).map(parse::parse_cpumask) {
        check_cpuset(&set);
    }
}

/// Directory names under `/sys/bus/pci/devices`, NVML bus ids.
pub fn pci_addr(data: &[u8]) {
    let Some(t) = text(data) else { return };
    let _ = PciAddr::looks_like(t);
    if let Ok(addr) = t.parse::<PciAddr>() {
        assert_eq!(addr.to_string().parse::<PciAddr>().unwrap(), addr);
        assert_eq!(addr.nvml().parse::<PciAddr>().unwrap(), addr);
        let json = serde_json::to_string(&addr).unwrap();
        assert_eq!(serde_json::from_str::<PciAddr>(&json).unwrap(), addr);
    }
}

/// `current_link_speed`, `max_link_speed`.
pub fn link_speed(data: &[u8]) {
    let Some(t) = text(data) else { return };
    if let Ok(Some(speed)) = parse::parse_link_speed(t) {
        assert!((0.0..=1024.0).contains(&speed.gts), "{speed:?}");
        assert!((1..=6).contains(&speed.generation()));
        let again = parse::parse_link_speed(&format!("{} GT/s PCIe", speed.gts)).unwrap();
        assert_eq!(again, Some(speed));
    }
}

/// `ports/<n>/state`, `phys_state` and `link_layer`.
pub fn port_state(data: &[u8]) {
    let Some(t) = text(data) else { return };
    let _ = parse::parse_port_state(t);
    let _ = parse::parse_link_layer(t);
    if let Ok(p) = parse::parse_phys_state(t) {
        let again = parse::parse_phys_state(&format!("{}: {}", p.code, p.name)).unwrap();
        assert_eq!(again, p);
    }
}

/// `ports/<n>/rate`.
pub fn rate(data: &[u8]) {
    let Some(t) = text(data) else { return };
    if let Ok(r) = parse::parse_rate(t) {
        assert!(r.gbps.is_finite());
        let again =
            parse::parse_rate(&format!("{} Gb/sec ({}X {})", r.gbps, r.lanes, r.speed)).unwrap();
        assert_eq!(again, r);
    }
}

/// `ports/<n>/gids/<i>` and `gid_attrs/types/<i>`.
pub fn gid(data: &[u8]) {
    let Some(t) = text(data) else { return };
    if let Ok(g) = parse::parse_gid(t) {
        let canonical = parse::format_gid(&g);
        assert_eq!(canonical.len(), 39, "{canonical}");
        assert_eq!(parse::parse_gid(&canonical).unwrap(), g);
        let _ = (parse::gid_ipv4(&g), parse::gid_is_link_local(&g));
    }
    if let Ok(kind) = parse::parse_gid_type(t) {
        assert_eq!(parse::parse_gid_type(kind.as_str()).unwrap(), kind);
    }
}

/// The rdma cgroup controller's `rdma.max` / `rdma.current`.
pub fn rdma_max(data: &[u8]) {
    let Some(t) = text(data) else { return };
    let Ok(limits) = parse::parse_rdma_cgroup(t) else {
        return;
    };
    assert!(limits.len() <= t.lines().count());
    let value = |v: parse::RdmaLimitValue| match v {
        parse::RdmaLimitValue::Max => "max".to_string(),
        parse::RdmaLimitValue::Count(n) => n.to_string(),
    };
    let mut again = String::new();
    for l in &limits {
        again.push_str(&l.device);
        if let Some(v) = l.hca_handle {
            again.push_str(&format!(" hca_handle={}", value(v)));
        }
        if let Some(v) = l.hca_object {
            again.push_str(&format!(" hca_object={}", value(v)));
        }
        again.push('\n');
    }
    assert_eq!(
        parse::parse_rdma_cgroup(&again).unwrap(),
        limits,
        "{again:?}"
    );
}

/// `/proc/self/status` and the other per-process files discovery reads.
pub fn proc_status(data: &[u8]) {
    let _ = parse::parse_environ(data);
    let Some(t) = text(data) else { return };
    if let Some(v) = parse::parse_status_field(t, "Cpus_allowed_list")
        && let Ok(set) = parse::parse_cpulist(v)
    {
        check_cpuset(&set);
    }
    if let Some(v) = parse::parse_status_field(t, "Cpus_allowed") {
        let _ = parse::parse_cpumask(v);
    }
    let _ = parse::parse_cgroup(t);
    let _ = parse::parse_limits_memlock(t);
    let _ = parse::parse_route(t);
    let _ = parse::parse_fib_trie_local(t);
}

/// `NCCL_IB_HCA` values: the canonical text parses back to the same filter, and the
/// filter agrees with itself on the names it lists.
pub fn nccl_ib_hca(data: &[u8]) {
    let Some(t) = text(data) else { return };
    let Ok(filter) = parse::parse_nccl_ib_hca(t) else {
        return;
    };
    assert!(filter.entries.len() <= parse::MAX_HCA_ENTRIES);
    let canonical = filter.to_string();
    let again = parse::parse_nccl_ib_hca(&canonical).unwrap();
    assert_eq!(
        (again.exclude, again.exact, &again.entries),
        (filter.exclude, filter.exact, &filter.entries),
        "{canonical:?}"
    );
    for e in &filter.entries {
        assert!(!e.name.is_empty() && !e.name.contains([',', ':', '\0']));
        let port = e.port.and_then(|p| u32::try_from(p).ok()).unwrap_or(1);
        if e.port.is_none_or(|p| p >= 1) {
            assert_eq!(filter.selects(&e.name, port), !filter.exclude, "{e:?}");
        }
    }
}

/// A PCI function's `uevent`: what it accepts is what the kernel's `pci_uevent` prints
/// back, and the ids are the ones printed.
pub fn pci_uevent(data: &[u8]) {
    let Some(t) = text(data) else { return };
    if let Ok(ids) = parse::parse_pci_uevent(t) {
        assert!(ids.class <= 0xff_ffff, "{ids:?}");
        let mut again = format!(
            "PCI_CLASS={:04X}\nPCI_ID={:04X}:{:04X}\n",
            ids.class, ids.vendor, ids.device
        );
        if let Some((vendor, device)) = ids.subsystem {
            again += &format!("PCI_SUBSYS_ID={vendor:04X}:{device:04X}\n");
        }
        if let Some(driver) = &ids.driver {
            again = format!("DRIVER={driver}\n{again}");
        }
        assert_eq!(parse::parse_pci_uevent(&again).unwrap(), ids);
    }
}

/// Binary PCI configuration space (`config`): the extended-capability walk ends, stays
/// inside the 4 KiB space, and the ACS registers read back bit for bit.
pub fn pcicfg(data: &[u8]) {
    if let Ok(caps) = parse::parse_ext_caps(data) {
        assert!(caps.len() <= (4096 - 0x100) / 4);
        for c in &caps {
            assert!(
                (0x100..4096).contains(&c.offset) && c.offset % 4 == 0,
                "{c:?}"
            );
        }
    }
    if let Ok(parse::AcsState::Present {
        capability,
        control,
    }) = parse::parse_acs(data)
    {
        for flags in [capability, control] {
            assert_eq!(parse::AcsFlags::from_bits(flags.bits()), flags);
            assert!(flags.bits() < 0x80);
            let _ = flags.lspci();
        }
    }
    let raw = u16::from_le_bytes([
        data.first().copied().unwrap_or(0),
        data.get(1).copied().unwrap_or(0),
    ]);
    assert_eq!(parse::AcsFlags::from_bits(raw).bits(), raw & 0x7f);
}

// ---------------------------------------------------------------------------------
// Discovery over an arbitrary tree.

/// Path components discovery looks for, so that random trees reach deep code.
const WORDS: &[&str] = &[
    "sys",
    "devices",
    "bus",
    "pci",
    "class",
    "infiniband",
    "infiniband_verbs",
    "net",
    "system",
    "node",
    "cpu",
    "online",
    "node0",
    "node1",
    "cpulist",
    "distance",
    "pci0000:00",
    "pci0000:80",
    "ports",
    "1",
    "2",
    "gids",
    "gid_attrs",
    "types",
    "ndevs",
    "0",
    "device",
    "vendor",
    "subsystem_vendor",
    "subsystem_device",
    "numa_node",
    "local_cpulist",
    "current_link_speed",
    "max_link_speed",
    "current_link_width",
    "max_link_width",
    "driver",
    "physfn",
    "virtfn0",
    "virtfn1",
    "sriov_totalvfs",
    "sriov_numvfs",
    "iommu_group",
    "state",
    "phys_state",
    "rate",
    "link_layer",
    "lid",
    "node_guid",
    "fw_ver",
    "mlx5_0",
    "mlx5_1",
    "mlx5_bond_0",
    "uverbs0",
    "ibdev",
    "eth0",
    "bond0",
    "lo",
    "bonding",
    "slaves",
    "mode",
    "master",
    "mtu",
    "operstate",
    "speed",
    "address",
    "type",
    "ifindex",
    "carrier",
    "proc",
    "self",
    "status",
    "cgroup",
    "environ",
    "limits",
    "fs",
    "rdma.max",
    "rdma.current",
    "cpuset.cpus.effective",
    "route",
    "fib_trie",
    "cpuinfo",
    "dev",
    "nvidia0",
    "rdmatopo",
    "nvml.json",
    "verbs.json",
    "virtual",
    "..",
    ".",
    "module",
    "nvidia",
    "version",
    "0000:00:01.0",
    "0000:01:00.0",
    "0000:02:00.0",
    "0000:02:01.0",
    "0000:03:00.0",
    "0000:04:00.0",
    "0000:04:00.1",
    "0000:81:00.0",
];

/// Attribute texts that parse, or almost parse.
const VALUES: &[&str] = &[
    "0x10de\n",
    "0x15b3\n",
    "0x030200\n",
    "0x020700\n",
    "0x060400\n",
    "0x2330\n",
    "0x1021\n",
    "0x101e\n",
    "-1\n",
    "0\n",
    "1\n",
    "999\n",
    "4: ACTIVE\n",
    "1: DOWN\n",
    "5: LinkUp\n",
    "400 Gb/sec (4X NDR)\n",
    "InfiniBand\n",
    "Ethernet\n",
    "RoCE v2\n",
    "IB/RoCE v1\n",
    "fe80:0000:0000:0000:0000:0000:0000:0001\n",
    "0000:0000:0000:0000:0000:ffff:0a00:0001\n",
    "0-15\n",
    "16-31\n",
    "32.0 GT/s PCIe\n",
    "Unknown\n",
    "16\n",
    "10 20\n",
    "mlx5_0\n",
    "eth0\n",
    "Name:\tx\nCpus_allowed_list:\t0-7\n",
    "0::/pod\n",
    "mlx5_0 hca_handle=2 hca_object=max\n",
    "",
    "\n",
    "\0",
    "max\n",
    "up\n",
    "9000\n",
    "eth0 eth1\n",
    "802.3ad 4\n",
    "{}",
    "null",
    "Max locked memory         unlimited            unlimited            bytes\n",
];

/// Path components of the files only [`full_machine`] holds (QoS, config space,
/// `uevent`, the NVIDIA driver's and the mount table's files), for `discover_full`.
const MORE_WORDS: &[&str] = &[
    "uevent",
    "config",
    "iommu_groups",
    "qos",
    "ecn",
    "roce_np",
    "roce_rp",
    "enable",
    "prio2buffer",
    "buffer_size",
    "maxrate",
    "tc_num",
    "tc",
    "traffic_class",
    "sriov",
    "kernel",
    "rdma_cm",
    "default_roce_tos",
    "default_roce_mode",
    "cnp_dscp",
    "rpg_ai_rate",
    "mountinfo",
    "gpus",
    "information",
    "0000:03:00.0",
    "sys_image_guid",
    "board_id",
    "node_type",
    "iflink",
    "sriov_offset",
    "sriov_stride",
    "3",
    "7",
];

/// MLNX_OFED's `qos/prio2buffer`: priority 3 in buffer 1, the others in buffer 0.
const PRIO2BUFFER: &str =
    "Priority\tBuffer\n0\t\t0\n1\t\t0\n2\t\t0\n3\t\t1\n4\t\t0\n5\t\t0\n6\t\t0\n7\t\t0\n";
/// MLNX_OFED's `qos/buffer_size`: buffer 1 lossless (pause thresholds), buffer 0 not.
const BUFFER_SIZE: &str = "Port buffer size = 524160\nBuffer\tSize\txoff_threshold\txon_threshold\n\
     0\t262016\t0\t\t0\n1\t262016\t160128\t\t150528\n";

/// Attribute texts of those files, as the drivers print them or almost.
const MORE_VALUES: &[&str] = &[
    "Global tclass=106\n",
    "dst_ip=10.0.0.0/8,tclass=96\n",
    PRIO2BUFFER,
    BUFFER_SIZE,
    "0 0 0 0 0 0 0 0 \n",
    "VF         : 0\nMAC        : 02:00:00:00:00:01\nVLAN       : 5\nQoS        : 3\nSpoofCheck : ON\nTrust      : ON\n",
    "DRIVER=mlx5_core\nPCI_CLASS=20000\nPCI_ID=15B3:1021\nPCI_SUBSYS_ID=15B3:0023\n",
    "PCI_CLASS=30200\nPCI_ID=10DE:2330\n",
    "Model: \t\t NVIDIA H100 80GB HBM3\nGPU UUID: \t GPU-0\nDevice Minor: \t 0\n",
    "1290 1180 0:245 / /proc/driver/nvidia rw - tmpfs tmpfs rw\n",
    "1291 1180 0:6 /nvidia0 /dev/nvidia0 rw - devtmpfs udev rw\n",
];

/// What a tree's edits draw on: path components and attribute texts, each a list and
/// its continuation.
struct Vocabulary {
    words: [&'static [&'static str]; 2],
    values: [&'static [&'static str]; 2],
}

impl Vocabulary {
    /// The `discover` target's (as it has always been, so that its corpus and
    /// regressions keep their meaning).
    const BASE: Self = Self {
        words: [WORDS, &[]],
        values: [VALUES, &[]],
    };
    /// The `discover_full` target's.
    const FULL: Self = Self {
        words: [WORDS, MORE_WORDS],
        values: [VALUES, MORE_VALUES],
    };

    fn nth(lists: &[&'static [&'static str]; 2], i: u8) -> &'static str {
        let i = usize::from(i) % (lists[0].len() + lists[1].len());
        lists[0]
            .get(i)
            .unwrap_or_else(|| &lists[1][i - lists[0].len()])
    }
    fn word(&self, i: u8) -> &'static str {
        Self::nth(&self.words, i)
    }
    fn value(&self, i: u8) -> &'static str {
        Self::nth(&self.values, i)
    }
}

/// Input of the `discover` target: edits applied to an empty root or to a small,
/// realistic machine ([`base_machine`]).
#[derive(Debug, Arbitrary)]
pub struct TreeInput {
    pub start_from_base: bool,
    pub edits: Vec<Edit>,
}

/// One change to the tree.
#[derive(Debug, Arbitrary)]
pub enum Edit {
    Set { at: Target, entry: Entry },
    Remove { existing: u16 },
}

/// Where an edit applies.
#[derive(Debug, Arbitrary)]
pub enum Target {
    /// An entry already in the tree (index modulo the number of entries).
    Existing(u16),
    /// A child of an existing directory.
    Child(u16, Comp),
    /// A path built from scratch.
    Path(Vec<Comp>),
}

/// One path component.
#[derive(Debug, Arbitrary)]
pub enum Comp {
    Word(u8),
    Pci {
        domain: u16,
        bus: u8,
        device: u8,
        function: u8,
    },
    Index(u16),
    Name(String),
}

/// What is put there.
#[derive(Debug, Arbitrary)]
pub enum Entry {
    Dir,
    Value(u8),
    Bytes(Vec<u8>),
    Number(i64),
    /// A symlink climbing `up` levels and then descending through `to`.
    Link {
        absolute: bool,
        up: u8,
        to: Vec<Comp>,
    },
    /// A relative symlink to an existing entry (or to itself, or to an ancestor).
    LinkToExisting(u16),
    Fifo,
    Unreadable(Errno),
}

#[derive(Debug, Clone, Copy, Arbitrary)]
pub enum Errno {
    Einval,
    Eacces,
    Eio,
    Enodev,
    Enoent,
}

impl Comp {
    fn text(&self, vocabulary: &Vocabulary) -> String {
        match self {
            Self::Word(i) => vocabulary.word(*i).to_string(),
            Self::Pci {
                domain,
                bus,
                device,
                function,
            } => PciAddr::new(u32::from(*domain), *bus, device % 32, function % 8).to_string(),
            Self::Index(i) => i.to_string(),
            Self::Name(s) => s.chars().take(64).collect(),
        }
    }
}

fn path_of(comps: &[Comp], vocabulary: &Vocabulary) -> String {
    let mut p = String::new();
    for c in comps.iter().take(16) {
        p.push('/');
        p.push_str(&c.text(vocabulary));
    }
    if p.is_empty() { "/".into() } else { p }
}

/// A relative link from `from` to `to` (both absolute logical paths).
fn relative_link(from: &str, to: &str) -> String {
    let from_dir: Vec<&str> = from.split('/').filter(|c| !c.is_empty()).collect();
    let from_dir = &from_dir[..from_dir.len().saturating_sub(1)];
    let to: Vec<&str> = to.split('/').filter(|c| !c.is_empty()).collect();
    let common = from_dir.iter().zip(&to).take_while(|(a, b)| a == b).count();
    let mut parts = vec![".."; from_dir.len() - common];
    parts.extend(&to[common..]);
    if parts.is_empty() {
        ".".into()
    } else {
        parts.join("/")
    }
}

impl TreeInput {
    /// Most edits applied; more only slow the fuzzer down without reaching new code.
    pub const MAX_EDITS: usize = 64;

    /// The tree this input describes: edits to [`base_machine`] or to an empty root.
    pub fn build(&self) -> MemTree {
        // Built once: rebuilding it for every input halved the fuzzer's speed.
        static BASE: std::sync::OnceLock<BTreeMap<String, MemEntry>> = std::sync::OnceLock::new();
        self.build_on(&BASE, base_machine, &Vocabulary::BASE)
    }

    /// As [`TreeInput::build`], on [`full_machine`] and with its files' words and values.
    pub fn build_full(&self) -> MemTree {
        static FULL: std::sync::OnceLock<BTreeMap<String, MemEntry>> = std::sync::OnceLock::new();
        self.build_on(&FULL, full_machine, &Vocabulary::FULL)
    }

    fn build_on(
        &self,
        base: &std::sync::OnceLock<BTreeMap<String, MemEntry>>,
        machine: fn() -> MemTree,
        vocabulary: &Vocabulary,
    ) -> MemTree {
        let mut entries: BTreeMap<String, MemEntry> = BTreeMap::new();
        if self.start_from_base {
            entries = base
                .get_or_init(|| {
                    machine()
                        .entries()
                        .map(|(p, e)| (p.to_string(), e.clone()))
                        .collect()
                })
                .clone();
        }
        let pick = |entries: &BTreeMap<String, MemEntry>, i: u16| -> Option<String> {
            let n = entries.len();
            (n > 0).then(|| entries.keys().nth(i as usize % n).cloned())?
        };
        for edit in self.edits.iter().take(Self::MAX_EDITS) {
            match edit {
                Edit::Remove { existing } => {
                    if let Some(p) = pick(&entries, *existing) {
                        entries.remove(&p);
                    }
                }
                Edit::Set { at, entry } => {
                    let path = match at {
                        Target::Existing(i) => pick(&entries, *i),
                        Target::Child(i, c) => pick(&entries, *i)
                            .map(|p| format!("{}/{}", p.trim_end_matches('/'), c.text(vocabulary))),
                        Target::Path(comps) => Some(path_of(comps, vocabulary)),
                    };
                    let Some(path) = path else { continue };
                    let entry = match entry {
                        Entry::Dir => MemEntry::Dir,
                        Entry::Value(i) => MemEntry::File(vocabulary.value(*i).as_bytes().to_vec()),
                        Entry::Bytes(b) => MemEntry::File(b.clone()),
                        Entry::Number(n) => MemEntry::File(format!("{n}\n").into_bytes()),
                        Entry::Link { absolute, up, to } => {
                            let mut t = if *absolute {
                                String::from("/")
                            } else {
                                String::new()
                            };
                            for _ in 0..(*up % 12) {
                                t.push_str("../");
                            }
                            t.push_str(path_of(to, vocabulary).trim_start_matches('/'));
                            MemEntry::Symlink(t)
                        }
                        Entry::LinkToExisting(i) => match pick(&entries, *i) {
                            Some(to) => MemEntry::Symlink(relative_link(&path, &to)),
                            None => continue,
                        },
                        Entry::Fifo => MemEntry::Other,
                        Entry::Unreadable(e) => MemEntry::Unreadable(match e {
                            Errno::Einval => libc::EINVAL,
                            Errno::Eacces => libc::EACCES,
                            Errno::Eio => libc::EIO,
                            Errno::Enodev => libc::ENODEV,
                            Errno::Enoent => libc::ENOENT,
                        }),
                    };
                    entries.insert(path, entry);
                }
            }
        }
        let mut tree = MemTree::new();
        for (p, e) in entries {
            tree.insert(&p, e);
        }
        tree
    }
}

/// Structured input → tree → [`check_discovery`].
pub fn discover(data: &[u8]) {
    let Ok(input) = TreeInput::arbitrary_take_rest(Unstructured::new(data)) else {
        return;
    };
    check_discovery(input.build());
}

/// As `discover`, on [`full_machine`]: the files no answer but `doctor`, `qos` and
/// `inventory` reads (MLNX_OFED's QoS files, config space, `uevent`, the NVIDIA driver's
/// and the mount table's files, a verbs snapshot) edited too.
pub fn discover_full(data: &[u8]) {
    let Ok(input) = TreeInput::arbitrary_take_rest(Unstructured::new(data)) else {
        return;
    };
    check_discovery(input.build_full());
}

/// A snapshot archive (`--root x.tar.gz`, `diff`, `cluster`: files from other machines),
/// read as a tar and as a gzip of one: the reader returns; a tree it accepts holds only
/// absolute paths with no `.` or `..` step, within the unpacking limits, and reads as a
/// root does ([`check_discovery`]).
pub fn archive(data: &[u8]) {
    let gz = flate2::read::GzDecoder::new(data);
    for tree in [
        crate::snapshot::load_reader(data, "fuzz.tar"),
        crate::snapshot::load_reader(gz, "fuzz.tar.gz"),
    ] {
        let Ok(tree) = tree else { continue };
        assert!(tree.len() <= crate::snapshot::MAX_ENTRIES);
        let mut bytes = 0u64;
        for (path, entry) in tree.entries() {
            assert!(path.starts_with('/'), "{path:?}");
            assert!(
                !path.split('/').any(|step| step == "." || step == ".."),
                "{path:?}"
            );
            if let MemEntry::File(b) = entry {
                bytes += b.len() as u64;
            }
        }
        assert!(bytes <= crate::snapshot::MAX_UNPACKED_BYTES);
        check_discovery(tree);
    }
}

/// Discover `tree` (in both scopes) and check what every tree must give: no panic,
/// output bounded by the size of the tree, a model whose JSON reads back the same, and a
/// matrix.
/// Returns the model (`None` when the tree holds no sysfs, the one allowed error).
pub fn check_discovery(tree: MemTree) -> Option<Topology> {
    let n = tree.len() + 1;
    let bytes: usize = tree
        .entries()
        .map(|(p, e)| {
            p.len()
                + match e {
                    MemEntry::File(b) => b.len(),
                    MemEntry::Symlink(t) => t.len(),
                    _ => 0,
                }
        })
        .sum();
    // The narrower needs of `topo`, `gids`, `netdevs` and `nccl-env` must hold up on
    // the same tree. (The affinity matrix may differ from the full one's on a broken
    // tree: a placement read does not read the vendor of most functions, so it keeps
    // some a whole read drops.)
    for needs in [
        crate::Needs::TOPO,
        crate::Needs::GIDS,
        crate::Needs::NETDEVS,
        crate::Needs::NCCL_ENV,
    ] {
        let narrow = Sysfs::memory(tree.clone(), "fuzz");
        if let Ok(t) = crate::discover_needs(&narrow, needs) {
            assert!(t.pci.len() <= n && t.rdma_devices.len() <= n && t.netdevs.len() <= n);
            let _ = crate::export::table::nvidia_smi_table(&TopoMatrix::for_topology(&t), false);
            for d in &t.rdma_devices {
                for p in &d.ports {
                    let _ = crate::view::gid::choose_gid(&t, &d.name, p.number);
                }
            }
        }
    }
    let fs = Sysfs::memory(tree, "fuzz");
    let topo = crate::discover_fs(&fs).ok()?;
    // Every device is a distinct entry of the tree; several may share one directory
    // through symlinks, but never more than the links that name them.
    for (what, count) in [
        ("PCI functions", topo.pci.len()),
        ("RDMA devices", topo.rdma_devices.len()),
        ("netdevs", topo.netdevs.len()),
        ("NUMA nodes", topo.numa_nodes.len()),
        ("host bridges", topo.host_bridges.len()),
    ] {
        assert!(count <= n, "{count} {what} from a tree of {n} entries");
    }
    // Work is polynomial in the tree: each device × port × GID slot reads a few files.
    let reads = fs.files_read();
    assert!(reads <= 16 * n * n * n, "{reads} reads for {n} entries");
    let json = topo.to_json();
    let limit = 4096 + 64 * n * n * (bytes + n).min(1 << 16);
    assert!(
        json.len() <= limit,
        "{} bytes of JSON for {n} entries",
        json.len()
    );
    let back = Topology::read_json(&json).expect("the model's JSON reads back");
    if back != topo {
        panic!(
            "JSON round trip changed the model: {}",
            first_difference(&topo, &back)
        );
    }
    let matrix = TopoMatrix::for_topology(&topo);
    let _ = crate::export::table::nvidia_smi_table(&matrix, false);
    for d in &topo.diagnostics {
        if let Some(p) = &d.path {
            assert!(
                p.starts_with('/'),
                "diagnostic path {p:?} is not a logical path"
            );
        }
    }
    Some(topo)
}

/// The first line where two values' pretty Debug forms differ (models are long).
fn first_difference(a: &impl std::fmt::Debug, b: &impl std::fmt::Debug) -> String {
    let (a, b) = (format!("{a:#?}"), format!("{b:#?}"));
    a.lines()
        .zip(b.lines())
        .find(|(x, y)| x != y)
        .map(|(x, y)| format!("before {:?}, after {:?}", x.trim(), y.trim()))
        .unwrap_or_else(|| "lengths differ".into())
}

/// A small, realistic machine: two host bridges on two NUMA nodes, a PCIe switch with
/// a GPU and a ConnectX-7 (an SR-IOV PF with one VF) below it, a second GPU on the
/// other socket, one RoCE port with a GID table, netdevs (one bonded), a container's
/// process view with cgroup limits, and an NVML snapshot with NVLinks.
pub fn base_machine() -> MemTree {
    let mut t = MemTree::new();
    let pf = add_pci(&mut t);
    add_rdma_device(&mut t, &pf);
    add_netdevs(&mut t, &pf);
    add_numa_and_process(&mut t);
    add_nvml_snapshot(&mut t);
    t
}

/// [`base_machine`] with every file the whole read takes besides: each function's
/// `uevent` and IOMMU group, the bridges' config space (an AER and an ACS capability),
/// MLNX_OFED's QoS files on the PF (traffic class, ECN, port buffers, the VF's e-switch
/// config) and the rdma_cm defaults, the mount table with the NVIDIA runtime's mounts,
/// the NVIDIA driver's GPU information and a verbs snapshot.
pub fn full_machine() -> MemTree {
    let mut t = base_machine();
    let sw = "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0";
    let pf = format!("{sw}/0000:02:01.0/0000:04:00.0");
    // `pci_uevent` prints the class with `%04X`, the ids with `%04X:%04X`; the driver
    // core puts `DRIVER=` first.
    for (group, (path, vendor, device, class, subsystem)) in pci_functions().iter().enumerate() {
        let hex = |t: &str| parse::parse_hex_u16("fuzz machine id", t).unwrap();
        let (vendor, device) = (hex(vendor), hex(device));
        let class = parse::parse_pci_class(class).unwrap();
        let driver = match class >> 16 {
            0x06 => "pcieport",
            0x03 => "nvidia",
            _ => "mlx5_core",
        };
        let slot = path.rsplit('/').next().unwrap_or_default();
        t.file(
            &format!("{path}/uevent"),
            &format!(
                "DRIVER={driver}\nPCI_CLASS={class:04X}\nPCI_ID={vendor:04X}:{device:04X}\n\
                 PCI_SUBSYS_ID={subsystem}\nPCI_SLOT_NAME={slot}\n"
            ),
        );
        let to = format!("/sys/kernel/iommu_groups/{group}");
        t.dir(&to);
        let from = format!("{path}/iommu_group");
        t.link(&from, &relative_link(&from, &to));
        if class >> 8 == 0x0604 {
            t.insert(
                &format!("{path}/config"),
                MemEntry::File(bridge_config(vendor, device)),
            );
        }
    }
    let ib = format!("{pf}/infiniband/mlx5_0");
    let eth0 = format!("{pf}/net/eth0");
    t.file(&format!("{ib}/tc/1/traffic_class"), "Global tclass=106\n")
        .file(&format!("{ib}/sys_image_guid"), "b8ce:f603:0012:3456\n")
        .file(&format!("{ib}/board_id"), "MT_0000000838\n")
        .file(&format!("{eth0}/qos/tc_num"), "8\n")
        .file(&format!("{eth0}/qos/maxrate"), "0 0 0 0 0 0 0 0 \n")
        .file(&format!("{eth0}/qos/prio2buffer"), PRIO2BUFFER)
        .file(&format!("{eth0}/qos/buffer_size"), BUFFER_SIZE)
        .file(&format!("{eth0}/ecn/roce_np/cnp_dscp"), "48\n")
        .file(&format!("{eth0}/ecn/roce_rp/rpg_ai_rate"), "5\n")
        .file(
            &format!("{pf}/sriov/0/config"),
            "VF         : 0\nMAC        : 02:00:00:00:00:01\nVLAN       : 0\nQoS        : 0\n\
             VLAN Proto : N/A\nSpoofCheck : ON\nTrust      : ON\nLinkState  : Follow\n\
             MinTxRate  : 0\nMaxTxRate  : 0\nVGT+       : OFF\n",
        )
        .file(
            "/sys/kernel/config/rdma_cm/mlx5_0/ports/1/default_roce_tos",
            "106\n",
        )
        .file(
            "/sys/kernel/config/rdma_cm/mlx5_0/ports/1/default_roce_mode",
            "RoCE v2\n",
        );
    for prio in 0..8 {
        let on = if prio == 3 { "1\n" } else { "0\n" };
        t.file(&format!("{eth0}/ecn/roce_np/enable/{prio}"), on)
            .file(&format!("{eth0}/ecn/roce_rp/enable/{prio}"), on);
    }
    t.file(
        "/proc/self/mountinfo",
        "1180 1100 0:230 / / rw,relatime - overlay overlay rw,lowerdir=/l\n\
         1290 1180 0:245 / /proc/driver/nvidia rw,nosuid,nodev,noexec,relatime - tmpfs tmpfs rw,mode=555\n\
         1291 1180 0:6 /nvidia0 /dev/nvidia0 rw,nosuid - devtmpfs udev rw,size=10240k\n\
         1292 1180 253:1 /data\\040set /mnt/data\\040set rw,relatime shared:1 - ext4 /dev/vda1 rw\n",
    )
    .file(
        "/proc/driver/nvidia/gpus/0000:03:00.0/information",
        "Model: \t\t NVIDIA H100 80GB HBM3\nIRQ:   \t\t 420\nGPU UUID: \t GPU-0\n\
         Bus Location: \t 0000:03:00.0\nDevice Minor: \t 0\n",
    );
    let verbs = crate::model::VerbsSnapshot {
        schema: crate::model::VerbsSnapshot::SCHEMA.to_string(),
        devices: vec![crate::model::VerbsDevice {
            name: "mlx5_0".into(),
            max_qp: Some(131_072),
            max_cq: Some(16_777_216),
            max_mr: Some(16_777_216),
            max_srq: Some(8_388_608),
            ports: vec![crate::model::VerbsPort {
                port: 1,
                state: Some("ACTIVE".into()),
                active_mtu: Some(4096),
                max_mtu: Some(4096),
                link_layer: Some("Ethernet".into()),
                active_speed: None,
                active_width: None,
                gid_tbl_len: Some(3),
                gids: Vec::new(),
            }],
        }],
        device_index: Default::default(),
    };
    t.file(
        crate::sources::VERBS_SNAPSHOT_PATH,
        &serde_json::to_string(&verbs).unwrap_or_default(),
    );
    t
}

/// A bridge's 4 KiB config space: its ids, then an AER capability at 0x100 leading to
/// an ACS capability at 0x148 (source validation, translation blocking, P2P request and
/// completion redirect, upstream forwarding; none enabled).
fn bridge_config(vendor: u16, device: u16) -> Vec<u8> {
    let mut c = vec![0u8; 4096];
    c[..2].copy_from_slice(&vendor.to_le_bytes());
    c[2..4].copy_from_slice(&device.to_le_bytes());
    // Extended capability header: id (16 bits), version (4), next offset (12).
    let header = |id: u32, next: u32| (id | (1 << 16) | (next << 20)).to_le_bytes();
    c[0x100..0x104].copy_from_slice(&header(0x0001, 0x148));
    c[0x148..0x14c].copy_from_slice(&header(0x000d, 0));
    c[0x14c..0x14e].copy_from_slice(&0x001fu16.to_le_bytes());
    c
}

/// One PCI function of the base machine: directory, `vendor`, `device`, `class`, and the
/// subsystem ids that only [`full_machine`]'s `uevent` states.
type PciRow = (
    String,
    &'static str,
    &'static str,
    &'static str,
    &'static str,
);

/// The base machine's PCI functions.
fn pci_functions() -> [PciRow; 9] {
    let sw = "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0";
    let root = |bus: &str| format!("/sys/devices/pci0000:{bus}/0000:{bus}:01.0");
    [
        (root("00"), "0x1022", "0x1483", "0x060400", "1022:1453"),
        (sw.into(), "0x1000", "0xc030", "0x060400", "1000:A064"),
        (
            format!("{sw}/0000:02:00.0"),
            "0x1000",
            "0xc030",
            "0x060400",
            "1000:A064",
        ),
        (
            format!("{sw}/0000:02:01.0"),
            "0x1000",
            "0xc030",
            "0x060400",
            "1000:A064",
        ),
        (
            format!("{sw}/0000:02:00.0/0000:03:00.0"),
            "0x10de",
            "0x2330",
            "0x030200",
            "10DE:16C1",
        ),
        (
            format!("{sw}/0000:02:01.0/0000:04:00.0"),
            "0x15b3",
            "0x1021",
            "0x020000",
            "15B3:0041",
        ),
        (
            format!("{sw}/0000:02:01.0/0000:04:00.1"),
            "0x15b3",
            "0x101e",
            "0x020000",
            "15B3:0041",
        ),
        (root("80"), "0x1022", "0x1483", "0x060400", "1022:1453"),
        (
            format!("{}/0000:81:00.0", root("80")),
            "0x10de",
            "0x2330",
            "0x030200",
            "10DE:16C1",
        ),
    ]
}

/// The PCI tree: the switch with a GPU and the ConnectX-7 PF and its VF below it, the
/// second GPU on the other socket, the bridges above, their drivers. Returns the PF's
/// directory.
fn add_pci(t: &mut MemTree) -> String {
    let sw = "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0";
    let gpu0 = format!("{sw}/0000:02:00.0/0000:03:00.0");
    let pf = format!("{sw}/0000:02:01.0/0000:04:00.0");
    let vf = format!("{sw}/0000:02:01.0/0000:04:00.1");
    let gpu1 = "/sys/devices/pci0000:80/0000:80:01.0/0000:81:00.0".to_string();
    for (path, vendor, device, class, _) in &pci_functions() {
        let addr = path.rsplit('/').next().unwrap_or_default();
        let numa = if path.contains("pci0000:80") {
            "1"
        } else {
            "0"
        };
        let cpus = if numa == "1" { "16-31" } else { "0-15" };
        t.file(&format!("{path}/vendor"), &format!("{vendor}\n"))
            .file(&format!("{path}/device"), &format!("{device}\n"))
            .file(&format!("{path}/class"), &format!("{class}\n"))
            .file(&format!("{path}/numa_node"), &format!("{numa}\n"))
            .file(&format!("{path}/local_cpulist"), &format!("{cpus}\n"))
            .file(&format!("{path}/current_link_speed"), "32.0 GT/s PCIe\n")
            .file(&format!("{path}/max_link_speed"), "32.0 GT/s PCIe\n")
            .file(&format!("{path}/current_link_width"), "16\n")
            .file(&format!("{path}/max_link_width"), "16\n")
            .link(
                &format!("/sys/bus/pci/devices/{addr}"),
                &format!("../../..{}", path.trim_start_matches("/sys")),
            );
    }
    t.file(&format!("{pf}/sriov_totalvfs"), "8\n")
        .file(&format!("{pf}/sriov_numvfs"), "1\n")
        .link(&format!("{pf}/virtfn0"), "../0000:04:00.1")
        .link(&format!("{vf}/physfn"), "../0000:04:00.0")
        .link(
            &format!("{pf}/driver"),
            "../../../../../../bus/pci/drivers/mlx5_core",
        )
        .link(
            &format!("{gpu0}/driver"),
            "../../../../../../bus/pci/drivers/nvidia",
        )
        .link(&format!("{gpu1}/driver"), "../../../bus/pci/drivers/nvidia")
        .dir("/sys/bus/pci/drivers/mlx5_core")
        .dir("/sys/bus/pci/drivers/nvidia");
    pf
}

/// The PF's RDMA device: one RoCE port with a GID table (a RoCE v1, a RoCE v2 and an
/// empty slot) and its uverbs node.
fn add_rdma_device(t: &mut MemTree, pf: &str) {
    let ib = format!("{pf}/infiniband/mlx5_0");
    t.link(
        "/sys/class/infiniband/mlx5_0",
        &format!("../../devices{}", ib.trim_start_matches("/sys/devices")),
    )
    .link(&format!("{ib}/device"), "../../../0000:04:00.0")
    .file(&format!("{ib}/node_type"), "1: CA\n")
    .file(&format!("{ib}/node_guid"), "b8ce:f603:0012:3456\n")
    .file(&format!("{ib}/fw_ver"), "28.39.1002\n")
    .file(&format!("{ib}/hca_type"), "MT4129\n")
    .file(&format!("{ib}/ports/1/state"), "4: ACTIVE\n")
    .file(&format!("{ib}/ports/1/phys_state"), "5: LinkUp\n")
    .file(&format!("{ib}/ports/1/rate"), "400 Gb/sec (4X NDR)\n")
    .file(&format!("{ib}/ports/1/link_layer"), "Ethernet\n")
    .file(&format!("{ib}/ports/1/lid"), "0x0\n")
    .file(
        &format!("{ib}/ports/1/gids/0"),
        "fe80:0000:0000:0000:bace:f6ff:fe12:3456\n",
    )
    .file(
        &format!("{ib}/ports/1/gids/1"),
        "0000:0000:0000:0000:0000:ffff:0a00:0001\n",
    )
    .file(
        &format!("{ib}/ports/1/gids/2"),
        "0000:0000:0000:0000:0000:0000:0000:0000\n",
    )
    .file(&format!("{ib}/ports/1/gid_attrs/types/0"), "IB/RoCE v1\n")
    .file(&format!("{ib}/ports/1/gid_attrs/types/1"), "RoCE v2\n")
    .insert(
        &format!("{ib}/ports/1/gid_attrs/types/2"),
        MemEntry::Unreadable(libc::EINVAL),
    )
    .file(&format!("{ib}/ports/1/gid_attrs/ndevs/0"), "eth0\n")
    .file(&format!("{ib}/ports/1/gid_attrs/ndevs/1"), "eth0\n")
    .link(
        "/sys/class/infiniband_verbs/uverbs0",
        "../../devices/virtual/infiniband_verbs/uverbs0",
    )
    .file(
        "/sys/devices/virtual/infiniband_verbs/uverbs0/ibdev",
        "mlx5_0\n",
    );
}

/// Netdevs: the PF's port enslaved to a bond, and loopback.
fn add_netdevs(t: &mut MemTree, pf: &str) {
    let eth0 = format!("{pf}/net/eth0");
    t.link(
        "/sys/class/net/eth0",
        &format!("../../devices{}", eth0.trim_start_matches("/sys/devices")),
    )
    .link("/sys/class/net/bond0", "../../devices/virtual/net/bond0")
    .link("/sys/class/net/lo", "../../devices/virtual/net/lo")
    .file("/sys/class/net/bonding_masters", "bond0\n")
    .link(
        &format!("{eth0}/master"),
        "../../../../../../../virtual/net/bond0",
    );
    for (dir, mac) in [
        (eth0.as_str(), "b8:ce:f6:12:34:56"),
        ("/sys/devices/virtual/net/bond0", "b8:ce:f6:12:34:56"),
        ("/sys/devices/virtual/net/lo", "00:00:00:00:00:00"),
    ] {
        t.file(&format!("{dir}/mtu"), "9000\n")
            .file(&format!("{dir}/operstate"), "up\n")
            .file(&format!("{dir}/address"), &format!("{mac}\n"))
            .file(
                &format!("{dir}/type"),
                if dir.ends_with("lo") { "772\n" } else { "1\n" },
            )
            .file(&format!("{dir}/speed"), "400000\n")
            .file(&format!("{dir}/carrier"), "1\n");
    }
    t.file("/sys/devices/virtual/net/bond0/bonding/mode", "802.3ad 4\n")
        .file("/sys/devices/virtual/net/bond0/bonding/slaves", "eth0\n");
}

/// NUMA nodes, CPUs, and a pod's process view (cgroup, limits, environment, device
/// nodes).
fn add_numa_and_process(t: &mut MemTree) {
    t.file("/sys/devices/system/node/node0/cpulist", "0-15\n")
        .file("/sys/devices/system/node/node0/distance", "10 32\n")
        .file("/sys/devices/system/node/node1/cpulist", "16-31\n")
        .file("/sys/devices/system/node/node1/distance", "32 10\n")
        .file("/sys/devices/system/cpu/online", "0-31\n")
        .file(
            "/proc/self/status",
            "Name:\tpython\nCpus_allowed:\tffff\nCpus_allowed_list:\t0-15\n",
        )
        .file("/proc/self/cgroup", "0::/kubepods/pod1\n")
        .file("/proc/self/environ", "NCCL_IB_HCA=mlx5_0\0LOCAL_RANK=0\0")
        .file(
            "/proc/self/limits",
            "Limit                     Soft Limit           Hard Limit           Units     \nMax locked memory         8388608              8388608              bytes     \n",
        )
        .file("/sys/fs/cgroup/kubepods/pod1/cpuset.cpus.effective", "0-15\n")
        .file("/sys/fs/cgroup/kubepods/pod1/rdma.max", "mlx5_0 hca_handle=2 hca_object=max\n")
        .file("/proc/net/route", "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\nbond0\t0000000A\t00000000\t0001\t0\t0\t0\t000000FF\t0\t0\t0\n")
        .file("/proc/cpuinfo", "processor\t: 0\nvendor_id\t: AuthenticAMD\n\n")
        .file("/dev/infiniband/uverbs0", "")
        .file("/dev/nvidia0", "")
        .file("/sys/module/nvidia/version", "550.54.15\n");
}

/// An NVML snapshot: the two GPUs, one NVLink between them.
fn add_nvml_snapshot(t: &mut MemTree) {
    let nvml = NvmlSnapshot {
        schema: NvmlSnapshot::SCHEMA.to_string(),
        driver_version: Some("550.54.15".into()),
        cuda_driver_version: Some(12040),
        device_count: None,
        gpus: Vec::new(),
    };
    let mut nvml = serde_json::to_value(&nvml).unwrap_or_default();
    nvml["gpus"] = serde_json::json!([
        {"index": 0, "bus_id": "00000000:03:00.0", "name": "NVIDIA H100 80GB HBM3",
         "uuid": "GPU-0", "nvlinks": [{"link": 0, "active": true,
         "remote_bus_id": "00000000:81:00.0", "remote_kind": "gpu"}]},
        {"index": 1, "bus_id": "00000000:81:00.0", "name": "NVIDIA H100 80GB HBM3",
         "uuid": "GPU-1", "nvlinks": [{"link": 0, "active": true,
         "remote_bus_id": "00000000:03:00.0", "remote_kind": "gpu"}]}
    ]);
    t.file(crate::sources::NVML_SNAPSHOT_PATH, &nvml.to_string());
}
#[cfg(test)]
mod tests {
    use super::*;

    /// A clean machine has no diagnostic above info.
    fn assert_clean(topo: &Topology) {
        let warnings: Vec<_> = topo
            .diagnostics
            .iter()
            .filter(|d| d.severity > crate::model::Severity::Info)
            .collect();
        assert!(
            warnings.is_empty(),
            "a clean machine has no warnings: {warnings:#?}"
        );
    }

    #[test]
    fn the_base_machine_discovers_completely() {
        let topo = check_discovery(base_machine()).expect("a sysfs tree");
        assert_eq!(topo.gpus.len(), 2);
        assert_eq!(topo.pci.len(), 9);
        assert_eq!(topo.rdma_devices.len(), 1);
        let port = &topo.rdma_devices[0].ports[0];
        assert_eq!(port.gids.len(), 2, "{port:?}");
        assert_eq!(port.netdev.as_deref(), Some("eth0"));
        assert!(
            topo.pci_function("0000:04:00.1".parse().unwrap())
                .unwrap()
                .is_vf
        );
        assert_eq!(topo.numa_nodes.len(), 2);
        assert!(topo.process.rdma_max.is_some());
        assert!(topo.nvml.is_some());
        assert_clean(&topo);
    }

    #[test]
    fn the_full_machine_discovers_completely() {
        let topo = check_discovery(full_machine()).expect("a sysfs tree");
        assert_clean(&topo);
        // Every file it adds is read and reaches the model.
        let pf = topo.pci_function("0000:04:00.0".parse().unwrap()).unwrap();
        assert_eq!(pf.driver.as_deref(), Some("mlx5_core"));
        assert_eq!(pf.subsystem_device, Some(0x0041));
        assert!(pf.iommu_group.is_some());
        let bridge = topo.pci_function("0000:02:01.0".parse().unwrap()).unwrap();
        assert!(
            matches!(bridge.acs, Some(parse::AcsState::Present { .. })),
            "{:?}",
            bridge.acs
        );
        let qos = &topo.qos;
        assert_eq!(
            qos.ports[0].traffic_class.as_ref().unwrap().global,
            Some(106)
        );
        assert_eq!(qos.ports[0].rdma_cm_tos, Some(106));
        let eth0 = qos.netdevs.iter().find(|n| n.netdev == "eth0").unwrap();
        assert_eq!(
            eth0.ecn.as_ref().unwrap().roce_np.as_ref().unwrap().enabled,
            [3]
        );
        assert!(
            eth0.prio2buffer.is_some() && eth0.buffers.is_some() && eth0.maxrate_kbps.is_some()
        );
        assert_eq!(qos.vfs.len(), 1);
        assert_eq!(topo.process.device_mounts.len(), 2);
        assert_eq!(topo.process.proc_nvidia_gpu_info[0].minor, Some(0));
        assert!(topo.verbs.is_some());
    }

    #[test]
    fn relative_links_point_where_asked() {
        assert_eq!(
            relative_link("/sys/class/net/eth0", "/sys/devices/x"),
            "../../devices/x"
        );
        assert_eq!(relative_link("/a/b", "/a"), ".");
        assert_eq!(relative_link("/a/b", "/a/b"), "b");
    }

    #[test]
    fn every_target_accepts_empty_and_garbage_input() {
        for (name, body) in TARGETS {
            body(b"");
            body(&[0xff, 0x00, b':', b'-', b'/', 0x80]);
            assert!(run(name, b"0"));
        }
        assert!(!run("no-such-target", b""));
    }

    #[test]
    fn cpumask_text_is_the_kernel_form() {
        let set = parse::parse_cpulist("0-39").unwrap();
        assert_eq!(cpumask_text(&set), "000000ff,ffffffff");
        assert_eq!(cpumask_text(&CpuSet::new()), "00000000");
    }
}
