//! Check 2: the PCIe distance from each GPU to the NIC it would use, against the
//! nearest RDMA NIC anywhere on the machine.

use super::pcie;
use super::report::Sink;
use super::words::{list, pci_dir};
use crate::model::PciFunction;
use crate::parse::PciAddr;
use crate::view::affinity::{C2cAttach, PathClass, c2c_attach, path_class};
use crate::view::plan::DataDirect;
use crate::view::scope::Scope;

pub(super) fn check(scope: &Scope, out: &mut Sink) {
    if scope.gpus.is_empty() {
        out.not_applicable("no GPU here");
        return;
    }
    if scope.gpu_nics.is_empty() {
        if scope.machine_nics().is_empty() {
            out.not_applicable("no RDMA NIC on this machine");
        } else {
            out.not_applicable("no RDMA device usable here (see rdma-devices and multi-rail)");
        }
        return;
    }
    let machine = scope.machine_nics();
    let mut ok = Vec::new();
    // GPUs whose nearest NIC anywhere is beyond PXB: a property of the machine.
    let mut no_gdr: Vec<(String, PathClass)> = Vec::new();
    // GPUs whose NIC is on their own CPU, which they reach over NVLink-C2C: P2C.
    let mut over_c2c: Vec<(String, PathClass, C2cAttach)> = Vec::new();
    for gn in &scope.gpu_nics {
        let Some(gf) = scope.function(gn.gpu.pci) else {
            continue;
        };
        let used: Vec<String> = gn.nics.iter().map(|d| d.name.clone()).collect();
        let gpu_label = scope.gpu_label(gn.gpu);
        let Some((best_fn, best_class)) = pcie::nearest(scope, &machine, gf) else {
            continue;
        };
        if !pcie::recommends(gn.class, best_class) {
            ok.push(format!("{gpu_label} {} {}", gn.class, list(&used)));
            // NCCL's own place for a Data Direct NIC: its DMA function (NCCL_IB_DATA_DIRECT).
            // NCCL then takes the closest one, so any within PXB of the GPU keeps GDR on.
            let dd_on = DataDirect::from_env(&scope.topo.process.env).uses_dma();
            if dd_on
                && gn.nics.iter().any(|d| {
                    d.data_direct
                        .and_then(|a| scope.function(a))
                        .is_some_and(|dma| path_class(scope.topo, gf, dma).allows_gdr())
                })
            {
                continue;
            }
            if !gn.class.allows_gdr() {
                match p2c(scope, gf, gn.class) {
                    Some(attach) => over_c2c.push((gpu_label, gn.class, attach)),
                    None => no_gdr.push((gpu_label, gn.class)),
                }
            }
            continue;
        }
        let nic_fn = gn.nics[0].pci.and_then(|a| scope.function(a));
        let better = scope.nic_label(best_fn);
        let used_is_vf = nic_fn.is_some_and(|f| f.is_vf);
        // ACS redirect on the way to `better` would send its peer-to-peer traffic
        // through the root complex anyway: the advice is worth less until it is off.
        let redirect = pcie::redirecting(scope, gn.gpu.pci, best_fn.address, best_class);
        let ports: Vec<String> = redirect
            .iter()
            .map(|(b, _)| b.address.to_string())
            .collect();
        let summary = format!(
            "{gpu_label} would use {} at {} while {better} is {best_class} from it{}{}",
            list(&used),
            gn.class,
            if used_is_vf {
                ": its VF sits under a different PCIe switch than the GPU"
            } else {
                ""
            },
            if ports.is_empty() {
                String::new()
            } else {
                format!(
                    " (but ACS on {} redirects peer-to-peer on that path: see acs-redirect)",
                    list(&ports)
                )
            }
        );
        let mut f = if best_class.allows_gdr() {
            out.error(summary)
        } else {
            out.warning(summary)
        };
        f = f
            .with(pci_dir(gn.gpu.pci), gf.path.clone())
            .with(pci_dir(best_fn.address), best_fn.path.clone());
        if let Some(nf) = nic_fn {
            f = f.with(pci_dir(nf.address), nf.path.clone());
        }
        for (b, control) in &redirect {
            f = f.with(
                format!("{}/config", pci_dir(b.address)),
                format!("ACSCtl: {control}"),
            );
        }
        let mut why = if best_class.allows_gdr() {
            format!(
                "NCCL uses GPUDirect RDMA only up to PXB (NCCL_NET_GDR_LEVEL default); at {} every transfer is staged through host memory and crosses the CPU, which costs up to half the bandwidth (NVIDIA/nccl-tests#347; NeMo-RL PR #3670: +29% all-reduce with aligned HCAs)",
                gn.class
            )
        } else {
            format!(
                "{} is farther than {best_class}: traffic crosses more PCIe bridges or the host bridge, adding latency and sharing links with other devices",
                gn.class
            )
        };
        let mut fix = fix_for(scope, best_fn, used_is_vf);
        if !ports.is_empty() {
            why.push_str(&format!(
                ". ACS P2P redirect on {} sends traffic between {gpu_label} and {better} up to the root complex too, so {best_class} pays off only once it is disabled",
                list(&ports)
            ));
            fix.push_str(&format!(
                "; and disable ACS redirect on {} (see the acs-redirect warning)",
                list(&ports)
            ));
        }
        out.push(f.why(why).fix(fix));
    }
    if !no_gdr.is_empty() {
        let worst = no_gdr
            .iter()
            .map(|(_, c)| *c)
            .max_by_key(PathClass::rank)
            .unwrap_or(PathClass::Sys);
        let names: Vec<String> = no_gdr.iter().map(|(g, c)| format!("{g} at {c}")).collect();
        out.push(
            out.info(format!(
                "no RDMA NIC on this machine is within PXB of {}: NCCL will not use GPUDirect RDMA for {} by default",
                list(&names),
                if no_gdr.len() == 1 { "it" } else { "them" }
            ))
            .why("NCCL enables GPUDirect RDMA only up to PXB; beyond that, data is staged through host memory. This is the machine's layout, not a fault of this configuration")
            .fix(format!(
                "nothing to change on bare metal; if the CPU root complex forwards peer-to-peer well, NCCL_NET_GDR_LEVEL={}{} forces GPUDirect RDMA (measure with nccl-tests before keeping it). In a VM whose PCIe tree hides the host's layout (every device in its own PCI domain), give NCCL the real one with NCCL_TOPO_FILE (the cloud's file, or `rdmatopo nccl-topo` run on the host)",
                worst.nccl_level().name(),
                if worst == PathClass::Node {
                    " (NCCL's name for NODE)"
                } else {
                    ""
                }
            )),
        );
    }
    if !over_c2c.is_empty() {
        let names: Vec<String> = over_c2c
            .iter()
            .map(|(g, c, _)| format!("{g} (NIC at {c})"))
            .collect();
        let ports: Vec<PciAddr> = over_c2c
            .iter()
            .filter_map(|(_, _, a)| match a {
                C2cAttach::NvidiaRootPort(rp) => Some(*rp),
                C2cAttach::Nvml(_) => None,
            })
            .collect();
        let one = over_c2c.len() == 1;
        let how = if ports.is_empty() {
            format!(
                "{} its CPU over NVLink-C2C (NVML counts active C2C links)",
                if one { "reaches" } else { "reach" }
            )
        } else {
            format!(
                "{} directly from an NVIDIA root port ({}), as C2C-attached GPUs (GH200, GB200, GB10) do; NVML's C2C link count, not read here, tells for certain",
                if one { "hangs" } else { "hang" },
                list(&ports.iter().map(ToString::to_string).collect::<Vec<_>>())
            )
        };
        let mut f = out
            .info(format!(
                "{} {how}: {} from that CPU, a path NCCL >= 2.27.3 types P2C and uses GPUDirect RDMA on by default (NCCL_NET_GDR_C2C=1)",
                list(&names),
                if one { "its NIC hangs" } else { "their NICs hang" }
            ))
            .why("NCCL types a GPU-to-NIC path that goes up the GPU's C2C link to its CPU and down that CPU's PCIe to the NIC as P2C (src/graph/paths.cc, mergePathType), and NCCL_NET_GDR_C2C=1 (default since 2.27.3; 0 in 2.26, absent before) raises the GPUDirect RDMA level from PXB to P2C (ncclTopoCheckGdr)")
            .fix("nothing to change with NCCL >= 2.27.3; NCCL 2.26 needs NCCL_NET_GDR_C2C=1, older versions NCCL_NET_GDR_LEVEL=PHB. NCCL_NET_GDR_LEVEL, when set, replaces the P2C level");
        for rp in ports {
            if let Some(rf) = scope.function(rp) {
                f = f.with(pci_dir(rp), rf.path.clone());
            }
        }
        out.push(f);
    }
    if out.findings.is_empty() {
        out.note(ok.join("; "));
    }
}

fn fix_for(scope: &Scope, best: &PciFunction, used_is_vf: bool) -> String {
    let pf = best.physfn.and_then(|a| scope.function(a)).unwrap_or(best);
    let pf_label = scope.nic_label(pf);
    if used_is_vf || best.is_vf || pf.sriov.is_some() {
        format!(
            "allocate a VF of {pf_label} instead: one sriov-network-device-plugin resource per GPU switch (selectors.rootDevices, or pfNames: [\"<pf>#<vf-range>\"]), or a DRA driver that aligns GPU and NIC by PCIe; the Topology Manager aligns NUMA nodes only"
        )
    } else if scope.context.is_container() {
        format!(
            "give the pod {pf_label} (one rdma-shared-dev-plugin resource per rail, ifNames: [<its netdev>]) and select it with NCCL_IB_HCA==<device>"
        )
    } else {
        format!(
            "select {pf_label} for this GPU: `rdmatopo nccl-env` (or `rdmatopo exec`) gives each rank its nearest HCA"
        )
    }
}

/// Whether NCCL makes the path from `gpu` to a NIC at `class` P2C and uses GPUDirect
/// RDMA on it (nccl src/graph/paths.cc, v2.30.7-1): the GPU reaches its CPU over C2C,
/// the NIC hangs from that CPU's PCIe (NODE or PHB here: PHB to the CPU in NCCL's
/// terms), `NCCL_NET_GDR_C2C` is not 0 and `NCCL_NET_GDR_LEVEL` is unset (it replaces
/// the P2C level; the `gdr-level` check judges it).
fn p2c(scope: &Scope, gpu: &PciFunction, class: PathClass) -> Option<C2cAttach> {
    if !matches!(class, PathClass::Node | PathClass::Phb) {
        return None;
    }
    let env = &scope.topo.process.env;
    if env.contains_key("NCCL_NET_GDR_LEVEL")
        || env
            .get("NCCL_NET_GDR_C2C")
            .is_some_and(|v| crate::parse::parse_nccl_int(v) == Ok(0))
    {
        return None;
    }
    c2c_attach(scope.topo, gpu)
}
