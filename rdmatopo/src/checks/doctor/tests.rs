//! Every check on a small sysfs tree (built in memory, read by discovery) with the
//! fault, and on one without it.

use super::*;
use crate::model::Severity;
use crate::sysfs::{MemEntry, MemTree, Sysfs};
use crate::view::scope::Context;

/// A two-socket machine: on each NUMA node a root port, a PCIe switch, and below it
/// one GPU and one ConnectX NIC (PIX). Node 0: CPUs 0-7, GPU0 0000:03:00.0, mlx5_0
/// 0000:04:00.0; node 1: CPUs 8-15, GPU1 0000:83:00.0, mlx5_1 0000:84:00.0.
struct Machine {
    tree: MemTree,
    roce: bool,
}

const NODES: [(&str, u32, &str); 2] = [("00", 0, "0-7"), ("80", 1, "8-15")];

/// ACS capability at 0x100 with the given control bits, in a 4096-byte config space.
fn bridge_config(acs_control: u16) -> Vec<u8> {
    let mut b = vec![0u8; 4096];
    b[0..4].copy_from_slice(&[0x00, 0x10, 0x30, 0xc0]);
    b[0x0e] = 1;
    b[0x100..0x104].copy_from_slice(&(0x0001_000Du32).to_le_bytes());
    b[0x104..0x106].copy_from_slice(&0x005fu16.to_le_bytes());
    b[0x106..0x108].copy_from_slice(&acs_control.to_le_bytes());
    b
}

impl Machine {
    /// The healthy host: InfiniBand (or RoCE with MTU 9000), links at Gen5 x16,
    /// ACS off, peer memory loaded, memlock unlimited, every device node present.
    fn new(roce: bool) -> Self {
        let mut m = Self {
            tree: MemTree::new(),
            roce,
        };
        let t = &mut m.tree;
        t.file("/sys/devices/system/cpu/online", "0-15\n");
        for (_, node, cpus) in NODES {
            let d = format!("/sys/devices/system/node/node{node}");
            t.file(&format!("{d}/cpulist"), &format!("{cpus}\n"));
            t.file(
                &format!("{d}/distance"),
                if node == 0 { "10 21\n" } else { "21 10\n" },
            );
        }
        t.file("/sys/module/ib_core/parameters/netns_mode", "Y\n");
        t.file("/sys/module/nvidia_peermem/version", "535.161.08\n");
        t.file("/sys/module/nvidia/version", "535.161.08\n");
        t.file(
            "/proc/self/status",
            "Name:\trdmatopo\nCpus_allowed_list:\t0-15\n",
        );
        t.file("/proc/self/cgroup", "0::/\n");
        t.file("/sys/fs/cgroup/cpuset.cpus.effective", "0-15\n");
        t.file("/dev/infiniband/rdma_cm", "");
        m.limits("unlimited");
        for (hb, node, cpus) in NODES {
            m.socket(hb, node, cpus);
        }
        m
    }

    fn limits(&mut self, memlock: &str) {
        self.tree.file(
            "/proc/self/limits",
            &format!(
                "Limit                     Soft Limit           Hard Limit           Units     \nMax locked memory         {memlock:<20} {memlock:<20} bytes     \n"
            ),
        );
    }

    fn func(&mut self, path: &str, class: &str, vendor: &str, device: &str, node: u32, cpus: &str) {
        let t = &mut self.tree;
        let bdf = path.rsplit('/').next().unwrap_or_default();
        t.file(&format!("{path}/class"), &format!("{class}\n"));
        t.file(&format!("{path}/vendor"), &format!("{vendor}\n"));
        t.file(&format!("{path}/device"), &format!("{device}\n"));
        t.file(&format!("{path}/numa_node"), &format!("{node}\n"));
        t.file(&format!("{path}/local_cpulist"), &format!("{cpus}\n"));
        for (k, v) in [
            ("current_link_speed", "32.0 GT/s PCIe"),
            ("max_link_speed", "32.0 GT/s PCIe"),
            ("current_link_width", "16"),
            ("max_link_width", "16"),
        ] {
            t.file(&format!("{path}/{k}"), &format!("{v}\n"));
        }
        t.link(
            &format!("/sys/bus/pci/devices/{bdf}"),
            &format!("../../../{}", path.trim_start_matches("/sys/")),
        );
    }

    fn socket(&mut self, hb: &str, node: u32, cpus: &str) {
        let bus = u8::from_str_radix(hb, 16).unwrap_or(0);
        let a = |b: u8, d: u8| format!("0000:{:02x}:{d:02x}.0", bus + b);
        let rp = format!("/sys/devices/pci0000:{hb}/{}", a(0, 1));
        let usp = format!("{rp}/{}", a(1, 0));
        let dsp_gpu = format!("{usp}/{}", a(2, 0));
        let dsp_nic = format!("{usp}/{}", a(2, 1));
        for b in [&rp, &usp, &dsp_gpu, &dsp_nic] {
            self.func(b, "0x060400", "0x1000", "0xc030", node, cpus);
            self.tree
                .insert(&format!("{b}/config"), MemEntry::File(bridge_config(0)));
        }
        let gpu = format!("{dsp_gpu}/{}", a(3, 0));
        self.func(&gpu, "0x030200", "0x10de", "0x2330", node, cpus);
        let gpu_bdf = a(3, 0);
        self.tree.file(
            &format!("/proc/driver/nvidia/gpus/{gpu_bdf}/information"),
            "Model: \t\t NVIDIA H100\n",
        );
        let nic = format!("{dsp_nic}/{}", a(4, 0));
        self.func(&nic, "0x020700", "0x15b3", "0x1021", node, cpus);
        let i = node;
        let dev = format!("mlx5_{i}");
        self.rdma(&nic, &dev, &format!("ens{i}"), i, &format!("10.0.{i}.1"));
    }

    /// An RDMA device on the function at `fpath` with one port, its netdev, uverbs.
    fn rdma(&mut self, fpath: &str, dev: &str, netdev: &str, uverbs: u32, ip: &str) {
        let roce = self.roce;
        let t = &mut self.tree;
        let ddir = format!("{fpath}/infiniband/{dev}");
        t.link(
            &format!("/sys/class/infiniband/{dev}"),
            &format!("../../{}", ddir.trim_start_matches("/sys/")),
        );
        t.link(&format!("{ddir}/device"), "../../");
        t.file(&format!("{ddir}/node_type"), "1: CA\n");
        t.file(
            &format!("{ddir}/sys_image_guid"),
            &format!("b8ce:f603:00a1:b2c{uverbs}\n"),
        );
        let p = format!("{ddir}/ports/1");
        t.file(&format!("{p}/state"), "4: ACTIVE\n");
        t.file(&format!("{p}/phys_state"), "5: LinkUp\n");
        t.file(&format!("{p}/rate"), "400 Gb/sec (4X NDR)\n");
        t.file(
            &format!("{p}/link_layer"),
            if roce { "Ethernet\n" } else { "InfiniBand\n" },
        );
        for slot in 0..8u32 {
            t.file(
                &format!("{p}/gids/{slot}"),
                "0000:0000:0000:0000:0000:0000:0000:0000\n",
            );
        }
        if roce {
            let octets: Vec<u8> = ip.split('.').filter_map(|o| o.parse().ok()).collect();
            let v4 = format!(
                "0000:0000:0000:0000:0000:ffff:{:02x}{:02x}:{:02x}{:02x}\n",
                octets[0], octets[1], octets[2], octets[3]
            );
            let ll = format!("fe80:0000:0000:0000:bace:f6ff:fe00:000{uverbs}\n");
            for (slot, gid, ty) in [
                (0, &ll, "IB/RoCE v1"),
                (1, &ll, "RoCE v2"),
                (2, &v4, "IB/RoCE v1"),
                (3, &v4, "RoCE v2"),
            ] {
                t.file(&format!("{p}/gids/{slot}"), gid);
                t.file(&format!("{p}/gid_attrs/types/{slot}"), &format!("{ty}\n"));
                t.file(
                    &format!("{p}/gid_attrs/ndevs/{slot}"),
                    &format!("{netdev}\n"),
                );
            }
        } else {
            t.file(
                &format!("{p}/gids/0"),
                &format!("fe80:0000:0000:0000:b8ce:f603:00a1:b2c{uverbs}\n"),
            );
        }
        let u = format!("uverbs{uverbs}");
        t.file(
            &format!("/sys/class/infiniband_verbs/{u}/ibdev"),
            &format!("{dev}\n"),
        );
        t.file(&format!("/dev/infiniband/{u}"), "");
        // The netdev.
        let ndir = format!("{fpath}/net/{netdev}");
        t.link(
            &format!("/sys/class/net/{netdev}"),
            &format!("../../{}", ndir.trim_start_matches("/sys/")),
        );
        t.file(
            &format!("{ndir}/mtu"),
            if roce { "9000\n" } else { "4092\n" },
        );
        t.file(&format!("{ndir}/operstate"), "up\n");
        t.file(&format!("{ndir}/type"), if roce { "1\n" } else { "32\n" });
        t.file(&format!("{ndir}/ifindex"), &format!("{}\n", 10 + uverbs));
        t.file(&format!("{ndir}/iflink"), &format!("{}\n", 10 + uverbs));
    }

    /// Turn the view into a pod's: its own netns (eth0 veth, net1 macvlan over the PF
    /// of mlx5_0 with the GIDs at slots 4/5), Kubernetes in the environment, only GPU0
    /// and mlx5_0 assigned.
    fn pod(mut self) -> Self {
        let t = &mut self.tree;
        t.file(
            "/proc/self/environ",
            "KUBERNETES_SERVICE_HOST=10.96.0.1\0HOSTNAME=train-0\0",
        );
        t.file(
            "/proc/self/cgroup",
            "0::/kubepods.slice/pod1234/cri-containerd-abc.scope\n",
        );
        // The host's netdevs are not in this namespace.
        let mut fresh = MemTree::new();
        for (path, e) in t.entries() {
            let hidden = path.starts_with("/sys/class/net/")
                || path.contains("/net/ens")
                || path.starts_with("/dev/infiniband/uverbs1")
                || path.starts_with("/proc/driver/nvidia/gpus/0000:83")
                || (path.contains("/gids/") || path.contains("/gid_attrs/"));
            if !hidden {
                fresh.insert(path, e.clone());
            }
        }
        *t = fresh;
        for (name, idx) in [("eth0", 3), ("net1", 4)] {
            let d = format!("/sys/devices/virtual/net/{name}");
            t.link(
                &format!("/sys/class/net/{name}"),
                &format!("../../devices/virtual/net/{name}"),
            );
            t.file(&format!("{d}/mtu"), "9000\n");
            t.file(&format!("{d}/operstate"), "up\n");
            t.file(&format!("{d}/type"), "1\n");
            t.file(&format!("{d}/ifindex"), &format!("{idx}\n"));
            t.file(&format!("{d}/iflink"), "2\n");
        }
        for (dev, bdf) in [("mlx5_0", "0000:04:00.0"), ("mlx5_1", "0000:84:00.0")] {
            let p = format!("{}/infiniband/{dev}/ports/1", path_of(bdf));
            for slot in 0..8u32 {
                t.file(
                    &format!("{p}/gids/{slot}"),
                    "0000:0000:0000:0000:0000:0000:0000:0000\n",
                );
            }
            if dev == "mlx5_0" && self.roce {
                let v4 = "0000:0000:0000:0000:0000:ffff:0a00:0005\n";
                for (slot, ty) in [(4, "IB/RoCE v1"), (5, "RoCE v2")] {
                    t.file(&format!("{p}/gids/{slot}"), v4);
                    t.file(&format!("{p}/gid_attrs/types/{slot}"), &format!("{ty}\n"));
                    t.file(&format!("{p}/gid_attrs/ndevs/{slot}"), "net1\n");
                }
            }
        }
        self
    }

    fn set(mut self, path: &str, text: &str) -> Self {
        self.tree.file(path, text);
        self
    }

    fn remove(mut self, prefix: &str) -> Self {
        let mut fresh = MemTree::new();
        for (path, e) in self.tree.entries() {
            if !path.starts_with(prefix) {
                fresh.insert(path, e.clone());
            }
        }
        self.tree = fresh;
        self
    }

    fn report(&self) -> Report {
        let fs = Sysfs::memory(self.tree.clone(), "test");
        let topo = crate::Discoverer::new(&fs).discover().unwrap();
        run(&topo)
    }
}

fn host() -> Machine {
    Machine::new(false)
}

fn roce() -> Machine {
    Machine::new(true)
}

/// Function path of a device by address.
fn path_of(bdf: &str) -> String {
    let bus = &bdf[5..7];
    let hb = if bus.starts_with('8') { "80" } else { "00" };
    let base = u8::from_str_radix(hb, 16).unwrap_or(0);
    let a = |b: u8, d: u8| format!("0000:{:02x}:{d:02x}.0", base + b);
    let usp = format!("/sys/devices/pci0000:{hb}/{}/{}", a(0, 1), a(1, 0));
    match bdf {
        _ if bdf == a(3, 0) => format!("{usp}/{}/{bdf}", a(2, 0)),
        _ if bdf == a(4, 0) => format!("{usp}/{}/{bdf}", a(2, 1)),
        _ if bdf == a(2, 0) || bdf == a(2, 1) => format!("{usp}/{bdf}"),
        _ => usp,
    }
}

fn outcome(r: &Report, check: &str) -> Outcome {
    r.checks
        .iter()
        .find(|c| c.check == check)
        .map(|c| c.outcome)
        .unwrap_or_else(|| panic!("no check {check}"))
}

fn findings<'a>(r: &'a Report, check: &str) -> Vec<&'a Finding> {
    r.findings.iter().filter(|f| f.check == check).collect()
}

fn summaries(r: &Report, check: &str) -> String {
    findings(r, check)
        .iter()
        .map(|f| format!("[{:?}] {}", f.severity, f.summary))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn healthy_host_is_clean() {
    for m in [host(), roce()] {
        let r = m.report();
        assert_eq!(r.context, Context::Host);
        assert_eq!(r.exit_code(), 0, "{:#?}", r.findings);
        assert_eq!(r.checks.len(), CHECKS.len());
        assert_eq!(outcome(&r, "gpu-nic-distance"), Outcome::Ok);
        assert_eq!(outcome(&r, "acs-redirect"), Outcome::Ok);
        assert_eq!(outcome(&r, "netns"), Outcome::NotApplicable);
    }
}

#[test]
fn numa_no_local_cpu_left() {
    // A pod given GPU0 and mlx5_0 (node 0) but CPUs of node 1 only.
    let r = roce()
        .pod()
        .set("/proc/self/status", "Cpus_allowed_list:\t8-11\n")
        .set("/sys/fs/cgroup/cpuset.cpus.effective", "8-11\n")
        .report();
    assert_eq!(outcome(&r, "numa-affinity"), Outcome::Error);
    let f = findings(&r, "numa-affinity");
    assert!(
        f[0].summary.contains("none of the 4 CPUs"),
        "{}",
        f[0].summary
    );
    assert!(f.iter().any(|f| f.summary.contains("GPU0")));
    assert!(f[0].evidence.iter().any(|e| e.path == "/proc/self/status"));
    assert_eq!(r.exit_code(), 2);
    // The same pod on node-0 CPUs is fine.
    let ok = roce()
        .pod()
        .set("/proc/self/status", "Cpus_allowed_list:\t0-3\n")
        .set("/sys/fs/cgroup/cpuset.cpus.effective", "0-3\n")
        .report();
    assert_eq!(
        outcome(&ok, "numa-affinity"),
        Outcome::Ok,
        "{}",
        summaries(&ok, "numa-affinity")
    );
}

#[test]
fn numa_restricted_cpus_partly_remote() {
    let r = roce()
        .pod()
        .set("/proc/self/status", "Cpus_allowed_list:\t0-3,8-11\n")
        .set("/sys/fs/cgroup/cpuset.cpus.effective", "0-3,8-11\n")
        .report();
    assert_eq!(
        outcome(&r, "numa-affinity"),
        Outcome::Warning,
        "{}",
        summaries(&r, "numa-affinity")
    );
    assert!(findings(&r, "numa-affinity")[0].summary.contains("8-11"));
}

#[test]
fn numa_unknown_cpus_is_skipped_not_silent() {
    let r = host()
        .remove("/proc/self/status")
        .remove("/sys/fs/cgroup")
        .report();
    assert_eq!(outcome(&r, "numa-affinity"), Outcome::Skipped);
    let f = findings(&r, "numa-affinity");
    assert!(f[0].skipped && f[0].severity == Severity::Info);
    assert_eq!(r.exit_code(), 0);
}

#[test]
fn distance_nic_far_while_pix_exists() {
    // GPU0 in the pod, but its RDMA device is mlx5_1 on the other socket.
    let r = host()
        .pod()
        .remove("/dev/infiniband/uverbs0")
        .set("/dev/infiniband/uverbs1", "")
        .report();
    assert_eq!(
        outcome(&r, "gpu-nic-distance"),
        Outcome::Error,
        "{}",
        summaries(&r, "gpu-nic-distance")
    );
    let f = &findings(&r, "gpu-nic-distance")[0];
    assert!(f.summary.contains("mlx5_1 at SYS"), "{}", f.summary);
    assert!(
        f.summary.contains("mlx5_0 (0000:04:00.0) is PIX"),
        "{}",
        f.summary
    );
    let ok = host().pod().report();
    assert_eq!(outcome(&ok, "gpu-nic-distance"), Outcome::Ok);
}

#[test]
fn distance_offers_no_nic_that_nccl_env_would_not_select() {
    // mlx5_0, PIX from GPU0, has an ACTIVE port whose link layer is not known: the plan
    // leaves it out, so GPU0 takes mlx5_1 across the sockets, and the distance check
    // must not send the user to mlx5_0 (`nccl-env` would never give it to them).
    let link_layer = format!(
        "{}/infiniband/mlx5_0/ports/1/link_layer",
        path_of("0000:04:00.0")
    );
    let r = host().set(&link_layer, "Unknown\n").report();
    let f = &findings(&r, "gpu-nic-distance")[0];
    assert_eq!(
        outcome(&r, "gpu-nic-distance"),
        Outcome::Info,
        "{}",
        f.summary
    );
    assert!(f.summary.contains("no RDMA NIC"), "{}", f.summary);
    // A NIC of the fabric PIX from the GPU is still offered.
    let r = host()
        .pod()
        .remove("/dev/infiniband/uverbs0")
        .set("/dev/infiniband/uverbs1", "")
        .report();
    assert_eq!(outcome(&r, "gpu-nic-distance"), Outcome::Error);
}

#[test]
fn an_nccl_ib_hca_that_selects_no_active_port_is_an_error() {
    // A typo, or another machine's names: NCCL falls back to TCP sockets without a word.
    for value in ["mlx5_9", "=mlx5", "^mlx5"] {
        let r = host()
            .set("/proc/self/environ", &format!("NCCL_IB_HCA={value}\0"))
            .report();
        assert_eq!(outcome(&r, "multi-rail"), Outcome::Error, "{value}");
        let f = &findings(&r, "multi-rail")[0];
        assert!(
            f.summary
                .contains("selects none of the 2 ACTIVE RDMA port(s) here (mlx5_0 and mlx5_1)"),
            "{value}: {}",
            f.summary
        );
        assert_eq!(r.exit_code(), 2);
    }
    // A prefix selects: no such finding.
    let r = host()
        .set("/proc/self/environ", "NCCL_IB_HCA=mlx5\0")
        .report();
    assert_ne!(
        outcome(&r, "multi-rail"),
        Outcome::Error,
        "{}",
        summaries(&r, "multi-rail")
    );
}

#[test]
fn nccl_variables_that_turn_the_ib_transport_off_are_errors() {
    for (value, error) in [
        ("NCCL_IB_DISABLE=1", true),
        ("NCCL_IB_DISABLE=0x1", true),
        ("NCCL_NET=Socket", true),
        ("NCCL_NET=socket", true),
        ("NCCL_IB_DISABLE=0", false),
        // Not an integer to NCCL: it keeps the default.
        ("NCCL_IB_DISABLE=yes", false),
        ("NCCL_NET=IB", false),
    ] {
        let r = host()
            .set("/proc/self/environ", &format!("{value}\0"))
            .report();
        let f = findings(&r, "multi-rail");
        assert_eq!(
            f.iter().any(|f| f.severity == Severity::Error
                && f.summary
                    .starts_with(&format!("{value}: NCCL leaves the 2 ACTIVE"))),
            error,
            "{value}: {}",
            summaries(&r, "multi-rail")
        );
    }
}

#[test]
fn nccl_net_gdr_level_below_the_path_or_unknown_to_nccl_is_a_warning() {
    let level = |value: &str| {
        host()
            .set(
                "/proc/self/environ",
                &format!("NCCL_NET_GDR_LEVEL={value}\0"),
            )
            .report()
    };
    // Both GPUs are PIX from their NICs: LOC (or old-style 0) turns GPUDirect RDMA off.
    for value in ["LOC", "0"] {
        let r = level(value);
        assert_eq!(outcome(&r, "gpudirect-rdma"), Outcome::Warning, "{value}");
        let s = &findings(&r, "gpudirect-rdma")[0].summary;
        assert!(s.contains("turns GPUDirect RDMA off for GPU0"), "{s}");
        assert!(s.contains("at PIX from mlx5_0"), "{s}");
    }
    // nvidia-smi's NODE is no NCCL level: ignored by NCCL, which doctor says.
    let r = level("NODE");
    assert_eq!(outcome(&r, "gpudirect-rdma"), Outcome::Warning);
    assert!(
        findings(&r, "gpudirect-rdma")[0]
            .summary
            .contains("not a level NCCL knows")
    );
    for value in ["PIX", "PHB", "SYS"] {
        assert_eq!(
            outcome(&level(value), "gpudirect-rdma"),
            Outcome::Ok,
            "{value}"
        );
    }
}

#[test]
fn an_nccl_socket_ifname_that_names_no_interface_is_an_error() {
    let with = |value: &str| {
        host()
            .set(
                "/proc/self/environ",
                &format!("NCCL_SOCKET_IFNAME={value}\0"),
            )
            .report()
    };
    let names = |r: &Report| {
        findings(r, "multi-rail").iter().any(|f| {
            f.severity == Severity::Error
                && f.summary.contains("matches none of the network interfaces")
        })
    };
    for value in ["ib0", "=ens", "^ens"] {
        let r = with(value);
        assert!(names(&r), "{value}: {}", summaries(&r, "multi-rail"));
    }
    // A prefix of one, an exact name, and one character (NCCL ignores it).
    for value in ["ens", "=ens0", "^ib", "e"] {
        let r = with(value);
        assert!(!names(&r), "{value}: {}", summaries(&r, "multi-rail"));
    }
}

/// A VF of mlx5_0 (0000:04:00.2, mlx5_2) beside its PF.
fn with_vf(m: Machine, port_state: &str) -> Machine {
    let mut m = m;
    let pf = path_of("0000:04:00.0");
    let vf = pf.replace("0000:04:00.0", "0000:04:00.2");
    m.func(&vf, "0x020700", "0x15b3", "0x101e", 0, "0-7");
    m.tree.link(&format!("{vf}/physfn"), "../0000:04:00.0");
    m.tree.link(&format!("{pf}/virtfn0"), "../0000:04:00.2");
    m.tree.file(&format!("{pf}/sriov_totalvfs"), "8\n");
    m.tree.file(&format!("{pf}/sriov_numvfs"), "4\n");
    for k in ["current_link_speed", "max_link_speed"] {
        m.tree.file(&format!("{vf}/{k}"), "Unknown\n");
    }
    for k in ["current_link_width", "max_link_width"] {
        m.tree.file(&format!("{vf}/{k}"), "0\n");
    }
    m.rdma(&vf, "mlx5_2", "ens0v0", 2, "10.0.0.9");
    let p = format!("{vf}/infiniband/mlx5_2/ports/1");
    m.tree.file(&format!("{p}/state"), port_state);
    m
}

#[test]
fn sriov_vf_port_down_is_this_pods_problem_only_when_owned() {
    // The pod owns only the VF, whose port is DOWN.
    let r = with_vf(roce(), "1: DOWN\n")
        .pod()
        .remove("/dev/infiniband/uverbs0")
        .report();
    assert_eq!(
        outcome(&r, "sriov"),
        Outcome::Error,
        "{}",
        summaries(&r, "sriov")
    );
    assert!(findings(&r, "sriov")[0].summary.contains("mlx5_2"));
    // Trust/spoofchk cannot be seen: said, not silently skipped.
    assert!(
        findings(&r, "sriov")
            .iter()
            .any(|f| f.skipped && f.summary.contains("spoofchk"))
    );
    // An unassigned VF with its port down is not this pod's problem.
    let other = with_vf(roce(), "1: DOWN\n")
        .pod()
        .remove("/dev/infiniband/uverbs2")
        .report();
    assert_eq!(
        outcome(&other, "sriov"),
        Outcome::NotApplicable,
        "{}",
        summaries(&other, "sriov")
    );
    // A healthy VF in use is information only.
    let fine = with_vf(roce(), "4: ACTIVE\n")
        .pod()
        .remove("/dev/infiniband/uverbs0")
        .report();
    assert!(
        fine.checks
            .iter()
            .any(|c| c.check == "sriov" && c.outcome == Outcome::Info)
    );
    assert!(
        findings(&fine, "sriov")
            .iter()
            .all(|f| f.severity == Severity::Info)
    );
}

#[test]
fn mtu_1500_gives_active_mtu_1024() {
    let r = roce()
        .set(
            &format!("{}/net/ens0/mtu", path_of("0000:04:00.0")),
            "1500\n",
        )
        .report();
    assert_eq!(outcome(&r, "mtu"), Outcome::Warning);
    let s = summaries(&r, "mtu");
    assert!(
        s.contains("mlx5_0 runs at active MTU 1024 (from ens0 MTU 1500)"),
        "{s}"
    );
    assert!(s.contains("different active MTUs"), "{s}");
    assert_eq!(outcome(&roce().report(), "mtu"), Outcome::Ok);
    assert_eq!(super::network::roce_mtu(4200), Some(4096));
    assert_eq!(super::network::roce_mtu(1500), Some(1024));
    assert_eq!(super::network::roce_mtu(2200), Some(2048));
    assert_eq!(super::network::roce_mtu(200), None);
}

/// A pod's macvlan carries the port's GIDs while the PF netdev stays on the host: the
/// macvlan's MTU bounds the PF's from below (`macvlan_change_mtu`), so 9000 there means
/// the port runs at 4096, judged rather than skipped; 1450 leaves it unknown.
#[test]
fn mtu_judged_through_a_pods_macvlan() {
    let r = roce().pod().report();
    assert_eq!(outcome(&r, "mtu"), Outcome::Ok, "{}", summaries(&r, "mtu"));
    let note = &r.checks.iter().find(|c| c.check == "mtu").unwrap().note;
    assert!(
        note.contains("active MTU 4096 on mlx5_0") && note.contains("from net1 MTU 9000"),
        "{note}"
    );
    let low = roce()
        .pod()
        .set("/sys/devices/virtual/net/net1/mtu", "1450\n")
        .report();
    let s = summaries(&low, "mtu");
    assert!(
        s.contains("active MTU of mlx5_0") && s.contains("net1"),
        "{s}"
    );
}

#[test]
fn mtu_pod_netdev_1450() {
    let r = roce()
        .pod()
        .set("/sys/devices/virtual/net/net1/mtu", "1450\n")
        .report();
    let s = summaries(&r, "mtu");
    assert!(
        s.contains("net1") && s.contains("MTU 1450") && s.contains("IB MTU 1024"),
        "{s}"
    );
    let ok = roce().pod().report();
    assert!(
        !summaries(&ok, "mtu").contains("net1"),
        "{}",
        summaries(&ok, "mtu")
    );
}

#[test]
fn netns_pod_reports_gid_index_and_wrong_forced_index() {
    let r = roce().pod().report();
    assert_eq!(r.context, Context::Pod);
    assert_eq!(outcome(&r, "netns"), Outcome::Info);
    let s = summaries(&r, "netns");
    assert!(
        s.contains("GID index right here: mlx5_0 -> 5 (10.0.0.5 on net1)"),
        "{s}"
    );
    let bad = roce()
        .pod()
        .set(
            "/proc/self/environ",
            "KUBERNETES_SERVICE_HOST=10.96.0.1\0NCCL_IB_GID_INDEX=3\0",
        )
        .report();
    assert_eq!(
        outcome(&bad, "netns"),
        Outcome::Error,
        "{}",
        summaries(&bad, "netns")
    );
    assert_eq!(outcome(&roce().report(), "netns"), Outcome::NotApplicable);
}

#[test]
fn rdma_cgroup_limits() {
    let base = || {
        host()
            .set("/proc/self/cgroup", "0::/job\n")
            .set("/proc/self/environ", "LOCAL_WORLD_SIZE=8\0")
    };
    let r = base()
        .set(
            "/sys/fs/cgroup/job/rdma.max",
            "mlx5_0 hca_handle=2 hca_object=max \nmlx5_1 hca_handle=max hca_object=max \n",
        )
        .report();
    assert_eq!(
        outcome(&r, "rdma-cgroup"),
        Outcome::Error,
        "{}",
        summaries(&r, "rdma-cgroup")
    );
    let f = &findings(&r, "rdma-cgroup")[0];
    assert!(f.summary.contains("mlx5_0 hca_handle=2"), "{}", f.summary);
    assert!(f.evidence[0].path.ends_with("/sys/fs/cgroup/job/rdma.max"));
    let near = base()
        .set(
            "/sys/fs/cgroup/job/rdma.max",
            "mlx5_0 hca_handle=10 hca_object=max \n",
        )
        .set(
            "/sys/fs/cgroup/job/rdma.current",
            "mlx5_0 hca_handle=9 hca_object=40 \n",
        )
        .report();
    assert_eq!(
        outcome(&near, "rdma-cgroup"),
        Outcome::Warning,
        "{}",
        summaries(&near, "rdma-cgroup")
    );
    let ok = base()
        .set(
            "/sys/fs/cgroup/job/rdma.max",
            "mlx5_0 hca_handle=max hca_object=max \n",
        )
        .report();
    assert_eq!(outcome(&ok, "rdma-cgroup"), Outcome::Ok);
}

#[test]
fn rail_down_and_fewer_rails_than_gpus() {
    let p = format!("{}/infiniband/mlx5_1/ports/1", path_of("0000:84:00.0"));
    let r = host()
        .set(&format!("{p}/state"), "1: DOWN\n")
        .set(&format!("{p}/phys_state"), "3: Disabled\n")
        .report();
    assert_eq!(outcome(&r, "multi-rail"), Outcome::Warning);
    let s = summaries(&r, "multi-rail");
    assert!(s.contains("rail mlx5_1 is not ACTIVE (1: DOWN)"), "{s}");
    assert!(s.contains("2 GPUs share 1 usable rail(s) (mlx5_0)"), "{s}");
    // GPU1 then reaches mlx5_0 across the sockets: distance finds that too.
    assert_eq!(outcome(&r, "gpu-nic-distance"), Outcome::Info);
}

/// On RoCE, Disabled is a netdev set down or one without a link partner: the fix says
/// which, from `carrier`.
#[test]
fn a_disabled_roce_rail_names_down_or_no_carrier() {
    let p = format!("{}/infiniband/mlx5_1/ports/1", path_of("0000:84:00.0"));
    let n = format!("{}/net/ens1", path_of("0000:84:00.0"));
    let fix = |carrier: Option<&str>| {
        let mut m = roce()
            .set(&format!("{p}/state"), "1: DOWN\n")
            .set(&format!("{p}/phys_state"), "3: Disabled\n")
            .set(&format!("{n}/operstate"), "down\n");
        if let Some(c) = carrier {
            m = m.set(&format!("{n}/carrier"), c);
        }
        let r = m.report();
        let f = findings(&r, "multi-rail");
        let f = f.iter().find(|f| f.summary.contains("mlx5_1")).unwrap();
        f.fix.clone()
    };
    let no_link = fix(Some("0\n"));
    assert!(no_link.contains("ens1 up but no carrier"), "{no_link}");
    assert!(no_link.contains("mlxlink -d mlx5_1"), "{no_link}");
    // Down: `carrier` cannot be read (EINVAL).
    let down = fix(None);
    assert!(
        down.contains("ens1 is down") && down.contains("ip link set ens1 up"),
        "{down}"
    );
}

#[test]
fn rails_of_different_speed() {
    let p = format!("{}/infiniband/mlx5_1/ports/1", path_of("0000:84:00.0"));
    let r = host()
        .set(&format!("{p}/rate"), "200 Gb/sec (4X HDR)\n")
        .report();
    assert!(
        summaries(&r, "multi-rail").contains("different speeds"),
        "{}",
        summaries(&r, "multi-rail")
    );
    // One port at each speed: no speed is the common one, so both are evidence (where
    // one is, the evidence is its first port and every other port; pod goldens).
    let f = findings(&r, "multi-rail");
    let f = f.iter().find(|f| f.summary.contains("speeds")).unwrap();
    let rates: Vec<&str> = f.evidence.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(
        rates,
        [
            "/sys/class/infiniband/mlx5_0/ports/1/rate",
            "/sys/class/infiniband/mlx5_1/ports/1/rate",
        ]
    );
}

#[test]
fn pcie_link_trained_down() {
    let nic = path_of("0000:04:00.0");
    let r = host()
        .set(&format!("{nic}/current_link_width"), "8\n")
        .report();
    assert_eq!(outcome(&r, "pcie-link"), Outcome::Warning);
    assert!(
        summaries(&r, "pcie-link")
            .contains("mlx5_0 (0000:04:00.0) link trained at 32 GT/s x8, below its 32 GT/s x16")
    );
    // An idle GPU at a lower speed is normal.
    let gpu = path_of("0000:03:00.0");
    let idle = host()
        .set(&format!("{gpu}/current_link_speed"), "2.5 GT/s PCIe\n")
        .report();
    assert_eq!(
        outcome(&idle, "pcie-link"),
        Outcome::Info,
        "{}",
        summaries(&idle, "pcie-link")
    );
    assert_eq!(idle.exit_code(), 0);
    // A GPU whose link tops out at 2.5 GT/s is on the die (GB10): x1 of x16 is no fault.
    let on_die = host()
        .set(&format!("{gpu}/current_link_speed"), "2.5 GT/s PCIe\n")
        .set(&format!("{gpu}/max_link_speed"), "2.5 GT/s PCIe\n")
        .set(&format!("{gpu}/current_link_width"), "1\n")
        .report();
    let s = summaries(&on_die, "pcie-link");
    assert_eq!(outcome(&on_die, "pcie-link"), Outcome::Info, "{s}");
    assert!(s.contains("on the die"), "{s}");
}

#[test]
fn acs_redirect_between_gpu_and_nic() {
    let dsp = path_of("0000:02:01.0");
    let mut m = host();
    m.tree.insert(
        &format!("{dsp}/config"),
        MemEntry::File(bridge_config(0x001d)),
    );
    let r = m.report();
    assert_eq!(outcome(&r, "acs-redirect"), Outcome::Error);
    let f = &findings(&r, "acs-redirect")[0];
    assert!(f.summary.contains("0000:02:01.0"), "{}", f.summary);
    assert!(f.evidence[0].value.contains("ReqRedir+ CmpltRedir+"));
    // Without CAP_SYS_ADMIN the config space is 64 bytes: said so.
    let mut m = host();
    for (path, _) in host().tree.entries() {
        if path.ends_with("/config") {
            m.tree.insert(path, MemEntry::File(vec![0u8; 64]));
        }
    }
    let r = m.report();
    assert_eq!(outcome(&r, "acs-redirect"), Outcome::Skipped);
    assert!(findings(&r, "acs-redirect")[0].why.contains("64 bytes"));
}

/// The pod of `distance_nic_far_while_pix_exists`: GPU0 given mlx5_1 (SYS) while
/// mlx5_0 sits under GPU0's switch, so gpu-nic-distance recommends mlx5_0.
fn pod_with_far_nic() -> Machine {
    host()
        .pod()
        .remove("/dev/infiniband/uverbs0")
        .set("/dev/infiniband/uverbs1", "")
}

#[test]
fn acs_redirect_on_the_recommended_path_is_a_warning() {
    let mut m = pod_with_far_nic();
    m.tree.insert(
        &format!("{}/config", path_of("0000:02:01.0")),
        MemEntry::File(bridge_config(0x001d)),
    );
    let r = m.report();
    assert_eq!(
        outcome(&r, "acs-redirect"),
        Outcome::Warning,
        "{}",
        summaries(&r, "acs-redirect")
    );
    let f = &findings(&r, "acs-redirect")[0];
    assert_eq!(f.severity, Severity::Warning);
    for text in [
        "0000:02:01.0",
        "GPU0 (0000:03:00.0)",
        "mlx5_0 (0000:04:00.0)",
    ] {
        assert!(f.summary.contains(text), "{text}: {}", f.summary);
    }
    // Only the port that redirects is named: 02:00.0 is on the path, but clean.
    assert!(!f.summary.contains("0000:02:00.0"), "{}", f.summary);
    assert_eq!(
        f.evidence[0].path,
        "/sys/bus/pci/devices/0000:02:01.0/config"
    );
    assert!(f.evidence[0].value.contains("ReqRedir+ CmpltRedir+"));
    assert!(f.fix.contains("disable ACS") && f.fix.contains("0000:02:01.0"));
    assert!(f.fix.contains("Direct Translated P2P"), "{}", f.fix);
    // The distance finding says its advice needs ACS off, and points to the warning.
    let d = &findings(&r, "gpu-nic-distance")[0];
    assert!(
        d.summary.contains("mlx5_0 (0000:04:00.0) is PIX"),
        "{}",
        d.summary
    );
    assert!(d.summary.contains("see acs-redirect"), "{}", d.summary);
    assert!(
        d.evidence
            .iter()
            .any(|e| e.path.ends_with("0000:02:01.0/config") && e.value.contains("ReqRedir+"))
    );
    assert!(d.fix.contains("acs-redirect"), "{}", d.fix);
    // Nothing uses that path yet: the pod's exit code comes from the distance error.
    assert_eq!(r.exit_code(), 2);
}

#[test]
fn acs_clean_recommended_path_is_checked_not_na() {
    let r = pod_with_far_nic().report();
    assert_eq!(outcome(&r, "gpu-nic-distance"), Outcome::Error);
    assert_eq!(outcome(&r, "acs-redirect"), Outcome::Ok);
    let note = &r
        .checks
        .iter()
        .find(|c| c.check == "acs-redirect")
        .map(|c| c.note.clone())
        .unwrap_or_default();
    for text in [
        "no GPU-NIC pair in use under a common PCIe switch",
        "2 bridge(s) on the path",
        "GPU0 (0000:03:00.0) -> mlx5_0 (0000:04:00.0)",
    ] {
        assert!(note.contains(text), "{text}: {note}");
    }
    // The distance finding claims nothing about ACS when the path is clean.
    let d = &findings(&r, "gpu-nic-distance")[0];
    assert!(!d.summary.contains("ACS"), "{}", d.summary);
}

#[test]
fn acs_unreadable_on_the_recommended_path_is_skipped_not_na() {
    // A pod without CAP_SYS_ADMIN reads 64 bytes of config space: said, not n/a.
    let mut m = pod_with_far_nic();
    for (path, _) in host().tree.entries() {
        if path.ends_with("/config") {
            m.tree.insert(path, MemEntry::File(vec![0u8; 64]));
        }
    }
    let r = m.report();
    assert_eq!(outcome(&r, "acs-redirect"), Outcome::Skipped);
    let f = &findings(&r, "acs-redirect")[0];
    assert!(f.summary.contains("0000:02:01.0"), "{}", f.summary);
    assert!(f.why.contains("64 bytes"));
}

#[test]
fn acs_not_applicable_without_pix_or_pxb_anywhere() {
    // mlx5_0's port is down: no alternative, so nothing is recommended, and the pod's
    // own pair (GPU0-mlx5_1) is SYS.
    let p = format!("{}/infiniband/mlx5_0/ports/1", path_of("0000:04:00.0"));
    let mut m = pod_with_far_nic().set(&format!("{p}/state"), "1: DOWN\n");
    m.tree.insert(
        &format!("{}/config", path_of("0000:02:01.0")),
        MemEntry::File(bridge_config(0x001d)),
    );
    let r = m.report();
    assert_eq!(
        outcome(&r, "gpu-nic-distance"),
        Outcome::Info,
        "{}",
        summaries(&r, "gpu-nic-distance")
    );
    assert_eq!(outcome(&r, "acs-redirect"), Outcome::NotApplicable);
}

#[test]
fn gpudirect_needs_peer_memory() {
    let r = host().remove("/sys/module/nvidia_peermem").report();
    assert_eq!(outcome(&r, "gpudirect-rdma"), Outcome::Warning);
    let old = host()
        .remove("/sys/module/nvidia_peermem")
        .set("/sys/module/nvidia/version", "470.82.01\n")
        .report();
    assert_eq!(outcome(&old, "gpudirect-rdma"), Outcome::Error);
    assert_eq!(outcome(&host().report(), "gpudirect-rdma"), Outcome::Ok);
}

#[test]
fn memlock_limits() {
    let mut m = host();
    m.limits("65536");
    let r = m.report();
    assert_eq!(outcome(&r, "memlock"), Outcome::Error);
    assert!(findings(&r, "memlock")[0].summary.contains("64 KiB"));
    let mut m = host();
    m.limits("8388608");
    assert_eq!(outcome(&m.report(), "memlock"), Outcome::Warning);
    assert_eq!(outcome(&host().report(), "memlock"), Outcome::Ok);
}

#[test]
fn missing_uverbs_and_rdma_cm() {
    let r = host().pod().remove("/dev/infiniband").report();
    assert_eq!(outcome(&r, "rdma-devices"), Outcome::Error);
    assert!(
        findings(&r, "rdma-devices")[0]
            .fix
            .contains("resources.limits")
    );
    let r = host().pod().remove("/dev/infiniband/rdma_cm").report();
    assert_eq!(
        outcome(&r, "rdma-devices"),
        Outcome::Warning,
        "{}",
        summaries(&r, "rdma-devices")
    );
    let ok = host().report();
    assert_eq!(outcome(&ok, "rdma-devices"), Outcome::Ok);
}

/// mlx5_0 without its IPv4 address: only the link-local GIDs are left.
fn roce_without_ipv4_on_mlx5_0() -> Machine {
    let p = format!("{}/infiniband/mlx5_0/ports/1", path_of("0000:04:00.0"));
    let zero = "0000:0000:0000:0000:0000:0000:0000:0000\n";
    roce()
        .set(&format!("{p}/gids/2"), zero)
        .set(&format!("{p}/gids/3"), zero)
        .remove(&format!("{p}/gid_attrs/types/2"))
        .remove(&format!("{p}/gid_attrs/types/3"))
        .remove(&format!("{p}/gid_attrs/ndevs/2"))
        .remove(&format!("{p}/gid_attrs/ndevs/3"))
}

#[test]
fn roce_without_v2_ipv4_gid() {
    // Selected by NCCL_IB_HCA: the missing GID is an error of the rail.
    let r = roce_without_ipv4_on_mlx5_0()
        .set("/proc/self/environ", "NCCL_IB_HCA==mlx5_0,mlx5_1\0")
        .report();
    assert_eq!(
        outcome(&r, "roce-gid"),
        Outcome::Error,
        "{}",
        summaries(&r, "roce-gid")
    );
    assert!(
        summaries(&r, "roce-gid")
            .contains("mlx5_0 has no RoCE v2 IPv4 GID: NCCL would use index 0 (v1 fe80:"),
        "{}",
        summaries(&r, "roce-gid")
    );
    // NCCL_IB_HCA unset: the plan leaves mlx5_0 out, and multi-rail says NCCL would
    // still open it.
    let r = roce_without_ipv4_on_mlx5_0().report();
    assert_eq!(outcome(&r, "roce-gid"), Outcome::Ok);
    let s = summaries(&r, "multi-rail");
    assert!(
        s.contains("NCCL_IB_HCA is not set")
            && s.contains("mlx5_0 (Ethernet, 400 Gb/s; RoCE port without a GID"),
        "{s}"
    );
    assert_eq!(outcome(&roce().report(), "roce-gid"), Outcome::Ok);
    assert_eq!(
        outcome(&host().report(), "roce-gid"),
        Outcome::NotApplicable
    );
}

#[test]
fn soft_roce_goes_through_netfilter() {
    let mut m = roce();
    m.tree.link(
        "/sys/class/infiniband/rxe0",
        "../../devices/virtual/infiniband/rxe0",
    );
    let d = "/sys/devices/virtual/infiniband/rxe0/ports/1";
    m.tree.file(&format!("{d}/state"), "4: ACTIVE\n");
    m.tree.file(&format!("{d}/link_layer"), "Ethernet\n");
    m.tree
        .file("/sys/class/infiniband_verbs/uverbs5/ibdev", "rxe0\n");
    m.tree.file("/dev/infiniband/uverbs5", "");
    let r = m.report();
    assert_eq!(
        outcome(&r, "roce-netfilter"),
        Outcome::Warning,
        "{}",
        summaries(&r, "roce-netfilter")
    );
    assert_eq!(outcome(&roce().report(), "roce-netfilter"), Outcome::Ok);
}

#[test]
fn json_shape_and_exit_codes() {
    let r = host().remove("/sys/module/nvidia_peermem").report();
    let v: serde_json::Value = serde_json::to_value(&r).unwrap();
    assert_eq!(v["schema"], "rdmatopo.doctor/1");
    let f = &v["findings"][0];
    for k in ["check", "severity", "summary", "evidence", "why", "fix"] {
        assert!(f.get(k).is_some(), "missing {k} in {f}");
    }
    assert_eq!(r.exit_code(), 1);
    assert_eq!(r.count(Severity::Warning), 1);
}

/// Discovery with the snapshot sources, so `/rdmatopo/verbs.json` is replayed.
fn report_with_sources(m: &Machine) -> Report {
    let fs = Sysfs::memory(m.tree.clone(), "test");
    run(&crate::discover_fs(&fs).unwrap())
}

fn verbs_json(dev: &str, max_qp: u32, active_mtu: u32) -> String {
    format!(
        r#"{{"schema":"rdmatopo.verbs/1","devices":[{{"name":"{dev}","max_qp":{max_qp},"max_cq":{max_qp},"max_mr":null,"max_srq":null,"ports":[{{"port":1,"state":"ACTIVE","active_mtu":{active_mtu},"max_mtu":4096,"link_layer":"Ethernet","active_speed":null,"active_width":null,"gid_tbl_len":null}}]}}]}}"#
    )
}

#[test]
fn vf_limits_from_verbs_facts() {
    // The pod's VF offers 256 QPs; a 512-rank all-to-all needs ~1022.
    let m = with_vf(roce(), "4: ACTIVE\n")
        .pod()
        .remove("/dev/infiniband/uverbs0")
        .set(
            "/proc/self/environ",
            "KUBERNETES_SERVICE_HOST=10.96.0.1\0WORLD_SIZE=512\0",
        )
        .set("/rdmatopo/verbs.json", &verbs_json("mlx5_2", 256, 4096));
    let r = report_with_sources(&m);
    let s = summaries(&r, "sriov");
    assert!(
        s.contains(
            "VF mlx5_2 offers max_qp 256, below the ~1022 that all-to-all needs for WORLD_SIZE=512"
        ),
        "{s}"
    );
    assert!(!s.contains("QP/CQ limits of"), "verbs facts are there: {s}");
    // Enough QPs for the job: no warning.
    let m = with_vf(roce(), "4: ACTIVE\n")
        .pod()
        .remove("/dev/infiniband/uverbs0")
        .set(
            "/proc/self/environ",
            "KUBERNETES_SERVICE_HOST=10.96.0.1\0WORLD_SIZE=8\0",
        )
        .set("/rdmatopo/verbs.json", &verbs_json("mlx5_2", 256, 4096));
    assert!(
        findings(&report_with_sources(&m), "sriov")
            .iter()
            .all(|f| f.severity == Severity::Info)
    );
}

#[test]
fn active_mtu_from_verbs_facts_wins() {
    // sysfs says MTU 9000 (4096), libibverbs reports 2048 (what the HCA negotiated).
    let m = roce().set("/rdmatopo/verbs.json", &verbs_json("mlx5_0", 1 << 17, 2048));
    let r = report_with_sources(&m);
    let f = findings(&r, "mtu");
    assert!(
        f[0].summary.starts_with("mlx5_0 runs at active MTU 2048"),
        "{}",
        f[0].summary
    );
    assert_eq!(f[0].evidence[0].path, "verbs: mlx5_0 port 1 active_mtu");
}

#[test]
fn judging_exactly_the_given_devices_and_cpus() {
    // The host sees both sockets; judge only socket 1's GPU and NIC with socket 0's
    // CPUs, as a node audit judges a pod from its allocation.
    let fs = Sysfs::memory(host().tree.clone(), "test");
    let topo = crate::Discoverer::new(&fs).discover().unwrap();
    let here = crate::view::CheckedDevices::this_process(&topo);
    assert_eq!((here.gpus.len(), here.hcas.len()), (2, 2));
    let judged = crate::view::CheckedDevices {
        gpus: vec![&topo.gpus[1]],
        hcas: vec![&topo.rdma_devices[1]],
        cpus: Some(crate::parse::parse_cpulist("0-7").unwrap()),
        ..here
    };
    let r = judge(&Scope::judging(&topo, judged));
    assert_eq!(r.judged.gpus, [topo.gpus[1].pci]);
    assert_eq!(r.judged.rdma_devices, ["mlx5_1"]);
    // Socket 1's devices with socket 0's CPUs: none of the CPUs is local.
    assert_eq!(
        outcome(&r, "numa-affinity"),
        Outcome::Error,
        "{}",
        summaries(&r, "numa-affinity")
    );
    // The same devices with their own socket's CPUs are fine, and the whole host too.
    let local = crate::view::CheckedDevices {
        gpus: vec![&topo.gpus[1]],
        hcas: vec![&topo.rdma_devices[1]],
        cpus: Some(crate::parse::parse_cpulist("8-15").unwrap()),
        ..crate::view::CheckedDevices::this_process(&topo)
    };
    let r = judge(&Scope::judging(&topo, local));
    assert_eq!(outcome(&r, "numa-affinity"), Outcome::Ok);
    assert_eq!(run(&topo), judge(&Scope::of(&topo)));
}

#[test]
fn judging_another_container_uses_its_evidence_candidates_and_no_environment() {
    let discover = |m: &Machine| {
        let fs = Sysfs::memory(m.tree.clone(), "test");
        crate::Discoverer::new(&fs).discover().unwrap()
    };
    // Our NCCL_IB_HCA selects mlx5_0, which has no RoCE v2 IPv4 GID: an error for this
    // process, but another container's environment is unknown, so the plan (which
    // leaves mlx5_0 out) decides, and no "NCCL_IB_HCA is not set" is claimed for it.
    let topo = discover(
        &roce_without_ipv4_on_mlx5_0().set("/proc/self/environ", "NCCL_IB_HCA==mlx5_0,mlx5_1\0"),
    );
    let mine = judge(&Scope::of(&topo));
    assert_eq!(outcome(&mine, "roce-gid"), Outcome::Error);
    let other = crate::view::CheckedDevices {
        own_environment: false,
        ..crate::view::CheckedDevices::this_process(&topo)
    };
    let r = judge(&Scope::judging(&topo, other));
    assert_eq!(
        outcome(&r, "roce-gid"),
        Outcome::Ok,
        "{}",
        summaries(&r, "roce-gid")
    );
    let topo = discover(&roce_without_ipv4_on_mlx5_0());
    assert!(summaries(&judge(&Scope::of(&topo)), "multi-rail").contains("NCCL_IB_HCA is not set"));
    let other = crate::view::CheckedDevices {
        own_environment: false,
        ..crate::view::CheckedDevices::this_process(&topo)
    };
    let s = summaries(&judge(&Scope::judging(&topo, other)), "multi-rail");
    assert!(!s.contains("NCCL_IB_HCA"), "{s}");

    // GPU0 with the far mlx5_1: mlx5_0 is offered as the better NIC only while it is
    // a candidate (free); the CPUs' evidence is the one given.
    let topo = discover(&host());
    let far = |candidates: Option<Vec<crate::parse::PciAddr>>| crate::view::CheckedDevices {
        gpus: vec![&topo.gpus[0]],
        hcas: vec![&topo.rdma_devices[1]],
        cpus: Some(crate::parse::parse_cpulist("8-15").unwrap()),
        cpus_evidence: vec![("kubelet: ns/p container c cpu_ids".into(), "8-15".into())],
        candidate_nics: candidates,
        ..crate::view::CheckedDevices::this_process(&topo)
    };
    let mlx5_1 = topo.rdma_devices[1].pci.unwrap();
    let r = judge(&Scope::judging(&topo, far(None)));
    assert_eq!(outcome(&r, "gpu-nic-distance"), Outcome::Error);
    assert!(summaries(&r, "gpu-nic-distance").contains("mlx5_0 (0000:04:00.0) is PIX"));
    let numa = findings(&r, "numa-affinity");
    assert!(
        numa.iter().any(|f| f
            .evidence
            .iter()
            .any(|e| e.path == "kubelet: ns/p container c cpu_ids" && e.value == "8-15")),
        "{}",
        summaries(&r, "numa-affinity")
    );
    assert!(
        numa.iter()
            .all(|f| f.evidence.iter().all(|e| e.path != "/proc/self/status"))
    );
    // Only its own NIC is a candidate: no better one to name, just no GPUDirect.
    let r = judge(&Scope::judging(&topo, far(Some(vec![mlx5_1]))));
    let s = summaries(&r, "gpu-nic-distance");
    assert_eq!(outcome(&r, "gpu-nic-distance"), Outcome::Info, "{s}");
    assert!(!s.contains("mlx5_0"), "{s}");
}

/// The RoCE host with MLNX_OFED's QoS files on both rails: `class` in
/// `tc/1/traffic_class` (`None`: the file empty, unset) and ECN on `ecn_on` on both points.
fn roce_qos(class: Option<u8>, ecn_on: &[u8]) -> Machine {
    let mut m = roce();
    for (i, bdf) in ["0000:04:00.0", "0000:84:00.0"].iter().enumerate() {
        let f = path_of(bdf);
        m = m.set(
            &format!("{f}/infiniband/mlx5_{i}/tc/1/traffic_class"),
            &class.map_or(String::new(), |c| format!("Global tclass={c}\n")),
        );
        for point in ["roce_np", "roce_rp"] {
            for p in 0..8u8 {
                m = m.set(
                    &format!("{f}/net/ens{i}/ecn/{point}/enable/{p}"),
                    if ecn_on.contains(&p) { "1\n" } else { "0\n" },
                );
            }
        }
    }
    m
}

#[test]
fn ecn_on_some_priorities_while_the_roce_priority_is_unknown_is_a_warning() {
    let r = roce_qos(None, &[3]).report();
    assert_eq!(
        outcome(&r, "roce-qos"),
        Outcome::Warning,
        "{}",
        summaries(&r, "roce-qos")
    );
    let f = findings(&r, "roce-qos");
    let f = f
        .iter()
        .find(|f| f.summary.contains("on only for priority 3"))
        .unwrap_or_else(|| panic!("{}", summaries(&r, "roce-qos")));
    assert!(f.summary.contains("off for 0,1,2,4,5,6,7"), "{}", f.summary);
    assert!(f.summary.contains("mlx5_0 and mlx5_1"), "{}", f.summary);
    assert!(f.summary.contains("not visible here"), "{}", f.summary);
    assert!(
        f.evidence
            .iter()
            .any(|e| e.path == "/sys/class/net/ens1/ecn/roce_rp/enable" && e.value == "on for 3"),
        "{:?}",
        f.evidence
    );
    assert!(
        f.evidence
            .iter()
            .any(|e| e.path.ends_with("/mlx5_0/tc/1/traffic_class") && e.value.contains("unset")),
        "{:?}",
        f.evidence
    );
    // Unset class means ToS 0, priority 0: off here, and the why says so.
    assert!(
        f.why
            .contains("priority 0 when that is unset, which is off here"),
        "{}",
        f.why
    );
    assert!(f.fix.contains("NCCL_IB_TC=106"), "{}", f.fix);
    assert!(
        f.fix.contains(
            "for p in 0 1 2 4 5 6 7; do echo 1 > /sys/class/net/ens0/ecn/roce_np/enable/$p; echo 1 > /sys/class/net/ens0/ecn/roce_rp/enable/$p; done"
        ),
        "{}",
        f.fix
    );
    assert!(
        f.fix.contains("/sys/class/net/ens1/ecn/roce_np/enable/$p"),
        "{}",
        f.fix
    );
}

#[test]
fn ecn_off_on_priorities_roce_does_not_use_is_fine_once_the_class_says_which() {
    // Class 106: DSCP 26, priority 3, where ECN is on; the others may stay off.
    let r = roce_qos(Some(106), &[3]).report();
    assert!(
        !summaries(&r, "roce-qos").contains("ECN"),
        "{}",
        summaries(&r, "roce-qos")
    );
    // The class puts RoCE on priority 3 while ECN is on for 4 only: the priority is named.
    let r = roce_qos(Some(106), &[4]).report();
    assert!(
        summaries(&r, "roce-qos").contains("ECN (DCQCN) is off for the RoCE priority 3"),
        "{}",
        summaries(&r, "roce-qos")
    );
    // The mlx5 default, every priority on: nothing to say.
    let r = roce_qos(None, &[0, 1, 2, 3, 4, 5, 6, 7]).report();
    assert!(
        !summaries(&r, "roce-qos").contains("ECN"),
        "{}",
        summaries(&r, "roce-qos")
    );
}

#[test]
fn ecn_off_on_every_priority_with_no_class_is_a_warning() {
    let r = roce_qos(None, &[]).report();
    let s = summaries(&r, "roce-qos");
    assert!(
        s.contains("ECN (DCQCN) is off on every priority of mlx5_0 and mlx5_1"),
        "{s}"
    );
    let f = findings(&r, "roce-qos");
    let f = f
        .iter()
        .find(|f| f.summary.contains("every priority"))
        .unwrap();
    // No single ECN priority to steer RoCE to: only the enables are offered.
    assert!(!f.fix.contains("NCCL_IB_TC"), "{}", f.fix);
    assert!(f.fix.contains("for p in 0 1 2 3 4 5 6 7;"), "{}", f.fix);
}
