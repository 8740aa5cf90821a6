//! PCIe checks on GPU-NIC paths (8): links trained below their maximum, and ACS
//! peer-to-peer redirect on the bridges between a GPU and its NIC or the one
//! `gpu-nic-distance` recommends (the nearest function, chosen here for both checks).

use super::report::Sink;
use super::words::{list, pci_dir};
use crate::model::{PciFunction, PciRole};
use crate::parse::{AcsFlags, AcsState, LinkSpeed, PciAddr};
use crate::view::affinity::{PathClass, path_class};
use crate::view::scope::GpuNics;
use crate::view::scope::Scope;

/// The functions on the path between `a` and `b` below their lowest common ancestor
/// (which the traffic does not pass through); the whole of both chains when they
/// meet only at the host bridge or beyond.
fn path<'a>(scope: &Scope<'a>, a: PciAddr, b: PciAddr) -> Vec<&'a PciFunction> {
    let topo = scope.topo;
    let up = |x: PciAddr| -> Vec<&'a PciFunction> {
        let mut v: Vec<&PciFunction> = topo.pci_function(x).into_iter().collect();
        v.extend(topo.ancestors(x));
        v
    };
    let (ua, ub) = (up(a), up(b));
    let mut out: Vec<&PciFunction> = Vec::new();
    for (chain, other) in [(&ua, &ub), (&ub, &ua)] {
        for f in chain.iter() {
            if other.iter().any(|g| g.address == f.address) {
                break;
            }
            out.push(f);
        }
    }
    out
}

/// Every (GPU, NIC) pair this process would use.
fn pairs<'a>(scope: &Scope<'a>) -> Vec<(String, PciAddr, String, PciAddr, PathClass)> {
    let mut out = Vec::new();
    for gn in &scope.gpu_nics {
        for nic in &gn.nics {
            if let Some(n) = nic.pci {
                out.push((
                    scope.gpu_name(gn.gpu),
                    gn.gpu.pci,
                    nic.name.clone(),
                    n,
                    gn.class,
                ));
            }
        }
    }
    out
}

fn speed_text(s: Option<LinkSpeed>) -> String {
    s.map_or("Unknown".into(), |s| format!("{} GT/s", s.gts))
}

fn min_speed(a: Option<LinkSpeed>, b: Option<LinkSpeed>) -> Option<LinkSpeed> {
    match (a, b) {
        (Some(x), Some(y)) => Some(if x.gts <= y.gts { x } else { y }),
        (x, None) => x,
        (None, y) => y,
    }
}

fn min_width(a: Option<u32>, b: Option<u32>) -> Option<u32> {
    match (a.filter(|w| *w > 0), b.filter(|w| *w > 0)) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, None) => x,
        (None, y) => y,
    }
}

pub(super) fn link(scope: &Scope, out: &mut Sink) {
    let pairs = pairs(scope);
    if pairs.is_empty() {
        out.not_applicable("no GPU-NIC pair in use");
        return;
    }
    let topo = scope.topo;
    let mut seen: Vec<PciAddr> = Vec::new();
    let mut checked = 0;
    for (gpu_name, g, nic_name, n, _) in &pairs {
        for f in path(scope, *g, *n) {
            // Each physical link is described by the function below it (endpoint or
            // switch upstream port); the port above (root or downstream port) bounds
            // what the link can reach. VFs have no link of their own.
            if !matches!(f.role, PciRole::Endpoint | PciRole::SwitchUpstream)
                || f.is_vf
                || seen.contains(&f.address)
            {
                continue;
            }
            seen.push(f.address);
            let parent = f.parent.and_then(|p| topo.pci_function(p));
            let link = &f.link;
            let cap_speed = min_speed(link.max_speed, parent.and_then(|p| p.link.max_speed));
            let cap_width = min_width(link.max_width, parent.and_then(|p| p.link.max_width));
            let (Some(cur_speed), Some(cur_width)) = (link.current_speed, link.current_width)
            else {
                continue;
            };
            checked += 1;
            let slow = cap_speed.is_some_and(|c| cur_speed.gts + 0.01 < c.gts);
            let narrow = cap_width.is_some_and(|c| cur_width > 0 && cur_width < c);
            if !slow && !narrow {
                continue;
            }
            let is_gpu = f.is_nvidia_gpu();
            let label = if is_gpu && f.address == *g {
                scope.topo.gpus.iter().find(|x| x.pci == *g).map_or_else(
                    || format!("{gpu_name} ({})", f.address),
                    |x| scope.gpu_label(x),
                )
            } else if is_gpu {
                format!("GPU {}", f.address)
            } else if f.address == *n {
                format!("{nic_name} ({})", f.address)
            } else {
                format!("bridge {} (on the {gpu_name}-{nic_name} path)", f.address)
            };
            let summary = format!(
                "{label} link trained at {} x{cur_width}, below its {} x{}",
                speed_text(Some(cur_speed)),
                speed_text(cap_speed),
                cap_width.unwrap_or(cur_width)
            );
            // NVIDIA GPUs lower their link speed when idle (power management); only
            // a narrower link is a fault there.
            let idle_gpu = is_gpu && slow && !narrow;
            // No NVIDIA GPU of this century tops out at 2.5 GT/s: a GPU whose link
            // reaches no more is on the die (GB10, behind NVLink-C2C), and its
            // reported link (x1 of x16) is nothing to reseat.
            let on_die_gpu = is_gpu && cap_speed.is_some_and(|c| c.gts < 2.5 + 0.01);
            let mut finding = if on_die_gpu {
                out.info(format!(
                    "{summary} (a GPU on the die, not in a PCIe slot: its link tops out at 2.5 GT/s)"
                ))
            } else if idle_gpu {
                out.info(format!("{summary} (normal while the GPU is idle)"))
            } else {
                out.warning(summary)
            };
            let dir = pci_dir(f.address);
            finding = finding
                .with(
                    format!("{dir}/current_link_speed"),
                    speed_text(Some(cur_speed)),
                )
                .with(format!("{dir}/max_link_speed"), speed_text(link.max_speed))
                .with(format!("{dir}/current_link_width"), cur_width)
                .with(
                    format!("{dir}/max_link_width"),
                    link.max_width.map_or("-".into(), |w| w.to_string()),
                );
            if let Some(p) = parent {
                finding = finding
                    .with(
                        format!("{}/max_link_speed", pci_dir(p.address)),
                        speed_text(p.link.max_speed),
                    )
                    .with(
                        format!("{}/max_link_width", pci_dir(p.address)),
                        p.link.max_width.map_or("-".into(), |w| w.to_string()),
                    );
            }
            out.push(if idle_gpu {
                finding
                    .why("GPUs drop to a lower PCIe speed when idle and retrain under load")
                    .fix("re-run doctor while the GPU is busy; if it stays low under load, reseat the GPU or check the riser/retimer")
            } else {
                finding
                    .why("every byte between this GPU and its NIC crosses this link: a link at half the width or speed halves GPUDirect RDMA bandwidth (a x8 Gen4 link carries ~16 GB/s, below one 200 Gb/s port)")
                    .fix("reseat the card or cable, check the slot's bifurcation and the BIOS PCIe speed setting, and check `lspci -vvv -s <bdf>` LnkSta vs LnkCap; a link that trained down usually needs a cold reboot or hardware service")
            });
        }
    }
    if out.findings.is_empty() {
        out.note(format!(
            "{checked} link(s) on {} GPU-NIC path(s) at their maximum",
            pairs.len()
        ));
    }
}

/// What a bridge's ACS does to peer-to-peer traffic through it.
enum BridgeAcs {
    /// No redirect (capability absent, or present with ReqRedir- CmpltRedir-).
    Clean,
    /// P2P Request or Completion Redirect on: the control register as read.
    Redirects(AcsFlags),
    /// Not judged: bytes of config space read (0: none).
    Unreadable(usize),
}

fn bridge_acs(f: &PciFunction) -> BridgeAcs {
    match f.acs {
        Some(AcsState::Present { control, .. }) if control.redirects_p2p() => {
            BridgeAcs::Redirects(control)
        }
        Some(AcsState::Present { .. } | AcsState::Absent) => BridgeAcs::Clean,
        Some(AcsState::NotReadable { config_bytes }) => BridgeAcs::Unreadable(config_bytes),
        None => BridgeAcs::Unreadable(0),
    }
}

/// The bridges whose ACS decides whether peer-to-peer between `a` and `b` (at `class`)
/// stays below the root complex: those strictly between them, for PIX/PXB pairs only
/// (anything farther crosses the root complex whatever ACS says).
fn p2p_bridges<'a>(
    scope: &Scope<'a>,
    a: PciAddr,
    b: PciAddr,
    class: PathClass,
) -> Vec<&'a PciFunction> {
    if !matches!(class, PathClass::Pix | PathClass::Pxb) {
        return Vec::new();
    }
    path(scope, a, b)
        .into_iter()
        .filter(|f| f.is_bridge())
        .collect()
}

/// The bridges between `a` and `b` (at `class`) whose ACS redirects peer-to-peer
/// traffic up to the root complex, with their `ACSCtl` as lspci spells it.
pub(super) fn redirecting<'a>(
    scope: &Scope<'a>,
    a: PciAddr,
    b: PciAddr,
    class: PathClass,
) -> Vec<(&'a PciFunction, String)> {
    p2p_bridges(scope, a, b, class)
        .into_iter()
        .filter_map(|f| match bridge_acs(f) {
            BridgeAcs::Redirects(control) => Some((f, control.lspci())),
            _ => None,
        })
        .collect()
}

/// The fix for ACS redirect on `ports` (bridge addresses).
fn acs_fix(ports: &[String]) -> String {
    let (these, setpci) = match ports {
        [one] => (
            "this bridge",
            format!("`setpci -s {one} ECAP_ACS+0x6.w=0000` on each switch port"),
        ),
        _ => (
            "these bridges",
            format!(
                "`setpci -s <bdf> ECAP_ACS+0x6.w=0000` for each of {}",
                list(ports)
            ),
        ),
    };
    format!(
        "disable ACS on {these}: BIOS setting (\"PCIe ACS\" / \"ACS Control\" disabled), or at boot {setpci} (NVIDIA's GPUDirect guide); on bare metal also boot with iommu=pt. In VMs, keep ACS and enable ATS with Direct Translated P2P instead"
    )
}

/// The nearest RDMA-capable function on the machine (`machine`: `scope.machine_nics()`)
/// to the GPU `gpu`, owned or not, and its class: PFs before VFs at the same class, then
/// by address, so that the choice is stable.
pub(super) fn nearest<'a>(
    scope: &Scope<'a>,
    machine: &[&'a PciFunction],
    gpu: &PciFunction,
) -> Option<(&'a PciFunction, PathClass)> {
    machine
        .iter()
        .map(|f| (*f, path_class(scope.topo, gpu, f)))
        .min_by_key(|(f, c)| (c.rank(), f.is_vf, f.address))
}

/// Whether a GPU whose NIC is `used` away is told to move to the nearest at `best`:
/// only when the used one is beyond PXB (no GPUDirect RDMA) and the other is closer.
pub(super) fn recommends(used: PathClass, best: PathClass) -> bool {
    !used.allows_gdr() && used.rank() > best.rank()
}

/// The function `gpu-nic-distance` recommends instead of the NIC `gn` uses, and its
/// class; `None` when it recommends nothing for this GPU.
pub(super) fn recommended<'a>(
    scope: &Scope<'a>,
    machine: &[&'a PciFunction],
    gn: &GpuNics,
) -> Option<(&'a PciFunction, PathClass)> {
    let gf = scope.function(gn.gpu.pci)?;
    nearest(scope, machine, gf).filter(|(_, best)| recommends(gn.class, *best))
}

pub(super) fn acs(scope: &Scope, out: &mut Sink) {
    // Peer-to-peer stays below the root complex only for PIX/PXB pairs.
    let pairs: Vec<_> = pairs(scope)
        .into_iter()
        .filter(|p| matches!(p.4, PathClass::Pix | PathClass::Pxb))
        .collect();
    // The devices gpu-nic-distance recommends instead of far NICs: its PIX/PXB advice
    // holds only if ACS lets peer-to-peer to them stay below the switch too.
    let machine = scope.machine_nics();
    let recommended: Vec<_> = scope
        .gpu_nics
        .iter()
        .filter_map(|gn| {
            let (f, class) = recommended(scope, &machine, gn)?;
            let bridges = p2p_bridges(scope, gn.gpu.pci, f.address, class);
            (!bridges.is_empty()).then(|| (scope.gpu_label(gn.gpu), f, class, bridges))
        })
        .collect();
    if pairs.is_empty() && recommended.is_empty() {
        out.not_applicable(
            "no GPU-NIC pair under a common PCIe switch: their traffic goes through the root complex anyway",
        );
        return;
    }
    let mut unreadable: Vec<(PciAddr, usize)> = Vec::new();
    let mut seen: Vec<PciAddr> = Vec::new();
    let mut redirecting: Vec<(&PciFunction, AcsFlags, String)> = Vec::new();
    let mut checked = 0;
    for (gpu_name, g, nic_name, n, class) in &pairs {
        for f in p2p_bridges(scope, *g, *n, *class) {
            if seen.contains(&f.address) {
                continue;
            }
            seen.push(f.address);
            match bridge_acs(f) {
                BridgeAcs::Clean => checked += 1,
                BridgeAcs::Redirects(control) => {
                    checked += 1;
                    redirecting.push((f, control, format!("{gpu_name}-{nic_name}")));
                }
                BridgeAcs::Unreadable(bytes) => unreadable.push((f.address, bytes)),
            }
        }
    }
    for (f, control, pair) in &redirecting {
        out.push(
            out.error(format!(
                "ACS redirects peer-to-peer traffic on bridge {} between {pair}",
                f.address
            ))
            .with(format!("{}/config", pci_dir(f.address)), format!("ACSCtl: {}", control.lspci()))
            .why("with P2P Request/Completion Redirect on, every GPUDirect RDMA transfer between the GPU and the NIC is sent up to the root complex and back instead of across the switch: bandwidth drops sharply or transfers stall (NVIDIA/nccl-tests#252 needed NCCL_NET_GDR_LEVEL=0 until ACS was disabled)")
            .fix(acs_fix(&[f.address.to_string()])),
        );
    }
    // The recommended paths: one warning per (GPU, device), naming every port that
    // redirects (a port shared with a used pair is named again: another pair).
    let mut rec_clean: Vec<PciAddr> = Vec::new();
    let mut rec_names: Vec<String> = Vec::new();
    for (gpu, f, class, bridges) in &recommended {
        let dev = scope.nic_label(f);
        rec_names.push(format!("{gpu} -> {dev}"));
        let mut redirect: Vec<(&PciFunction, AcsFlags)> = Vec::new();
        for b in bridges {
            match bridge_acs(b) {
                BridgeAcs::Redirects(control) => redirect.push((b, control)),
                BridgeAcs::Clean => {
                    if !rec_clean.contains(&b.address) {
                        rec_clean.push(b.address);
                    }
                }
                BridgeAcs::Unreadable(bytes) => {
                    if !unreadable.iter().any(|(a, _)| *a == b.address) {
                        unreadable.push((b.address, bytes));
                    }
                }
            }
        }
        if redirect.is_empty() {
            continue;
        }
        let ports: Vec<String> = redirect
            .iter()
            .map(|(b, _)| b.address.to_string())
            .collect();
        let mut w = out.warning(format!(
            "ACS redirects peer-to-peer traffic on {} {} between {gpu} and {dev}, the device gpu-nic-distance recommends for it",
            if ports.len() == 1 { "bridge" } else { "bridges" },
            list(&ports)
        ));
        for (b, control) in &redirect {
            w = w.with(
                format!("{}/config", pci_dir(b.address)),
                format!("ACSCtl: {}", control.lspci()),
            );
        }
        out.push(
            w.why(format!(
                "{dev} is {class} from {gpu}, close enough for GPUDirect RDMA across the PCIe switch; with P2P Request/Completion Redirect on these ports, that traffic would still be sent up to the root complex and back, so moving to {dev} gains less than its {class} promises (NVIDIA/nccl-tests#252). Nothing uses this path yet, hence a warning"
            ))
            .fix(format!("before moving to {dev}, {}", acs_fix(&ports))),
        );
    }
    if !unreadable.is_empty() {
        let names: Vec<String> = unreadable.iter().map(|(a, _)| a.to_string()).collect();
        let bytes = unreadable.iter().map(|(_, b)| *b).max().unwrap_or(0);
        let mut f = out.info(format!("the ACS state of {} is not readable", list(&names)));
        for (a, b) in unreadable.iter().take(4) {
            f = f.with(
                format!("{}/config", pci_dir(*a)),
                if *b == 0 {
                    "not read".to_string()
                } else {
                    format!("{b} bytes")
                },
            );
        }
        out.skip_with(
            f.why(if bytes > 0 && bytes < 256 {
                "without CAP_SYS_ADMIN the kernel returns only the first 64 bytes of config space; the ACS capability lives in the extended space (offset >= 0x100)"
            } else {
                "the config file is missing or shorter than the 4096-byte extended space"
            })
            .fix("run `rdmatopo doctor` as root on the host, or `sudo lspci -vvv -s <bdf> | grep ACSCtl` for each bridge listed"),
        );
    }
    if out.findings.is_empty() {
        let used = if pairs.is_empty() {
            "no GPU-NIC pair in use under a common PCIe switch".to_string()
        } else {
            format!("{checked} bridge(s) between GPUs and their NICs without ACS redirect")
        };
        out.note(if rec_names.is_empty() {
            used
        } else {
            format!(
                "{used}; {} bridge(s) on the path to the device gpu-nic-distance recommends ({}) without ACS redirect",
                rec_clean.len(),
                list(&rec_names)
            )
        });
    }
}
