//! The kubelet's PodResources v1 gRPC API, read over its unix socket: `List` (what each
//! container holds) and `GetAllocatableResources` (what the node can hand out).
//!
//! The `.proto` is the kubelet's own (`k8s.io/kubelet/pkg/apis/podresources/v1/api.proto`,
//! vendored unchanged in `rdmatopo/proto/`); its generated code is `podresources_v1.rs`
//! beside this file (scripts/gen-podresources writes it). One call runs on a
//! current-thread tokio runtime made for it, bounded in time (the whole exchange) and
//! in size (each reply), so a kubelet that accepts and never answers, or answers with a
//! flood, costs at most the timeout and [`MAX_REPLY_BYTES`].

use crate::model::allocation::{
    Allocatable, Allocation, ClaimAllocation, ClaimDevice, ContainerAllocation, DeviceAllocation,
    MemoryAllocation, PodAllocation,
};
use hyper_util::rt::TokioIo;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tonic::Code;
use tonic::transport::{Endpoint, Uri};

/// The code generated from the kubelet's `api.proto` (package `v1`): messages, the
/// client, and the server the tests run as a fake kubelet.
#[allow(
    missing_debug_implementations,
    clippy::all,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]
pub mod proto {
    include!("podresources_v1.rs");
}

use proto::pod_resources_lister_client::PodResourcesListerClient;

/// Where the kubelet serves the API (`--pod-resources-socket`'s default).
pub const DEFAULT_SOCKET: &str = "/var/lib/kubelet/pod-resources/kubelet.sock";

/// Largest reply decoded. The kubelet's own limit for this API is 16 MiB
/// (`podresources.DefaultMaxMsgSize` in k8s.io/kubernetes `pkg/kubelet/apis/podresources/client.go`);
/// 110 pods with every device take a few hundred KiB.
pub const MAX_REPLY_BYTES: usize = 16 * 1024 * 1024;

/// Why the kubelet could not be read. Every variant names the socket.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KubeletError {
    #[error("cannot start the gRPC runtime: {0}")]
    Runtime(std::io::Error),
    #[error(
        "{}: cannot reach the kubelet's PodResources socket: {source} (in a pod, mount the host's /var/lib/kubelet/pod-resources read-only)",
        socket.display()
    )]
    Unreachable {
        socket: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: the kubelet did not answer within {:?}", socket.display(), after)]
    Timeout { socket: PathBuf, after: Duration },
    #[error("{}: {call} failed: {code:?}: {message}", socket.display())]
    Rpc {
        socket: PathBuf,
        call: &'static str,
        code: Code,
        message: String,
    },
    #[error("{}: {call} answered {what}", socket.display())]
    Invalid {
        socket: PathBuf,
        call: &'static str,
        what: String,
    },
}

/// Ask the kubelet at `socket` for `List` and `GetAllocatableResources`, all within
/// `timeout`. A kubelet without `GetAllocatableResources` (UNIMPLEMENTED) gives
/// `allocatable: None`.
///
/// # Errors
/// The socket cannot be reached, the exchange outlasts `timeout`, a call fails, or a
/// reply is larger than [`MAX_REPLY_BYTES`] or holds impossible values.
pub fn read(socket: &Path, timeout: Duration) -> Result<Allocation, KubeletError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
        .map_err(KubeletError::Runtime)?;
    runtime.block_on(async {
        match tokio::time::timeout(timeout, query(socket)).await {
            Ok(result) => result,
            Err(_) => Err(KubeletError::Timeout {
                socket: socket.to_path_buf(),
                after: timeout,
            }),
        }
    })
}

async fn query(socket: &Path) -> Result<Allocation, KubeletError> {
    // Connect first, so an unreachable socket is reported with the OS's reason rather
    // than tonic's "transport error".
    let stream = tokio::net::UnixStream::connect(socket)
        .await
        .map_err(|source| KubeletError::Unreachable {
            socket: socket.to_path_buf(),
            source,
        })?;
    let slot = Arc::new(Mutex::new(Some(stream)));
    let connector = tower::service_fn(move |_: Uri| {
        let taken = slot.lock().ok().and_then(|mut s| s.take());
        async move {
            taken.map(TokioIo::new).ok_or_else(|| {
                std::io::Error::new(
                    std::io::ErrorKind::NotConnected,
                    "the kubelet closed the connection",
                )
            })
        }
    });
    // The URI is required by the API and ignored: the connector dials the socket.
    let channel = Endpoint::from_static("http://localhost")
        .connect_with_connector(connector)
        .await
        .map_err(|e| KubeletError::Unreachable {
            socket: socket.to_path_buf(),
            source: std::io::Error::other(e),
        })?;
    let mut client =
        PodResourcesListerClient::new(channel).max_decoding_message_size(MAX_REPLY_BYTES);
    let rpc = |call: &'static str| {
        move |status: tonic::Status| KubeletError::Rpc {
            socket: socket.to_path_buf(),
            call,
            code: status.code(),
            message: status.message().to_string(),
        }
    };
    let list = client
        .list(proto::ListPodResourcesRequest {})
        .await
        .map_err(rpc("List"))?
        .into_inner();
    let pods = pods_of(list).map_err(|what| KubeletError::Invalid {
        socket: socket.to_path_buf(),
        call: "List",
        what,
    })?;
    let allocatable = match client
        .get_allocatable_resources(proto::AllocatableResourcesRequest {})
        .await
    {
        Ok(reply) => {
            Some(
                allocatable_of(reply.into_inner()).map_err(|what| KubeletError::Invalid {
                    socket: socket.to_path_buf(),
                    call: "GetAllocatableResources",
                    what,
                })?,
            )
        }
        Err(status) if status.code() == Code::Unimplemented => None,
        Err(status) => return Err(rpc("GetAllocatableResources")(status)),
    };
    Ok(Allocation { pods, allocatable })
}

/// A CPU or NUMA id as the model holds it (the proto's `int64`).
fn id(value: i64, what: &str) -> Result<u32, String> {
    u32::try_from(value).map_err(|_| format!("{what} {value}"))
}

fn ids(values: &[i64], what: &str) -> Result<Vec<u32>, String> {
    values.iter().map(|v| id(*v, what)).collect()
}

fn numa(topology: Option<&proto::TopologyInfo>) -> Result<Option<Vec<u32>>, String> {
    topology
        .map(|t| t.nodes.iter().map(|n| id(n.id, "NUMA node")).collect())
        .transpose()
}

fn devices(list: &[proto::ContainerDevices]) -> Result<Vec<DeviceAllocation>, String> {
    list.iter()
        .map(|d| {
            Ok(DeviceAllocation {
                resource_name: d.resource_name.clone(),
                device_ids: d.device_ids.clone(),
                numa_nodes: numa(d.topology.as_ref())?,
            })
        })
        .collect()
}

fn memory(list: &[proto::ContainerMemory]) -> Result<Vec<MemoryAllocation>, String> {
    list.iter()
        .map(|m| {
            Ok(MemoryAllocation {
                memory_type: m.memory_type.clone(),
                size: m.size,
                numa_nodes: numa(m.topology.as_ref())?,
            })
        })
        .collect()
}

fn claims(list: &[proto::DynamicResource]) -> Vec<ClaimAllocation> {
    list.iter()
        .map(|c| ClaimAllocation {
            claim_name: c.claim_name.clone(),
            claim_namespace: c.claim_namespace.clone(),
            devices: c
                .claim_resources
                .iter()
                .map(|r| ClaimDevice {
                    driver_name: r.driver_name.clone(),
                    pool_name: r.pool_name.clone(),
                    device_name: r.device_name.clone(),
                    cdi_devices: r.cdi_devices.iter().map(|d| d.name.clone()).collect(),
                })
                .collect(),
        })
        .collect()
}

/// The `List` reply as the model holds it.
///
/// # Errors
/// A negative (or too large) CPU or NUMA id, naming it.
pub fn pods_of(reply: proto::ListPodResourcesResponse) -> Result<Vec<PodAllocation>, String> {
    reply
        .pod_resources
        .iter()
        .map(|p| {
            Ok(PodAllocation {
                namespace: p.namespace.clone(),
                name: p.name.clone(),
                cpu_ids: ids(&p.cpu_ids, "CPU id")?,
                containers: p
                    .containers
                    .iter()
                    .map(|c| {
                        Ok(ContainerAllocation {
                            name: c.name.clone(),
                            devices: devices(&c.devices)?,
                            cpu_ids: ids(&c.cpu_ids, "CPU id")?,
                            memory: memory(&c.memory)?,
                            dynamic_resources: claims(&c.dynamic_resources),
                        })
                    })
                    .collect::<Result<_, String>>()?,
            })
        })
        .collect()
}

/// The `GetAllocatableResources` reply as the model holds it.
///
/// # Errors
/// A negative (or too large) CPU or NUMA id, naming it.
pub fn allocatable_of(reply: proto::AllocatableResourcesResponse) -> Result<Allocatable, String> {
    Ok(Allocatable {
        devices: devices(&reply.devices)?,
        cpu_ids: ids(&reply.cpu_ids, "CPU id")?,
        memory: memory(&reply.memory)?,
    })
}

#[cfg(test)]
mod tests {
    /// The generated code is the vendored `.proto`'s: its header records the CRC-32 of
    /// the `.proto` it was generated from (scripts/gen-podresources writes both).
    #[test]
    fn generated_code_is_the_vendored_protos() {
        let mut crc = flate2::Crc::new();
        crc.update(include_bytes!(
            "../../proto/kubelet/podresources/v1/api.proto"
        ));
        let want = format!("(proto CRC-32 {:#010x})", crc.sum());
        let code = include_str!("podresources_v1.rs");
        assert!(
            code.lines().take(2).any(|l| l.contains(&want)),
            "src/sources/podresources_v1.rs was not generated from the vendored api.proto \
             ({want}): run cargo run --manifest-path scripts/gen-podresources/Cargo.toml"
        );
    }
}
