//! Which of the devices this process can see were given to it.
//!
//! Inside a pod `/sys/bus/pci` lists every device of the host, and so does
//! `/sys/class/infiniband` in the shared RDMA netns mode. Advice about "the" GPU or NIC
//! is only right for the devices this container was given. Each source below votes for
//! or against a device, or only notes what it saw:
//!
//! - GPUs: the entries of `/proc/driver/nvidia/gpus/` (the NVIDIA container runtime
//!   mounts a tmpfs there and bind-mounts only the GPUs it gives), the `/dev/nvidia<N>`
//!   nodes (minor numbers mapped through NVML or the `Device Minor:` line of
//!   `/proc/driver/nvidia/gpus/<bdf>/information`), the GPUs NVML lists (inside a
//!   container, those it may open), `NVIDIA_VISIBLE_DEVICES` and device-plugin
//!   `PCIDEVICE_*` variables. `CUDA_VISIBLE_DEVICES` selects among them.
//! - RDMA devices: `/dev/infiniband/uverbs<N>` (through
//!   `/sys/class/infiniband_verbs/uverbs<N>/ibdev`), the VFs named by `PCIDEVICE_*`, the
//!   netdevs in this network namespace, and the exclusive RDMA netns mode.
//!
//! A device with votes only for it is owned, with votes only against it is visible
//! (someone else's), with both is unknown and a finding. A device no source speaks
//! about belongs to the machine on a host, and is unknown in a container.
//!
//! Here: the view and what it answers. What it says of one device in `ownership.rs`;
//! the context (host or container, the host's network or its own) in `context.rs`;
//! the facts the votes are cast from in `analysis.rs`, and how a device's votes decide
//! in `voting.rs`; the sources' votes on GPUs in `gpus.rs`, on RDMA devices in
//! `rdma.rs`, on this namespace's netdevs in `netdevs.rs`.

mod analysis;
mod context;
mod gpus;
mod netdevs;
mod ownership;
mod rdma;
mod voting;

pub use context::Context;
pub use ownership::{Evidence, Owned, Ownership};

use crate::model::{NetnsMode, Topology};
use crate::parse::{CpuSet, PciAddr};
use analysis::Analysis;
use context::detect_context;
use ownership::{keys_in, state_of};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// Which GPUs, RDMA devices, netdevs and CPUs belong to this process's container.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContainerView {
    pub context: Context,
    pub context_evidence: Vec<Evidence>,
    /// Whether the netdevs listed are the host's (a host, or a host-network container).
    pub host_network: bool,
    /// `/sys/module/ib_core/parameters/netns_mode`.
    pub rdma_netns_mode: Option<NetnsMode>,
    /// Every GPU of the model, in PCI order.
    pub gpus: Vec<Owned<PciAddr>>,
    /// Every RDMA device of the model, in model order.
    pub rdma: Vec<Owned<String>>,
    /// Every netdev of this network namespace.
    pub netdevs: Vec<Owned<String>>,
    /// The CPUs this process may run on (`Cpus_allowed_list` narrowed by the cgroup
    /// cpuset).
    pub cpus: Option<CpuSet>,
    pub cpus_evidence: Vec<Evidence>,
    /// The GPUs CUDA will enumerate, in CUDA order, when `CUDA_VISIBLE_DEVICES` is set.
    pub cuda_visible: Option<Vec<PciAddr>>,
    /// Ownership of every GPU and RDMA device is known (none is unknown).
    pub certain: bool,
    /// Disagreements between sources, and what could not be resolved.
    pub findings: Vec<String>,
}

impl ContainerView {
    /// Work out the view from the model.
    pub fn of(topo: &Topology) -> Self {
        let (context, context_evidence, host_network) = detect_context(topo);
        let mut a = Analysis::new(topo, context, host_network);
        let gpus = a.gpus();
        let cuda_visible = a.cuda_visible(&gpus);
        let gpus = match cuda_visible.1 {
            Some(notes) => with_notes(gpus, notes),
            None => gpus,
        };
        let rdma = a.rdma();
        let netdevs = a.netdevs(&rdma);
        let (cpus, cpus_evidence) = a.cpus();
        let certain = gpus.iter().all(|g| g.state != Ownership::Unknown)
            && rdma.iter().all(|r| r.state != Ownership::Unknown);
        Self {
            context,
            context_evidence,
            host_network,
            rdma_netns_mode: topo.host.rdma_netns_mode,
            gpus,
            rdma,
            netdevs,
            cpus,
            cpus_evidence,
            cuda_visible: cuda_visible.0,
            certain,
            findings: a.findings,
        }
    }

    /// Whether the GPU at `pci` is this container's (`Unknown` for a GPU not in the model).
    pub fn gpu(&self, pci: PciAddr) -> Ownership {
        state_of(&self.gpus, &pci)
    }

    /// Whether the RDMA device `name` is this container's.
    pub fn rdma_device(&self, name: &str) -> Ownership {
        state_of(&self.rdma, &name.to_string())
    }

    /// Whether the netdev `name` is this container's.
    pub fn netdev(&self, name: &str) -> Ownership {
        state_of(&self.netdevs, &name.to_string())
    }

    /// GPUs known to be this container's, in PCI order.
    pub fn owned_gpus(&self) -> Vec<PciAddr> {
        keys_in(&self.gpus, |s| s == Ownership::Owned)
    }

    /// RDMA devices known to be this container's.
    pub fn owned_rdma(&self) -> Vec<String> {
        keys_in(&self.rdma, |s| s == Ownership::Owned)
    }

    /// GPUs advice may concern: the owned ones and, when ownership is not certain, the
    /// unknown ones too (an assumption the caller should state).
    pub fn usable_gpus(&self) -> Vec<PciAddr> {
        keys_in(&self.gpus, |s| s != Ownership::Visible)
    }

    /// RDMA devices advice may concern: owned and unknown ones.
    pub fn usable_rdma(&self) -> Vec<String> {
        keys_in(&self.rdma, |s| s != Ownership::Visible)
    }
}

/// Which GPUs and RDMA devices an answer about the machine's devices shows: inside a
/// container whose devices are certain, those it owns (`--all` shows every one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DisplayedDevices {
    /// The RDMA devices shown; `None`: every device of the model.
    pub owned_rdma: Option<BTreeSet<String>>,
    /// The GPUs shown; `None`: every GPU of the model.
    pub owned_gpus: Option<BTreeSet<PciAddr>>,
    /// The devices left out, in natural order: the model's others and those an owned
    /// view only names ([`Topology::other_rdma_devices`]).
    pub left_out: Vec<String>,
    pub context: Context,
}

impl DisplayedDevices {
    /// For `topo`: every device where `all`, on a host, or where ownership is uncertain.
    pub fn of(topo: &Topology, all: bool) -> Self {
        if all {
            return Self {
                owned_rdma: None,
                owned_gpus: None,
                left_out: Vec::new(),
                context: Context::of(topo),
            };
        }
        let view = ContainerView::of(topo);
        let narrowed = view.context.is_container() && view.certain;
        let owned_rdma: Option<BTreeSet<String>> =
            narrowed.then(|| view.owned_rdma().into_iter().collect());
        let owned_gpus = narrowed.then(|| view.owned_gpus().into_iter().collect());
        let left_out = match &owned_rdma {
            None => Vec::new(),
            Some(owned) => crate::parse::merge_natural(
                topo.rdma_devices
                    .iter()
                    .map(|d| d.name.as_str())
                    .filter(|n| !owned.contains(*n)),
                topo.other_rdma_devices(),
            )
            .into_iter()
            .map(str::to_string)
            .collect(),
        };
        Self {
            owned_rdma,
            owned_gpus,
            left_out,
            context: view.context,
        }
    }

    /// Whether the RDMA device `name` is shown.
    pub fn shows(&self, name: &str) -> bool {
        self.owned_rdma.as_ref().is_none_or(|o| o.contains(name))
    }

    /// Whether the GPU at `pci` is shown.
    pub fn shows_gpu(&self, pci: PciAddr) -> bool {
        self.owned_gpus.as_ref().is_none_or(|o| o.contains(&pci))
    }

    /// The line saying what is left out, when anything is.
    pub fn note(&self) -> Option<String> {
        let names: Vec<&str> = self.left_out.iter().map(String::as_str).collect();
        (!names.is_empty()).then(|| {
            format!(
                "RDMA devices of another container are left out ({}): {}; `--all` shows every visible device",
                self.context,
                super::words::list_short(&names)
            )
        })
    }
}

fn with_notes(
    mut gpus: Vec<Owned<PciAddr>>,
    mut notes: BTreeMap<PciAddr, Evidence>,
) -> Vec<Owned<PciAddr>> {
    for g in &mut gpus {
        if let Some(e) = notes.remove(&g.key) {
            g.evidence.push(e);
        }
    }
    gpus
}

#[cfg(test)]
mod tests;
