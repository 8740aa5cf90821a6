//! `rdmatopo doctor`: why RDMA is slow in this pod (or on this host).
//!
//! Each check looks at the model only and reports [`Finding`]s that name the check, a
//! severity, the evidence (logical sysfs/procfs paths and the values read there), why
//! it costs performance, and the fix. A check that cannot run says so with an `info`
//! finding marked `skipped`; it is never silently left out. In a container, only the
//! devices this container owns are judged when ownership is known: an unassigned VF
//! with its port down is not this pod's problem.
//!
//! ```no_run
//! let topo = rdmatopo::discover(None)?;
//! let report = rdmatopo::checks::doctor::run(&topo);
//! std::process::exit(report.exit_code());
//! # Ok::<(), rdmatopo::Error>(())
//! ```

mod devices;
mod distance;
mod limits;
mod network;
mod numa;
mod pcie;
mod qos;
mod rails;
mod report;
mod words;

pub use network::roce_mtu;
pub(crate) use network::{active_mtu, uplink};
pub(crate) use report::exit_code;
pub use report::{CheckResult, Evidence, Finding, Judged, Outcome, Report, SCHEMA};

use crate::model::Topology;
use crate::view::scope::Scope;
use report::Sink;

type CheckFn = fn(&Scope, &mut Sink);

/// Every check, in report order: id, what it looks at, and the function.
const CHECKS: &[(&str, &str, CheckFn)] = &[
    (
        "numa-affinity",
        "CPUs this process may use vs the NUMA nodes of its GPUs and NICs",
        numa::check,
    ),
    (
        "gpu-nic-distance",
        "PCIe distance from each GPU to the NIC it would use",
        distance::check,
    ),
    (
        "gpu-driver",
        "NVIDIA GPUs the nvidia driver does not hold (nvidia-smi, CUDA and NCCL skip them)",
        devices::gpu_driver,
    ),
    (
        "sriov",
        "virtual functions in use: limits and port state",
        devices::sriov,
    ),
    (
        "mtu",
        "netdev MTU vs RoCE active MTU on the NICs in use",
        network::mtu,
    ),
    (
        "netns",
        "network namespace, RDMA netns mode and the GID index that is right here",
        network::netns,
    ),
    (
        "rdma-cgroup",
        "rdma cgroup limits (rdma.max, rdma.current)",
        limits::rdma_cgroup,
    ),
    (
        "multi-rail",
        "usable rails vs GPUs: count, speed, link layer, port state; NCCL variables that leave them unused",
        rails::check,
    ),
    (
        "pcie-link",
        "PCIe links trained below their maximum on GPU-NIC paths",
        pcie::link,
    ),
    (
        "acs-redirect",
        "ACS peer-to-peer redirect on bridges between GPU and NIC",
        pcie::acs,
    ),
    (
        "gpudirect-rdma",
        "GPUDirect RDMA prerequisites (peer memory module, DMA-BUF)",
        devices::gpudirect,
    ),
    ("memlock", "RLIMIT_MEMLOCK of this process", limits::memlock),
    (
        "rdma-devices",
        "/dev/infiniband/uverbs* and rdma_cm in this container",
        devices::char_devices,
    ),
    (
        "roce-netfilter",
        "netfilter/conntrack on RoCE v2 traffic (UDP 4791)",
        network::netfilter,
    ),
    (
        "roce-gid",
        "a RoCE v2 IPv4 GID on every RoCE port in use",
        network::roce_gid,
    ),
    (
        "roce-qos",
        "RoCE traffic class, ECN (DCQCN) and PFC on every rail, VF and PF alike",
        qos::check,
    ),
];

/// Id and description of every check, in report order.
pub fn check_list() -> impl Iterator<Item = (&'static str, &'static str)> {
    CHECKS.iter().map(|(id, what, _)| (*id, *what))
}

/// The findings about this process's NCCL variables that leave the RDMA path unused
/// (`NCCL_IB_DISABLE`, `NCCL_NET`, `NCCL_IB_HCA`, `NCCL_SOCKET_IFNAME`,
/// `NCCL_NET_GDR_LEVEL`), as `multi-rail` and `gpudirect-rdma` report them: what
/// `rdmatopo exec` warns of before it starts a rank.
pub fn nccl_variable_findings(scope: &Scope) -> Vec<Finding> {
    let mut rails = Sink::new("multi-rail");
    rails::nccl_variables(scope, &mut rails);
    let mut gdr = Sink::new("gpudirect-rdma");
    devices::gdr_level(scope, &mut gdr);
    rails.findings.into_iter().chain(gdr.findings).collect()
}

/// Run every check on what this process owns in `topo`.
pub fn run(topo: &Topology) -> Report {
    judge(&Scope::of(topo))
}

/// Run every check on `scope`: this process's devices ([`Scope::of`]) or any other set
/// ([`Scope::judging`], e.g. a pod's allocation seen from its node).
pub fn judge(scope: &Scope) -> Report {
    judge_only(scope, |_| true)
}

/// Run the checks `wanted` picks (by id) on `scope`, in report order. `k8s audit`
/// picks those that judge a container's placement.
pub fn judge_only(scope: &Scope, wanted: impl Fn(&str) -> bool) -> Report {
    let mut findings = Vec::new();
    let mut checks = Vec::new();
    for (id, _, f) in CHECKS.iter().filter(|(id, _, _)| wanted(id)) {
        let mut sink = Sink::new(id);
        f(scope, &mut sink);
        let outcome = sink.outcome();
        let note = sink.note.clone().unwrap_or_else(|| match outcome {
            Outcome::Ok => "nothing wrong found".into(),
            _ => String::new(),
        });
        checks.push(CheckResult {
            check: id.to_string(),
            outcome,
            note,
        });
        let mut fs = sink.findings;
        // Worst first within a check; stable otherwise (device order).
        fs.sort_by_key(|f| std::cmp::Reverse(f.severity));
        findings.extend(fs);
    }
    Report {
        schema: SCHEMA.to_string(),
        context: scope.context,
        judged: Judged {
            gpus: scope.gpus.iter().map(|g| g.pci).collect(),
            rdma_devices: scope.hcas.iter().map(|d| d.name.clone()).collect(),
        },
        findings,
        checks,
    }
}

#[cfg(test)]
mod tests;
