//! NUMA nodes, machine-wide facts, and the reading process's own view.

use super::ctx::Ctx;
use super::needs::HostFacts;
use crate::model::{
    DraMetadataDevice, LOCAL_RANK_VARS, LOCAL_SIZE_VARS, NetnsMode, NumaNode, Process, Topology,
};
use crate::parse::{
    PCI_ATTRIBUTES, ParseError, PciAddr, default_route, parse_cgroup, parse_cpuinfo, parse_cpulist,
    parse_device_metadata, parse_environ, parse_limits_memlock, parse_mountinfo,
    parse_node_mem_total, parse_nvidia_information, parse_rdma_cgroup_of, parse_status_field,
};
use crate::sysfs::join;
use std::collections::BTreeSet;

const NODE_DIR: &str = "/sys/devices/system/node";
const PROC_NVIDIA_GPUS: &str = "/proc/driver/nvidia/gpus";

/// Files whose existence says the process runs in a container.
const CONTAINER_MARKERS: [&str; 4] = [
    "/.dockerenv",
    "/run/.containerenv",
    "/run/secrets/kubernetes.io/serviceaccount",
    "/var/run/secrets/kubernetes.io/serviceaccount",
];

/// Largest `/proc/self/mountinfo` read.
const MOUNTINFO_MAX_BYTES: usize = 8 << 20;

/// Where the NVIDIA device plugin's `volume-mounts` strategy lists the GPUs given.
const NVIDIA_CONTAINER_DEVICES: &str = "/var/run/nvidia-container-devices";

/// Where DRA drivers' kubelet plugins mount device metadata files (KEP-5304;
/// k8s.io/dynamic-resource-allocation `api/metadata/types.go` `ContainerDir`): under
/// `resourceclaims/<claim>` or `resourceclaimtemplates/<podClaimName>`, then
/// `<request>/<driver>-metadata.json`.
const DRA_METADATA_DIR: &str = "/var/run/kubernetes.io/dra-device-attributes";

/// Peer-memory markers NCCL checks before it enables GPUDirect RDMA.
const PEERMEM_MARKERS: [&str; 3] = [
    "/sys/module/nvidia_peermem/version",
    "/sys/kernel/mm/memory_peers/nv_mem/version",
    "/sys/kernel/mm/memory_peers/nv_mem_nc/version",
];

/// Environment variables kept in the model: the ones that decide which devices this
/// process owns and how NCCL will behave.
fn env_is_relevant(key: &str) -> bool {
    const EXACT: [&str; 9] = [
        "CUDA_VISIBLE_DEVICES",
        "NVIDIA_VISIBLE_DEVICES",
        "LOCAL_RANK",
        "LOCAL_WORLD_SIZE",
        "RANK",
        "WORLD_SIZE",
        "KUBERNETES_SERVICE_HOST",
        "CUDA_DEVICE_ORDER",
        // Set by podman and systemd-nspawn in the container's environment.
        "container",
    ];
    EXACT.contains(&key)
        || LOCAL_RANK_VARS.contains(&key)
        || LOCAL_SIZE_VARS.contains(&key)
        || key.starts_with("NCCL_")
        || key.starts_with("PCIDEVICE_")
}

pub(super) fn read_numa(ctx: &mut Ctx, topo: &mut Topology) {
    let distances_wanted = ctx.needs.numa_distances;
    let memory_wanted = ctx.needs.numa_memory;
    let mut nodes: Vec<NumaNode> = ctx
        .list(NODE_DIR)
        .into_iter()
        .filter_map(|name| name.strip_prefix("node")?.parse::<u32>().ok())
        .map(|id| {
            let dir = join(NODE_DIR, &format!("node{id}"));
            let cpus = ctx
                .attr(&join(&dir, "cpulist"), false, parse_cpulist)
                .unwrap_or_default();
            let distances = distances_wanted
                .then(|| {
                    ctx.attr(&join(&dir, "distance"), true, |t| {
                        t.split_whitespace()
                            .map(|d| crate::parse::parse_dec::<u32>("NUMA distance", d))
                            .collect::<Result<Vec<_>, _>>()
                    })
                })
                .flatten()
                .unwrap_or_default();
            let memory_kib = memory_wanted
                .then(|| ctx.attr(&join(&dir, "meminfo"), true, parse_node_mem_total))
                .flatten();
            NumaNode {
                id,
                cpus,
                distances,
                memory_kib,
            }
        })
        .collect();
    nodes.sort_by_key(|n| n.id);
    topo.numa_nodes = nodes;
}

/// `ib_core`'s `netns_mode`: whether RDMA devices are shared by every namespace.
fn read_netns_mode(ctx: &mut Ctx) -> Option<NetnsMode> {
    ctx.text("/sys/module/ib_core/parameters/netns_mode", true)
        .and_then(|t| match t.trim() {
            "Y" | "1" => Some(NetnsMode::Shared),
            "N" | "0" => Some(NetnsMode::Exclusive),
            _ => None,
        })
}

pub(super) fn read_host(ctx: &mut Ctx, topo: &mut Topology) {
    if ctx.needs.host == HostFacts::None {
        return;
    }
    let host = &mut topo.host;
    host.rdma_netns_mode = read_netns_mode(ctx);
    let route = ctx.net_table("route");
    host.default_route_interface = ctx.text(&route, true).and_then(|t| default_route(&t));
    // `topo` in a container needs of the host's facts these two alone (ownership).
    if ctx.needs.host == HostFacts::Ownership {
        return;
    }
    host.cpus_online = ctx.attr("/sys/devices/system/cpu/online", true, parse_cpulist);
    if ctx.needs.host == HostFacts::Cpus {
        return;
    }
    host.cpu = ctx
        .fs
        .read_prefix("/proc/cpuinfo", 8192)
        .ok()
        .map(|t| parse_cpuinfo(&t));
    host.peermem = PEERMEM_MARKERS
        .iter()
        .filter(|p| ctx.fs.exists(p))
        .map(|p| p.to_string())
        .collect();
    host.nvidia_driver = ctx.text("/sys/module/nvidia/version", true);
}

pub(super) fn read_process(ctx: &mut Ctx, topo: &mut Topology) {
    // Else what the CPU mask and the host/container decision need.
    let whole = ctx.needs.process_whole;
    let p = &mut topo.process;
    if let Some(status) = ctx.text("/proc/self/status", true) {
        p.cap_eff = parse_status_field(&status, "CapEff")
            .and_then(|v| u64::from_str_radix(v.trim(), 16).ok());
        p.cpus_allowed = parse_status_field(&status, "Cpus_allowed_list")
            .and_then(|v| ctx.accept("/proc/self/status", parse_cpulist(v)));
    }
    if let Ok(bytes) = ctx.fs.read_bytes("/proc/self/environ", 1 << 20) {
        p.env = parse_environ(&bytes)
            .into_iter()
            .filter(|(k, _)| env_is_relevant(k))
            .collect();
    }
    read_dra_metadata(ctx, p);
    p.cgroups = ctx
        .attr("/proc/self/cgroup", true, parse_cgroup)
        .unwrap_or_default();
    let dirs = cgroup_dirs(&p.cgroups);
    for dir in &dirs {
        if p.cgroup_cpuset.is_none() {
            for name in ["cpuset.cpus.effective", "cpuset.effective_cpus"] {
                if let Some(set) = ctx.attr(&join(dir, name), true, parse_cpulist) {
                    p.cgroup_cpuset = Some(set);
                    break;
                }
            }
        }
    }
    if ctx.needs.limits && !ctx.rdma_limits_later {
        read_rdma_limits(ctx, p, None);
    }
    read_device_view(ctx, p, whole);
}

/// The rdma cgroup's `rdma.max` and `rdma.current` of this process, of every device
/// or (`held`) of those named: an owned view reads the lines of its own devices.
pub(super) fn read_rdma_limits(ctx: &mut Ctx, p: &mut Process, held: Option<&BTreeSet<String>>) {
    let wanted = |d: &str| held.is_none_or(|h| h.contains(d));
    for dir in cgroup_dirs(&p.cgroups) {
        if p.rdma_max.is_some() {
            break;
        }
        p.rdma_max = ctx.attr(&join(&dir, "rdma.max"), true, |t| {
            parse_rdma_cgroup_of(t, wanted)
        });
        p.rdma_current = ctx.attr(&join(&dir, "rdma.current"), true, |t| {
            parse_rdma_cgroup_of(t, wanted)
        });
    }
}

/// Device nodes and the driver's GPU list (only with `whole`), runtime mounts and
/// container markers.
fn read_device_view(ctx: &mut Ctx, p: &mut Process, whole: bool) {
    if whole {
        read_memlock(ctx, p);
        read_device_nodes(ctx, p);
    }
    // Container hosts have thousands of mounts: read more than one attribute's worth.
    match ctx
        .fs
        .read_bytes("/proc/self/mountinfo", MOUNTINFO_MAX_BYTES)
    {
        Ok(bytes) => {
            p.device_mounts = parse_mountinfo(&String::from_utf8_lossy(&bytes))
                .into_iter()
                .filter(|m| is_device_mount(&m.mount_point))
                .collect();
        }
        Err(e) if e.is_not_found() => {}
        Err(e) => ctx.unreadable(&e),
    }
    p.container_markers = CONTAINER_MARKERS
        .iter()
        .filter(|m| ctx.fs.exists(m))
        .map(|m| m.to_string())
        .collect();
    if whole {
        read_container_devices(ctx, p);
    }
}

/// The rest of a process view read without [`super::Needs::process_whole`]: what a
/// container's answer needs once the process view has said it is one.
pub(super) fn read_process_rest(ctx: &mut Ctx, p: &mut Process) {
    read_memlock(ctx, p);
    read_device_nodes(ctx, p);
    read_container_devices(ctx, p);
}

fn read_memlock(ctx: &mut Ctx, p: &mut Process) {
    if ctx.needs.limits {
        p.memlock = ctx.attr("/proc/self/limits", true, parse_limits_memlock);
    }
}

/// The devices the DRA device metadata files name, with their PCI addresses: like
/// `PCIDEVICE_*`, what this container was given. Read with the environment, as the
/// partial read takes the functions they name as candidates.
fn read_dra_metadata(ctx: &mut Ctx, p: &mut Process) {
    for kind in ["resourceclaims", "resourceclaimtemplates"] {
        let base = join(DRA_METADATA_DIR, kind);
        for claim in ctx.fs.list_opt(&base).unwrap_or_default() {
            let claim_dir = join(&base, &claim);
            for request in ctx.fs.list_opt(&claim_dir).unwrap_or_default() {
                let dir = join(&claim_dir, &request);
                for name in ctx.fs.list_opt(&dir).unwrap_or_default() {
                    if !name.ends_with("-metadata.json") {
                        continue;
                    }
                    let file = join(&dir, &name);
                    let Some(devices) = ctx.attr(&file, true, parse_device_metadata) else {
                        continue;
                    };
                    for d in devices {
                        let Some((attr, text)) = PCI_ATTRIBUTES
                            .iter()
                            .find_map(|a| d.attributes.get(*a).map(|v| (*a, v)))
                        else {
                            continue;
                        };
                        let pci = ctx.accept(
                            &file,
                            text.parse::<PciAddr>()
                                .map_err(|_| ParseError::new(attr, text, "not a PCI address")),
                        );
                        if let Some(pci) = pci {
                            p.dra_metadata_devices.push(DraMetadataDevice {
                                file: file.clone(),
                                driver: d.driver,
                                pool: d.pool,
                                device: d.name,
                                pci: pci.to_string(),
                            });
                        }
                    }
                }
            }
        }
    }
}

/// The device list of the NVIDIA runtime's `NVIDIA_VISIBLE_DEVICES=/var/run/nvidia-container-devices`.
fn read_container_devices(ctx: &mut Ctx, p: &mut Process) {
    if p.env.get("NVIDIA_VISIBLE_DEVICES").map(String::as_str) == Some(NVIDIA_CONTAINER_DEVICES) {
        p.nvidia_container_devices = ctx
            .fs
            .list_opt(NVIDIA_CONTAINER_DEVICES)
            .unwrap_or_default();
    }
}

/// `/dev/infiniband`, `/dev/nvidia<N>` and what the NVIDIA driver lists under
/// `/proc/driver/nvidia`.
fn read_device_nodes(ctx: &mut Ctx, p: &mut Process) {
    p.dev_infiniband = ctx.fs.list_opt("/dev/infiniband").unwrap_or_default();
    let dev = ctx.fs.list("/dev").ok();
    p.dev_listed = dev.as_ref().is_some_and(|d| !d.is_empty());
    let mut minors: Vec<u32> = dev
        .unwrap_or_default()
        .iter()
        .filter_map(|n| n.strip_prefix("nvidia")?.parse().ok())
        .collect();
    minors.sort_unstable();
    p.dev_nvidia = minors;
    p.proc_driver_nvidia = ctx.fs.exists("/proc/driver/nvidia");
    p.proc_nvidia_gpus = ctx.fs.list_opt(PROC_NVIDIA_GPUS).unwrap_or_default();
    p.proc_nvidia_gpu_info = p
        .proc_nvidia_gpus
        .iter()
        .map(|bus_id| {
            let path = join(&join(PROC_NVIDIA_GPUS, bus_id), "information");
            let text = ctx.text(&path, true).unwrap_or_default();
            parse_nvidia_information(bus_id, &text)
        })
        .collect();
}

/// Mount points that say which devices a runtime gave the container.
fn is_device_mount(mount_point: &str) -> bool {
    mount_point == "/proc/driver/nvidia"
        || mount_point.starts_with("/proc/driver/nvidia/gpus/")
        || mount_point
            .strip_prefix("/dev/nvidia")
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        || mount_point.starts_with("/dev/infiniband")
}

/// Directories that may hold this process's cgroup files: the v2 path, the v1
/// `cpuset`/`rdma` paths, and the cgroup-namespace root `/sys/fs/cgroup`.
fn cgroup_dirs(cgroups: &[crate::parse::CgroupEntry]) -> Vec<String> {
    let mut dirs = Vec::new();
    for cg in cgroups {
        let rel = cg.path.trim_start_matches('/');
        if rel.contains("..") {
            continue;
        }
        if cg.controllers.is_empty() {
            dirs.push(format!("/sys/fs/cgroup/{rel}"));
        }
        for ctl in &cg.controllers {
            if ctl == "cpuset" || ctl == "rdma" {
                dirs.push(format!("/sys/fs/cgroup/{ctl}/{rel}"));
            }
        }
    }
    dirs.push("/sys/fs/cgroup".to_string());
    dirs.iter_mut()
        .for_each(|d| *d = d.trim_end_matches('/').to_string());
    dirs.dedup();
    dirs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_mounts() {
        let m = parse_mountinfo(
            "1290 1180 0:245 / /proc/driver/nvidia rw,nosuid,nodev,noexec,relatime - tmpfs tmpfs rw,mode=555\n\
             1291 1290 0:22 /driver/nvidia/gpus/0000:18:00.0 /proc/driver/nvidia/gpus/0000:18:00.0 ro,nosuid,nodev,noexec,relatime shared:5 - proc proc rw\n\
             1292 1188 0:5 /nvidia3 /dev/nvidia3 ro,nosuid,noexec,relatime master:2 - devtmpfs udev rw,size=1024k\n\
             1293 1180 0:60 / /mnt/with\\040space rw - ext4 /dev/sda1 rw\n",
        );
        let device: Vec<&str> = m
            .iter()
            .filter(|m| is_device_mount(&m.mount_point))
            .map(|m| m.mount_point.as_str())
            .collect();
        assert_eq!(
            device,
            [
                "/proc/driver/nvidia",
                "/proc/driver/nvidia/gpus/0000:18:00.0",
                "/dev/nvidia3"
            ]
        );
        assert!(!is_device_mount("/dev/nvidiactl"));
    }
}
