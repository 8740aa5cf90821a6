//! Reconciliation tests on small in-memory machines: four GPUs, one ConnectX PF
//! (`mlx5_0`) with two VFs (`mlx5_2`, `mlx5_3`), seen from a host or from a container.

use super::*;
use crate::Discoverer;
use crate::sysfs::{MemTree, Sysfs};

const GPUS: [&str; 4] = [
    "0000:18:00.0",
    "0000:2a:00.0",
    "0000:3a:00.0",
    "0000:5d:00.0",
];
/// Device minors deliberately not in PCI order, so a test passes only if the minor is
/// looked up rather than assumed.
const MINORS: [u32; 4] = [2, 3, 0, 1];
const PF: &str = "0000:19:00.0";
const VF0: &str = "0000:19:00.2";
const VF1: &str = "0000:19:00.3";

fn uuid(i: usize) -> String {
    format!("GPU-aaaaaaa{i}-1111-2222-3333-44444444444{i}")
}

fn pci(s: &str) -> PciAddr {
    s.parse().unwrap()
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Host,
    /// A pod with its own network namespace: `eth0` (veth) and, when given, `net1` (VF0).
    Pod,
    /// The same, privileged: all capabilities, the host's `/dev`.
    PrivilegedPod,
    /// A pod with `hostNetwork: true`.
    PodHostNetwork,
    /// Docker, own network namespace.
    Docker,
}

#[derive(Debug, Clone)]
struct B {
    kind: Kind,
    /// GPUs (by index) under `/proc/driver/nvidia/gpus`; `None`: no `/proc/driver/nvidia`.
    proc_gpus: Option<Vec<usize>>,
    proc_info: bool,
    /// The NVIDIA runtime's tmpfs and bind mounts in mountinfo.
    runtime_mounts: bool,
    dev_nvidia: Vec<u32>,
    uverbs: Vec<u32>,
    env: Vec<(String, String)>,
    /// Move VF0's netdev into the pod as `net1`.
    net1: bool,
    exclusive: bool,
    /// RDMA devices listed under `/sys/class/infiniband` (exclusive mode hides others).
    rdma_listed: Vec<&'static str>,
    cpus_allowed: &'static str,
    cpuset: Option<&'static str>,
    nvidia_container_devices: Vec<&'static str>,
    /// DRA device metadata files: (path under the metadata directory, contents).
    dra_metadata: Vec<(String, String)>,
}

impl B {
    fn new(kind: Kind) -> Self {
        let everything = matches!(kind, Kind::Host | Kind::PrivilegedPod);
        Self {
            kind,
            proc_gpus: Some((0..4).collect()),
            proc_info: true,
            runtime_mounts: false,
            dev_nvidia: if everything { MINORS.to_vec() } else { vec![] },
            uverbs: if everything { vec![0, 2, 3] } else { vec![] },
            env: Vec::new(),
            net1: false,
            exclusive: false,
            rdma_listed: vec!["mlx5_0", "mlx5_2", "mlx5_3"],
            cpus_allowed: "0-15",
            cpuset: None,
            nvidia_container_devices: Vec::new(),
            dra_metadata: Vec::new(),
        }
    }

    /// A DRA device metadata file for the claim `claim`, request `request`, naming
    /// `devices` (driver, device, PCI address) as a v1alpha1 `DeviceMetadata`.
    fn dra(mut self, claim: &str, request: &str, devices: &[(&str, &str, &str)]) -> Self {
        let driver = devices.first().map_or("none", |d| d.0);
        let devices: Vec<serde_json::Value> = devices
            .iter()
            .map(|(driver, name, pci)| {
                serde_json::json!({"driver": driver, "pool": "node-a", "name": name,
                    "attributes": {"resource.kubernetes.io/pciBusID": {"string": pci}}})
            })
            .collect();
        let doc = serde_json::json!({"kind": "DeviceMetadata",
            "apiVersion": "metadata.resource.k8s.io/v1alpha1",
            "metadata": {"name": claim, "namespace": "ml"},
            "requests": [{"name": request, "devices": devices}]});
        self.dra_metadata.push((
            format!("resourceclaims/{claim}/{request}/{driver}-metadata.json"),
            format!("{doc}\n"),
        ));
        self
    }

    /// A pod the NVIDIA runtime gave the GPUs `gpus` (procfs, device nodes, mounts).
    fn pod_with_gpus(gpus: &[usize]) -> Self {
        let mut b = Self::new(Kind::Pod);
        b.proc_gpus = Some(gpus.to_vec());
        b.dev_nvidia = gpus.iter().map(|i| MINORS[*i]).collect();
        b.runtime_mounts = true;
        b
    }

    fn env(mut self, k: &str, v: &str) -> Self {
        self.env.push((k.to_string(), v.to_string()));
        self
    }

    fn tree(&self) -> MemTree {
        let mut t = MemTree::new();
        let dev = |bdf: &str| format!("/sys/devices/pci0000:00/{bdf}");
        let function =
            |t: &mut MemTree, bdf: &str, vendor: &str, device: &str, class: &str, driver: &str| {
                let d = dev(bdf);
                t.file(&format!("{d}/vendor"), &format!("{vendor}\n"))
                    .file(&format!("{d}/device"), &format!("{device}\n"))
                    .file(&format!("{d}/class"), &format!("{class}\n"))
                    .link(
                        &format!("{d}/driver"),
                        &format!("/sys/bus/pci/drivers/{driver}"),
                    )
                    .link(&format!("/sys/bus/pci/devices/{bdf}"), &d);
            };
        for g in GPUS {
            function(&mut t, g, "0x10de", "0x2330", "0x030200", "nvidia");
        }
        function(&mut t, PF, "0x15b3", "0x1021", "0x020000", "mlx5_core");
        t.file(&format!("{}/sriov_totalvfs", dev(PF)), "8\n")
            .file(&format!("{}/sriov_numvfs", dev(PF)), "2\n");
        for (i, vf) in [VF0, VF1].iter().enumerate() {
            function(&mut t, vf, "0x15b3", "0x101e", "0x020000", "mlx5_core");
            t.link(&format!("{}/physfn", dev(vf)), &dev(PF))
                .link(&format!("{}/virtfn{i}", dev(PF)), &dev(vf));
        }
        // RDMA devices.
        for (name, bdf, uverbs) in [("mlx5_0", PF, 0), ("mlx5_2", VF0, 2), ("mlx5_3", VF1, 3)] {
            if !self.rdma_listed.contains(&name) {
                continue;
            }
            let d = format!("{}/infiniband/{name}", dev(bdf));
            t.file(&format!("{d}/ports/1/state"), "4: ACTIVE\n")
                .file(&format!("{d}/ports/1/link_layer"), "Ethernet\n")
                .link(&format!("{d}/device"), &dev(bdf))
                .link(&format!("/sys/class/infiniband/{name}"), &d)
                .file(
                    &format!("/sys/class/infiniband_verbs/uverbs{uverbs}/ibdev"),
                    &format!("{name}\n"),
                );
        }
        t.file(
            "/sys/module/ib_core/parameters/netns_mode",
            if self.exclusive { "N\n" } else { "Y\n" },
        );
        // Netdevs of this network namespace.
        let netdev =
            |t: &mut MemTree, name: &str, dir: String, ifindex: u32, iflink: u32, arphrd: u32| {
                let d = format!("{dir}/net/{name}");
                t.file(&format!("{d}/ifindex"), &format!("{ifindex}\n"))
                    .file(&format!("{d}/iflink"), &format!("{iflink}\n"))
                    .file(&format!("{d}/type"), &format!("{arphrd}\n"))
                    .file(&format!("{d}/operstate"), "up\n")
                    .link(&format!("/sys/class/net/{name}"), &d);
            };
        netdev(&mut t, "lo", "/sys/devices/virtual".into(), 1, 1, 772);
        let default_route = match self.kind {
            Kind::Host | Kind::PodHostNetwork => {
                netdev(&mut t, "ens1f0np0", dev(PF), 2, 2, 1);
                netdev(&mut t, "ens1f0v0", dev(VF0), 5, 5, 1);
                netdev(&mut t, "ens1f0v1", dev(VF1), 6, 6, 1);
                // The host end of some other pod's veth.
                netdev(&mut t, "cali1234", "/sys/devices/virtual".into(), 9, 3, 1);
                "ens1f0np0"
            }
            Kind::Pod | Kind::PrivilegedPod | Kind::Docker => {
                netdev(&mut t, "eth0", "/sys/devices/virtual".into(), 3, 27, 1);
                if self.net1 {
                    netdev(&mut t, "net1", dev(VF0), 4, 4, 1);
                }
                "eth0"
            }
        };
        t.file(
            "/proc/net/route",
            &format!(
                "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n{default_route}\t00000000\t0100A8C0\t0003\t0\t0\t0\t00000000\t0\t0\t0\n"
            ),
        );
        // The process.
        let cap = match self.kind {
            Kind::Host | Kind::PrivilegedPod => "000001ffffffffff",
            _ => "00000000a80425fb",
        };
        t.file(
            "/proc/self/status",
            &format!(
                "Name:\trdmatopo\nCapEff:\t{cap}\nCpus_allowed_list:\t{}\n",
                self.cpus_allowed
            ),
        );
        let cgroup = match self.kind {
            Kind::Host => "0::/user.slice/user-1000.slice/session-3.scope\n",
            Kind::Docker => "0::/system.slice/docker-4f1c2a.scope\n",
            _ => "0::/kubepods.slice/kubepods-pod1234.slice/cri-containerd-9ab.scope\n",
        };
        t.file("/proc/self/cgroup", cgroup);
        if let Some(c) = self.cpuset {
            t.file(
                "/sys/fs/cgroup/kubepods.slice/kubepods-pod1234.slice/cri-containerd-9ab.scope/cpuset.cpus.effective",
                &format!("{c}\n"),
            );
        }
        let mut env = self.env.clone();
        if matches!(
            self.kind,
            Kind::Pod | Kind::PrivilegedPod | Kind::PodHostNetwork
        ) {
            env.push(("KUBERNETES_SERVICE_HOST".into(), "10.96.0.1".into()));
        }
        if self.kind == Kind::Docker {
            t.file("/.dockerenv", "");
        }
        let environ: Vec<u8> = env
            .iter()
            .flat_map(|(k, v)| format!("{k}={v}\0").into_bytes())
            .collect();
        t.insert("/proc/self/environ", crate::sysfs::MemEntry::File(environ));
        let mut mounts = String::from("22 1 0:21 / / rw,relatime - overlay overlay rw\n");
        if let Some(listed) = &self.proc_gpus {
            t.file("/proc/driver/nvidia/version", "NVRM version: 550.54.15\n");
            if self.runtime_mounts {
                mounts.push_str("30 22 0:40 / /proc/driver/nvidia rw,nosuid,nodev,noexec,relatime - tmpfs tmpfs rw,mode=555\n");
            }
            for i in listed {
                let bdf = GPUS[*i];
                let info = if self.proc_info {
                    format!(
                        "Model: \t\t NVIDIA H100 80GB HBM3\nGPU UUID: \t {}\nBus Location: \t {bdf}\nDevice Minor: \t {}\n",
                        uuid(*i),
                        MINORS[*i]
                    )
                } else {
                    "Model: \t\t NVIDIA H100 80GB HBM3\n".to_string()
                };
                t.file(
                    &format!("/proc/driver/nvidia/gpus/{bdf}/information"),
                    &info,
                );
                if self.runtime_mounts {
                    mounts.push_str(&format!(
                        "3{i} 30 0:22 /driver/nvidia/gpus/{bdf} /proc/driver/nvidia/gpus/{bdf} ro,nosuid,nodev,noexec,relatime - proc proc rw\n"
                    ));
                }
            }
        }
        t.file("/dev/null", "");
        for m in &self.dev_nvidia {
            t.file(&format!("/dev/nvidia{m}"), "");
            if self.runtime_mounts {
                mounts.push_str(&format!(
                    "4{m} 22 0:5 /nvidia{m} /dev/nvidia{m} ro,nosuid,noexec,relatime - devtmpfs udev rw\n"
                ));
            }
        }
        for u in &self.uverbs {
            t.file(&format!("/dev/infiniband/uverbs{u}"), "");
        }
        t.file("/proc/self/mountinfo", &mounts);
        for n in &self.nvidia_container_devices {
            t.file(&format!("/var/run/nvidia-container-devices/{n}"), "");
        }
        for (path, text) in &self.dra_metadata {
            t.file(
                &format!("/var/run/kubernetes.io/dra-device-attributes/{path}"),
                text,
            );
        }
        t
    }

    fn topo(&self) -> Topology {
        let fs = Sysfs::memory(self.tree(), "test");
        Discoverer::new(&fs).discover().unwrap()
    }

    fn view(&self) -> ContainerView {
        ContainerView::of(&self.topo())
    }
}

fn states(v: &ContainerView) -> Vec<Ownership> {
    v.gpus.iter().map(|g| g.state).collect()
}

use Ownership::{Owned as O, Unknown as U, Visible as V};

fn gpus(idx: &[usize]) -> Vec<PciAddr> {
    idx.iter().map(|i| pci(GPUS[*i])).collect()
}

fn findings_with(v: &ContainerView, needle: &str) -> usize {
    v.findings.iter().filter(|f| f.contains(needle)).count()
}

// ---------------------------------------------------------------------------------
// Context
// ---------------------------------------------------------------------------------

#[test]
fn a_host_owns_everything() {
    let v = B::new(Kind::Host).view();
    assert_eq!(v.context, Context::Host);
    assert!(v.host_network);
    assert_eq!(states(&v), [O, O, O, O]);
    assert_eq!(v.owned_rdma(), ["mlx5_0", "mlx5_2", "mlx5_3"]);
    assert!(v.netdevs.iter().all(|n| n.state == O));
    assert!(v.certain);
    assert!(v.findings.is_empty(), "{:?}", v.findings);
    assert_eq!(v.rdma_netns_mode, Some(NetnsMode::Shared));
}

#[test]
fn contexts_from_cgroup_env_markers_and_netdevs() {
    let pod = B::new(Kind::Pod).view();
    assert_eq!(pod.context, Context::Pod);
    assert!(!pod.host_network);
    assert!(
        pod.context_evidence
            .iter()
            .any(|e| e.source == "/proc/self/cgroup" && e.value.contains("kubepods"))
    );
    assert!(
        pod.context_evidence
            .iter()
            .any(|e| e.source == "/sys/class/net/eth0" && e.value.contains("iflink 27"))
    );
    let hn = B::new(Kind::PodHostNetwork).view();
    assert_eq!(hn.context, Context::PodHostNetwork);
    assert!(
        hn.context_evidence
            .iter()
            .any(|e| e.source == "/proc/net/route")
    );
    let docker = B::new(Kind::Docker).view();
    assert_eq!(docker.context, Context::Container);
    assert!(
        docker
            .context_evidence
            .iter()
            .any(|e| e.source == "/.dockerenv")
    );
    let privileged = B::new(Kind::PrivilegedPod).view();
    assert!(
        privileged
            .context_evidence
            .iter()
            .any(|e| e.value.contains("privileged"))
    );
}

#[test]
fn a_runtime_service_cgroup_is_not_a_container() {
    let mut t = B::new(Kind::Host).tree();
    t.file("/proc/self/cgroup", "0::/system.slice/containerd.service\n");
    let fs = Sysfs::memory(t, "test");
    let v = ContainerView::of(&Discoverer::new(&fs).discover().unwrap());
    assert_eq!(v.context, Context::Host);
    let mut t = B::new(Kind::Host).tree();
    t.file(
        "/proc/self/cgroup",
        "12:cpuset:/docker/4f1c2a9e\n0::/docker/4f1c2a9e\n",
    );
    let fs = Sysfs::memory(t, "test");
    let v = ContainerView::of(&Discoverer::new(&fs).discover().unwrap());
    assert_eq!(v.context, Context::Container);
    assert_eq!(
        v.context_evidence
            .iter()
            .filter(|e| e.source == "/proc/self/cgroup")
            .count(),
        2
    );
}

#[test]
fn serde_names() {
    assert_eq!(
        serde_json::to_string(&Context::PodHostNetwork).unwrap(),
        "\"pod-host-network\""
    );
    assert_eq!(
        serde_json::to_string(&Ownership::Visible).unwrap(),
        "\"visible\""
    );
    let v = B::pod_with_gpus(&[1]).view();
    let json = serde_json::to_value(&v).unwrap();
    assert_eq!(json["gpus"][1]["device"], "0000:2a:00.0");
    assert_eq!(json["gpus"][1]["state"], "owned");
    assert_eq!(json["context"], "pod");
    let back: ContainerView = serde_json::from_value(json).unwrap();
    assert_eq!(back, v);
}

// ---------------------------------------------------------------------------------
// GPUs
// ---------------------------------------------------------------------------------

#[test]
fn the_nvidia_runtime_gives_one_gpu() {
    let v = B::pod_with_gpus(&[1])
        .env("NVIDIA_VISIBLE_DEVICES", &uuid(1))
        .view();
    assert_eq!(states(&v), [V, O, V, V]);
    assert_eq!(v.owned_gpus(), gpus(&[1]));
    assert!(v.certain, "{:?}", v.findings);
    assert!(v.findings.is_empty(), "{:?}", v.findings);
    let g1 = &v.gpus[1].evidence;
    // Minor 3 is GPU 1's, read from the driver's procfs line.
    assert!(
        g1.iter()
            .any(|e| e.source == "/dev/nvidia3" && e.value.contains("bind-mounted"))
    );
    assert!(
        g1.iter()
            .any(|e| e.source == "NVIDIA_VISIBLE_DEVICES" && e.value.contains("UUID"))
    );
    let g0 = &v.gpus[0].evidence;
    assert!(g0.iter().any(|e| e.source == "/proc/driver/nvidia/gpus/0000:18:00.0" && e.value == "not listed"));
    // Its minor is unknown in the pod (the runtime hid its procfs entry), but every
    // node present is another GPU's.
    assert!(g0.iter().any(|e| e.source == "/dev"
        && e.value == "minor number unknown, and every /dev/nvidia<N> present is another GPU's"));
}

#[test]
fn device_nodes_alone_decide_in_an_unprivileged_pod() {
    // CDI: no procfs masking, no mounts, only the nodes of GPUs 2 and 3.
    let mut b = B::new(Kind::Pod);
    b.dev_nvidia = vec![MINORS[2], MINORS[3]];
    let v = b.view();
    assert_eq!(states(&v), [V, V, O, O]);
    assert!(v.certain);
}

/// A privileged pod whose procfs and `/dev` show every GPU: only the variable decides.
fn env_only(value: &str) -> ContainerView {
    B::new(Kind::PrivilegedPod)
        .env("NVIDIA_VISIBLE_DEVICES", value)
        .view()
}

#[test]
fn nvidia_visible_devices_indices() {
    let v = env_only("1,2");
    assert_eq!(states(&v), [V, O, O, V]);
    // Not certain: nothing says which RDMA devices a privileged pod was given.
    assert!(!v.certain);
    let e = &v.gpus[2].evidence;
    assert!(e.iter().any(|e| e.value == "names it: index 2"));
}

#[test]
fn nvidia_visible_devices_uuids_and_prefixes() {
    assert_eq!(states(&env_only(&uuid(3))), [V, V, V, O]);
    assert_eq!(states(&env_only("GPU-aaaaaaa2")), [V, V, O, V]);
    // Upper-case hex, with a space after the comma.
    assert_eq!(
        states(&env_only(&format!(
            "{}, {}",
            uuid(0).replace("aaaa", "AAAA"),
            uuid(1)
        ))),
        [O, O, V, V]
    );
    // An ambiguous prefix resolves to nothing, so the others cannot be ruled out.
    let v = env_only("GPU-aaaa");
    assert_eq!(findings_with(&v, "a UUID prefix matching 4 GPUs"), 1);
    assert_eq!(states(&v), [U, U, U, U]);
}

#[test]
fn nvidia_visible_devices_all_none_void() {
    // `all` without any runtime mount is what CUDA images set: no vote.
    let v = env_only("all");
    assert_eq!(states(&v), [U, U, U, U]);
    assert!(!v.certain);
    // `all` with the runtime's mounts: every GPU given.
    let mut b = B::pod_with_gpus(&[0, 1, 2, 3]);
    b.env.push(("NVIDIA_VISIBLE_DEVICES".into(), "all".into()));
    let v = b.view();
    assert_eq!(states(&v), [O, O, O, O]);
    assert!(v.certain);
    assert_eq!(states(&env_only("none")), [V, V, V, V]);
    assert_eq!(states(&env_only("void")), [U, U, U, U]);
    assert_eq!(states(&env_only("")), [U, U, U, U]);
}

/// NVML as a container sees it: the GPUs given, in NVML's order, with their minors.
fn nvml_of(given: &[usize]) -> crate::model::NvmlSnapshot {
    crate::model::NvmlSnapshot {
        schema: crate::model::NvmlSnapshot::SCHEMA.to_string(),
        driver_version: None,
        cuda_driver_version: None,
        device_count: None,
        gpus: given
            .iter()
            .enumerate()
            .map(|(n, i)| {
                let mut g = crate::model::NvmlGpu::new(n as u32, GPUS[*i]);
                g.minor_number = Some(MINORS[*i]);
                g
            })
            .collect(),
    }
}

/// A CDI pod: `NVIDIA_VISIBLE_DEVICES=void`, the driver's GPU list unmasked, no runtime
/// mount. Its device nodes and NVML narrow the GPUs down; where nodes of other GPUs
/// exist too (created in the container), NVML, which cannot open them, makes them
/// another container's instead of this one's.
#[test]
fn nvml_inside_a_container_votes_for_the_gpus_it_lists() {
    let mut b = B::new(Kind::Pod).env("NVIDIA_VISIBLE_DEVICES", "void");
    b.dev_nvidia = vec![MINORS[1]];
    let view = |b: &B, nvml: Option<&[usize]>| {
        let mut topo = b.topo();
        topo.nvml = nvml.map(nvml_of);
        ContainerView::of(&topo)
    };
    let v = view(&b, Some(&[1]));
    assert_eq!(states(&v), [V, O, V, V]);
    assert!(v.certain);
    let nvml = |g: &Owned<PciAddr>| {
        g.evidence
            .iter()
            .find(|e| e.source == "NVML")
            .map(|e| e.value.clone())
    };
    assert_eq!(
        nvml(&v.gpus[1]).as_deref(),
        Some("lists it, and not every GPU")
    );
    assert!(nvml(&v.gpus[0]).is_some_and(|e| e.starts_with("does not list it")));
    // The node is matched to its GPU by NVML's minor, and said so.
    assert!(
        v.gpus[1]
            .evidence
            .iter()
            .any(|e| e.source == format!("/dev/nvidia{}", MINORS[1])
                && e.value == "present (minor from NVML)")
    );
    // Nodes of every GPU: the device nodes alone would make all four owned.
    b.dev_nvidia = MINORS.to_vec();
    assert_eq!(states(&view(&b, None)), [O, O, O, O]);
    let v = view(&b, Some(&[1]));
    assert_eq!(states(&v), [V, O, V, V]);
    assert!(v.certain);
    assert!(v.gpus[0].evidence.iter().any(|e| e.source
        == format!("/dev/nvidia{}", MINORS[0])
        && e.value.ends_with("but NVML here does not list it: a node made inside the container, which may not open it")));
    // NVML listing every GPU (a privileged container) narrows nothing; none is no vote.
    b.dev_nvidia = vec![MINORS[1]];
    assert_eq!(states(&view(&b, Some(&[0, 1, 2, 3]))), [V, O, V, V]);
    assert!(
        view(&b, Some(&[0, 1, 2, 3])).gpus[0]
            .evidence
            .iter()
            .all(|e| e.source != "NVML" || e.value == "lists it, as every GPU")
    );
    assert_eq!(states(&view(&b, Some(&[]))), [V, O, V, V]);
    // An NVML that counted GPUs it could not read says nothing of those it lists not.
    b.dev_nvidia = MINORS.to_vec();
    let mut topo = b.topo();
    let mut partial = nvml_of(&[1]);
    partial.device_count = Some(4);
    topo.nvml = Some(partial);
    let v = ContainerView::of(&topo);
    assert_eq!(states(&v), [O, O, O, O]);
    assert!(v.gpus[0].evidence.iter().any(|e| e.source == "NVML"
        && e.value == "does not list it, but could not read 3 of the GPUs it counts"));
}

/// Without NVML, a device node is matched by the minor the driver's procfs line gives,
/// and the evidence says so (not NVML).
#[test]
fn device_minor_origin_is_told_apart() {
    let mut b = B::new(Kind::Pod);
    b.dev_nvidia = vec![MINORS[2]];
    let v = b.view();
    assert_eq!(states(&v), [V, V, O, V]);
    assert!(
        v.gpus[2]
            .evidence
            .iter()
            .any(|e| e.value == "present (minor from /proc/driver/nvidia/gpus/*/information)")
    );
}

#[test]
fn nvidia_visible_devices_mig_forms() {
    let v = env_only("2:0");
    assert_eq!(states(&v), [V, V, O, V]);
    let v = env_only("MIG-5c2a7e1f-0c6b-5a3c-9f8d-1e2d3c4b5a69");
    assert_eq!(findings_with(&v, "MIG device UUID"), 1);
    assert_eq!(states(&v), [U, U, U, U]);
    let v = env_only("7");
    assert_eq!(findings_with(&v, "index 7, but there are 4 GPUs"), 1);
}

#[test]
fn nvidia_visible_devices_volume_mounts() {
    let mut b = B::new(Kind::PrivilegedPod).env(
        "NVIDIA_VISIBLE_DEVICES",
        "/var/run/nvidia-container-devices",
    );
    b.nvidia_container_devices = vec!["GPU-aaaaaaa1-1111-2222-3333-444444444441"];
    let v = b.view();
    assert_eq!(states(&v), [V, O, V, V]);
    assert!(
        v.gpus[1]
            .evidence
            .iter()
            .any(|e| e.source.contains("/var/run/nvidia-container-devices"))
    );
}

#[test]
fn nvidia_visible_devices_is_ignored_on_a_host() {
    let v = B::new(Kind::Host).env("NVIDIA_VISIBLE_DEVICES", "0").view();
    assert_eq!(states(&v), [O, O, O, O]);
}

#[test]
fn disagreement_is_a_finding() {
    // The variable names GPU 0, but the runtime mounted GPU 1.
    let v = B::pod_with_gpus(&[1])
        .env("NVIDIA_VISIBLE_DEVICES", "0")
        .view();
    assert_eq!(states(&v), [U, U, V, V]);
    assert!(!v.certain);
    assert_eq!(
        v.findings,
        [
            "GPU 0000:18:00.0: sources disagree: NVIDIA_VISIBLE_DEVICES says it is this container's, /proc/driver/nvidia/gpus/0000:18:00.0 and /dev say it is not",
            "GPU 0000:2a:00.0: sources disagree: /proc/driver/nvidia/gpus/0000:2a:00.0 and /dev/nvidia3 say it is this container's, NVIDIA_VISIBLE_DEVICES says it is not"
        ]
    );
    assert!(v.owned_gpus().is_empty());
    assert_eq!(v.usable_gpus(), gpus(&[0, 1]));
}

#[test]
fn no_nvidia_runtime_leaves_ownership_unknown() {
    let v = B::new(Kind::PrivilegedPod).view();
    assert_eq!(states(&v), [U, U, U, U]);
    assert!(!v.certain);
    assert_eq!(findings_with(&v, "no source narrows the 4 GPUs"), 1);
    assert_eq!(findings_with(&v, "no source narrows the 3 RDMA devices"), 1);
    // RDMA too: every uverbs node is there, nothing names a device.
    assert!(v.rdma.iter().all(|r| r.state == U));
    assert_eq!(v.usable_gpus().len(), 4);
    assert!(v.owned_gpus().is_empty());
}

#[test]
fn procfs_subset_without_mountinfo_still_counts_in_a_container() {
    let mut b = B::new(Kind::Pod);
    b.proc_gpus = Some(vec![3]);
    b.dev_nvidia = vec![MINORS[3]];
    let v = b.view();
    assert_eq!(states(&v), [V, V, V, O]);
    assert!(
        v.gpus[3]
            .evidence
            .iter()
            .any(|e| e.value == "listed, while other GPUs are not")
    );
}

#[test]
fn unknown_minors_cannot_map_device_nodes() {
    let mut b = B::new(Kind::Pod);
    b.proc_gpus = Some(vec![0]);
    b.proc_info = false;
    b.dev_nvidia = vec![7];
    let v = b.view();
    // The procfs listing still decides; the node says nothing.
    assert_eq!(states(&v), [O, V, V, V]);
    assert_eq!(findings_with(&v, "/dev/nvidia7 present but no GPU here"), 1);
    assert!(
        v.gpus[0]
            .evidence
            .iter()
            .any(|e| e.source == "/dev" && e.value.contains("minor number unknown"))
    );
}

#[test]
fn a_pod_without_gpus_owns_none() {
    let mut b = B::new(Kind::Pod);
    b.proc_gpus = Some(vec![]);
    let v = b.env("NVIDIA_VISIBLE_DEVICES", "none").view();
    assert_eq!(states(&v), [V, V, V, V]);
    assert!(v.certain);
}

#[test]
fn gpu_bound_to_vfio_is_not_the_hosts() {
    let mut b = B::new(Kind::Host);
    b.proc_gpus = Some(vec![0, 1, 2]);
    let mut t = b.tree();
    t.link(
        "/sys/devices/pci0000:00/0000:5d:00.0/driver",
        "/sys/bus/pci/drivers/vfio-pci",
    );
    let fs = Sysfs::memory(t, "test");
    let topo = Discoverer::new(&fs).discover().unwrap();
    // No GPU of this host's (NVML numbers the nvidia driver's): not in the view at all.
    let v = ContainerView::of(&topo);
    assert_eq!(states(&v), [O, O, O]);
    let unnumbered: Vec<String> = topo
        .unnumbered_gpus()
        .map(|f| f.address.to_string())
        .collect();
    assert_eq!(unnumbered, ["0000:5d:00.0"]);
}

// ---------------------------------------------------------------------------------
// CUDA_VISIBLE_DEVICES
// ---------------------------------------------------------------------------------

#[test]
fn cuda_indices_count_within_the_containers_gpus() {
    let v = B::pod_with_gpus(&[1, 2])
        .env("CUDA_VISIBLE_DEVICES", "1")
        .view();
    assert_eq!(v.cuda_visible, Some(gpus(&[2])));
    assert!(v.findings.is_empty(), "{:?}", v.findings);
    assert!(
        v.gpus[2]
            .evidence
            .iter()
            .any(|e| e.source == "CUDA_VISIBLE_DEVICES" && e.value == "CUDA device 0 (1)")
    );
    // Ownership is the container's, whatever CUDA selects.
    assert_eq!(v.owned_gpus(), gpus(&[1, 2]));
}

#[test]
fn cuda_stops_at_the_first_invalid_entry() {
    let v = B::pod_with_gpus(&[1, 2])
        .env("CUDA_VISIBLE_DEVICES", "0,5,1")
        .view();
    assert_eq!(v.cuda_visible, Some(gpus(&[1])));
    assert_eq!(
        findings_with(
            &v,
            "5: index 5, but this process can open 2 GPUs; CUDA hides it and every entry after it"
        ),
        1
    );
    let v = B::pod_with_gpus(&[1, 2])
        .env("CUDA_VISIBLE_DEVICES", "0,-1,1")
        .view();
    assert_eq!(v.cuda_visible, Some(gpus(&[1])));
}

#[test]
fn cuda_uuid_of_a_gpu_not_given_is_a_finding() {
    let v = B::pod_with_gpus(&[1])
        .env("CUDA_VISIBLE_DEVICES", &format!("{},{}", uuid(1), uuid(0)))
        .view();
    // GPU 0's UUID is unknown inside the pod (the runtime hid its procfs entry).
    assert_eq!(v.cuda_visible, Some(gpus(&[1])));
    assert_eq!(findings_with(&v, "matches no GPU UUID known here"), 1);
    // On a privileged pod all UUIDs are known, and the GPU is someone else's.
    let mut b = B::new(Kind::PrivilegedPod)
        .env("NVIDIA_VISIBLE_DEVICES", "1")
        .env("CUDA_VISIBLE_DEVICES", &uuid(0));
    b.proc_gpus = Some(vec![0, 1, 2, 3]);
    let v = b.view();
    assert_eq!(v.cuda_visible, Some(vec![]));
    assert_eq!(
        findings_with(&v, "GPU 0000:18:00.0, which this container was not given"),
        1
    );
}

#[test]
fn cuda_empty_hides_every_gpu() {
    let v = B::pod_with_gpus(&[1])
        .env("CUDA_VISIBLE_DEVICES", "")
        .view();
    assert_eq!(v.cuda_visible, Some(vec![]));
    assert_eq!(findings_with(&v, "CUDA_VISIBLE_DEVICES is empty"), 1);
}

#[test]
fn cuda_on_a_host_orders_as_given() {
    let v = B::new(Kind::Host).env("CUDA_VISIBLE_DEVICES", "2,0").view();
    assert_eq!(v.cuda_visible, Some(gpus(&[2, 0])));
    let v = B::new(Kind::Host).view();
    assert_eq!(v.cuda_visible, None);
}

// ---------------------------------------------------------------------------------
// RDMA devices and netdevs
// ---------------------------------------------------------------------------------

fn rdma_states(v: &ContainerView) -> Vec<(String, Ownership)> {
    v.rdma.iter().map(|r| (r.key.clone(), r.state)).collect()
}

fn named(v: &[(&str, Ownership)]) -> Vec<(String, Ownership)> {
    v.iter().map(|(n, s)| (n.to_string(), *s)).collect()
}

#[test]
fn a_pod_given_one_vf() {
    let mut b = B::pod_with_gpus(&[0]).env("PCIDEVICE_NVIDIA_COM_SRIOV_ROCE", VF0);
    b.uverbs = vec![2];
    b.net1 = true;
    let v = b.view();
    assert_eq!(
        rdma_states(&v),
        named(&[("mlx5_0", V), ("mlx5_2", O), ("mlx5_3", V)])
    );
    assert!(v.certain, "{:?}", v.findings);
    assert!(v.findings.is_empty(), "{:?}", v.findings);
    let e = &v.rdma[1].evidence;
    assert!(e.iter().any(|e| e.source == "/dev/infiniband/uverbs2"
        && e.value == "present (/sys/class/infiniband_verbs/uverbs2/ibdev = mlx5_2)"));
    assert!(
        e.iter()
            .any(|e| e.source == "PCIDEVICE_NVIDIA_COM_SRIOV_ROCE")
    );
    assert!(e.iter().any(|e| e.source == "/sys/class/net/net1"));
    let other = &v.rdma[2].evidence;
    assert!(other.iter().any(|e| e.source == "PCIDEVICE_*"));
    // Every netdev of the pod's own namespace is its own.
    assert_eq!(v.netdev("net1"), O);
    assert_eq!(v.netdev("eth0"), O);
    assert_eq!(v.netdev("nope"), U);
    assert_eq!(v.rdma_device("mlx5_2"), O);
}

/// KEP-5304: the DRA drivers' metadata files name the VF and the GPU given, as
/// `PCIDEVICE_*` does for a device plugin's.
#[test]
fn dra_device_metadata_names_the_devices_given() {
    let sriov = "sriovnetwork.k8snetworkplumbingwg.io";
    let mut b = B::pod_with_gpus(&[0])
        .dra("gpu-nic", "nic", &[(sriov, "vf-2", VF0)])
        .dra("gpu-nic", "gpu", &[("gpu.nvidia.com", "gpu-2", GPUS[0])]);
    b.uverbs = vec![2];
    let v = b.view();
    assert_eq!(
        rdma_states(&v),
        named(&[("mlx5_0", V), ("mlx5_2", O), ("mlx5_3", V)])
    );
    assert!(v.certain, "{:?}", v.findings);
    let file = format!(
        "/var/run/kubernetes.io/dra-device-attributes/resourceclaims/gpu-nic/nic/{sriov}-metadata.json"
    );
    assert!(
        v.rdma[1]
            .evidence
            .iter()
            .any(|e| e.source == file && e.value == format!("names {VF0}")),
        "{:?}",
        v.rdma[1].evidence
    );
    assert!(
        v.rdma[2]
            .evidence
            .iter()
            .any(|e| e.source == "DRA device metadata"
                && e.value == format!("the DRA driver gave other VFs, not {VF1}")),
        "{:?}",
        v.rdma[2].evidence
    );
    assert!(
        v.gpus[0]
            .evidence
            .iter()
            .any(|e| e.source.ends_with("/gpu/gpu.nvidia.com-metadata.json")),
        "{:?}",
        v.gpus[0].evidence
    );
    // Without the files, nothing but the device node says which VF.
    let mut plain = B::pod_with_gpus(&[0]);
    plain.uverbs = vec![2];
    assert!(
        !plain.view().rdma[2]
            .evidence
            .iter()
            .any(|e| e.source == "DRA device metadata")
    );
}

/// A metadata file that is not one, or names no PCI function of this node: a
/// diagnostic or a finding naming it, never a vote.
#[test]
fn bad_dra_device_metadata_is_named() {
    let mut b = B::pod_with_gpus(&[0]).dra("c", "r", &[("dra.net", "x", "0000:99:00.1")]);
    b.dra_metadata.push((
        "resourceclaims/c/q/dra.net-metadata.json".into(),
        "{oops".into(),
    ));
    b.dra_metadata.push((
        "resourceclaims/c/s/dra.net-metadata.json".into(),
        r#"{"kind":"DeviceMetadata","apiVersion":"metadata.resource.k8s.io/v1alpha1","requests":[{"name":"s","devices":[{"driver":"dra.net","pool":"p","name":"y","attributes":{"dra.net/pciAddress":{"string":"zz"}}}]}]}"#.into(),
    ));
    let topo = b.topo();
    let diags: Vec<String> = topo
        .diagnostics
        .iter()
        .map(|d| format!("{:?} {}", d.path, d.message))
        .collect();
    assert!(
        diags
            .iter()
            .any(|d| d.contains("resourceclaims/c/q/dra.net-metadata.json")),
        "{diags:?}"
    );
    assert!(
        diags
            .iter()
            .any(|d| d.contains("resourceclaims/c/s/dra.net-metadata.json")
                && d.contains("dra.net/pciAddress")),
        "{diags:?}"
    );
    let v = ContainerView::of(&topo);
    assert_eq!(
        findings_with(&v, "names 0000:99:00.1, which is not a PCI function"),
        1,
        "{:?}",
        v.findings
    );
}

#[test]
fn exclusive_netns_lists_only_this_namespaces_devices() {
    let mut b = B::pod_with_gpus(&[0]);
    b.exclusive = true;
    b.rdma_listed = vec!["mlx5_2"];
    b.uverbs = vec![2];
    b.net1 = true;
    let v = b.view();
    assert_eq!(v.rdma_netns_mode, Some(NetnsMode::Exclusive));
    assert_eq!(rdma_states(&v), named(&[("mlx5_2", O)]));
    assert!(
        v.rdma[0]
            .evidence
            .iter()
            .any(|e| e.source == "/sys/module/ib_core/parameters/netns_mode")
    );
}

#[test]
fn a_vf_given_without_its_netdev_is_a_finding() {
    let mut b = B::pod_with_gpus(&[0]).env("PCIDEVICE_NVIDIA_COM_SRIOV_ROCE", VF0);
    b.uverbs = vec![2];
    let v = b.view();
    assert_eq!(v.rdma_device("mlx5_2"), O);
    assert_eq!(findings_with(&v, "the SR-IOV CNI did not move it in"), 1);
}

#[test]
fn pcidevice_garbage_is_a_finding() {
    let v = B::pod_with_gpus(&[0])
        .env("PCIDEVICE_INTEL_COM_X", "0000:99:00.1,zz")
        .env("PCIDEVICE_INTEL_COM_X_INFO", "{\"not\":\"addresses\"}")
        .view();
    assert_eq!(
        findings_with(&v, "names 0000:99:00.1, which is not a PCI function"),
        1
    );
    assert_eq!(
        findings_with(&v, "holds \"zz\", which is not a PCI address"),
        1
    );
    assert_eq!(v.findings.len(), 2, "{:?}", v.findings);
}

#[test]
fn host_network_pod_with_a_shared_hca() {
    let mut b = B::new(Kind::PodHostNetwork);
    b.proc_gpus = Some(vec![0]);
    b.dev_nvidia = vec![MINORS[0]];
    b.runtime_mounts = true;
    b.uverbs = vec![0];
    let v = b.view();
    assert_eq!(v.context, Context::PodHostNetwork);
    assert_eq!(
        rdma_states(&v),
        named(&[("mlx5_0", O), ("mlx5_2", V), ("mlx5_3", V)])
    );
    // Netdevs follow the RDMA device behind them; the rest is the host's, shared.
    assert_eq!(v.netdev("ens1f0np0"), O);
    assert_eq!(v.netdev("ens1f0v0"), V);
    assert_eq!(v.netdev("cali1234"), V);
    assert_eq!(v.netdev("lo"), O);
    assert!(v.certain);
}

#[test]
fn a_capture_without_dev_says_nothing_about_nodes() {
    let mut b = B::new(Kind::Pod);
    b.proc_gpus = None;
    let mut t = b.tree();
    // Drop /dev by building the tree again without it.
    let kept: Vec<(String, crate::sysfs::MemEntry)> = t
        .entries()
        .filter(|(p, _)| !p.starts_with("/dev"))
        .map(|(p, e)| (p.to_string(), e.clone()))
        .collect();
    t = MemTree::new();
    for (p, e) in kept {
        t.insert(&p, e);
    }
    let fs = Sysfs::memory(t, "test");
    let v = ContainerView::of(&Discoverer::new(&fs).discover().unwrap());
    assert_eq!(states(&v), [U, U, U, U]);
    assert!(v.rdma.iter().all(|r| r.state == U));
    assert!(!v.certain);
}

// ---------------------------------------------------------------------------------
// CPUs
// ---------------------------------------------------------------------------------

#[test]
fn cpus_are_the_allowed_list_within_the_cpuset() {
    let mut b = B::new(Kind::Pod);
    b.cpus_allowed = "0-7";
    b.cpuset = Some("0-3");
    let v = b.view();
    assert_eq!(
        v.cpus.as_ref().map(|c| c.to_string()).as_deref(),
        Some("0-3")
    );
    assert_eq!(
        findings_with(
            &v,
            "Cpus_allowed_list 0-7 has CPUs outside the cgroup cpuset 0-3"
        ),
        1
    );
    assert_eq!(v.cpus_evidence.len(), 2);
    b.cpus_allowed = "2-3";
    let v = b.view();
    assert_eq!(
        v.cpus.as_ref().map(|c| c.to_string()).as_deref(),
        Some("2-3")
    );
    assert_eq!(findings_with(&v, "Cpus_allowed_list"), 0);
}

// ---------------------------------------------------------------------------------
// What discovery puts in the model for this analysis
// ---------------------------------------------------------------------------------

#[test]
fn the_model_carries_the_process_view() {
    let mut b = B::pod_with_gpus(&[1]);
    b.nvidia_container_devices = vec!["1"];
    let b = b.env(
        "NVIDIA_VISIBLE_DEVICES",
        "/var/run/nvidia-container-devices",
    );
    let p = b.topo().process;
    assert!(p.dev_listed);
    assert!(p.proc_driver_nvidia);
    assert_eq!(p.cap_eff, Some(0xa80425fb));
    assert_eq!(p.dev_nvidia, [MINORS[1]]);
    assert_eq!(p.proc_nvidia_gpus, [GPUS[1]]);
    assert_eq!(p.proc_nvidia_gpu_info.len(), 1);
    assert_eq!(
        p.proc_nvidia_gpu_info[0].uuid.as_deref(),
        Some(uuid(1).as_str())
    );
    assert_eq!(p.proc_nvidia_gpu_info[0].minor, Some(MINORS[1]));
    let mounts: Vec<&str> = p
        .device_mounts
        .iter()
        .map(|m| m.mount_point.as_str())
        .collect();
    assert_eq!(
        mounts,
        [
            "/proc/driver/nvidia",
            "/proc/driver/nvidia/gpus/0000:2a:00.0",
            "/dev/nvidia3"
        ]
    );
    assert_eq!(p.nvidia_container_devices, ["1"]);
    assert!(p.container_markers.is_empty());
    let docker = B::new(Kind::Docker).topo().process;
    assert_eq!(docker.container_markers, ["/.dockerenv"]);
    // The index listed by the device plugin's volume mounts is resolved like the variable.
    let v = b.view();
    assert_eq!(states(&v), [V, O, V, V]);
}
