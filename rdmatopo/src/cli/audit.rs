//! `rdmatopo k8s audit`: every pod on the node judged against the node's topology,
//! from the kubelet's PodResources API.

use super::EXIT_FAILURE;
use super::args::RootArgs;
use super::output::{Output, json};
use crate::checks::audit::{self, AuditOptions, AuditReport};
use crate::export::k8s::SharedDevPluginConfig;
use crate::export::prometheus::{self, AuditRound, SourceRead};
use crate::model::Severity;
use crate::model::allocation::Allocation;
use crate::parse::SliceDevice;
use crate::sources::{apiserver, kubelet};
use clap::{Args, ValueEnum};
use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuditFormat {
    Table,
    Json,
    /// Prometheus text format (for node-exporter's textfile collector).
    Prometheus,
}

#[derive(Args, Debug)]
pub struct AuditArgs {
    /// The node's topology: in the DaemonSet, the host's / mounted read-only.
    #[command(flatten)]
    pub root: RootArgs,
    /// The kubelet's PodResources socket.
    #[arg(long, value_name = "PATH", default_value = kubelet::DEFAULT_SOCKET)]
    pub pod_resources_socket: PathBuf,
    /// Read the kubelet's answer from FILE instead of the socket: a report of
    /// `--format json --with-allocation`, or its `allocation` object alone.
    #[arg(long, value_name = "FILE", conflicts_with = "pod_resources_socket")]
    pub allocation: Option<PathBuf>,
    /// Give up on the kubelet, and on the API server, after this long (each whole
    /// exchange).
    #[arg(long, value_name = "DURATION", default_value = "5s")]
    pub timeout: humantime::Duration,
    #[arg(long, value_enum, default_value = "table")]
    pub format: AuditFormat,
    /// k8s-rdma-shared-dev-plugin's config.json, to map its pools to the HCAs their
    /// selectors pick (by default, the names `rdmatopo k8s rdma-shared-dev-plugin` writes).
    #[arg(long, value_name = "FILE")]
    pub rdma_shared_config: Option<PathBuf>,
    /// The node's ResourceSlices (`kubectl get resourceslices -o json`), to place the
    /// devices of DRA claims by the PCI address their driver publishes; with
    /// --node-name, other nodes' slices are told apart.
    #[arg(long, value_name = "FILE")]
    pub resource_slices: Option<PathBuf>,
    /// Read this node's ResourceSlices from the Kubernetes API server instead (a list
    /// with the field selector spec.nodeName=NAME; KUBECONFIG, else the pod's
    /// service account; needs --node-name).
    #[arg(long, conflicts_with = "resource_slices")]
    pub api_server: bool,
    /// The node's name, for the report and the API server's field selector (the
    /// DaemonSet passes spec.nodeName).
    #[arg(long, env = "NODE_NAME", value_name = "NAME")]
    pub node_name: Option<String>,
    /// Also put the kubelet's answer in the JSON report (`allocation`), so it can be
    /// judged again offline with --allocation.
    #[arg(long)]
    pub with_allocation: bool,
    /// Write the output to FILE (through a dot file and a rename) instead of printing
    /// it; for node-exporter's textfile collector, a `*.prom` file in its directory.
    #[arg(long, value_name = "FILE")]
    pub write: Option<PathBuf>,
    /// With --write: audit again every SECONDS, for ever (a DaemonSet's loop).
    #[arg(long, value_name = "SECONDS", requires = "write", value_parser = clap::value_parser!(u64).range(1..))]
    pub interval: Option<u64>,
}

fn allocation(a: &AuditArgs) -> Result<Allocation, String> {
    if let Some(path) = &a.allocation {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let mut value: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        // A report made with --with-allocation carries the answer under `allocation`.
        if value.get("schema").and_then(|s| s.as_str()) == Some(audit::SCHEMA) {
            value = value
                .get_mut("allocation")
                .map(serde_json::Value::take)
                .ok_or_else(|| {
                    format!(
                        "{}: this audit report holds no `allocation` (made without --with-allocation)",
                        path.display()
                    )
                })?;
        }
        return serde_json::from_value(value).map_err(|e| format!("{}: {e}", path.display()));
    }
    kubelet::read(&a.pod_resources_socket, a.timeout.into()).map_err(|e| e.to_string())
}

fn options(a: &AuditArgs) -> Result<AuditOptions, String> {
    let mut opts = shared_options(a)?;
    if let Some(path) = &a.resource_slices {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let slices = crate::parse::parse_resource_slices(&text)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        opts.resource_slices = Some(slices);
        opts.node_name = a.node_name.clone();
    }
    Ok(opts)
}

fn shared_options(a: &AuditArgs) -> Result<AuditOptions, String> {
    let Some(path) = &a.rdma_shared_config else {
        return Ok(AuditOptions::default());
    };
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let config: SharedDevPluginConfig =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    config.validate().map_err(|e| {
        format!(
            "{}: {e} (the plugin exits on such a config)",
            path.display()
        )
    })?;
    Ok(AuditOptions {
        shared_pools: Some(config.pools()),
        ..Default::default()
    })
}

/// The node's ResourceSlices from the API server: `Ok(None)` where it serves no
/// `resource.k8s.io/v1` (no DRA claim can then be placed by a slice).
fn api_slices(a: &AuditArgs) -> Result<Option<Vec<SliceDevice>>, String> {
    let node = a.node_name.as_deref().filter(|n| !n.is_empty()).ok_or(
        "--api-server needs the node's name (--node-name, or NODE_NAME from the pod's spec.nodeName)",
    )?;
    apiserver::read(node, a.timeout.into()).map_err(|e| e.to_string())
}

/// The sources a round needs, none read yet.
fn required(a: &AuditArgs) -> Vec<SourceRead> {
    let mut sources = vec![SourceRead {
        source: "sysfs",
        read: false,
    }];
    if a.rdma_shared_config.is_some() {
        sources.push(SourceRead {
            source: "rdma-shared-config",
            read: false,
        });
    }
    sources.push(SourceRead {
        source: if a.allocation.is_some() {
            "allocation-file"
        } else {
            "kubelet"
        },
        read: false,
    });
    if a.api_server {
        sources.push(SourceRead {
            source: "api-server",
            read: false,
        });
    }
    sources
}

/// `result`, with `source` marked read when it is Ok.
fn mark<T>(
    sources: &mut [SourceRead],
    source: &str,
    result: Result<T, String>,
) -> Result<T, String> {
    if result.is_ok()
        && let Some(s) = sources.iter_mut().find(|s| s.source == source)
    {
        s.read = true;
    }
    result
}

/// A judgement, and the error of a source it went on without (its pods judged
/// without it: the API server's slices place only DRA claims).
type Judged = (AuditReport, Allocation, Option<String>);

/// Read every source and judge the node.
fn judge(a: &AuditArgs, sources: &mut [SourceRead]) -> Result<Judged, String> {
    let topo = mark(sources, "sysfs", a.root.discover(crate::Needs::ALL))?;
    let mut opts = mark(sources, "rdma-shared-config", options(a))?;
    let source = if a.allocation.is_some() {
        "allocation-file"
    } else {
        "kubelet"
    };
    let alloc = mark(sources, source, allocation(a))?;
    let mut missed = None;
    if a.api_server {
        match mark(sources, "api-server", api_slices(a)) {
            Ok(Some(slices)) => {
                opts.resource_slices = Some(slices);
                opts.node_name = a.node_name.clone();
            }
            Ok(None) => {
                if holds_claims(&alloc) {
                    eprintln!(
                        "rdmatopo: the API server serves no resource.k8s.io/v1 ResourceSlices (Kubernetes before 1.34, or the API group off): DRA claims are placed by device name where the driver's names say which device"
                    );
                }
            }
            Err(e) => missed = Some(format!("api-server: {e}")),
        }
    }
    let mut report = audit::audit(&topo, &alloc, &opts);
    report.node = a.node_name.clone();
    Ok((report, alloc, missed))
}

fn holds_claims(alloc: &Allocation) -> bool {
    alloc
        .pods
        .iter()
        .flat_map(|p| &p.containers)
        .any(|c| !c.dynamic_resources.is_empty())
}

/// What one round gives: the text to print or write (also when a Prometheus round
/// failed: its up 0), the exit code, and the error that failed it.
struct Round {
    text: Option<String>,
    code: i32,
    error: Option<String>,
}

/// One audit. `last_success` is the Unix time of the last round that read everything,
/// updated by this one.
fn round(a: &AuditArgs, last_success: &mut Option<f64>) -> Round {
    let start = Instant::now();
    let mut sources = required(a);
    let judged = judge(a, &mut sources).and_then(|(report, alloc, missed)| {
        let text = match a.format {
            AuditFormat::Table => table(&report),
            AuditFormat::Prometheus => prometheus::audit_metrics(&report),
            AuditFormat::Json if a.with_allocation => {
                let mut value = serde_json::to_value(&report).map_err(|e| e.to_string())?;
                if let Some(obj) = value.as_object_mut() {
                    obj.insert(
                        "allocation".into(),
                        serde_json::to_value(&alloc).map_err(|e| e.to_string())?,
                    );
                }
                json(&value)
            }
            AuditFormat::Json => json(&report),
        };
        // Without a source the judgement is incomplete: exit as a round that could
        // not run, with the report of what could be judged.
        let code = if missed.is_some() {
            EXIT_FAILURE
        } else {
            report.exit_code()
        };
        Ok((text, code, missed))
    });
    if judged.is_ok()
        && prometheus::up(&sources)
        && let Ok(now) = SystemTime::now().duration_since(UNIX_EPOCH)
    {
        *last_success = Some(now.as_secs_f64());
    }
    let status = || {
        prometheus::round_metrics(&AuditRound {
            sources: &sources,
            duration_seconds: start.elapsed().as_secs_f64(),
            last_success: *last_success,
        })
    };
    match judged {
        // A judgement made without a required source (one a later source marks unread
        // and goes on without) keeps its report, but not its pod series.
        Ok((text, code, missed)) if a.format == AuditFormat::Prometheus => Round {
            text: Some(if prometheus::up(&sources) {
                status() + &text
            } else {
                status()
            }),
            code,
            error: missed,
        },
        Ok((text, code, missed)) => Round {
            text: Some(text),
            code,
            error: missed,
        },
        Err(e) => Round {
            // No pod series: they would be the last good round's, shown as current.
            text: (a.format == AuditFormat::Prometheus).then(status),
            code: EXIT_FAILURE,
            error: Some(e),
        },
    }
}

pub fn run(a: &AuditArgs) -> Result<Output, String> {
    // The last success the previous file recorded, kept while the kubelet is away.
    let mut last_success = match (&a.write, a.format) {
        (Some(path), AuditFormat::Prometheus) => std::fs::read_to_string(path)
            .ok()
            .and_then(|t| prometheus::last_success_in(&t)),
        _ => None,
    };
    let Some(path) = &a.write else {
        let r = round(a, &mut last_success);
        return match (r.text, r.error) {
            (Some(text), Some(e)) => {
                eprintln!("rdmatopo: {e}");
                Ok(Output::with_code(text, r.code))
            }
            (Some(text), None) => Ok(Output::with_code(text, r.code)),
            (None, Some(e)) => Err(e),
            (None, None) => Ok(Output::ok(String::new())),
        };
    };
    let mut write = || -> Result<i32, String> {
        let r = round(a, &mut last_success);
        if let Some(text) = &r.text {
            super::files::write_atomically(path, text)?;
        }
        match r.error {
            Some(e) => Err(e),
            None => Ok(r.code),
        }
    };
    let Some(every) = a.interval else {
        let code = write()?;
        return Ok(Output::with_code(String::new(), code));
    };
    loop {
        // A failed round is reported and retried; in Prometheus format its file says
        // up 0. The next round dials the socket afresh, so a restarted kubelet (which
        // recreates its socket) is found again.
        if let Err(e) = write() {
            eprintln!("rdmatopo: {e}");
        }
        std::thread::sleep(Duration::from_secs(every));
    }
}

/// `rdmatopo k8s probe`: a liveness or readiness check on a file a loop rewrites, for
/// an image with no shell (an exec probe runs this same command).
#[derive(Args, Debug)]
pub struct ProbeArgs {
    /// The file the loop writes (`k8s audit --write`, `k8s nfd --write`).
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// Fail when the file was last written longer ago than this.
    #[arg(long, value_name = "DURATION")]
    pub max_age: humantime::Duration,
    /// Also fail unless the file says `rdmatopo_audit_up 1` (the last audit read every source).
    #[arg(long)]
    pub up: bool,
}

pub fn probe(a: &ProbeArgs) -> Result<Output, String> {
    let fail = |msg: String| {
        eprintln!("rdmatopo: {}: {msg}", a.file.display());
        Ok(Output::with_code(String::new(), 1))
    };
    let modified = match std::fs::metadata(&a.file).and_then(|m| m.modified()) {
        Ok(t) => t,
        Err(e) => return fail(e.to_string()),
    };
    // A clock step backwards makes the file look new; the next rewrite sets it right.
    let age = SystemTime::now()
        .duration_since(modified)
        .unwrap_or_default();
    let max: Duration = a.max_age.into();
    if age > max {
        return fail(format!(
            "last written {}s ago, more than {}",
            age.as_secs(),
            a.max_age
        ));
    }
    if a.up {
        let text =
            std::fs::read_to_string(&a.file).map_err(|e| format!("{}: {e}", a.file.display()))?;
        match prometheus::gauge_in(&text, "rdmatopo_audit_up") {
            Some(1.0) => {}
            Some(_) => return fail("rdmatopo_audit_up is 0: the last audit could not read every source (rdmatopo_audit_source_up says which)".into()),
            None => return fail("no rdmatopo_audit_up sample (not a `k8s audit --format prometheus` file)".into()),
        }
    }
    Ok(Output::ok(String::new()))
}

fn list<T>(items: &[T], f: impl Fn(&T) -> String) -> String {
    if items.is_empty() {
        return "-".into();
    }
    items.iter().map(f).collect::<Vec<_>>().join(",")
}

fn table(r: &AuditReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "k8s audit of {} ({}): {} pods, {} containers with GPUs or NICs, {} NUMA-misaligned; {} errors, {} warnings{}",
        r.node.as_deref().unwrap_or("this node"),
        r.root,
        r.summary.pods,
        r.summary.containers_judged,
        r.summary.numa_misaligned_containers,
        r.summary.errors,
        r.summary.warnings,
        if r.free_devices_known {
            ""
        } else {
            "; free devices unknown (the kubelet does not implement GetAllocatableResources)"
        },
    );
    if r.pods.is_empty() {
        return out;
    }
    let mut rows = vec![[
        "POD".to_string(),
        "CONTAINER".into(),
        "GPUS".into(),
        "NICS".into(),
        "CPUS".into(),
        "PATH".into(),
        "FINDINGS".into(),
    ]];
    for p in &r.pods {
        for c in &p.containers {
            let worst = c
                .findings
                .iter()
                .filter(|f| !f.skipped)
                .map(|f| f.severity)
                .max();
            rows.push([
                format!("{}/{}", p.namespace, p.name),
                c.name.clone(),
                // One table for every pod of the node: the node's numbering keeps the
                // rows apart (each pod has its own GPU0); the findings and the JSON's
                // `container_index` give the pod's own (`view::naming`).
                list(&c.gpus, |g| format!("GPU{}", g.index)),
                list(&c.nics, |n| {
                    n.rdma_device
                        .clone()
                        .or_else(|| n.netdev.clone())
                        .unwrap_or_else(|| n.pci.to_string())
                }),
                format!(
                    "{}{} (node {})",
                    if c.cpus.shared_pool { "shared " } else { "" },
                    c.cpus.cpus,
                    list(&c.cpus.numa_nodes, u32::to_string)
                ),
                c.worst_path.clone().unwrap_or_else(|| "-".into()),
                match worst {
                    None => "ok".into(),
                    Some(s) => format!(
                        "{} ({})",
                        c.findings.iter().filter(|f| !f.skipped).count(),
                        severity(s)
                    ),
                },
            ]);
        }
    }
    let widths: Vec<usize> = (0..7)
        .map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0))
        .collect();
    for row in &rows {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            if i + 1 == row.len() {
                line.push_str(cell);
            } else {
                let _ = write!(line, "{cell:<w$}  ", w = widths[i]);
            }
        }
        let _ = writeln!(out, "{}", line.trim_end());
    }
    for p in &r.pods {
        for c in &p.containers {
            for f in c.findings.iter().filter(|f| !f.skipped) {
                let _ = writeln!(
                    out,
                    "\n[{}] {} {}/{} {}: {}",
                    severity(f.severity),
                    f.check,
                    p.namespace,
                    p.name,
                    c.name,
                    f.summary
                );
                for e in &f.evidence {
                    let _ = writeln!(out, "  {} = {}", e.path, e.value);
                }
                if !f.why.is_empty() {
                    let _ = writeln!(out, "  why: {}", f.why);
                }
                if !f.fix.is_empty() {
                    let _ = writeln!(out, "  fix: {}", f.fix);
                }
            }
        }
    }
    out
}

fn severity(s: Severity) -> &'static str {
    match s {
        Severity::Error => "error",
        Severity::Warning => "warning",
        Severity::Info => "info",
    }
}
