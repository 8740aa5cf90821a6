//! Checks on the devices themselves: GPUs outside the NVIDIA driver, SR-IOV virtual
//! functions (3), GPUDirect RDMA prerequisites and the RDMA character devices (8).

use super::report::Sink;
use super::words::{list, pci_dir, port_dir, port_name, short_list, state_text};
use crate::model::RdmaDevice;
use crate::parse::{merge_natural, parse_nccl_path_level};
use crate::view::scope::Scope;

/// `NCCL_IB_QPS_PER_CONNECTION` from this process's environment (NCCL's default 1).
fn qps_per_connection(scope: &Scope) -> u64 {
    env_u64(scope, "NCCL_IB_QPS_PER_CONNECTION")
        .unwrap_or(1)
        .max(1)
}

fn env_u64(scope: &Scope, key: &str) -> Option<u64> {
    scope.topo.process.env.get(key)?.trim().parse().ok()
}

/// Ranks of this node that open `dev`: `LOCAL_WORLD_SIZE`, else the GPUs that would
/// use it, at least one.
fn local_ranks(scope: &Scope, dev: &str) -> u64 {
    env_u64(scope, "LOCAL_WORLD_SIZE")
        .unwrap_or_else(|| scope.gpus_using(dev).len() as u64)
        .max(1)
}

/// NVIDIA GPUs the `nvidia` driver does not hold, where it holds others: NVML numbers
/// the GPUs it holds, so nvidia-smi, CUDA, NCCL and this report skip them.
pub(super) fn gpu_driver(scope: &Scope, out: &mut Sink) {
    let topo = scope.topo;
    let unnumbered: Vec<_> = topo.unnumbered_gpus().collect();
    if unnumbered.is_empty() {
        let held = topo
            .gpus
            .iter()
            .filter(|g| scope.function(g.pci).and_then(|f| f.driver.as_deref()) == Some("nvidia"))
            .count();
        match (topo.gpus.len(), held) {
            (0, _) => out.not_applicable("no GPU here"),
            (n, h) if h == n => out.note(format!(
                "{n} GPU(s) on this machine, all held by the nvidia driver"
            )),
            (n, _) => out.note(format!(
                "{n} GPU(s), told by their class: the nvidia driver holds none of them"
            )),
        }
        return;
    }
    let numbered = format!(
        "GPU numbers count the nvidia driver's {} GPU(s) only",
        topo.gpus.len()
    );
    for f in unnumbered {
        let name = f.device_name.as_deref().unwrap_or("NVIDIA GPU");
        let driver_link = format!("{}/driver", pci_dir(f.address));
        let finding = match f.driver.as_deref() {
            Some(driver) => out
                .info(format!(
                    "{} ({name}) is bound to {driver}, not nvidia: nvidia-smi, CUDA and NCCL do not see it; {numbered}",
                    f.address
                ))
                .with(driver_link, driver)
                .why(if driver.starts_with("vfio") {
                    "a GPU bound to vfio-pci is being given to a virtual machine (PCI passthrough); its host cannot use it, and the GPU numbers of this host (CUDA_VISIBLE_DEVICES, the device plugin's indices) count the others only"
                } else {
                    "NVML, and with it nvidia-smi, CUDA and NCCL, numbers only the GPUs the nvidia driver holds"
                })
                .fix(format!(
                    "nothing, if it is meant for a VM; to give it back to this host: `driverctl unset-override {}` (or clear /sys/bus/pci/devices/{}/driver_override and write the address to /sys/bus/pci/drivers_probe)",
                    f.address, f.address
                )),
            None => out
                .warning(format!(
                    "{} ({name}) is bound to no driver: the nvidia driver did not take it, so nvidia-smi, CUDA and NCCL do not see it; {numbered}",
                    f.address
                ))
                .with(driver_link, "absent")
                .why("a GPU the nvidia driver did not probe (\"NVRM: The NVIDIA probe routine failed\" in the kernel log), excluded with NVreg_ExcludedGpus, or unbound by hand is missing from every GPU count of this host while its slot and power stay taken")
                .fix("read the NVRM lines of the kernel log (`dmesg | grep NVRM`) for why the probe failed; a GPU that fails every probe needs a reset or a hardware check (nvidia-bug-report.sh)"),
        };
        out.push(finding);
    }
}

pub(super) fn sriov(scope: &Scope, out: &mut Sink) {
    let vfs: Vec<&RdmaDevice> = scope
        .hcas
        .iter()
        .copied()
        .filter(|d| scope.is_vf(d))
        .collect();
    if vfs.is_empty() {
        out.not_applicable(if scope.hcas.is_empty() {
            "no RDMA device in use"
        } else {
            "no virtual function in use"
        });
        return;
    }
    let mut described = Vec::new();
    let mut first_evidence = Vec::new();
    let mut without_verbs = Vec::new();
    for dev in &vfs {
        let Some(vf) = dev.pci.and_then(|a| scope.function(a)) else {
            continue;
        };
        let pf = vf.physfn.and_then(|a| scope.function(a));
        // Port state of a VF this process owns (or may own).
        for port in dev.ports.iter().filter(|p| !p.is_active()) {
            out.push(
                out.error(format!(
                    "{} (VF {}) is not ACTIVE: NCCL skips it",
                    port_name(dev, port.number),
                    vf.address
                ))
                .with(format!("{}/state", port_dir(&dev.name, port.number)), state_text(port))
                .with(
                    format!("{}/phys_state", port_dir(&dev.name, port.number)),
                    port.phys_state
                        .as_ref()
                        .map_or("-".into(), |p| format!("{}: {}", p.code, p.name)),
                )
                .why("a VF port follows its vport state and the PF uplink: DOWN means the VF link is administratively down on the host or the PF has no carrier, so this rail carries nothing")
                .fix(match pf {
                    Some(pf) => format!(
                        "on the host: `ip link set <pf-netdev> vf {} state auto` (or enable) and check the carrier of {}; with sriov-network-operator set linkState in the SriovNetwork",
                        vf.vf_index.map_or("<n>".to_string(), |i| i.to_string()),
                        scope.nic_label(pf)
                    ),
                    None => "on the host: `ip link set <pf-netdev> vf <n> state auto` and check the PF carrier".into(),
                }),
            );
        }
        described.push(match pf {
            Some(pf) => format!(
                "{} is VF {} of {} ({} VFs enabled)",
                dev.name,
                vf.vf_index.map_or("?".to_string(), |i| i.to_string()),
                scope.nic_label(pf),
                pf.sriov.as_ref().map_or(0, |s| s.num_vfs)
            ),
            None => format!("{} ({}, PF not visible)", dev.name, vf.address),
        });
        if first_evidence.is_empty() {
            first_evidence.push((pci_dir(vf.address), format!("{} (VF)", vf.id())));
            if let Some(pf) = pf
                && let Some(sr) = &pf.sriov
            {
                first_evidence.push((
                    format!("{}/sriov_numvfs", pci_dir(pf.address)),
                    sr.num_vfs.to_string(),
                ));
            }
        }
        if !limits(scope, out, dev) {
            without_verbs.push(dev.name.clone());
        }
    }
    let mut info = out.info(format!(
        "{} virtual function(s) in use: {}",
        vfs.len(),
        if described.len() <= 4 {
            described.join("; ")
        } else {
            format!(
                "{}; … ({} in all)",
                described[..4].join("; "),
                described.len()
            )
        }
    ));
    for (p, v) in first_evidence {
        info = info.with(p, v);
    }
    out.push(info
        .why("a VF is as fast as its PF while it is alone on the port; every busy VF of the same PF takes a share of the one physical link, and VF resources (QPs, CQs, MRs) are carved out of the PF's")
        .fix("nothing to change while this is the only heavy user of each port; otherwise give each training pod VFs of different PFs (one SR-IOV resource per rail)"));
    if !without_verbs.is_empty() {
        out.skip(
            format!("QP/CQ limits of {} are unknown", short_list(&without_verbs, 8)),
            "no libibverbs facts: rdmatopo was built without the `verbs` feature, libibverbs is missing, or the snapshot has no rdmatopo/verbs.json",
            "build with `--features verbs` (needs libibverbs) and run doctor on the node, or `ibv_devinfo -v -d <dev> | grep -E 'max_qp|max_cq'`",
        );
    }
    let names: Vec<String> = vfs.iter().map(|d| d.name.clone()).collect();
    out.skip(
        format!("VF trust and spoofchk of {} are not visible here", short_list(&names, 8)),
        "they are netlink attributes of the PF (IFLA_VF_INFO), not sysfs files, and the PF's netdev is not in this view",
        "on the host: `ip link show <pf-netdev>` (look for `spoof checking off, trust on` on the VFs in use; RoCE over VFs behind macvlan or bonding needs trust on)",
    );
}

/// The verbs limits of a VF against what NCCL needs; false when there are no verbs
/// facts for it.
fn limits(scope: &Scope, out: &mut Sink, dev: &RdmaDevice) -> bool {
    let Some(vd) = scope
        .topo
        .verbs
        .as_ref()
        .and_then(|v| v.devices.iter().find(|d| d.name == dev.name))
    else {
        return false;
    };
    let ranks = local_ranks(scope, &dev.name);
    let world = env_u64(scope, "WORLD_SIZE");
    // All-to-all connects every peer; each connection takes one QP per direction
    // (times NCCL_IB_QPS_PER_CONNECTION) and a completion queue.
    let peers = world.map_or(1023, |w| w.saturating_sub(1).max(1));
    let need = ranks * peers * 2 * qps_per_connection(scope);
    let job = match world {
        Some(w) => format!("WORLD_SIZE={w}"),
        None => "a 1024-rank job (WORLD_SIZE unset)".to_string(),
    };
    for (what, have) in [("max_qp", vd.max_qp), ("max_cq", vd.max_cq)] {
        let Some(have) = have else { continue };
        if u64::from(have) >= need {
            continue;
        }
        out.push(
            out.warning(format!(
                "VF {} offers {what} {have}, below the ~{need} that all-to-all needs for {job} with {ranks} local rank(s)",
                dev.name
            ))
            .with(format!("verbs: {} {what}", dev.name), have)
            .why("NCCL opens one QP per peer connection and direction (times NCCL_IB_QPS_PER_CONNECTION); when the VF runs out, connection setup fails with ENOMEM or NCCL falls back to fewer channels")
            .fix("lower sriov_numvfs on the PF (each VF gets a larger share), or assign the PF; the per-VF share is set in the adapter firmware (mlxconfig NUM_OF_VFS)"),
        );
    }
    true
}

pub(super) fn gpudirect(scope: &Scope, out: &mut Sink) {
    if scope.gpus.is_empty() || scope.usable_hcas().is_empty() {
        out.not_applicable("needs a GPU and a usable RDMA device");
        return;
    }
    gdr_level(scope, out);
    let host = &scope.topo.host;
    if let Some(marker) = host.peermem.first() {
        if out.findings.is_empty() {
            out.note(format!("peer memory module loaded ({marker})"));
        }
        return;
    }
    let mut f = out.warning(
        "no GPU peer-memory module is loaded (nvidia_peermem / nv_peer_mem): GPUDirect RDMA depends on DMA-BUF, which sysfs cannot show",
    );
    for p in [
        "/sys/module/nvidia_peermem/version",
        "/sys/kernel/mm/memory_peers/nv_mem/version",
    ] {
        f = f.with(p, "absent");
    }
    // DMA-BUF needs NVIDIA driver R515+ (open kernel modules) and CUDA 11.7.
    let driver_major = host
        .nvidia_driver
        .as_deref()
        .and_then(|v| v.split('.').next()?.parse::<u32>().ok());
    let cuda = scope.topo.nvml.as_ref().and_then(|n| n.cuda_driver_version);
    let dmabuf_impossible =
        driver_major.is_some_and(|m| m < 515) || cuda.is_some_and(|c| c < 11070);
    if let Some(v) = &host.nvidia_driver {
        f = f.with("/sys/module/nvidia/version", v);
    }
    if let Some(c) = cuda {
        f = f.with("nvml: cuda_driver_version", c);
    }
    if dmabuf_impossible {
        f.severity = crate::model::Severity::Error;
        f.summary = "GPUDirect RDMA is not possible: no peer-memory module and the NVIDIA driver is too old for DMA-BUF".into();
    }
    out.push(f
        .why("without GPUDirect RDMA the NIC cannot read or write GPU memory: NCCL stages every message through host memory (\"GPU Direct RDMA Disabled\" in NCCL_DEBUG=INFO), which costs bandwidth and CPU; missing peer memory cut bandwidth ~10x in NVIDIA/nccl#1676")
        .fix("on the host: `modprobe nvidia_peermem` (GPU Operator: driver.rdma.enabled=true), or use DMA-BUF: NVIDIA open kernel modules R515+, kernel >= 5.12, CUDA >= 11.7, NCCL >= 2.13 (GPU Operator: driver.useOpenKernelModules=true)"));
}

/// This process's `NCCL_NET_GDR_LEVEL`, as `ncclTopoCheckGdr` applies it (nccl
/// `src/graph/paths.cc`): GPUDirect RDMA between a GPU and a NIC only while their path
/// is within the level (default PXB).
pub(super) fn gdr_level(scope: &Scope, out: &mut Sink) {
    if !scope.own_environment {
        return;
    }
    let Some(value) = scope.topo.process.env.get("NCCL_NET_GDR_LEVEL") else {
        return;
    };
    let evidence = format!("NCCL_NET_GDR_LEVEL={value}");
    let level = match parse_nccl_path_level(value) {
        Ok(level) => level,
        Err(_) => {
            out.push(
                out.warning(format!(
                    "NCCL_NET_GDR_LEVEL={value} is not a level NCCL knows: NCCL ignores it and keeps its default (PXB)"
                ))
                .with("/proc/self/environ", evidence)
                .why("NCCL reads LOC, NVL, NVB, C2C, PIX, PXB, P2C, PXN, PHB or SYS (upper case), or an old-style number from 0; anything else leaves GPUDirect RDMA as it was, without a warning")
                .fix("PHB for GPU-NIC paths through the CPU within a NUMA node (nvidia-smi's PHB and NODE), SYS across sockets; or unset it"),
            );
            return;
        }
    };
    let off: Vec<String> = scope
        .gpu_nics
        .iter()
        .filter(|gn| gn.class.allows_gdr() && gn.class.nccl_level() > level)
        .map(|gn| {
            let nics: Vec<String> = gn.nics.iter().map(|d| d.name.clone()).collect();
            format!(
                "{} at {} from {}",
                scope.gpu_label(gn.gpu),
                gn.class,
                list(&nics)
            )
        })
        .collect();
    if off.is_empty() {
        return;
    }
    out.push(
        out.warning(format!(
            "NCCL_NET_GDR_LEVEL={value} turns GPUDirect RDMA off for {}",
            list(&off)
        ))
        .with("/proc/self/environ", evidence)
        .why("NCCL lets the NIC read and write GPU memory only while their path is within NCCL_NET_GDR_LEVEL (PXB by default); beyond it every message is staged through host memory, which costs bandwidth and CPU (\"GPU Direct RDMA Disabled\" in NCCL_DEBUG=INFO)")
        .fix("unset NCCL_NET_GDR_LEVEL; if it was set to 0 to get past ACS redirect, disable ACS redirect instead (see acs-redirect)"),
    );
}

pub(super) fn char_devices(scope: &Scope, out: &mut Sink) {
    let topo = scope.topo;
    // An owned view holds a device of its own whenever it names others (lib.rs).
    if topo.rdma_devices.is_empty() {
        out.not_applicable("no RDMA device");
        return;
    }
    let nodes = &topo.process.dev_infiniband;
    let listing = if nodes.is_empty() {
        "absent or empty".to_string()
    } else {
        nodes.join(" ")
    };
    if topo.rdma_devices.iter().all(|d| d.uverbs.is_none()) {
        out.push(
            out.error("no RDMA device has a uverbs interface: ib_uverbs is not loaded on the host")
                .with("/sys/class/infiniband_verbs", "absent")
                .why("user space (libibverbs, NCCL) reaches an HCA only through /dev/infiniband/uverbs<N>; without ib_uverbs NCCL falls back to TCP sockets")
                .fix("on the host: `modprobe ib_uverbs rdma_ucm` (persist in /etc/modules-load.d); the NVIDIA Network Operator's OFED driver container loads them"),
        );
        return;
    }
    let missing: Vec<&RdmaDevice> = topo
        .rdma_devices
        .iter()
        .filter(|d| match &d.uverbs {
            Some(u) => !nodes.iter().any(|n| n == u),
            // An owned view's partial read: no node in /dev/infiniband is this device's.
            None => !topo.holds_rdma_details(&d.name),
        })
        .collect();
    let present = topo.rdma_devices.len() - missing.len();
    // The devices an owned view only names are other containers': none has a node here.
    let others = topo.other_rdma_devices();
    if present == 0 {
        // Name the devices this container was meant to use when they are known.
        let judged: Vec<&RdmaDevice> = if scope.hcas.len() < missing.len() {
            scope.hcas.clone()
        } else {
            missing.clone()
        };
        let names: Vec<String> = judged
            .iter()
            .map(|d| format!("{} ({})", d.name, d.uverbs.as_deref().unwrap_or("?")))
            .collect();
        out.push(
            out.error(format!(
                "no /dev/infiniband/uverbs node here: {} cannot be opened{}",
                short_list(&names, 6),
                if judged.len() < missing.len() {
                    format!(" (none of the {} RDMA devices in sysfs can)", missing.len())
                } else {
                    String::new()
                }
            ))
            .with("/dev/infiniband", listing.clone())
            .why("without the uverbs character device libibverbs cannot open the HCA: NCCL finds no IB device and silently falls back to TCP sockets (NET/Socket), far below the NICs' RDMA bandwidth")
            .fix(if scope.context.is_container() {
                "request the RDMA resource in the pod spec (resources.limits, e.g. rdma/rdma_shared_device_a: 1 from k8s-rdma-shared-dev-plugin, or an SR-IOV VF resource with isRdma: true); with plain Docker: --device=/dev/infiniband --cap-add=IPC_LOCK"
            } else {
                "load ib_uverbs and check udev created /dev/infiniband/uverbs*: `modprobe ib_uverbs; ls -l /dev/infiniband`"
            }),
        );
        return;
    }
    if !missing.is_empty() || !others.is_empty() {
        let names = merge_natural(missing.iter().map(|d| d.name.as_str()), others);
        if scope.context.is_container() {
            out.push(
                out.info(format!(
                    "{} RDMA device(s) visible in sysfs are not assigned to this container (no uverbs node) and are not judged: {}",
                    names.len(),
                    short_list(&names, 8)
                ))
                .with("/dev/infiniband", listing.clone())
                .why("in RDMA shared netns mode every HCA shows in /sys/class/infiniband; only the device nodes tell which ones this container may open")
                .fix("none needed; to use them, request them as device-plugin resources"),
            );
        } else {
            out.push(
                out.warning(format!(
                    "{} have no /dev/infiniband/uverbs node",
                    short_list(&names, usize::MAX)
                ))
                .with("/dev/infiniband", listing.clone())
                .why("a device without its uverbs node cannot be opened from user space, so NCCL does not see that rail")
                .fix("check udev rules for /dev/infiniband (rdma-core's 90-rdma-umad/uverbs rules) or recreate the nodes by reloading ib_uverbs"),
            );
        }
    }
    if !nodes.iter().any(|n| n == "rdma_cm") {
        out.push(
            out.warning("/dev/infiniband/rdma_cm is missing")
                .with("/dev/infiniband", listing)
                .why("NCCL itself does not need rdma_cm, but RDMA CM users do: UCX (rdmacm), perftest -R, NVMe-oF, MPI over UCX; they fail to connect")
                .fix(if scope.context.is_container() {
                    "the device plugin mounts rdma_cm with the uverbs nodes (k8s-rdma-shared-dev-plugin always does); with plain Docker add --device=/dev/infiniband/rdma_cm"
                } else {
                    "`modprobe rdma_ucm`"
                }),
        );
    }
    if out.findings.is_empty() {
        out.note(format!("{present} uverbs node(s) and rdma_cm present"));
    }
}
