//! The Prometheus text exposition format (version 0.0.4) of a `k8s audit` report, for
//! node-exporter's textfile collector: gauges per container labelled `namespace`, `pod`
//! and `container`, and node totals; and, on every round whether it succeeded or not,
//! whether the audit could read what it needs (`rdmatopo_audit_up`) and when it last did.
//!
//! A file rather than a `/metrics` port: node-exporter already serves the node's
//! metrics with the labels the cluster's Prometheus gives them, and the DaemonSet then
//! opens no port at all.

use crate::checks::audit::AuditReport;
use crate::model::Severity;
use crate::view::affinity::PathClass;
use std::fmt::Write as _;

/// A label value escaped as the format requires (`\\`, `\"`, `\n`).
fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

fn header(out: &mut String, name: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} gauge");
}

/// The rank of a class as `PathClass::rank` orders it (X 0, NV 1, PIX 2 … SYS 6).
fn rank(class: &str) -> Option<u32> {
    if let Some(n) = class.strip_prefix("NV") {
        return n.parse::<u32>().ok().map(|n| PathClass::Nv(n).rank());
    }
    class.parse::<PathClass>().ok().map(|c| c.rank())
}

const SEVERITIES: [(Severity, &str); 3] = [
    (Severity::Error, "error"),
    (Severity::Warning, "warning"),
    (Severity::Info, "info"),
];

/// A source one round of the audit needed, and whether the round read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceRead {
    /// `sysfs` (the node's topology under `--root`), `kubelet` (the PodResources
    /// socket) or `allocation-file` (`--allocation`), `rdma-shared-config`,
    /// `api-server` (the node's ResourceSlices, `--api-server`).
    pub source: &'static str,
    pub read: bool,
}

/// How one round of the audit went, whatever its result: the metrics that say whether
/// the pod series beside them can be trusted.
#[derive(Debug, Clone, PartialEq)]
pub struct AuditRound<'a> {
    /// Every source the round required, in the order it reads them.
    pub sources: &'a [SourceRead],
    /// The round's wall time, reads and judgement.
    pub duration_seconds: f64,
    /// Unix time of the end of the last round that read every source, if any is known
    /// (this process's, or the one the previous file recorded).
    pub last_success: Option<f64>,
}

/// 1 only when the round required at least one source and read all of them: a
/// report judged without one of them is not shown at all.
pub fn up(sources: &[SourceRead]) -> bool {
    !sources.is_empty() && sources.iter().all(|s| s.read)
}

/// The name of the last-success gauge, which a writer reads back from its previous file.
pub const LAST_SUCCESS: &str = "rdmatopo_audit_last_success_timestamp_seconds";

/// The round's own metrics: `rdmatopo_audit_up`, one `rdmatopo_audit_source_up` per
/// source, the duration and the last success. Written on every round, alone when the
/// round failed, so an alert on the pod series never fires on a stale file.
pub fn round_metrics(round: &AuditRound<'_>) -> String {
    let mut out = String::new();
    header(
        &mut out,
        "rdmatopo_audit_up",
        "1 when the last audit read every source it needs (the node's sysfs, the kubelet); 0 when it could not, and then no pod series are written.",
    );
    let _ = writeln!(out, "rdmatopo_audit_up {}", u8::from(up(round.sources)));
    header(
        &mut out,
        "rdmatopo_audit_source_up",
        "1 when the last audit read this source.",
    );
    for s in round.sources {
        let _ = writeln!(
            out,
            "rdmatopo_audit_source_up{{source=\"{}\"}} {}",
            escape(s.source),
            u8::from(s.read)
        );
    }
    header(
        &mut out,
        "rdmatopo_audit_duration_seconds",
        "Wall time of the last audit, successful or not.",
    );
    let _ = writeln!(
        out,
        "rdmatopo_audit_duration_seconds {}",
        round.duration_seconds
    );
    if let Some(t) = round.last_success {
        header(
            &mut out,
            LAST_SUCCESS,
            "Unix time of the end of the last audit that read every source.",
        );
        let _ = writeln!(out, "{LAST_SUCCESS} {t}");
    }
    out
}

/// The value of the unlabelled gauge `name` in a file of `round_metrics`.
pub fn gauge_in(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|v| v.is_finite())
}

/// The last success a previous file of `round_metrics` recorded.
pub fn last_success_in(text: &str) -> Option<f64> {
    gauge_in(text, LAST_SUCCESS).filter(|v| *v >= 0.0)
}

/// The report as metrics text.
pub fn audit_metrics(report: &AuditReport) -> String {
    let mut out = String::new();
    let containers: Vec<(String, &crate::checks::audit::AuditContainer)> = report
        .pods
        .iter()
        .flat_map(|p| {
            p.containers.iter().map(move |c| {
                (
                    format!(
                        "namespace=\"{}\",pod=\"{}\",container=\"{}\"",
                        escape(&p.namespace),
                        escape(&p.name),
                        escape(&c.name)
                    ),
                    c,
                )
            })
        })
        .collect();
    header(
        &mut out,
        "rdmatopo_audit_container_worst_path_rank",
        "Worst PCIe class from a GPU of the container to its nearest NIC of the container (0 X, 1 NVLink, 2 PIX, 3 PXB, 4 PHB, 5 NODE, 6 SYS); the class is also a label.",
    );
    for (labels, c) in &containers {
        if let Some(class) = &c.worst_path
            && let Some(r) = rank(class)
        {
            let _ = writeln!(
                out,
                "rdmatopo_audit_container_worst_path_rank{{{labels},class=\"{}\"}} {r}",
                escape(class)
            );
        }
    }
    header(
        &mut out,
        "rdmatopo_audit_container_claim_devices",
        "GPUs and NICs of the container placed from each DRA claim (label claim: namespace/name), so the pod's series can be joined with its claim.",
    );
    for (labels, c) in &containers {
        let mut claims: std::collections::BTreeMap<&str, usize> = Default::default();
        let resources = c.gpus.iter().map(|g| &g.resource);
        for r in resources.chain(c.nics.iter().map(|n| &n.resource)) {
            if let Some(claim) = r.strip_prefix("claim ") {
                *claims.entry(claim).or_default() += 1;
            }
        }
        for (claim, n) in claims {
            let _ = writeln!(
                out,
                "rdmatopo_audit_container_claim_devices{{{labels},claim=\"{}\"}} {n}",
                escape(claim)
            );
        }
    }
    header(
        &mut out,
        "rdmatopo_audit_container_numa_misaligned",
        "1 when a GPU or NIC of the container has none of its CPUs local to it (doctor check numa-affinity).",
    );
    for (labels, c) in &containers {
        let _ = writeln!(
            out,
            "rdmatopo_audit_container_numa_misaligned{{{labels}}} {}",
            u8::from(c.numa_misaligned)
        );
    }
    header(
        &mut out,
        "rdmatopo_audit_container_findings",
        "Findings of the container by severity, in rdmatopo doctor's terms.",
    );
    for (labels, c) in &containers {
        for (sev, name) in SEVERITIES {
            let n = c
                .findings
                .iter()
                .filter(|f| !f.skipped && f.severity == sev)
                .count();
            let _ = writeln!(
                out,
                "rdmatopo_audit_container_findings{{{labels},severity=\"{name}\"}} {n}"
            );
        }
    }
    let s = &report.summary;
    let node_gauges: [(&str, &str, usize); 4] = [
        ("rdmatopo_audit_pods", "Pods the kubelet listed.", s.pods),
        (
            "rdmatopo_audit_containers_judged",
            "Containers holding a GPU or NIC.",
            s.containers_judged,
        ),
        (
            "rdmatopo_audit_numa_misaligned_containers",
            "Containers with a GPU or NIC on a NUMA node none of their CPUs is on.",
            s.numa_misaligned_containers,
        ),
        (
            "rdmatopo_audit_free_devices_known",
            "1 when the kubelet answered GetAllocatableResources.",
            usize::from(report.free_devices_known),
        ),
    ];
    for (name, help, value) in node_gauges {
        header(&mut out, name, help);
        let _ = writeln!(out, "{name} {value}");
    }
    header(
        &mut out,
        "rdmatopo_audit_findings",
        "Findings on the node by severity.",
    );
    for (name, value) in [
        ("error", s.errors),
        ("warning", s.warnings),
        ("info", s.infos),
    ] {
        let _ = writeln!(
            out,
            "rdmatopo_audit_findings{{severity=\"{name}\"}} {value}"
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(escape(r#"a"b\c"#), r#"a\"b\\c"#);
        assert_eq!(escape("x\ny"), "x\\ny");
    }

    #[test]
    fn up_needs_every_required_source() {
        let read = |source, read| SourceRead { source, read };
        assert!(up(&[read("sysfs", true), read("kubelet", true)]));
        assert!(!up(&[read("sysfs", true), read("kubelet", false)]));
        assert!(!up(&[
            read("sysfs", true),
            read("kubelet", true),
            read("api-server", false)
        ]));
        assert!(!up(&[]), "a round that read nothing is not up");
    }

    #[test]
    fn a_failed_round_keeps_the_last_success() {
        let sources = [
            SourceRead {
                source: "sysfs",
                read: true,
            },
            SourceRead {
                source: "kubelet",
                read: false,
            },
        ];
        let text = round_metrics(&AuditRound {
            sources: &sources,
            duration_seconds: 0.25,
            last_success: Some(1_765_000_000.5),
        });
        assert!(text.contains("rdmatopo_audit_up 0\n"), "{text}");
        assert_eq!(gauge_in(&text, "rdmatopo_audit_up"), Some(0.0));
        assert!(text.contains("rdmatopo_audit_source_up{source=\"kubelet\"} 0\n"));
        assert!(text.contains("rdmatopo_audit_duration_seconds 0.25\n"));
        assert_eq!(last_success_in(&text), Some(1_765_000_000.5));
        let unknown = round_metrics(&AuditRound {
            sources: &sources,
            duration_seconds: 0.25,
            last_success: None,
        });
        assert!(!unknown.contains(LAST_SUCCESS), "{unknown}");
        assert_eq!(last_success_in(&unknown), None);
        assert_eq!(
            last_success_in("rdmatopo_audit_last_success_timestamp_seconds_x 3\n"),
            None
        );
        assert_eq!(
            last_success_in("rdmatopo_audit_last_success_timestamp_seconds NaN\n"),
            None
        );
    }

    #[test]
    fn ranks_follow_path_class() {
        assert_eq!(rank("PIX"), Some(2));
        assert_eq!(rank("SYS"), Some(6));
        assert_eq!(rank("NV18"), Some(1));
        assert_eq!(rank("bogus"), None);
    }
}
