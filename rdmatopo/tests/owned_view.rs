//! Pod first: inside a container, `View::Owned` decides the container's devices from
//! cheap evidence and reads only those in full. Every answer about them must be the
//! whole read's (`View::All`), on every fixture; on a host, and wherever ownership is
//! uncertain, the model must be the whole read's, unchanged.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;
use rdmatopo::checks::doctor;
use rdmatopo::export::nccl_xml::{self, XmlOptions};
use rdmatopo::export::qos;
use rdmatopo::sysfs::MemTree;
use rdmatopo::view::TopoMatrix;
use rdmatopo::view::container::{ContainerView, DisplayedDevices};
use rdmatopo::view::plan::{Plan, PlanOptions};
use rdmatopo::{Needs, Sysfs, Topology, View, discover_view};
use std::path::PathBuf;

fn fixture_roots() -> Vec<PathBuf> {
    support::fixture_roots()
}

/// Both views of one root for `needs`: (whole, owned, files read by each).
fn both(open: impl Fn() -> Sysfs, needs: Needs) -> (Topology, Topology, usize, usize) {
    let (fs_all, fs_owned) = (open(), open());
    let all = discover_view(&fs_all, needs, View::All).unwrap();
    let owned = discover_view(&fs_owned, needs, View::Owned).unwrap();
    (all, owned, fs_all.files_read(), fs_owned.files_read())
}

fn owned_matrix(topo: &Topology) -> TopoMatrix {
    let view = ContainerView::of(topo);
    let nics = view.owned_rdma();
    let nics: Vec<&str> = nics.iter().map(String::as_str).collect();
    TopoMatrix::build(topo, &view.owned_gpus(), &nics)
}

/// The answers of `topo`, `nccl-env` and `doctor` in a container.
fn assert_same_answers(name: &str, all: &Topology, owned: &Topology) {
    let (va, vo) = (ContainerView::of(all), ContainerView::of(owned));
    assert_eq!(vo.certain, va.certain, "{name}: certain");
    assert_eq!(vo.owned_gpus(), va.owned_gpus(), "{name}: GPUs owned");
    assert_eq!(
        vo.owned_rdma(),
        va.owned_rdma(),
        "{name}: RDMA devices owned"
    );
    assert_eq!(vo.cpus, va.cpus, "{name}: CPUs");
    assert_eq!(owned_matrix(owned), owned_matrix(all), "{name}: matrix");
    assert_eq!(doctor::run(owned), doctor::run(all), "{name}: doctor");
    let opts = PlanOptions::default();
    let plan = |t: &Topology| Plan::compute(t, &opts).map_err(|e| e.to_string());
    assert_eq!(plan(owned), plan(all), "{name}: nccl-env");
}

#[test]
fn the_owned_view_gives_the_whole_answer_on_every_fixture() {
    let roots = fixture_roots();
    assert!(roots.len() >= 10, "fixtures missing: {roots:?}");
    let mut narrowed = 0;
    for root in roots {
        let name = root.display().to_string();
        let (all, owned, n_all, n_owned) = both(|| support::open(&root), Needs::ALL);
        if owned.view.is_none() {
            // A host, or a container whose devices are uncertain: the whole read.
            assert_eq!(owned, all, "{name}: not narrowed, yet not the whole read");
            continue;
        }
        narrowed += 1;
        assert!(
            ContainerView::of(&all).context.is_container(),
            "{name}: narrowed on a host"
        );
        assert_same_answers(&name, &all, &owned);
        assert!(n_owned < n_all, "{name}: {n_owned} >= {n_all} files");
        // Foreign devices are named, or partial reads (a PF's) read in part.
        let view = owned.view.as_ref().unwrap();
        for d in &owned.rdma_devices {
            let whole =
                view.rdma_devices.contains(&d.name) || view.pf_rdma_devices.contains(&d.name);
            assert_eq!(!d.ports.is_empty(), whole, "{name}: {}", d.name);
        }
        // `topo` in a container: topo's needs in a container, narrowed the same way, against
        // the whole full read (an affinity read alone cannot tell a macvlan's HCA).
        let (_, topo_owned, _, _) = both(|| support::open(&root), Needs::TOPO);
        assert!(topo_owned.view.is_some(), "{name}: topo not narrowed");
        assert_eq!(
            owned_matrix(&topo_owned),
            owned_matrix(&all),
            "{name}: topo"
        );
    }
    // The SR-IOV pods at least (pod-sriov, pod-h100-*).
    assert!(narrowed >= 5, "only {narrowed} fixtures were narrowed");
}

/// `gids`, `netdevs`, `qos` and `nccl-topo` show a container's own devices: what they
/// print of those (the devices, this namespace's netdevs, the QoS report, the NCCL
/// topology file) must be the whole read's, on every fixture, and a host's read for
/// `gids` and `netdevs` must be theirs unchanged.
#[test]
fn the_devices_answers_show_are_the_whole_reads() {
    let mut narrowed = 0;
    for root in fixture_roots() {
        let name = root.display().to_string();
        // What `gids` prints of a device, and what `netdevs` does.
        let gids = |t: &Topology, d: &str| -> Vec<_> {
            let d = t.rdma_device(d).unwrap();
            let of_ns = |g: &rdmatopo::model::Gid| g.netdev.as_ref().map(|n| t.netdev(n).is_some());
            d.ports
                .iter()
                .map(|p| {
                    let g: Vec<_> = p.gids.iter().map(|g| (g.clone(), of_ns(g))).collect();
                    (p.number, p.link_layer, g)
                })
                .collect()
        };
        let netdevs = |t: &Topology, d: &str| -> Vec<_> {
            let d = t.rdma_device(d).unwrap();
            d.ports
                .iter()
                .map(|p| {
                    let n = p.netdev.as_deref().and_then(|n| t.netdev(n));
                    let n = n.map(|n| (n.carrier, n.master.clone(), n.bond.clone()));
                    (p.number, p.link_layer, p.netdev.clone(), n)
                })
                .collect()
        };
        let whole = discover_view(&support::open(&root), Needs::ALL, View::All).unwrap();
        for needs in [Needs::GIDS, Needs::NETDEVS] {
            let owned = discover_view(&support::open(&root), needs, View::Owned).unwrap();
            let shown = DisplayedDevices::of(&owned, false);
            let Some(devices) = &shown.owned_rdma else {
                if owned.view.is_none() && !ContainerView::of(&whole).context.is_container() {
                    let host = discover_view(&support::open(&root), needs, View::All).unwrap();
                    assert_eq!(owned, host, "{name}: {needs:?} on a host");
                }
                continue;
            };
            narrowed += 1;
            // `gids` and `netdevs` show RDMA devices, and read no NVML facts: the GPUs
            // they own may be decided on less evidence (pod-h100-cdi-devnodes: a node NVML
            // would rule out), and they show none.
            let rdma = |s: &DisplayedDevices| (s.owned_rdma.clone(), s.left_out.clone(), s.context);
            assert_eq!(
                rdma(&shown),
                rdma(&DisplayedDevices::of(&whole, false)),
                "{name}: {needs:?} shown"
            );
            for d in devices {
                if needs == Needs::GIDS {
                    assert_eq!(gids(&owned, d), gids(&whole, d), "{name}: gids {d}");
                } else {
                    assert_eq!(
                        netdevs(&owned, d),
                        netdevs(&whole, d),
                        "{name}: netdevs {d}"
                    );
                }
            }
        }
        let (all, owned, _, _) = both(|| support::open(&root), Needs::ALL);
        let (shown_all, shown_owned) = (
            DisplayedDevices::of(&all, false),
            DisplayedDevices::of(&owned, false),
        );
        assert_eq!(shown_owned, shown_all, "{name}: shown");
        assert_eq!(
            qos::report_shown(&owned, &shown_owned),
            qos::report_shown(&all, &shown_all),
            "{name}: qos"
        );
        let opts = XmlOptions::default();
        assert_eq!(
            nccl_xml::write_shown(&owned, &opts, &shown_owned),
            nccl_xml::write_shown(&all, &opts, &shown_all),
            "{name}: nccl-topo"
        );
    }
    assert!(narrowed >= 10, "only {narrowed} reads were narrowed");
}

/// The pod-sriov tree in memory, to be edited.
fn pod_sriov() -> MemTree {
    let archive = support::root("pod-sriov");
    rdmatopo::snapshot::load(&archive).unwrap()
}

fn owned_of(tree: &MemTree) -> (Topology, Topology) {
    let (all, owned, _, _) = both(|| Sysfs::memory(tree.clone(), "edited"), Needs::ALL);
    (all, owned)
}

#[test]
fn pod_sriov_reads_one_gid_table_and_names_the_rest() {
    let (all, owned) = owned_of(&pod_sriov());
    let view = owned.view.as_ref().expect("narrowed");
    assert_eq!(view.rdma_devices, ["mlx5_12"]);
    assert_eq!(view.pf_rdma_devices, ["mlx5_0"]);
    // The pod's VF and its PF are held; every other device is a name, in model order.
    let held: Vec<&str> = owned.rdma_devices.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(held, ["mlx5_0", "mlx5_12"]);
    let every: Vec<&str> = all.rdma_devices.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(
        rdmatopo::parse::merge_natural(held, owned.other_rdma_devices()),
        every
    );
    assert_eq!(owned.rdma_device_count(), all.rdma_devices.len());
    assert_eq!(owned.gpus.len(), all.gpus.len());
    assert!(owned.holds_rdma_details("mlx5_12") && !owned.holds_rdma_details("mlx5_13"));
    // Another pod's VF costs nothing but its name: not even its links are read (a host
    // has hundreds), and the model holds no record of it.
    assert!(owned.rdma_device("mlx5_13").is_none());
    // Nor is any function but the pod's, their PFs and bridges, and the GPUs.
    assert!(
        owned.pci.len() * 3 < all.pci.len(),
        "{} of {}",
        owned.pci.len(),
        all.pci.len()
    );
    assert!(
        owned
            .pci_function("0000:18:00.3".parse().unwrap())
            .is_none()
    );
    assert_same_answers("pod-sriov", &all, &owned);
    // The view's own matrix is the container's; facts of a foreign device are an error,
    // not an empty answer.
    assert_eq!(TopoMatrix::for_topology(&owned), owned_matrix(&all));
    let devices = rdmatopo::view::Devices::of(&owned);
    assert!(devices.pci_of("mlx5_12").is_ok());
    for call in [
        devices.pci_of("mlx5_13").map(|_| ()),
        devices.rdma_in_full("mlx5_13").map(|_| ()),
    ] {
        let e = call.unwrap_err();
        assert!(matches!(e, rdmatopo::Error::OutsideView { .. }), "{e}");
        assert!(e.to_string().contains("mlx5_13"), "{e}");
        // Its function is no more known than its ports: the message says it was named.
        assert!(e.to_string().contains("only named"), "{e}");
    }
}

/// A pod whose VF is far from its GPU: the owned view reads what sits below the GPU's
/// root port (the nearer PF, its VFs, the switch ports), their RDMA devices partial reads
/// with their function; a pod whose VF is beside its GPU reads none of it.
#[test]
fn a_gpu_far_from_its_nics_reads_what_is_beside_it() {
    let read = |name: &str| {
        let root = support::root(name);
        both(|| support::open(&root), Needs::ALL)
    };
    let (all, owned, _, _) = read("pod-h100-acs-redirect");
    let view = owned.view.as_ref().expect("narrowed");
    for bdf in [
        "0000:bf:00.0",
        "0000:c0:00.0",
        "0000:c0:00.2",
        "0000:c2:01.0",
    ] {
        let a = bdf.parse().unwrap();
        assert!(view.pci.contains(&a), "{bdf} not read");
        assert_eq!(owned.pci_function(a), all.pci_function(a), "{bdf}");
    }
    let pf = owned.rdma_device("mlx5_9").unwrap();
    assert_eq!(pf.pci, Some("0000:c0:00.0".parse().unwrap()));
    assert!(pf.ports.is_empty() && !owned.holds_rdma_details("mlx5_9"));
    // Another tray stays unread.
    assert!(
        owned
            .pci_function("0000:18:00.0".parse().unwrap())
            .is_none()
    );
    let (_, near, _, _) = read("pod-h100-1gpu-1vf");
    assert!(near.pci_function("0000:c0:00.3".parse().unwrap()).is_none());
    assert!(near.pci_function("0000:c2:01.0".parse().unwrap()).is_none());
}

/// The whole read plus the diagnostics that say why the view was widened.
fn assert_widened(what: &str, all: &Topology, owned: &Topology, path: &str) {
    assert!(owned.view.is_none(), "{what}: narrowed");
    let said: Vec<_> = owned
        .diagnostics
        .iter()
        .filter(|d| d.code == "view-widened")
        .collect();
    assert!(
        said.iter().any(|d| d.path.as_deref() == Some(path)),
        "{what}: no diagnostic naming {path}: {said:?}"
    );
    let mut unsaid = owned.clone();
    unsaid.diagnostics.retain(|d| d.code != "view-widened");
    assert_eq!(&unsaid, all, "{what}: widened, yet not the whole read");
}

fn environ(tree: &MemTree) -> String {
    tree.text("/proc/self/environ").unwrap().to_string()
}

/// Evidence that does not hold together widens the view to the whole read, with a
/// diagnostic naming the path; never a panic.
#[test]
fn bad_evidence_widens_the_view() {
    // A PCIDEVICE_* variable naming a function the machine lacks.
    let mut tree = pod_sriov();
    let before = environ(&tree);
    let edited = before.replace(
        "PCIDEVICE_NVIDIA_COM_SRIOV_VF_RAIL0=0000:18:00.2",
        "PCIDEVICE_NVIDIA_COM_SRIOV_VF_RAIL0=0000:18:00.2,0000:ee:00.7",
    );
    assert_ne!(edited, before);
    tree.file("/proc/self/environ", &edited);
    let (all, owned) = owned_of(&tree);
    assert_widened(
        "PCIDEVICE",
        &all,
        &owned,
        "/sys/bus/pci/devices/0000:ee:00.7",
    );

    // A uverbs node whose device is not in sysfs.
    let mut tree = pod_sriov();
    tree.file("/dev/infiniband/uverbs99", "");
    let (all, owned) = owned_of(&tree);
    assert_widened("uverbs99", &all, &owned, "/dev/infiniband/uverbs99");

    // The owned device's uverbs node names something else (garbage, another device).
    for text in ["\u{1}\u{2}garbage\n", "mlx5_0\n"] {
        let mut tree = pod_sriov();
        let ibdev = tree
            .entries()
            .map(|(p, _)| p.to_string())
            .find(|p| p.ends_with("/infiniband_verbs/uverbs12/ibdev"))
            .unwrap();
        tree.file(&ibdev, text);
        let (all, owned) = owned_of(&tree);
        let path = "/sys/class/infiniband_verbs/uverbs12/ibdev";
        assert_widened(text, &all, &owned, path);
    }
}

/// A container that owns no RDMA device while the host has some is read whole: why
/// none of them opens (no node here, or no ib_uverbs) is told by their verbs devices,
/// which an owned view would only name.
#[test]
fn a_pod_without_an_rdma_device_is_read_whole() {
    let mut tree = pod_sriov();
    for node in ["uverbs12", "umad12", "issm12"] {
        tree.remove(&format!("/dev/infiniband/{node}"));
    }
    tree.remove("/sys/class/net/net1");
    let env: String = environ(&tree)
        .split('\0')
        .filter(|kv| !kv.starts_with("PCIDEVICE_"))
        .collect::<Vec<_>>()
        .join("\0");
    tree.file("/proc/self/environ", &env);
    let (all, owned) = owned_of(&tree);
    assert!(owned.view.is_none(), "narrowed to no RDMA device");
    assert_eq!(owned, all);
    assert!(ContainerView::of(&owned).owned_rdma().is_empty());
}

/// A GPU injected through CDI: `NVIDIA_VISIBLE_DEVICES` is `void` and the driver's GPU
/// list names all eight, so the device node and NVML alone tell the pod's GPU; the pod is
/// narrowed to it as the hook-injected pod is. Before toolkit 1.18 NVML in the pod could
/// make every GPU's node (`pod-h100-cdi-devnodes`): NVML's list still tells them apart.
#[test]
fn a_cdi_pod_is_narrowed_by_its_device_node_and_nvml() {
    for name in ["pod-h100-cdi", "pod-h100-cdi-devnodes"] {
        a_cdi_pod(name);
    }
}

fn a_cdi_pod(name: &str) {
    let root = support::root(name);
    let topo = discover_view(&support::open(&root), Needs::TOPO, View::Owned).unwrap();
    assert_eq!(
        topo.process
            .env
            .get("NVIDIA_VISIBLE_DEVICES")
            .map(String::as_str),
        Some("void")
    );
    assert_eq!(topo.process.proc_nvidia_gpus.len(), 8);
    let view = ContainerView::of(&topo);
    assert!(view.certain);
    let gpu5: rdmatopo::parse::PciAddr = "0000:c3:00.0".parse().unwrap();
    assert_eq!(view.owned_gpus(), [gpu5]);
    let evidence = |source: &str| {
        view.gpus
            .iter()
            .find(|g| g.key == gpu5)
            .unwrap()
            .evidence
            .iter()
            .find(|e| e.source == source)
            .map(|e| e.value.clone())
    };
    assert_eq!(
        evidence("NVML").as_deref(),
        Some("lists it, and not every GPU")
    );
    assert_eq!(
        evidence("/dev/nvidia5").as_deref(),
        Some("present (minor from NVML)")
    );
    assert_eq!(
        evidence("/proc/driver/nvidia/gpus/0000:c3:00.0").as_deref(),
        Some("listed")
    );
    let gpu0: rdmatopo::parse::PciAddr = "0000:1b:00.0".parse().unwrap();
    let gpu0_node = view
        .gpus
        .iter()
        .find(|g| g.key == gpu0)
        .unwrap()
        .evidence
        .iter()
        .find(|e| e.source == "/dev/nvidia0")
        .map(|e| e.value.clone())
        .unwrap_or_default();
    if name.ends_with("-devnodes") {
        assert!(gpu0_node.ends_with("but NVML here does not list it: a node made inside the container, which may not open it"), "{gpu0_node}");
    } else {
        assert!(gpu0_node.starts_with("absent"), "{gpu0_node}");
    }
    // The owned view holds the pod's GPU and VF only.
    assert_eq!(
        topo.view
            .as_ref()
            .map(|v| (v.gpus.clone(), v.rdma_devices.clone())),
        Some((vec![gpu5], vec!["mlx5_22".to_string()]))
    );
}
