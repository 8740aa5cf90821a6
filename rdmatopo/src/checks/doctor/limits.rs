//! Process limits: the rdma cgroup (6) and RLIMIT_MEMLOCK (8).

use super::report::Sink;
use super::words::list;
use crate::parse::{RdmaLimit, RdmaLimitValue};
use crate::view::scope::Scope;

/// A rough lower bound (a heuristic, not a measured number) for the `hca_object`
/// need of one NCCL rank on one device: QPs and CQs for up to 32 channels to two
/// ring neighbours each way, its PD, and memory regions for the registered buffers.
const OBJECTS_PER_RANK: u64 = 1000;
/// `rdma.current` at this fraction of `rdma.max` is "near the limit".
const NEAR_LIMIT: f64 = 0.8;

/// Where this process's `rdma.*` files are: the v1 `rdma` hierarchy or the v2 path.
fn cgroup_file(scope: &Scope, name: &str) -> String {
    let cgs = &scope.topo.process.cgroups;
    let rel = cgs
        .iter()
        .find(|c| c.controllers.iter().any(|k| k == "rdma"))
        .map(|c| format!("/sys/fs/cgroup/rdma{}", c.path))
        .or_else(|| {
            cgs.iter()
                .find(|c| c.controllers.is_empty())
                .map(|c| format!("/sys/fs/cgroup{}", c.path))
        })
        .unwrap_or_else(|| "/sys/fs/cgroup".to_string());
    format!("{}/{name}", rel.trim_end_matches('/'))
}

fn count(v: Option<RdmaLimitValue>) -> Option<u64> {
    match v? {
        RdmaLimitValue::Count(n) => Some(n),
        RdmaLimitValue::Max => None,
    }
}

fn line(l: &RdmaLimit) -> String {
    let v = |x: Option<RdmaLimitValue>| match x {
        Some(RdmaLimitValue::Max) => "max".to_string(),
        Some(RdmaLimitValue::Count(n)) => n.to_string(),
        None => "-".to_string(),
    };
    format!(
        "{} hca_handle={} hca_object={}",
        l.device,
        v(l.hca_handle),
        v(l.hca_object)
    )
}

pub(super) fn rdma_cgroup(scope: &Scope, out: &mut Sink) {
    let p = &scope.topo.process;
    if p.cgroups.is_empty() {
        out.skip(
            "this process's cgroup is unknown",
            "/proc/self/cgroup could not be read, so rdma.max cannot be located",
            "run doctor inside the container being diagnosed, with /proc mounted",
        );
        return;
    }
    let Some(max) = &p.rdma_max else {
        out.note("no rdma cgroup limit (no rdma.max for this cgroup: the rdma controller is not enabled here)");
        return;
    };
    let owned: Vec<&str> = scope.hcas.iter().map(|d| d.name.as_str()).collect();
    let ranks = p
        .env
        .get("LOCAL_WORLD_SIZE")
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap_or(scope.gpus.len() as u64)
        .max(1);
    let ranks_from = if p.env.contains_key("LOCAL_WORLD_SIZE") {
        "LOCAL_WORLD_SIZE"
    } else {
        "one rank per GPU"
    };
    let max_path = cgroup_file(scope, "rdma.max");
    let cur_path = cgroup_file(scope, "rdma.current");
    let mut low_handles = Vec::new();
    let mut low_objects = Vec::new();
    for l in max.iter().filter(|l| owned.contains(&l.device.as_str())) {
        if let Some(h) = count(l.hca_handle)
            && h < ranks
        {
            low_handles.push((l, h));
        }
        if let Some(o) = count(l.hca_object)
            && o < ranks * OBJECTS_PER_RANK
        {
            low_objects.push((l, o));
        }
    }
    if !low_handles.is_empty() {
        let names: Vec<String> = low_handles
            .iter()
            .map(|(l, h)| format!("{} hca_handle={h}", l.device))
            .collect();
        let mut f = out.error(format!(
            "rdma.max allows fewer device handles than the {ranks} rank(s) here ({ranks_from}) need: {}",
            list(&names)
        ));
        for (l, _) in &low_handles {
            f = f.with(max_path.clone(), line(l));
        }
        out.push(f
            .why("every NCCL rank opens each HCA it uses (one hca_handle per ibv_open_device); once the cgroup's handles are used up, ibv_open_device fails and NCCL drops the device or falls back to TCP sockets")
            .fix(format!("raise the limit: `echo \"<dev> hca_handle=max hca_object=max\" > {max_path}` (from the host, as root); Kubernetes has no API for rdma.max, so whatever set it (a device plugin or a runtime hook) must allow at least one handle per rank")));
    }
    if !low_objects.is_empty() {
        let names: Vec<String> = low_objects
            .iter()
            .map(|(l, o)| format!("{} hca_object={o}", l.device))
            .collect();
        let mut f = out.error(format!(
            "rdma.max allows fewer HCA objects than {ranks} NCCL rank(s) need (~{} each): {}",
            OBJECTS_PER_RANK,
            list(&names)
        ));
        for (l, _) in &low_objects {
            f = f.with(max_path.clone(), line(l));
        }
        out.push(f
            .why("QPs, CQs, PDs and memory regions all count as hca_object; NCCL creates one QP and CQ per connection per channel plus a memory region per registered buffer, so a low limit fails connection setup with ENOMEM or EDQUOT")
            .fix(format!("raise hca_object: `echo \"<dev> hca_handle=max hca_object=max\" > {max_path}` (from the host, as root)")));
    }
    if let Some(current) = &p.rdma_current {
        for c in current
            .iter()
            .filter(|l| owned.contains(&l.device.as_str()))
        {
            let Some(m) = max.iter().find(|m| m.device == c.device) else {
                continue;
            };
            for (what, used, limit) in [
                ("hca_handle", count(c.hca_handle), count(m.hca_handle)),
                ("hca_object", count(c.hca_object), count(m.hca_object)),
            ] {
                let (Some(used), Some(limit)) = (used, limit) else {
                    continue;
                };
                if limit == 0 || (used as f64) < NEAR_LIMIT * limit as f64 {
                    continue;
                }
                // Already reported as too low for the ranks.
                if low_handles.iter().any(|(l, _)| l.device == c.device) && what == "hca_handle"
                    || low_objects.iter().any(|(l, _)| l.device == c.device) && what == "hca_object"
                {
                    continue;
                }
                out.push(
                    out.warning(format!(
                        "{} uses {used} of {limit} {what} allowed by rdma.max",
                        c.device
                    ))
                    .with(cur_path.clone(), line(c))
                    .with(max_path.clone(), line(m))
                    .why("near the limit, the next ibv_open_device or QP creation fails: a restarted rank or a larger job will not connect")
                    .fix(format!("raise the limit in {max_path} (from the host, as root), or find the process holding the resources (`rdma resource show`)")),
                );
            }
        }
    }
    if out.findings.is_empty() {
        let judged: Vec<String> = max
            .iter()
            .filter(|l| owned.contains(&l.device.as_str()))
            .map(line)
            .collect();
        out.note(if judged.is_empty() {
            "rdma.max sets no limit on the devices in use".to_string()
        } else {
            format!("rdma.max: {}", judged.join("; "))
        });
    }
}

pub(super) fn memlock(scope: &Scope, out: &mut Sink) {
    let Some(limit) = scope.topo.process.memlock else {
        out.skip(
            "RLIMIT_MEMLOCK is unknown",
            "/proc/self/limits could not be read",
            "run `ulimit -l` in the container being diagnosed",
        );
        return;
    };
    if scope.topo.rdma_devices.is_empty() {
        out.not_applicable("no RDMA device");
        return;
    }
    let crate::parse::MemlockLimit::Bytes(bytes) = limit else {
        out.note("unlimited");
        return;
    };
    // CAP_IPC_LOCK (bit 14) exempts the process from the limit.
    if let Some(cap) = scope.topo.process.cap_eff
        && cap & (1 << 14) != 0
    {
        out.note(format!(
            "{} soft limit, but the process holds CAP_IPC_LOCK (CapEff {cap:016x}), which lifts it",
            human_bytes(bytes)
        ));
        return;
    }
    // Docker's default is 64 KiB; Ubuntu's is 8 MiB.
    let error = bytes < 8 << 20;
    let summary = format!("RLIMIT_MEMLOCK is {} for this process", human_bytes(bytes));
    let f = if error {
        out.error(summary)
    } else {
        out.warning(summary)
    };
    out.push(f
        .with("/proc/self/limits", format!("Max locked memory {bytes} bytes"))
        .with(
            "/proc/self/status",
            scope
                .topo
                .process
                .cap_eff
                .map_or("CapEff unreadable".to_string(), |c| format!("CapEff {c:016x} (no CAP_IPC_LOCK)")),
        )
        .why("ibv_reg_mr pins memory and counts it against RLIMIT_MEMLOCK (unless the process has CAP_IPC_LOCK); NCCL registers its host-side buffers, so a small limit fails with \"NET/IB : Unable to register memory\" / ENOMEM, and without GPUDirect every buffer is host memory")
        .fix("Kubernetes: the container runtime's default ulimit (containerd: LimitMEMLOCK=infinity in its systemd unit) or add the IPC_LOCK capability (securityContext.capabilities.add: [IPC_LOCK]); Docker: --ulimit memlock=-1; hosts: `* - memlock unlimited` in /etc/security/limits.d"));
}

fn human_bytes(b: u64) -> String {
    match b {
        b if b >= 1 << 30 && b % (1 << 30) == 0 => format!("{} GiB", b >> 30),
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{} MiB", b >> 20),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{} KiB", b >> 10),
        b => format!("{b} bytes"),
    }
}
