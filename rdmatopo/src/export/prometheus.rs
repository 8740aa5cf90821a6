//! The Prometheus text exposition format (version 0.0.4) of a `k8s audit` report, for
//! node-exporter's textfile collector: gauges per container labelled `namespace`, `pod`
//! and `container`, and node totals.
//!
//! A file rather than a `/metrics` port: the audit runs in a hostNetwork DaemonSet pod,
//! where a listening port is a port on the node itself (one more thing to firewall and
//! to keep from colliding), while node-exporter already serves the node's metrics.

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
    fn ranks_follow_path_class() {
        assert_eq!(rank("PIX"), Some(2));
        assert_eq!(rank("SYS"), Some(6));
        assert_eq!(rank("NV18"), Some(1));
        assert_eq!(rank("bogus"), None);
    }
}
