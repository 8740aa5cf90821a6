//! The facts the sources' votes are cast from (`gpus.rs`, `rdma.rs`, `netdevs.rs`), and
//! the findings they raise.

use super::context::{Context, PRIVILEGED_CAPS};
use super::ownership::Evidence;
use crate::model::{Netdev, RdmaDevice, Topology};
use crate::parse::{CpuSet, PciAddr};
use std::collections::{BTreeMap, HashMap};

/// The facts the votes are cast from, and the findings they raise.
pub(super) struct Analysis<'a> {
    pub(super) topo: &'a Topology,
    pub(super) context: Context,
    pub(super) host_network: bool,
    /// `/dev` holds only what the runtime gave (a container, not privileged, `/dev`
    /// captured): a missing node is a device not given, a present one a device given.
    pub(super) filtered_dev: bool,
    /// The NVIDIA runtime's tmpfs is over `/proc/driver/nvidia`: its GPU list is the
    /// container's.
    pub(super) nvidia_procfs_masked: bool,
    /// `PCIDEVICE_<PREFIX>_<NAME>` variables and DRA device metadata files: PCI
    /// address → the variable or file that names it.
    pub(super) pcidevice: BTreeMap<PciAddr, String>,
    links: NetLinks,
    pub(super) findings: Vec<String>,
}

/// Which netdevs of this namespace belong to which RDMA device, indexed once: a port's
/// netdev (the GID `ndevs` relation, which names a macvlan on a shared HCA) or one on
/// the device's PCI function. Indexed so that relating every netdev to every device
/// stays linear in their number.
#[derive(Debug, Default)]
struct NetLinks {
    /// RDMA device name → indices into `topo.netdevs`.
    netdevs_of: HashMap<String, Vec<usize>>,
    /// Netdev name → indices into `topo.rdma_devices`.
    rdma_behind: HashMap<String, Vec<usize>>,
}

impl NetLinks {
    fn of(topo: &Topology) -> Self {
        let by_name: HashMap<&str, usize> = topo
            .netdevs
            .iter()
            .enumerate()
            .map(|(i, n)| (n.name.as_str(), i))
            .collect();
        let mut by_pci: HashMap<PciAddr, Vec<usize>> = HashMap::new();
        for (i, n) in topo.netdevs.iter().enumerate() {
            if let Some(a) = n.pci {
                by_pci.entry(a).or_default().push(i);
            }
        }
        let mut links = Self::default();
        for (di, d) in topo.rdma_devices.iter().enumerate() {
            let mut ns: Vec<usize> = d
                .ports
                .iter()
                .filter_map(|p| by_name.get(p.netdev.as_deref()?).copied())
                .chain(
                    d.pci
                        .and_then(|a| by_pci.get(&a))
                        .into_iter()
                        .flatten()
                        .copied(),
                )
                .collect();
            ns.sort_unstable();
            ns.dedup();
            for &n in &ns {
                links
                    .rdma_behind
                    .entry(topo.netdevs[n].name.clone())
                    .or_default()
                    .push(di);
            }
            // Most devices of a pod's host have none here: nothing to index.
            if !ns.is_empty() {
                links.netdevs_of.insert(d.name.clone(), ns);
            }
        }
        links
    }
}

impl<'a> Analysis<'a> {
    pub(super) fn new(topo: &'a Topology, context: Context, host_network: bool) -> Self {
        let p = &topo.process;
        let privileged = p
            .cap_eff
            .is_some_and(|c| c & PRIVILEGED_CAPS == PRIVILEGED_CAPS);
        let mut a = Self {
            topo,
            context,
            host_network,
            filtered_dev: context.is_container() && p.dev_listed && !privileged,
            nvidia_procfs_masked: p
                .device_mounts
                .iter()
                .any(|m| m.mount_point == "/proc/driver/nvidia" && m.fs_type == "tmpfs"),
            pcidevice: BTreeMap::new(),
            links: NetLinks::of(topo),
            findings: Vec::new(),
        };
        a.read_pcidevice();
        a
    }

    /// The netdevs of this namespace that belong to RDMA device `d`.
    pub(super) fn netdevs_of(&self, d: &RdmaDevice) -> Vec<&'a Netdev> {
        let topo = self.topo;
        self.links
            .netdevs_of
            .get(&d.name)
            .map(|v| v.iter().map(|i| &topo.netdevs[*i]).collect())
            .unwrap_or_default()
    }

    /// The RDMA devices whose netdev `n` is.
    pub(super) fn rdma_behind(&self, n: &Netdev) -> Vec<&'a RdmaDevice> {
        let topo = self.topo;
        self.links
            .rdma_behind
            .get(&n.name)
            .map(|v| v.iter().map(|i| &topo.rdma_devices[*i]).collect())
            .unwrap_or_default()
    }

    fn read_pcidevice(&mut self) {
        for (key, item) in self.topo.process.given_functions() {
            match item.parse::<PciAddr>() {
                Ok(addr) if self.topo.pci_function(addr).is_some() => {
                    self.pcidevice.insert(addr, key.to_string());
                }
                Ok(addr) => self.findings.push(format!(
                    "{key} names {addr}, which is not a PCI function under /sys/bus/pci/devices"
                )),
                Err(_) => self
                    .findings
                    .push(format!("{key} holds {item:?}, which is not a PCI address")),
            }
        }
    }

    /// The CPUs this process may use (its affinity within the cgroup's cpuset), and
    /// what says so.
    pub(super) fn cpus(&mut self) -> (Option<CpuSet>, Vec<Evidence>) {
        let p = &self.topo.process;
        let mut evidence = Vec::new();
        if let Some(a) = &p.cpus_allowed {
            evidence.push(Evidence::new(
                "/proc/self/status",
                format!("Cpus_allowed_list {a}"),
            ));
        }
        if let Some(c) = &p.cgroup_cpuset {
            evidence.push(Evidence::new(
                "cgroup cpuset",
                format!("effective cpus {c}"),
            ));
        }
        if let (Some(a), Some(c)) = (&p.cpus_allowed, &p.cgroup_cpuset)
            && !a.is_subset(c)
        {
            self.findings.push(format!(
                "Cpus_allowed_list {a} has CPUs outside the cgroup cpuset {c}: the cpuset read may belong to another cgroup; using the CPUs in both"
            ));
        }
        (p.usable_cpus(), evidence)
    }
}
