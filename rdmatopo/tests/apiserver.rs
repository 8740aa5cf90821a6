//! `rdmatopo k8s audit --api-server` against a double of the Kubernetes API server: a
//! plain HTTP/1.1 server on a loopback TCP socket, which the real `kube` client reaches
//! through a kubeconfig file. It answers as kube-apiserver does:
//! - `GET /apis/resource.k8s.io/v1/resourceslices` with a `ResourceSliceList`
//!   (`apiVersion: resource.k8s.io/v1`, `metadata.resourceVersion`), honouring the
//!   `fieldSelector` on `spec.nodeName` (`ResourceSliceSelectorNodeName`, k8s.io/api
//!   resource/v1/types.go);
//! - a refused verb with the 403 `Status` the authorizer's rejection writes
//!   (`<resource>.<group> is forbidden: User "..." cannot list resource "..." in API
//!   group "..." at the cluster scope`, k8s.io/apiserver
//!   `pkg/endpoints/handlers/responsewriters/errors.go` `ForbiddenStatusError`);
//! - an API group it does not serve with the 404 `Status` "the server could not find
//!   the requested resource" (k8s.io/apimachinery `errors.NewNotFound`-style NotFound);
//! - or accepts and never answers.
#![cfg(feature = "apiserver")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use rdmatopo::export::dra;
use rdmatopo::model::allocation::{
    Allocation, ClaimAllocation, ClaimDevice, ContainerAllocation, DeviceAllocation, PodAllocation,
};
use rdmatopo::view::dra::{DraDriver, gpu_devices, nic_devices};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const TOKEN: &str = "double-token";

#[derive(Clone)]
enum Answer {
    /// Every slice of the cluster; the double filters by the field selector.
    Slices(Vec<Value>),
    Forbidden,
    NotServed,
    Silent,
}

struct Double {
    port: u16,
    /// The request targets (path and query) it was asked for.
    asked: Arc<Mutex<Vec<String>>>,
}

fn status(code: u16, reason: &str, message: &str, details: Value) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
           "message": message, "reason": reason, "details": details, "code": code})
}

/// The value of `key` in a query string, percent-decoded.
fn query_param(query: &str, key: &str) -> Option<String> {
    query.split('&').find_map(|kv| {
        let (k, v) = kv.split_once('=')?;
        (k == key).then(|| {
            let mut out = Vec::new();
            let b = v.as_bytes();
            let mut i = 0;
            while i < b.len() {
                if b[i] == b'%' && i + 2 < b.len() {
                    let hex = std::str::from_utf8(&b[i + 1..i + 3]).unwrap();
                    out.push(u8::from_str_radix(hex, 16).unwrap());
                    i += 3;
                } else {
                    out.push(if b[i] == b'+' { b' ' } else { b[i] });
                    i += 1;
                }
            }
            String::from_utf8(out).unwrap()
        })
    })
}

fn respond(stream: &mut TcpStream, code: u16, text: &str, body: &Value) {
    let body = body.to_string();
    let _ = write!(
        stream,
        "HTTP/1.1 {code} {text}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.flush();
}

fn handle(mut stream: TcpStream, answer: &Answer, asked: &Mutex<Vec<String>>) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut request_line = String::new();
    if reader.read_line(&mut request_line).is_err() {
        return;
    }
    let mut authorization = None;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
            break;
        }
        if let Some((k, v)) = line.split_once(':')
            && k.eq_ignore_ascii_case("authorization")
        {
            authorization = Some(v.trim().to_string());
        }
    }
    let target = request_line
        .split_whitespace()
        .nth(1)
        .unwrap_or("")
        .to_string();
    asked.lock().unwrap().push(target.clone());
    if let Answer::Silent = answer {
        // Hold the connection open, answering nothing, until the client gives up.
        std::thread::sleep(Duration::from_secs(30));
        return;
    }
    if authorization.as_deref() != Some(&format!("Bearer {TOKEN}")) {
        let body = status(401, "Unauthorized", "Unauthorized", json!({}));
        return respond(&mut stream, 401, "Unauthorized", &body);
    }
    let (path, query) = target.split_once('?').unwrap_or((&target, ""));
    match answer {
        Answer::Slices(items) if path == "/apis/resource.k8s.io/v1/resourceslices" => {
            let selector = query_param(query, "fieldSelector");
            let node = selector
                .as_deref()
                .and_then(|s| s.strip_prefix("spec.nodeName="));
            let items: Vec<&Value> = items
                .iter()
                .filter(|s| node.is_none_or(|n| s["spec"]["nodeName"] == n))
                .collect();
            let body = json!({"kind": "ResourceSliceList", "apiVersion": "resource.k8s.io/v1",
                              "metadata": {"resourceVersion": "48213"}, "items": items});
            respond(&mut stream, 200, "OK", &body);
        }
        Answer::Forbidden => {
            let body = status(
                403,
                "Forbidden",
                "resourceslices.resource.k8s.io is forbidden: User \"system:serviceaccount:rdmatopo:rdmatopo\" cannot list resource \"resourceslices\" in API group \"resource.k8s.io\" at the cluster scope",
                json!({"group": "resource.k8s.io", "kind": "resourceslices"}),
            );
            respond(&mut stream, 403, "Forbidden", &body);
        }
        _ => {
            let body = status(
                404,
                "NotFound",
                "the server could not find the requested resource",
                json!({}),
            );
            respond(&mut stream, 404, "Not Found", &body);
        }
    }
}

/// Serve `answer` on a loopback port from a thread for the rest of the test.
fn serve(answer: Answer) -> Double {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let asked = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&asked);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            let answer = answer.clone();
            let log = Arc::clone(&log);
            std::thread::spawn(move || handle(stream, &answer, &log));
        }
    });
    Double { port, asked }
}

/// A kubeconfig naming `server` with a bearer token.
fn kubeconfig(dir: &Path, server: &str) -> PathBuf {
    let path = dir.join("kubeconfig");
    let text = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: double\n  cluster:\n    server: {server}\n\
         contexts:\n- name: double\n  context:\n    cluster: double\n    user: audit\n\
         current-context: double\nusers:\n- name: audit\n  user:\n    token: {TOKEN}\n"
    );
    std::fs::write(&path, text).unwrap();
    path
}

struct Node {
    root: PathBuf,
    allocation: PathBuf,
    /// Both nodes' slices, as the drivers publish them.
    slices: Vec<Value>,
    gpu: String,
    gpu_pci: String,
    vf: String,
    vf_pci: String,
    _tmp: tempfile::TempDir,
}

fn claim_pod(name: &str, pool: &str, devices: &[(&str, &str)]) -> PodAllocation {
    PodAllocation {
        namespace: "ml".into(),
        name: name.into(),
        containers: vec![ContainerAllocation {
            name: "main".into(),
            dynamic_resources: vec![ClaimAllocation {
                claim_name: format!("{name}-gpu-nic"),
                claim_namespace: "ml".into(),
                devices: devices
                    .iter()
                    .map(|(driver, device)| ClaimDevice {
                        driver_name: (*driver).into(),
                        pool_name: pool.into(),
                        device_name: (*device).into(),
                        cdi_devices: Vec::new(),
                    })
                    .collect(),
            }],
            ..Default::default()
        }],
        cpu_ids: Vec::new(),
    }
}

/// An SR-IOV H100 node `node-a` whose pods hold: an aligned GPU+VF claim, a claim of
/// a device no slice publishes, a claim from another node's pool, and a device-plugin
/// GPU (judged whatever the API server says).
fn node() -> Node {
    let root = support::root("host-h100-sriov");
    let topo = support::discover(&root);
    let mut slices = Vec::new();
    for n in ["node-a", "node-b"] {
        let list = dra::resource_slices(&topo, n);
        slices.extend(list["items"].as_array().unwrap().iter().cloned());
    }
    let gpus = gpu_devices(&topo);
    let vfs = nic_devices(&topo, DraDriver::Sriov);
    let (g, vf) = (&gpus[0], &vfs[0]);
    let gpu_driver = DraDriver::NvidiaGpu.name();
    let nic_driver = DraDriver::Sriov.name();
    let mut plugin = claim_pod("plugin", "node-a", &[]);
    plugin.containers[0].dynamic_resources.clear();
    plugin.containers[0].devices = vec![DeviceAllocation {
        resource_name: "nvidia.com/gpu".into(),
        device_ids: vec![topo.gpus[1].uuid.clone().unwrap()],
        numa_nodes: None,
    }];
    let alloc = Allocation {
        pods: vec![
            claim_pod(
                "aligned",
                "node-a",
                &[(gpu_driver, &g.name), (nic_driver, &vf.name)],
            ),
            claim_pod("stale", "node-a", &[(gpu_driver, "gpu-99")]),
            claim_pod("elsewhere", "node-b", &[(gpu_driver, &g.name)]),
            plugin,
        ],
        allocatable: None,
    };
    let tmp = tempfile::tempdir().unwrap();
    let allocation = tmp.path().join("allocation.json");
    std::fs::write(&allocation, serde_json::to_vec(&alloc).unwrap()).unwrap();
    Node {
        root,
        allocation,
        slices,
        gpu: g.name.clone(),
        gpu_pci: g.pci.to_string(),
        vf: vf.name.clone(),
        vf_pci: vf.pci.to_string(),
        _tmp: tmp,
    }
}

/// `k8s audit --api-server` with the kubeconfig `kubeconfig` (none: no KUBECONFIG, no
/// ~/.kube/config, no in-cluster variables).
fn audit(node: &Node, kubeconfig: Option<&Path>, extra: &[&str]) -> Output {
    let home = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_rdmatopo"));
    cmd.args(["k8s", "audit", "--api-server"])
        .arg("--root")
        .arg(&node.root)
        .arg("--allocation")
        .arg(&node.allocation)
        .args(extra)
        .env("HOME", home.path())
        .env_remove("KUBECONFIG")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env_remove("KUBERNETES_SERVICE_PORT")
        .env_remove("NODE_NAME");
    if let Some(k) = kubeconfig {
        cmd.env("KUBECONFIG", k);
    }
    cmd.output().unwrap()
}

fn report(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

fn container<'a>(report: &'a Value, pod: &str) -> &'a Value {
    report["pods"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == pod)
        .map(|p| &p["containers"][0])
        .unwrap_or_else(|| panic!("no pod {pod}: {report:#}"))
}

fn summaries(c: &Value, check: &str) -> Vec<String> {
    c["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["check"] == check)
        .map(|f| f["summary"].as_str().unwrap().to_string())
        .collect()
}

fn samples(text: &str) -> Vec<prometheus_parse::Sample> {
    let lines = text.lines().map(|l| Ok(l.to_string()));
    prometheus_parse::Scrape::parse(lines).unwrap().samples
}

fn source_up(samples: &[prometheus_parse::Sample], source: &str) -> Option<f64> {
    samples
        .iter()
        .find(|s| s.metric == "rdmatopo_audit_source_up" && s.labels.get("source") == Some(source))
        .and_then(|s| match s.value {
            prometheus_parse::Value::Gauge(v) => Some(v),
            _ => None,
        })
}

fn gauge(samples: &[prometheus_parse::Sample], name: &str) -> Option<f64> {
    samples
        .iter()
        .find(|s| s.metric == name)
        .and_then(|s| match s.value {
            prometheus_parse::Value::Gauge(v) => Some(v),
            _ => None,
        })
}

#[test]
fn live_slices_place_claimed_devices_and_the_list_asks_for_this_node_only() {
    let node = node();
    let double = serve(Answer::Slices(node.slices.clone()));
    let tmp = tempfile::tempdir().unwrap();
    let config = kubeconfig(tmp.path(), &format!("http://127.0.0.1:{}", double.port));
    let out = audit(
        &node,
        Some(&config),
        &["--node-name", "node-a", "--format", "json"],
    );
    let r = report(&out);
    // The one request: the v1 list with this node's field selector.
    let asked = double.asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 1, "{asked:?}");
    let (path, query) = asked[0].split_once('?').unwrap();
    assert_eq!(path, "/apis/resource.k8s.io/v1/resourceslices");
    assert_eq!(
        query_param(query, "fieldSelector").as_deref(),
        Some("spec.nodeName=node-a")
    );
    // Placed by the slices' PCI addresses and named by the claim.
    let aligned = container(&r, "aligned");
    assert_eq!(aligned["gpus"][0]["pci"], node.gpu_pci.as_str());
    assert_eq!(aligned["gpus"][0]["resource"], "claim ml/aligned-gpu-nic");
    assert_eq!(aligned["nics"][0]["pci"], node.vf_pci.as_str());
    assert_eq!(aligned["nics"][0]["resource"], "claim ml/aligned-gpu-nic");
    // A device no slice of this node publishes, and one of another node's pool.
    let stale = summaries(container(&r, "stale"), "unknown-device");
    assert!(
        stale
            .iter()
            .any(|s| s.contains("gpu.nvidia.com/node-a/gpu-99 is in no ResourceSlice")),
        "{stale:?}"
    );
    let elsewhere = summaries(container(&r, "elsewhere"), "unknown-device");
    assert!(
        elsewhere.iter().any(|s| s.contains(&format!(
            "gpu.nvidia.com/node-b/{} is in no ResourceSlice",
            node.gpu
        ))),
        "{elsewhere:?}"
    );
    // The device-plugin pod is judged too.
    assert_eq!(container(&r, "plugin")["gpus"].as_array().unwrap().len(), 1);
    assert!(!node.vf.is_empty());

    let out = audit(
        &node,
        Some(&config),
        &["--node-name", "node-a", "--format", "prometheus"],
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let s = samples(&text);
    assert_eq!(source_up(&s, "api-server"), Some(1.0), "{text}");
    assert_eq!(gauge(&s, "rdmatopo_audit_up"), Some(1.0), "{text}");
    // The metrics name the claim each pod's devices came from.
    let claim = s
        .iter()
        .find(|x| {
            x.metric == "rdmatopo_audit_container_claim_devices"
                && x.labels.get("pod") == Some("aligned")
        })
        .unwrap_or_else(|| panic!("no claim series: {text}"));
    assert_eq!(claim.labels.get("claim"), Some("ml/aligned-gpu-nic"));
    assert!(matches!(claim.value, prometheus_parse::Value::Gauge(v) if v == 2.0));
}

#[test]
fn a_forbidden_list_names_the_missing_rbac_rule_and_the_pods_are_still_judged() {
    let node = node();
    let double = serve(Answer::Forbidden);
    let tmp = tempfile::tempdir().unwrap();
    let server = format!("http://127.0.0.1:{}", double.port);
    let config = kubeconfig(tmp.path(), &server);
    let out = audit(
        &node,
        Some(&config),
        &["--node-name", "node-a", "--format", "json"],
    );
    assert_eq!(out.status.code(), Some(3));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&server)
            && err.contains("forbidden")
            && err.contains("`list` verb on `resourceslices` in API group `resource.k8s.io`"),
        "{err}"
    );
    // Judged without the slices: the device-plugin pod as ever, the claims as names.
    let r = report(&out);
    assert_eq!(container(&r, "plugin")["gpus"].as_array().unwrap().len(), 1);
    assert_eq!(r["pods"].as_array().unwrap().len(), 4);

    let out = audit(
        &node,
        Some(&config),
        &["--node-name", "node-a", "--format", "prometheus"],
    );
    assert_eq!(out.status.code(), Some(3));
    let text = String::from_utf8(out.stdout).unwrap();
    let s = samples(&text);
    assert_eq!(source_up(&s, "api-server"), Some(0.0), "{text}");
    assert_eq!(source_up(&s, "allocation-file"), Some(1.0), "{text}");
    assert_eq!(gauge(&s, "rdmatopo_audit_up"), Some(0.0), "{text}");
    assert!(!text.contains("pod=\""), "no pod series when down: {text}");
}

#[test]
fn an_api_server_that_never_answers_costs_the_timeout() {
    let node = node();
    let double = serve(Answer::Silent);
    let tmp = tempfile::tempdir().unwrap();
    let server = format!("http://127.0.0.1:{}", double.port);
    let config = kubeconfig(tmp.path(), &server);
    let start = Instant::now();
    let out = audit(
        &node,
        Some(&config),
        &[
            "--node-name",
            "node-a",
            "--timeout",
            "1s",
            "--format",
            "json",
        ],
    );
    let took = start.elapsed();
    assert!(took < Duration::from_secs(10), "took {took:?}");
    assert_eq!(out.status.code(), Some(3));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&server) && err.contains("did not answer within 1s"),
        "{err}"
    );
    assert_eq!(double.asked.lock().unwrap().len(), 1);
    assert_eq!(report(&out)["pods"].as_array().unwrap().len(), 4);
}

#[test]
fn an_api_server_that_is_down_is_named() {
    let node = node();
    // A port that was just free: nothing listens there.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let tmp = tempfile::tempdir().unwrap();
    let server = format!("http://127.0.0.1:{port}");
    let config = kubeconfig(tmp.path(), &server);
    let out = audit(
        &node,
        Some(&config),
        &["--node-name", "node-a", "--format", "json"],
    );
    assert_eq!(out.status.code(), Some(3));
    let err = String::from_utf8_lossy(&out.stderr).to_lowercase();
    assert!(
        err.contains(&server) && err.contains("cannot reach the api server"),
        "{err}"
    );
    assert!(err.contains("refused"), "the OS's reason: {err}");
}

#[test]
fn a_cluster_without_resource_k8s_io_v1_is_not_an_outage() {
    let node = node();
    let double = serve(Answer::NotServed);
    let tmp = tempfile::tempdir().unwrap();
    let config = kubeconfig(tmp.path(), &format!("http://127.0.0.1:{}", double.port));
    let out = audit(
        &node,
        Some(&config),
        &["--node-name", "node-a", "--format", "prometheus"],
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let s = samples(&text);
    assert_eq!(source_up(&s, "api-server"), Some(1.0), "{text}");
    assert_eq!(gauge(&s, "rdmatopo_audit_up"), Some(1.0), "{text}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("serves no resource.k8s.io/v1 ResourceSlices"),
        "{err}"
    );
}

#[test]
fn without_a_node_name_or_a_configuration_the_error_says_what_is_missing() {
    let node = node();
    let out = audit(&node, None, &["--format", "json"]);
    assert_eq!(out.status.code(), Some(3));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--api-server needs the node's name"), "{err}");

    let out = audit(&node, None, &["--node-name", "node-a", "--format", "json"]);
    assert_eq!(out.status.code(), Some(3));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no Kubernetes API server configured") && err.contains("KUBECONFIG"),
        "{err}"
    );
}
