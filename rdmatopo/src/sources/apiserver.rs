//! The node's ResourceSlices (`resource.k8s.io/v1`) from the Kubernetes API server,
//! with kube's client: one `list` with the field selector `spec.nodeName=<node>`
//! (`ResourceSliceSelectorNodeName` in k8s.io/api `resource/v1/types.go`), so a node
//! reads its own slices only.
//!
//! A list per audit round, not a watch: a round runs once a minute in a fresh process
//! state, and a list with a field selector is served from the API server's watch cache.
//! The configuration is kube's `Config::infer`: `KUBECONFIG` (or `~/.kube/config`),
//! else the pod's service account. The whole exchange, configuration included, is
//! bounded by one timeout, so an API server that accepts and never answers costs at
//! most that.

use crate::parse::SliceDevice;
use k8s_openapi::api::resource::v1::{DeviceAttribute, ResourceSlice};
use kube::api::{Api, ListParams};
use std::collections::BTreeMap;
use std::time::Duration;

/// The resource and group RBAC must grant (deploy/base/rbac.yaml).
pub const RESOURCE: &str = "resourceslices";
pub const GROUP: &str = "resource.k8s.io";

/// Why the API server's ResourceSlices could not be read. Every variant names the
/// server, or says that none was configured.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ApiServerError {
    #[error("cannot start the client's runtime: {0}")]
    Runtime(std::io::Error),
    #[error(
        "no Kubernetes API server configured: {0} (set KUBECONFIG, or run in a pod with a service account token)"
    )]
    Config(String),
    #[error("{server}: cannot reach the API server: {reason}")]
    Unreachable { server: String, reason: String },
    #[error("{server}: the API server did not answer within {after:?}")]
    Timeout { server: String, after: Duration },
    #[error(
        "{server}: forbidden: {message} (grant the `{verb}` verb on `{RESOURCE}` in API group `{GROUP}` to this service account: deploy/base/rbac.yaml)"
    )]
    Forbidden {
        server: String,
        verb: &'static str,
        message: String,
    },
    #[error(
        "{server}: unauthorized: {message} (the client's credentials were refused: an expired token or a wrong kubeconfig user)"
    )]
    Unauthorized { server: String, message: String },
    #[error("{server}: listing {RESOURCE}.{GROUP}/v1 failed: HTTP {code} {reason}: {message}")]
    Api {
        server: String,
        code: u16,
        reason: String,
        message: String,
    },
    #[error("{server}: the answer is not a ResourceSliceList: {reason}")]
    Invalid { server: String, reason: String },
}

/// The ResourceSlices of `node`, as devices. `Ok(None)` when the API server serves no
/// `resource.k8s.io/v1` (before Kubernetes 1.34, or with the API group turned off):
/// no claim can then hold a device a v1 slice publishes.
///
/// # Errors
/// No configuration, the server cannot be reached or outlasts `timeout`, refuses
/// the credentials or the verb (403, naming the RBAC rule missing), or answers
/// something else than a list.
pub fn read(node: &str, timeout: Duration) -> Result<Option<Vec<SliceDevice>>, ApiServerError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
        .map_err(ApiServerError::Runtime)?;
    runtime.block_on(async {
        let mut config = kube::Config::infer()
            .await
            .map_err(|e| ApiServerError::Config(e.to_string()))?;
        let server = config.cluster_url.to_string();
        config.connect_timeout = Some(timeout);
        config.read_timeout = Some(timeout);
        config.write_timeout = Some(timeout);
        match tokio::time::timeout(timeout, list(config, node, &server)).await {
            Ok(result) => result,
            Err(_) => Err(ApiServerError::Timeout {
                server,
                after: timeout,
            }),
        }
    })
}

async fn list(
    config: kube::Config,
    node: &str,
    server: &str,
) -> Result<Option<Vec<SliceDevice>>, ApiServerError> {
    let client = kube::Client::try_from(config).map_err(|e| ApiServerError::Unreachable {
        server: server.into(),
        reason: e.to_string(),
    })?;
    let api: Api<ResourceSlice> = Api::all(client);
    let params = ListParams::default().fields(&format!("spec.nodeName={node}"));
    match api.list(&params).await {
        Ok(list) => Ok(Some(list.items.iter().flat_map(devices).collect())),
        Err(e) => classify(e, server),
    }
}

fn classify(e: kube::Error, server: &str) -> Result<Option<Vec<SliceDevice>>, ApiServerError> {
    let server = server.to_string();
    Err(match e {
        kube::Error::Api(status) => match status.code {
            // The group or version is not served: the API server's own 404 for an
            // unknown resource path (a Status with reason NotFound).
            404 => return Ok(None),
            403 => ApiServerError::Forbidden {
                server,
                verb: "list",
                message: status.message,
            },
            401 => ApiServerError::Unauthorized {
                server,
                message: status.message,
            },
            code => ApiServerError::Api {
                server,
                code,
                reason: status.reason,
                message: status.message,
            },
        },
        kube::Error::SerdeError(e) => ApiServerError::Invalid {
            server,
            reason: e.to_string(),
        },
        other => ApiServerError::Unreachable {
            server,
            reason: chain(&other),
        },
    })
}

/// An error with its causes, which name the OS's reason (connection refused, ...).
fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let s = c.to_string();
        if !text.contains(&s) {
            text.push_str(": ");
            text.push_str(&s);
        }
        cause = c.source();
    }
    text
}

/// A slice's devices with their attributes by qualified name, as
/// [`crate::parse::parse_resource_slices`] gives them from a file.
fn devices(slice: &ResourceSlice) -> Vec<SliceDevice> {
    let spec = &slice.spec;
    spec.devices
        .iter()
        .flatten()
        .map(|d| SliceDevice {
            driver: spec.driver.clone(),
            pool: spec.pool.name.clone(),
            name: d.name.clone(),
            node: spec.node_name.clone(),
            attributes: attributes(&spec.driver, d.attributes.as_ref()),
        })
        .collect()
}

fn attributes(
    driver: &str,
    attrs: Option<&BTreeMap<String, DeviceAttribute>>,
) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for (k, v) in attrs.into_iter().flatten() {
        // An attribute name without a domain is in the driver's own.
        let key = if k.contains('/') {
            k.clone()
        } else {
            format!("{driver}/{k}")
        };
        let text = match v {
            DeviceAttribute {
                string: Some(s), ..
            } => s.clone(),
            DeviceAttribute { int: Some(i), .. } => i.to_string(),
            DeviceAttribute { bool: Some(b), .. } => b.to_string(),
            DeviceAttribute {
                version: Some(s), ..
            } => s.clone(),
            // List values (KEP-5491) are not PCI identities.
            _ => continue,
        };
        out.insert(key, text);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The typed path gives what the file parser gives for the same JSON.
    #[test]
    fn typed_slices_give_the_file_parsers_devices() {
        let text = r#"{"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice","metadata":{"name":"n1-gpu"},
          "spec":{"driver":"gpu.nvidia.com","nodeName":"n1","pool":{"name":"n1","generation":1,"resourceSliceCount":1},
          "devices":[{"name":"gpu-0","attributes":{"type":{"string":"gpu"},"resource.kubernetes.io/pciBusID":{"string":"0000:18:00.0"},
          "resource.kubernetes.io/numaNode":{"int":0},"cudaComputeCapability":{"version":"9.0.0"},"x":{"bool":true}}}]}}"#;
        let slice: ResourceSlice = serde_json::from_str(text).unwrap();
        assert_eq!(
            devices(&slice),
            crate::parse::parse_resource_slices(text).unwrap()
        );
    }
}
