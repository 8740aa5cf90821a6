//! Times `k8s audit`'s own work on a full node (for BENCHMARKS.md):
//!
//!     cargo run --release --example bench_audit -- fixtures/h100-dgx/root [ROUNDS]
//!
//! The node holds 110 pods (the kubelet's default `maxPods`): 8 training pods with one
//! GPU each (by UUID, NUMA node reported) and a shared-RDMA pool slot, half of them on
//! the wrong rail, plus 102 pods without devices. A fake kubelet (tonic, this crate's
//! proto) serves them on a unix socket in a temp dir. Discovery runs once; then each
//! step runs ROUNDS times (default 200): the PodResources exchange (`List` and
//! `GetAllocatableResources` over the socket, a fresh runtime and connection each
//! time, as the CLI does), the judging of every container, and the JSON and
//! Prometheus texts. Minimum, median and maximum per run are printed.
//!
//! The same node with DRA instead: the training pods hold a claim of one
//! `gpu.nvidia.com` GPU and one `dra.net` NIC (the same rails), placed through the
//! ResourceSlices the drivers would publish for the root (`export::dra::resource_slices`);
//! its rows count parsing the slices' JSON, as `--resource-slices` does, in the audit.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use rdmatopo::checks::audit::{AuditOptions, audit};
use rdmatopo::sources::kubelet::{self, proto::*};
use std::path::Path;
#[path = "common/timing.rs"]
mod timing;
use std::time::Duration;
use timing::time;
use tonic::{Request, Response, Status};

#[derive(Clone)]
struct Kubelet {
    list: ListPodResourcesResponse,
    allocatable: AllocatableResourcesResponse,
}

#[tonic::async_trait]
impl pod_resources_lister_server::PodResourcesLister for Kubelet {
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
        Ok(Response::new(self.allocatable.clone()))
    }
    async fn get(
        &self,
        _: Request<GetPodResourcesRequest>,
    ) -> Result<Response<GetPodResourcesResponse>, Status> {
        Err(Status::unimplemented("get"))
    }
}

fn device(resource: &str, id: &str, numa: Option<i64>) -> ContainerDevices {
    ContainerDevices {
        resource_name: resource.into(),
        device_ids: vec![id.into()],
        topology: numa.map(|id| TopologyInfo {
            nodes: vec![NumaNode { id }],
        }),
    }
}

fn node(topo: &rdmatopo::Topology) -> Kubelet {
    // Each GPU's own rail, in GPU order on the dgx fixture.
    let rails = [
        "ibp24s0", "ibp64s0", "ibp79s0", "ibp94s0", "ibp154s0", "ibp192s0", "ibp206s0", "ibp220s0",
    ];
    let mut pods = Vec::new();
    for (i, g) in topo.gpus.iter().enumerate() {
        // Odd pods get the rail of the GPU on the other socket.
        let rail = if i % 2 == 1 {
            rails[(i + 4) % 8]
        } else {
            rails[i % 8]
        };
        let node = i64::from(g.numa_node.unwrap_or(0));
        let first = 4 + 8 * i as i64;
        pods.push(PodResources {
            name: format!("train-{i}"),
            namespace: "ml".into(),
            containers: vec![ContainerResources {
                name: "main".into(),
                devices: vec![
                    device(
                        "nvidia.com/gpu",
                        g.uuid.as_deref().unwrap_or("0"),
                        Some(node),
                    ),
                    device(&format!("rdma/hca_{rail}"), &i.to_string(), None),
                ],
                cpu_ids: (first..first + 8).collect(),
                memory: Vec::new(),
                dynamic_resources: Vec::new(),
            }],
            cpu_ids: Vec::new(),
            memory: Vec::new(),
        });
    }
    while pods.len() < 110 {
        let n = pods.len();
        pods.push(PodResources {
            name: format!("web-{n}"),
            namespace: "default".into(),
            containers: vec![
                ContainerResources {
                    name: "app".into(),
                    ..Default::default()
                },
                ContainerResources {
                    name: "sidecar".into(),
                    ..Default::default()
                },
            ],
            cpu_ids: Vec::new(),
            memory: Vec::new(),
        });
    }
    let mut devices: Vec<ContainerDevices> = topo
        .gpus
        .iter()
        .map(|g| {
            device(
                "nvidia.com/gpu",
                g.uuid.as_deref().unwrap_or("0"),
                g.numa_node.map(i64::from),
            )
        })
        .collect();
    for rail in rails {
        devices.push(ContainerDevices {
            resource_name: format!("rdma/hca_{rail}"),
            device_ids: (0..63).map(|n| n.to_string()).collect(),
            topology: None,
        });
    }
    Kubelet {
        list: ListPodResourcesResponse {
            pod_resources: pods,
        },
        allocatable: AllocatableResourcesResponse {
            devices,
            cpu_ids: (2..224).collect(),
            memory: Vec::new(),
        },
    }
}

/// The node of [`node`] with every device-plugin device of the training pods asked for
/// by a DRA claim instead: the GPU by its `gpu.nvidia.com` name, the rail's NIC by its
/// `dra.net` name.
fn node_dra(topo: &rdmatopo::Topology, plugin: &Kubelet) -> Kubelet {
    use rdmatopo::view::dra::{DraDriver, gpu_devices, nic_devices};
    let gpus = gpu_devices(topo);
    let nics = nic_devices(topo, DraDriver::Dranet);
    let mut k = plugin.clone();
    for pod in &mut k.list.pod_resources {
        for c in &mut pod.containers {
            let mut claim = Vec::new();
            for d in std::mem::take(&mut c.devices) {
                let id = &d.device_ids[0];
                let (driver, name) = if d.resource_name == "nvidia.com/gpu" {
                    let g = topo
                        .gpus
                        .iter()
                        .find(|g| g.uuid.as_deref() == Some(id))
                        .unwrap();
                    let dev = gpus.iter().find(|x| x.pci == g.pci).unwrap();
                    ("gpu.nvidia.com", dev.name.clone())
                } else {
                    let netdev = d.resource_name.trim_start_matches("rdma/hca_");
                    let pci = topo.netdevs.iter().find(|n| n.name == netdev).unwrap().pci;
                    let dev = nics.iter().find(|x| Some(x.pci) == pci).unwrap();
                    ("dra.net", dev.name.clone())
                };
                claim.push(ClaimResource {
                    cdi_devices: Vec::new(),
                    driver_name: driver.into(),
                    pool_name: "node-a".into(),
                    device_name: name,
                    share_id: None,
                });
            }
            if !claim.is_empty() {
                c.dynamic_resources.push(DynamicResource {
                    claim_name: format!("{}-gpu-nic", pod.name),
                    claim_namespace: pod.namespace.clone(),
                    claim_resources: claim,
                });
            }
        }
    }
    k
}

fn serve(socket: &Path, kubelet: Kubelet) {
    let listener = std::os::unix::net::UnixListener::bind(socket).unwrap();
    listener.set_nonblocking(true).unwrap();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = tokio::net::UnixListener::from_std(listener).unwrap();
            tonic::transport::Server::builder()
                .add_service(pod_resources_lister_server::PodResourcesListerServer::new(
                    kubelet,
                ))
                .serve_with_incoming(tokio_stream::wrappers::UnixListenerStream::new(listener))
                .await
                .unwrap();
        });
    });
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let root = args
        .next()
        .unwrap_or_else(|| "fixtures/h100-dgx/root".to_string());
    let rounds: usize = args.next().map_or(Ok(200), |r| r.parse())?;
    let topo = rdmatopo::discover(Some(Path::new(&root)))?;
    let dir = tempfile::tempdir()?;
    let socket = dir.path().join("kubelet.sock");
    serve(&socket, node(&topo));
    let timeout = Duration::from_secs(5);
    let allocation = kubelet::read(&socket, timeout)?;
    let report = audit(&topo, &allocation, &AuditOptions::default());
    println!(
        "{root}: {} pods, {} containers judged, {} errors, {} warnings",
        report.summary.pods,
        report.summary.containers_judged,
        report.summary.errors,
        report.summary.warnings
    );
    println!(
        "kubelet exchange (List + GetAllocatableResources over the socket): {}",
        time(rounds, || kubelet::read(&socket, timeout).unwrap())
    );
    println!(
        "audit (judge every container): {}",
        time(rounds, || audit(
            &topo,
            &allocation,
            &AuditOptions::default()
        ))
    );
    println!(
        "JSON + Prometheus text: {}",
        time(rounds, || {
            (
                serde_json::to_string_pretty(&report).unwrap(),
                rdmatopo::export::prometheus::audit_metrics(&report),
            )
        })
    );
    println!(
        "all three: {}",
        time(rounds, || {
            let a = kubelet::read(&socket, timeout).unwrap();
            let r = audit(&topo, &a, &AuditOptions::default());
            (
                serde_json::to_string_pretty(&r).unwrap(),
                rdmatopo::export::prometheus::audit_metrics(&r),
            )
        })
    );
    // DRA: the same pods by claims, placed through the node's ResourceSlices.
    let dra_socket = dir.path().join("kubelet-dra.sock");
    serve(&dra_socket, node_dra(&topo, &node(&topo)));
    let slices_json = rdmatopo::export::dra::resource_slices(&topo, "node-a").to_string();
    let dra_allocation = kubelet::read(&dra_socket, timeout)?;
    let dra_opts = |text: &str| AuditOptions {
        resource_slices: Some(rdmatopo::parse::parse_resource_slices(text).unwrap()),
        node_name: Some("node-a".into()),
        ..Default::default()
    };
    let r = audit(&topo, &dra_allocation, &dra_opts(&slices_json));
    println!(
        "DRA: {} pods, {} containers judged, {} errors, {} warnings ({} KiB of slices)",
        r.summary.pods,
        r.summary.containers_judged,
        r.summary.errors,
        r.summary.warnings,
        slices_json.len() / 1024
    );
    println!(
        "DRA audit (parse the slices, judge every container): {}",
        time(rounds, || audit(
            &topo,
            &dra_allocation,
            &dra_opts(&slices_json)
        ))
    );
    println!(
        "DRA all three: {}",
        time(rounds, || {
            let a = kubelet::read(&dra_socket, timeout).unwrap();
            let r = audit(&topo, &a, &dra_opts(&slices_json));
            (
                serde_json::to_string_pretty(&r).unwrap(),
                rdmatopo::export::prometheus::audit_metrics(&r),
            )
        })
    );
    Ok(())
}
