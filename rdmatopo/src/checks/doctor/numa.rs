//! Check 1: the CPUs this process may use against the NUMA nodes of its GPUs and NICs.

use super::report::Sink;
use super::words::{list, pci_dir};
use crate::model::PciFunction;
use crate::parse::CpuSet;
use crate::view::affinity::{local_cpus, numa_of};
use crate::view::scope::Scope;

const FIX: &str = "Kubernetes: kubelet topologyManagerPolicy: single-numa-node (topologyManagerScope: pod) with cpuManagerPolicy: static and a Guaranteed pod (integer CPU requests), so CPUs, GPU and NIC come from one NUMA node; outside Kubernetes: start each rank with `rdmatopo exec` (binds it to its GPU's local CPUs)";

fn local_evidence(scope: &Scope, f: &PciFunction) -> (String, String) {
    match (&f.local_cpus, numa_of(scope.topo, f)) {
        (Some(l), _) => (
            format!("{}/local_cpulist", pci_dir(f.address)),
            l.to_string(),
        ),
        (None, Some(n)) => (format!("{}/numa_node", pci_dir(f.address)), n.to_string()),
        (None, None) => (format!("{}/numa_node", pci_dir(f.address)), "-1".into()),
    }
}

/// NUMA nodes whose CPUs intersect `cpus`.
fn nodes_of(scope: &Scope, cpus: &CpuSet) -> Vec<String> {
    scope
        .topo
        .numa_nodes
        .iter()
        .filter(|n| !n.cpus.intersection(cpus).is_empty())
        .map(|n| n.id.to_string())
        .collect()
}

pub(super) fn check(scope: &Scope, out: &mut Sink) {
    let topo = scope.topo;
    let Some(usable) = scope.cpus.clone() else {
        out.skip(
            "the CPUs this process may use are unknown",
            "neither /proc/self/status (Cpus_allowed_list) nor the cgroup cpuset could be read",
            "run doctor inside the container being diagnosed, with /proc mounted",
        );
        return;
    };
    // The devices to be local to: owned GPUs and the NICs they would use.
    let mut devices: Vec<(String, &PciFunction)> = Vec::new();
    for g in &scope.gpus {
        if let Some(f) = scope.function(g.pci) {
            devices.push((scope.gpu_label(g), f));
        }
    }
    for gn in &scope.gpu_nics {
        for nic in &gn.nics {
            if let Some(f) = nic.pci.and_then(|a| scope.function(a))
                && !devices.iter().any(|(_, d)| d.address == f.address)
            {
                devices.push((scope.nic_label(f), f));
            }
        }
    }
    if devices.is_empty() {
        for d in scope.usable_hcas() {
            if let Some(f) = d.pci.and_then(|a| scope.function(a)) {
                devices.push((scope.nic_label(f), f));
            }
        }
    }
    if devices.is_empty() {
        out.not_applicable("no GPU or RDMA NIC to be local to");
        return;
    }
    let single_node = topo.numa_nodes.len() <= 1;
    let mut local_union = CpuSet::new();
    let mut unknown = Vec::new();
    let mut errors = 0;
    for (label, f) in &devices {
        let Some(local) = local_cpus(topo, f) else {
            unknown.push(label.clone());
            continue;
        };
        local_union = local_union.union(&local);
        if !local.intersection(&usable).is_empty() {
            continue;
        }
        errors += 1;
        let node = match topo.numa_affinity(f).is_empty() {
            true => "?".to_string(),
            false => topo.numa_affinity_text(f),
        };
        let (lp, lv) = local_evidence(scope, f);
        let mut finding = out
            .error(format!(
                "none of the {} CPUs this process may use ({usable}) is local to {label} (NUMA node {node}, CPUs {local})",
                usable.len()
            ))
            .with(lp, lv);
        for (p, v) in &scope.cpus_evidence {
            finding = finding.with(p, v);
        }
        out.push(
            finding
                .why("every CPU-side step of a transfer (NCCL proxy thread, completion polling, host staging buffers) crosses the inter-socket link; cross-NUMA placement roughly halves multi-node bus bandwidth (NVIDIA/nccl-tests#347)")
                .fix(FIX),
        );
    }
    if !unknown.is_empty() && !single_node {
        let f = devices
            .iter()
            .find(|(l, _)| *l == unknown[0])
            .map(|(_, f)| *f);
        let mut finding = out.info(format!(
            "the NUMA node of {} is unknown (numa_node is -1 and there is no local_cpulist), so its CPU locality cannot be judged",
            list(&unknown)
        ));
        if let Some(f) = f {
            let (p, v) = local_evidence(scope, f);
            finding = finding.with(p, v);
        }
        out.push(finding
            .why("firmware (ACPI _PXM) or a VM did not say where the device sits; NCCL, the kubelet Topology Manager and sriov-network-device-plugin then treat it as local to nothing")
            .fix("fix the firmware NUMA description (or the VM's vNUMA/PCIe expander layout); on bare metal, `echo <node> > /sys/bus/pci/devices/<bdf>/numa_node` as root is a workaround"));
    }
    // A restricted cpuset that also holds CPUs on nodes with none of our devices.
    let online = topo.host.cpus_online.clone().unwrap_or_else(|| {
        topo.numa_nodes
            .iter()
            .fold(CpuSet::new(), |a, n| a.union(&n.cpus))
    });
    let restricted = !online.is_empty() && usable.len() < online.len();
    let foreign = usable.difference(&local_union);
    if errors == 0 && restricted && !local_union.is_empty() && !foreign.is_empty() && !single_node {
        let mut finding = out
            .warning(format!(
                "{} of the {} CPUs this process may use ({foreign}) are on NUMA node(s) {} where none of its GPUs or NICs is",
                foreign.len(),
                usable.len(),
                list(&nodes_of(scope, &foreign))
            ));
        for (p, v) in &scope.cpus_evidence {
            finding = finding.with(p, v);
        }
        out.push(finding
            .why("threads scheduled on those CPUs reach the GPU and NIC across the inter-socket link; the kernel may put the NCCL proxy or data-loader threads there")
            .fix(FIX));
    }
    if out.findings.is_empty() {
        out.note(format!(
            "{} CPUs usable ({usable}); local to every GPU and NIC in use",
            usable.len()
        ));
    }
}
