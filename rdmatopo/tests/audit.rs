//! `rdmatopo k8s audit` against a fake kubelet: a tonic server of the kubelet's own
//! PodResources v1 proto on a unix socket in a temp dir, answering as kubelets do with
//! the NVIDIA device plugin, sriov-network-device-plugin and
//! k8s-rdma-shared-dev-plugin. The kubelet lists one `ContainerDevices` per device id,
//! each with the NUMA node its plugin reported (`pkg/kubelet/cm/devicemanager/pod_devices.go`,
//! `getContainerDevices`); the shared RDMA plugin reports no topology.
#![cfg(feature = "kubelet")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use rdmatopo::sources::kubelet::proto::pod_resources_lister_server::{
    PodResourcesLister, PodResourcesListerServer,
};
use rdmatopo::sources::kubelet::proto::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};
use tonic::{Request, Response, Status};

#[derive(Clone, Default)]
struct Kubelet {
    list: ListPodResourcesResponse,
    /// `None`: UNIMPLEMENTED, as kubelets before 1.23 without the feature gate answer.
    allocatable: Option<AllocatableResourcesResponse>,
}

#[tonic::async_trait]
impl PodResourcesLister for Kubelet {
    async fn list(
        &self,
        _: Request<ListPodResourcesRequest>,
    ) -> Result<Response<ListPodResourcesResponse>, Status> {
        Ok(Response::new(self.list.clone()))
    }

    async fn get_allocatable_resources(
        &self,
        _: Request<AllocatableResourcesRequest>,
    ) -> Result<Response<AllocatableResourcesResponse>, Status> {
        match &self.allocatable {
            Some(a) => Ok(Response::new(a.clone())),
            None => Err(Status::unimplemented(
                "unknown method GetAllocatableResources for service v1.PodResourcesLister",
            )),
        }
    }

    async fn get(
        &self,
        _: Request<GetPodResourcesRequest>,
    ) -> Result<Response<GetPodResourcesResponse>, Status> {
        Err(Status::unimplemented("not used"))
    }
}

/// Serve `kubelet` on `dir/kubelet.sock` from a thread for the rest of the test.
fn serve(dir: &Path, kubelet: Kubelet) -> PathBuf {
    let socket = dir.join("kubelet.sock");
    let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    listener.set_nonblocking(true).unwrap();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = tokio::net::UnixListener::from_std(listener).unwrap();
            tonic::transport::Server::builder()
                .add_service(
                    PodResourcesListerServer::new(kubelet).max_encoding_message_size(usize::MAX),
                )
                .serve_with_incoming(tokio_stream::wrappers::UnixListenerStream::new(listener))
                .await
                .unwrap();
        });
    });
    socket
}

fn fixture(name: &str) -> String {
    support::root(name).display().to_string()
}

fn audit(root: &str, socket: &Path, extra: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rdmatopo"))
        .args(["k8s", "audit", "--root", root, "--pod-resources-socket"])
        .arg(socket)
        .args(extra)
        .output()
        .unwrap()
}

fn json(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

fn topo(numa: &[i64]) -> Option<TopologyInfo> {
    Some(TopologyInfo {
        nodes: numa.iter().map(|&id| NumaNode { id }).collect(),
    })
}

/// One entry per device, as the kubelet lists them.
fn each(resource: &str, ids: &[&str], numa: Option<i64>) -> Vec<ContainerDevices> {
    ids.iter()
        .map(|id| ContainerDevices {
            resource_name: resource.into(),
            device_ids: vec![id.to_string()],
            topology: numa.and_then(|n| topo(&[n])),
        })
        .collect()
}

fn pod(ns: &str, name: &str, devices: Vec<ContainerDevices>, cpus: &[i64]) -> PodResources {
    PodResources {
        name: name.into(),
        namespace: ns.into(),
        containers: vec![ContainerResources {
            name: "main".into(),
            devices,
            cpu_ids: cpus.to_vec(),
            memory: Vec::new(),
            dynamic_resources: Vec::new(),
        }],
        cpu_ids: Vec::new(),
        memory: Vec::new(),
    }
}

// The UUIDs of fixtures/h100-dgx (its /proc/driver/nvidia/gpus/*/information).
const DGX_GPU0: &str = "GPU-e96a2c04-364a-ee95-be09-323f35592919";
const DGX_GPU4: &str = "GPU-282765a2-3bb9-1bed-c3ea-db3925cc74b4";
// fixtures/host-h100-sriov.
const SRIOV_GPU0: &str = "GPU-6f6b81cb-de00-1def-28cd-99dec497708a";
const SRIOV_GPU1: &str = "GPU-a74df874-c9d0-c57f-1701-ccd992eaf123";

/// h100-dgx with the NVIDIA GPU plugin and the shared RDMA plugin
/// (`rdmatopo k8s rdma-shared-dev-plugin` names: `rdma/hca_<netdev>`).
fn dgx_kubelet(allocatable: bool) -> Kubelet {
    let mut good = each("nvidia.com/gpu", &[DGX_GPU0], Some(0));
    good.extend(each("rdma/hca_ibp24s0", &["12"], None));
    let mut bad = each("nvidia.com/gpu", &[DGX_GPU4], Some(1));
    bad.extend(each("rdma/hca_ibp24s0", &["13"], None));
    let list = ListPodResourcesResponse {
        pod_resources: vec![
            pod("kube-system", "coredns-7db6d8ff4d-x2x9z", Vec::new(), &[]),
            pod("train", "good-0", good, &[2, 3, 4, 5]),
            pod("train", "bad-0", bad, &[60, 61, 62, 63]),
        ],
    };
    let mut devices = each("nvidia.com/gpu", &[DGX_GPU0], Some(0));
    devices.extend(each("nvidia.com/gpu", &[DGX_GPU4], Some(1)));
    let slots: Vec<String> = (0..63).map(|n| n.to_string()).collect();
    let slots: Vec<&str> = slots.iter().map(String::as_str).collect();
    for netdev in ["ibp24s0", "ibp154s0"] {
        devices.push(ContainerDevices {
            resource_name: format!("rdma/hca_{netdev}"),
            device_ids: slots.iter().map(|s| s.to_string()).collect(),
            topology: None,
        });
    }
    Kubelet {
        list,
        allocatable: allocatable.then(|| AllocatableResourcesResponse {
            devices,
            cpu_ids: (2..224).collect(),
            memory: Vec::new(),
        }),
    }
}

#[test]
fn gpu_and_shared_rdma_plugins_on_a_dgx() {
    let dir = tempfile::tempdir().unwrap();
    let socket = serve(dir.path(), dgx_kubelet(true));
    let out = audit(&fixture("h100-dgx"), &socket, &["--format", "json"]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r = json(&out);
    assert_eq!(r["schema"], "rdmatopo.audit/1");
    assert_eq!(r["free_devices_known"], true);
    assert_eq!(r["summary"]["pods"], 3);
    let pods = r["pods"].as_array().unwrap();
    assert_eq!(pods.len(), 2, "coredns holds no device and is not listed");
    let good = &pods[0]["containers"][0];
    assert_eq!(good["worst_path"], "PXB");
    assert_eq!(good["findings"].as_array().unwrap().len(), 0, "{good:#}");
    let bad = &pods[1]["containers"][0];
    assert_eq!(bad["gpus"][0]["index"], 4);
    assert_eq!(bad["nics"][0]["rdma_device"], "mlx5_0");
    assert_eq!(bad["worst_path"], "SYS");
    assert_eq!(bad["numa_misaligned"], true);
    let checks: Vec<&str> = bad["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["check"].as_str().unwrap())
        .collect();
    assert!(
        checks.contains(&"numa-affinity") && checks.contains(&"gpu-nic-distance"),
        "{checks:?}"
    );
    let distance = bad["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["check"] == "gpu-nic-distance")
        .unwrap();
    // The free pool next to GPU4 is ibp154s0 (mlx5_6).
    assert!(
        distance["summary"]
            .as_str()
            .unwrap()
            .contains("while mlx5_6 (0000:9a:00.0) is PXB from it"),
        "{distance:#}"
    );
}

/// The plugin's `config.json` in the forms of its own sample ConfigMap: a pool of every
/// IB HCA mounts all eight into the container, which is judged with all of them.
#[test]
fn a_shared_pool_config_places_every_hca_it_selects() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.json");
    std::fs::write(
        &config,
        r#"{"periodicUpdateInterval": 300, "configList": [
             {"resourceName": "rail0", "rdmaHcaMax": 1000, "devices": ["ibp24s0"]},
             {"resourceName": "ib_all", "rdmaHcaMax": 63,
              "selectors": {"vendors": ["15b3"], "linkTypes": ["infiniband"]}}]}"#,
    )
    .unwrap();
    let mut rail0 = each("nvidia.com/gpu", &[DGX_GPU0], Some(0));
    rail0.extend(each("rdma/rail0", &["3"], None));
    let mut all = each("nvidia.com/gpu", &[DGX_GPU4], Some(1));
    all.extend(each("rdma/ib_all", &["5"], None));
    let kubelet = Kubelet {
        list: ListPodResourcesResponse {
            pod_resources: vec![
                pod("train", "rail0-0", rail0, &[2, 3, 4, 5]),
                pod("train", "all-0", all, &[60, 61, 62, 63]),
            ],
        },
        allocatable: None,
    };
    let socket = serve(dir.path(), kubelet);
    let args = ["--format", "json", "--rdma-shared-config"];
    let mut extra: Vec<&str> = args.to_vec();
    extra.push(config.to_str().unwrap());
    let out = audit(&fixture("h100-dgx"), &socket, &extra);
    let r = json(&out);
    let pods = r["pods"].as_array().unwrap();
    let rail0 = &pods[0]["containers"][0];
    assert_eq!(rail0["nics"].as_array().unwrap().len(), 1, "{rail0:#}");
    assert_eq!(rail0["nics"][0]["netdev"], "ibp24s0");
    assert_eq!(rail0["worst_path"], "PXB");
    let all = &pods[1]["containers"][0];
    let hcas: Vec<&str> = all["nics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["rdma_device"].as_str().unwrap())
        .collect();
    assert_eq!(
        hcas,
        [
            "mlx5_0", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_9", "mlx5_10", "mlx5_11"
        ]
    );
    // GPU 4's own rail, mlx5_6, is among them.
    assert_eq!(all["worst_path"], "PXB", "{all:#}");

    // A config the plugin would refuse (and exit on) is an error naming the file.
    std::fs::write(
        &config,
        r#"{"configList": [{"resourceName": "x", "rdmaHcaMax": 1, "devices": ["a"],
             "selectors": {"ifNames": ["a"]}}]}"#,
    )
    .unwrap();
    let out = audit(&fixture("h100-dgx"), &socket, &extra);
    assert_eq!(out.status.code(), Some(3));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!(
            "{}: x: both selectors and devices",
            config.display()
        )),
        "{err}"
    );
}

#[test]
fn table_and_prometheus_outputs() {
    let dir = tempfile::tempdir().unwrap();
    let socket = serve(dir.path(), dgx_kubelet(true));
    let out = audit(&fixture("h100-dgx"), &socket, &["--node-name", "dgx-07"]);
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.starts_with("k8s audit of dgx-07 ("), "{table}");
    assert!(table.contains("train/bad-0"), "{table}");
    assert!(
        table.contains("[error] numa-affinity train/bad-0 main:"),
        "{table}"
    );

    let prom = dir.path().join("rdmatopo.prom");
    let out = audit(
        &fixture("h100-dgx"),
        &socket,
        &["--format", "prometheus", "--write", prom.to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    let text = std::fs::read_to_string(&prom).unwrap();
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.starts_with('.'))
        .collect();
    assert!(names.is_empty(), "no temp file left: {names:?}");
    let lines = text.lines().map(|l| Ok(l.to_string()));
    let scrape = prometheus_parse::Scrape::parse(lines).unwrap();
    let find = |name: &str, pod: Option<&str>| {
        scrape
            .samples
            .iter()
            .find(|s| s.metric == name && pod.is_none_or(|p| s.labels.get("pod") == Some(p)))
            .unwrap_or_else(|| panic!("{name} {pod:?} in\n{text}"))
    };
    let value = |s: &prometheus_parse::Sample| match s.value {
        prometheus_parse::Value::Gauge(v) | prometheus_parse::Value::Untyped(v) => v,
        ref v => panic!("{v:?}"),
    };
    let worst = find("rdmatopo_audit_container_worst_path_rank", Some("bad-0"));
    assert_eq!(value(worst), 6.0);
    assert_eq!(worst.labels.get("class"), Some("SYS"));
    assert_eq!(worst.labels.get("namespace"), Some("train"));
    assert_eq!(worst.labels.get("container"), Some("main"));
    assert_eq!(
        value(find(
            "rdmatopo_audit_container_numa_misaligned",
            Some("bad-0")
        )),
        1.0
    );
    assert_eq!(
        value(find(
            "rdmatopo_audit_container_numa_misaligned",
            Some("good-0")
        )),
        0.0
    );
    assert_eq!(value(find("rdmatopo_audit_pods", None)), 3.0);
    assert_eq!(
        value(find("rdmatopo_audit_numa_misaligned_containers", None)),
        1.0
    );
    assert!(
        scrape
            .docs
            .contains_key("rdmatopo_audit_container_findings"),
        "HELP lines parsed"
    );
}

#[test]
fn sriov_vfs_by_pci_address_and_unimplemented_allocatable() {
    let dir = tempfile::tempdir().unwrap();
    // One container with GPU0 and a VF of node 1 (0000:9a:00.3), on node 0's CPUs;
    // another with GPU1 and the VF under GPU1's switch (0000:40:00.2).
    let mut bad = each("nvidia.com/gpu", &[SRIOV_GPU0], Some(0));
    bad.extend(each(
        "nvidia.com/vf_enp154s0np0",
        &["0000:9a:00.3"],
        Some(1),
    ));
    let mut good = each("nvidia.com/gpu", &[SRIOV_GPU1], Some(0));
    good.extend(each("nvidia.com/vf_enp64s0np0", &["0000:40:00.2"], Some(0)));
    let kubelet = Kubelet {
        list: ListPodResourcesResponse {
            pod_resources: vec![
                pod("train", "vf-0", bad, &[8, 9]),
                pod("train", "vf-1", good, &[10, 11]),
            ],
        },
        allocatable: None,
    };
    let socket = serve(dir.path(), kubelet);
    let out = audit(&fixture("host-h100-sriov"), &socket, &["--format", "json"]);
    assert_eq!(out.status.code(), Some(2));
    let r = json(&out);
    assert_eq!(r["free_devices_known"], false);
    let good = &r["pods"][1]["containers"][0];
    assert_eq!(good["nics"][0]["rdma_device"], "mlx5_14");
    assert_eq!(good["nics"][0]["is_vf"], true);
    assert_eq!(good["worst_path"], "PXB");
    assert_eq!(good["findings"].as_array().unwrap().len(), 0, "{good:#}");
    let bad = &r["pods"][0]["containers"][0];
    assert_eq!(bad["nics"][0]["rdma_device"], "mlx5_21");
    assert_eq!(bad["worst_path"], "SYS");
    assert_eq!(bad["numa_misaligned"], true);
    let distance = bad["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["check"] == "gpu-nic-distance")
        .unwrap();
    // Free devices unknown: the nearest on the whole node is named.
    let summary = distance["summary"].as_str().unwrap();
    assert!(
        summary.contains(
            "while mlx5_0 (0000:18:00.0) is PXB from it: its VF sits under a different PCIe switch"
        ),
        "{summary}"
    );
    assert!(
        distance["fix"]
            .as_str()
            .unwrap()
            .starts_with("allocate a VF of mlx5_0 (0000:18:00.0) instead")
    );
}

#[test]
fn unknown_and_foreign_ids_are_findings() {
    let dir = tempfile::tempdir().unwrap();
    let mut devices = each(
        "nvidia.com/gpu",
        &["GPU-6f6b81cb-de00-1def-28cd-99dec497708a"],
        Some(0),
    );
    devices.extend(each("nvidia.com/sriov_x", &["0000:ee:00.2"], Some(0)));
    let kubelet = Kubelet {
        list: ListPodResourcesResponse {
            pod_resources: vec![pod("train", "stray", devices, &[])],
        },
        allocatable: None,
    };
    let socket = serve(dir.path(), kubelet);
    // The UUID is host-h100-sriov's, not h100-dgx's.
    let out = audit(&fixture("h100-dgx"), &socket, &["--format", "json"]);
    assert_eq!(out.status.code(), Some(1));
    let r = json(&out);
    let findings = r["pods"][0]["containers"][0]["findings"]
        .as_array()
        .unwrap();
    assert_eq!(findings.len(), 2);
    assert!(findings.iter().all(|f| f["check"] == "unknown-device"));
}

#[test]
fn missing_socket_exits_3_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("nope/kubelet.sock");
    let out = audit(&fixture("h100-dgx"), &socket, &[]);
    assert_eq!(out.status.code(), Some(3));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&socket.display().to_string()), "{err}");
    assert!(
        err.contains("cannot reach the kubelet's PodResources socket"),
        "{err}"
    );
}

#[test]
fn a_socket_that_never_answers_times_out() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("kubelet.sock");
    let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    // Accept and hold every connection without a byte in reply.
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for conn in listener.incoming() {
            held.push(conn);
        }
    });
    let start = Instant::now();
    let out = audit(&fixture("h100-dgx"), &socket, &["--timeout", "1s"]);
    let took = start.elapsed();
    assert_eq!(out.status.code(), Some(3));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("did not answer within 1s"), "{err}");
    // Discovery of the root is in this time too.
    assert!(took < Duration::from_secs(10), "{took:?}");
}

#[test]
fn an_oversized_reply_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    // 17 MiB of device ids: past the 16 MiB the client decodes.
    let ids: Vec<String> = (0..190_000).map(|n| format!("GPU-{n:090}")).collect();
    let kubelet = Kubelet {
        list: ListPodResourcesResponse {
            pod_resources: vec![pod(
                "train",
                "flood",
                vec![ContainerDevices {
                    resource_name: "nvidia.com/gpu".into(),
                    device_ids: ids,
                    topology: None,
                }],
                &[],
            )],
        },
        allocatable: None,
    };
    let socket = serve(dir.path(), kubelet);
    let out = audit(&fixture("h100-dgx"), &socket, &["--timeout", "20s"]);
    assert_eq!(out.status.code(), Some(3));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("List failed: OutOfRange"), "{err}");
    assert!(err.contains(&socket.display().to_string()), "{err}");
}

#[test]
fn cluster_lists_the_fleets_misaligned_pods() {
    let dir = tempfile::tempdir().unwrap();
    let socket = serve(dir.path(), dgx_kubelet(true));
    let reports = dir.path().join("reports");
    std::fs::create_dir(&reports).unwrap();
    let out = audit(
        &fixture("h100-dgx"),
        &socket,
        &["--format", "json", "--node-name", "dgx-07"],
    );
    std::fs::write(reports.join("dgx-07.audit.json"), &out.stdout).unwrap();
    let bin = env!("CARGO_BIN_EXE_rdmatopo");
    let cluster = |extra: &[&str]| {
        Command::new(bin)
            .arg("cluster")
            .arg(&reports)
            .args(extra)
            .output()
            .unwrap()
    };
    // Audit reports alone.
    let out = cluster(&["--format", "json"]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r = json(&out);
    let pods = r["misaligned_pods"].as_array().unwrap();
    assert_eq!(pods.len(), 1, "{r:#}");
    assert_eq!(pods[0]["node"], "dgx-07");
    assert_eq!(pods[0]["pod"], "bad-0");
    assert_eq!(pods[0]["worst_path"], "SYS");
    assert_eq!(pods[0]["severity"], "error");
    // Beside an inventory report, both sections.
    let inv = Command::new(bin)
        .args([
            "inventory",
            "--format",
            "json",
            "--root",
            &fixture("h100-dgx"),
        ])
        .output()
        .unwrap();
    std::fs::write(reports.join("dgx-07.json"), &inv.stdout).unwrap();
    let out = cluster(&[]);
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table.starts_with("rdmatopo cluster: 1 node, 1 agree, 0 differ"),
        "{table}"
    );
    assert!(table.contains("Misaligned pods (k8s audit):"), "{table}");
    assert!(
        table.contains("dgx-07  train/bad-0  main       SYS   misaligned  error"),
        "{table}"
    );
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn impossible_values_are_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let kubelet = Kubelet {
        list: ListPodResourcesResponse {
            pod_resources: vec![pod("train", "neg", Vec::new(), &[-1])],
        },
        allocatable: None,
    };
    let socket = serve(dir.path(), kubelet);
    let out = audit(&fixture("h100-dgx"), &socket, &[]);
    assert_eq!(out.status.code(), Some(3));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("{}: List answered CPU id -1", socket.display())),
        "{err}"
    );
}

#[test]
fn a_saved_answer_is_judged_again_offline() {
    let dir = tempfile::tempdir().unwrap();
    let socket = serve(dir.path(), dgx_kubelet(false));
    let live = audit(
        &fixture("h100-dgx"),
        &socket,
        &["--format", "json", "--with-allocation"],
    );
    let saved = dir.path().join("node.json");
    std::fs::write(&saved, &live.stdout).unwrap();
    let replay = Command::new(env!("CARGO_BIN_EXE_rdmatopo"))
        .args([
            "k8s",
            "audit",
            "--format",
            "json",
            "--root",
            &fixture("h100-dgx"),
        ])
        .arg("--allocation")
        .arg(&saved)
        .output()
        .unwrap();
    assert_eq!(replay.status.code(), live.status.code());
    let mut a = json(&live);
    a.as_object_mut().unwrap().remove("allocation");
    assert_eq!(json(&replay), a);
    // A report without the answer says so.
    let bare = dir.path().join("bare.json");
    std::fs::write(&bare, serde_json::to_vec(&a).unwrap()).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_rdmatopo"))
        .args([
            "k8s",
            "audit",
            "--root",
            &fixture("h100-dgx"),
            "--allocation",
        ])
        .arg(&bare)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&out.stderr).contains("holds no `allocation`"));
}

/// The fake kubelet on `socket` until the returned stop is called, which shuts the
/// server down and removes the socket, as a stopping kubelet's socket goes away.
fn serve_stoppable(socket: &Path, kubelet: Kubelet) -> impl FnOnce() {
    let listener = std::os::unix::net::UnixListener::bind(socket).unwrap();
    listener.set_nonblocking(true).unwrap();
    let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = tokio::net::UnixListener::from_std(listener).unwrap();
            let stopped = async move {
                while let Err(std::sync::mpsc::TryRecvError::Empty) = stop_rx.try_recv() {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            };
            tonic::transport::Server::builder()
                .add_service(PodResourcesListerServer::new(kubelet))
                .serve_with_incoming_shutdown(
                    tokio_stream::wrappers::UnixListenerStream::new(listener),
                    stopped,
                )
                .await
                .unwrap();
        });
        let _ = done_tx.send(());
    });
    let socket = socket.to_path_buf();
    move || {
        stop_tx.send(()).unwrap();
        done_rx
            .recv_timeout(Duration::from_secs(20))
            .expect("the fake kubelet stops within 20 s");
        std::fs::remove_file(&socket).unwrap();
    }
}

/// A child process killed when the test ends, passed or not.
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The samples of a metrics file, parsed by a real Prometheus text parser.
fn samples(text: &str) -> Vec<prometheus_parse::Sample> {
    let lines = text.lines().map(|l| Ok(l.to_string()));
    prometheus_parse::Scrape::parse(lines).unwrap().samples
}

fn gauge(samples: &[prometheus_parse::Sample], name: &str) -> Option<f64> {
    samples
        .iter()
        .find(|s| s.metric == name)
        .map(|s| match s.value {
            prometheus_parse::Value::Gauge(v) | prometheus_parse::Value::Untyped(v) => v,
            ref v => panic!("{name}: {v:?}"),
        })
}

/// Read `path` until `done` holds of its samples, for at most 30 s.
fn wait_for(
    path: &Path,
    what: &str,
    done: impl Fn(&[prometheus_parse::Sample]) -> bool,
) -> Vec<prometheus_parse::Sample> {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut last = String::new();
    while Instant::now() < deadline {
        if let Ok(text) = std::fs::read_to_string(path) {
            let s = samples(&text);
            if done(&s) {
                return s;
            }
            last = text;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("{what}: not seen within 30 s; last file:\n{last}");
}

fn pod_series(samples: &[prometheus_parse::Sample]) -> usize {
    samples
        .iter()
        .filter(|s| s.metric.starts_with("rdmatopo_audit_container_"))
        .count()
}

#[test]
fn the_interval_loop_says_down_while_the_kubelet_is_away_and_recovers() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("kubelet.sock");
    let prom = dir.path().join("rdmatopo-audit.prom");
    let stop = serve_stoppable(&socket, dgx_kubelet(true));
    let _child = Killed(
        Command::new(env!("CARGO_BIN_EXE_rdmatopo"))
            .args(["k8s", "audit", "--root", &fixture("h100-dgx")])
            .arg("--pod-resources-socket")
            .arg(&socket)
            .args([
                "--format",
                "prometheus",
                "--interval",
                "1",
                "--timeout",
                "2s",
            ])
            .arg("--write")
            .arg(&prom)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    let up = |s: &[prometheus_parse::Sample]| gauge(s, "rdmatopo_audit_up");
    let first = wait_for(&prom, "up 1", |s| up(s) == Some(1.0));
    assert!(pod_series(&first) > 0);
    let success = gauge(&first, "rdmatopo_audit_last_success_timestamp_seconds").unwrap();
    assert!(gauge(&first, "rdmatopo_audit_duration_seconds").unwrap() >= 0.0);

    // The kubelet goes away: the next rounds say so, with no pod series.
    stop();
    let down = wait_for(&prom, "up 0", |s| up(s) == Some(0.0));
    assert_eq!(pod_series(&down), 0, "no stale pod series when down");
    assert_eq!(gauge(&down, "rdmatopo_audit_pods"), None);
    let kept = gauge(&down, "rdmatopo_audit_last_success_timestamp_seconds").unwrap();
    assert!(kept >= success, "{kept} < {success}");
    let kubelet_up = down
        .iter()
        .find(|s| {
            s.metric == "rdmatopo_audit_source_up" && s.labels.get("source") == Some("kubelet")
        })
        .unwrap();
    assert!(matches!(kubelet_up.value, prometheus_parse::Value::Gauge(v) if v == 0.0));
    // A later failed round keeps the same last success.
    let modified = std::fs::metadata(&prom).unwrap().modified().unwrap();
    let again = wait_for(&prom, "a second failed round", |_| {
        std::fs::metadata(&prom).unwrap().modified().unwrap() > modified
    });
    assert_eq!(up(&again), Some(0.0));
    assert_eq!(
        gauge(&again, "rdmatopo_audit_last_success_timestamp_seconds"),
        Some(kept)
    );

    // The kubelet restarts and recreates its socket: the loop finds it again.
    let _stop = serve_stoppable(&socket, dgx_kubelet(true));
    let back = wait_for(&prom, "up 1 again", |s| up(s) == Some(1.0));
    assert!(pod_series(&back) > 0);
    assert!(gauge(&back, "rdmatopo_audit_last_success_timestamp_seconds").unwrap() > kept);
}

#[test]
fn a_failed_single_write_rewrites_the_file_as_down() {
    let dir = tempfile::tempdir().unwrap();
    let socket = serve(dir.path(), dgx_kubelet(true));
    let prom = dir.path().join("rdmatopo-audit.prom");
    let write = ["--format", "prometheus", "--write", prom.to_str().unwrap()];
    let out = audit(&fixture("h100-dgx"), &socket, &write);
    assert_eq!(out.status.code(), Some(2));
    let good = samples(&std::fs::read_to_string(&prom).unwrap());
    assert_eq!(gauge(&good, "rdmatopo_audit_up"), Some(1.0));
    let success = gauge(&good, "rdmatopo_audit_last_success_timestamp_seconds").unwrap();

    // A new process, the kubelet's socket gone: up 0, the success read from the file.
    let gone = dir.path().join("gone/kubelet.sock");
    let out = audit(&fixture("h100-dgx"), &gone, &write);
    assert_eq!(out.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot reach the kubelet"));
    let down = samples(&std::fs::read_to_string(&prom).unwrap());
    assert_eq!(gauge(&down, "rdmatopo_audit_up"), Some(0.0));
    assert_eq!(pod_series(&down), 0);
    assert_eq!(
        gauge(&down, "rdmatopo_audit_last_success_timestamp_seconds"),
        Some(success)
    );

    // Unknown (no earlier file): no last-success sample, rather than a made-up one.
    let fresh = dir.path().join("fresh.prom");
    let out = audit(
        &fixture("h100-dgx"),
        &gone,
        &["--format", "prometheus", "--write", fresh.to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(3));
    let fresh = samples(&std::fs::read_to_string(&fresh).unwrap());
    assert_eq!(gauge(&fresh, "rdmatopo_audit_up"), Some(0.0));
    assert_eq!(
        gauge(&fresh, "rdmatopo_audit_last_success_timestamp_seconds"),
        None
    );

    // A root that cannot be read is a failed source too.
    let out = audit("/nonexistent-root", &socket, &write);
    assert_eq!(out.status.code(), Some(3));
    let down = samples(&std::fs::read_to_string(&prom).unwrap());
    assert_eq!(gauge(&down, "rdmatopo_audit_up"), Some(0.0));
    let sysfs = down
        .iter()
        .find(|s| s.labels.get("source") == Some("sysfs"))
        .unwrap();
    assert!(matches!(sysfs.value, prometheus_parse::Value::Gauge(v) if v == 0.0));
}

#[test]
fn probe_checks_age_and_up() {
    let dir = tempfile::tempdir().unwrap();
    let socket = serve(dir.path(), dgx_kubelet(true));
    let prom = dir.path().join("rdmatopo-audit.prom");
    let probe = |extra: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_rdmatopo"))
            .args(["k8s", "probe"])
            .arg(&prom)
            .args(extra)
            .output()
            .unwrap()
    };
    let out = probe(&["--max-age", "1m"]);
    assert_eq!(out.status.code(), Some(1), "a missing file fails");
    assert!(String::from_utf8_lossy(&out.stderr).contains(prom.to_str().unwrap()));
    let write = ["--format", "prometheus", "--write", prom.to_str().unwrap()];
    audit(&fixture("h100-dgx"), &socket, &write);
    assert_eq!(probe(&["--max-age", "1m", "--up"]).status.code(), Some(0));
    std::thread::sleep(Duration::from_millis(1100));
    let out = probe(&["--max-age", "1s"]);
    assert_eq!(out.status.code(), Some(1), "stale");
    assert!(String::from_utf8_lossy(&out.stderr).contains("more than 1s"));
    audit(&fixture("h100-dgx"), &dir.path().join("gone.sock"), &write);
    assert_eq!(probe(&["--max-age", "1m"]).status.code(), Some(0), "fresh");
    let out = probe(&["--max-age", "1m", "--up"]);
    assert_eq!(out.status.code(), Some(1), "fresh but down");
    assert!(String::from_utf8_lossy(&out.stderr).contains("rdmatopo_audit_up is 0"));
}

/// The DaemonSet's root without hostNetwork: the host's procfs mounted into a pod
/// whose network namespace is its own. There `/proc/net` is a link to `self/net`, the
/// reader's (the pod's), and `/proc/1/net` the host's init's, the node's: the default
/// route and the addresses come from the latter.
#[test]
fn a_mounted_host_procfs_gives_the_nodes_routes_not_the_pods() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("host");
    // A base fixture's archive holds one top directory: the root.
    std::fs::create_dir(&root).unwrap();
    let unpacked = Command::new("tar")
        .args(["-xzf", &fixture("h100-dgx"), "--strip-components=1", "-C"])
        .arg(&root)
        .status()
        .unwrap();
    assert!(unpacked.success());
    let proc = root.join("proc");
    let host_net = proc.join("1/net");
    std::fs::create_dir_all(proc.join("1")).unwrap();
    std::fs::rename(proc.join("net"), &host_net).unwrap();
    // The pod's own namespace: eth0 and its default route only.
    let pod_net = proc.join("4242/net");
    std::fs::create_dir_all(&pod_net).unwrap();
    std::fs::write(
        pod_net.join("route"),
        "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n\
         eth0\t00000000\t0100580A\t0003\t0\t0\t0\t00000000\t0\t0\t0\n",
    )
    .unwrap();
    std::fs::remove_dir_all(proc.join("self")).unwrap();
    std::os::unix::fs::symlink("4242", proc.join("self")).unwrap();
    std::os::unix::fs::symlink("self/net", proc.join("net")).unwrap();
    let inventory = |root: &Path| {
        let out = Command::new(env!("CARGO_BIN_EXE_rdmatopo"))
            .args(["inventory", "--format", "json", "--root"])
            .arg(root)
            .output()
            .unwrap();
        json(&out)
    };
    let host = inventory(&root);
    let fixture_root = fixture("h100-dgx");
    let original = inventory(Path::new(&fixture_root));
    assert_eq!(original["host"]["default_route_interface"], "eno3");
    assert_eq!(
        host["host"]["default_route_interface"], "eno3",
        "the node's"
    );
    // Without the host's init in the tree, /proc/net (here the pod's) is read.
    std::fs::rename(&host_net, proc.join("1/gone")).unwrap();
    let pod = inventory(&root);
    assert_eq!(pod["host"]["default_route_interface"], "eth0");
}
