//! `rdmatopo k8s audit`: every container of a node judged against the node's topology.
//!
//! The kubelet says what each container holds ([`Allocation`]); [`ids`] maps the
//! device-plugin ids onto the node's GPUs and NICs; `judge` runs the doctor's own
//! placement checks (`numa-affinity`, `gpu-nic-distance`, `multi-rail`) on each
//! container through a [`CheckedDevices`](crate::view::CheckedDevices) of its allocation, and
//! adds what only the kubelet's view can show: `plugin-numa` (a plugin's NUMA node
//! against sysfs) and `unknown-device` (ids that are not on this node).
//!
//! The topology must be the node's whole one (the host's sysfs), never the view of the
//! auditing container.

pub mod ids;
mod judge;
mod report;

use crate::model::Severity;
use crate::model::Topology;
use crate::model::allocation::Allocation;

pub use ids::{IdMap, Mapped, SharedPools, SharedSelectors};
pub use report::{
    AuditContainer, AuditCpus, AuditGpu, AuditNic, AuditOptions, AuditPod, AuditReport,
    AuditSummary, DOCTOR_CHECKS, OtherResource, SCHEMA,
};

/// Judge every container of `allocation` on `topo`, the node's whole topology.
pub fn audit(topo: &Topology, allocation: &Allocation, opts: &AuditOptions) -> AuditReport {
    let node = judge::Node::new(topo, allocation, opts);
    let mut pods = Vec::new();
    let mut summary = AuditSummary {
        pods: allocation.pods.len(),
        ..Default::default()
    };
    for pod in &allocation.pods {
        let containers: Vec<AuditContainer> = pod
            .containers
            .iter()
            .filter_map(|c| node.container(pod, c))
            .collect();
        if containers.is_empty() {
            continue;
        }
        for c in &containers {
            summary.containers_judged += 1;
            summary.numa_misaligned_containers += usize::from(c.numa_misaligned);
            for f in c.findings.iter().filter(|f| !f.skipped) {
                match f.severity {
                    Severity::Error => summary.errors += 1,
                    Severity::Warning => summary.warnings += 1,
                    Severity::Info => summary.infos += 1,
                }
            }
        }
        pods.push(AuditPod {
            namespace: pod.namespace.clone(),
            name: pod.name.clone(),
            containers,
        });
    }
    AuditReport {
        schema: SCHEMA.to_string(),
        root: topo.root.clone(),
        node: None,
        free_devices_known: allocation.allocatable.is_some(),
        pods,
        summary,
    }
}

#[cfg(test)]
mod tests;
