//! The RDMA devices' votes: the uverbs nodes in `/dev/infiniband`, the VFs
//! `PCIDEVICE_*` names, the netdevs of this namespace, the exclusive RDMA netns mode.

use super::analysis::Analysis;
use super::context::describe_netdev;
use super::ownership::Owned;
use super::voting::{Tally, Vote};
use crate::model::{NetdevKind, NetnsMode};
use std::collections::BTreeSet;

impl Analysis<'_> {
    pub(super) fn rdma(&mut self) -> Vec<Owned<String>> {
        let topo = self.topo;
        let p = &topo.process;
        let mut tallies: Vec<Tally> = topo.rdma_devices.iter().map(|_| Tally::default()).collect();
        let present: BTreeSet<&str> = p
            .dev_infiniband
            .iter()
            .map(String::as_str)
            .filter(|n| n.starts_with("uverbs"))
            .collect();
        let own_netns = self.context.is_container() && !self.host_network;
        let exclusive = topo.host.rdma_netns_mode == Some(NetnsMode::Exclusive);
        let given_vfs = self
            .pcidevice
            .keys()
            .any(|a| topo.pci_function(*a).is_some_and(|f| f.is_vf));
        // Who gave them: a device plugin's variables, a DRA driver's metadata files.
        let (giver, by) = if self.pcidevice.values().all(|s| s.starts_with("PCIDEVICE_")) {
            ("PCIDEVICE_*", "the device plugin")
        } else if self.pcidevice.values().all(|s| s.starts_with('/')) {
            ("DRA device metadata", "the DRA driver")
        } else {
            (
                "PCIDEVICE_*, DRA device metadata",
                "the device plugin or DRA driver",
            )
        };
        for (d, t) in topo.rdma_devices.iter().zip(tallies.iter_mut()) {
            // The char device that libibverbs opens.
            match &d.uverbs {
                Some(u) if p.dev_listed => {
                    let path = format!("/dev/infiniband/{u}");
                    let value = format!("/sys/class/infiniband_verbs/{u}/ibdev = {}", d.name);
                    if present.contains(u.as_str()) {
                        let vote = if self.filtered_dev {
                            Vote::For
                        } else {
                            Vote::Note
                        };
                        t.add(vote, path, format!("present ({value})"));
                    } else {
                        t.add(
                            Vote::Against,
                            path,
                            format!("absent ({value}): cannot be opened"),
                        );
                    }
                }
                Some(_) => {}
                // An owned view's partial read of another container's device: every uverbs
                // node in /dev/infiniband was traced to a device, and none to this one.
                None if p.dev_listed && !topo.holds_rdma_details(&d.name) => t.add(
                    Vote::Against,
                    "/dev/infiniband",
                    format!(
                        "no uverbs node of {} is here (another container's device, read in part)",
                        d.name
                    ),
                ),
                None => t.add(
                    Vote::Note,
                    "/sys/class/infiniband_verbs",
                    format!("no uverbs<N> names {}", d.name),
                ),
            }
            // Device-plugin variables name the VFs given.
            if let Some(addr) = d.pci {
                let is_vf = topo.pci_function(addr).is_some_and(|f| f.is_vf);
                match self.pcidevice.get(&addr) {
                    Some(var) => t.add(Vote::For, var.clone(), format!("names {addr}")),
                    None if is_vf && given_vfs => t.add(
                        Vote::Against,
                        giver,
                        format!("{by} gave other VFs, not {addr}"),
                    ),
                    None => {}
                }
            }
            if own_netns {
                if exclusive {
                    t.add(
                        Vote::For,
                        "/sys/module/ib_core/parameters/netns_mode",
                        "N (exclusive): only this network namespace's RDMA devices are listed",
                    );
                }
                for n in self.netdevs_of(d) {
                    if n.kind == NetdevKind::Loopback {
                        continue;
                    }
                    t.add(
                        Vote::For,
                        format!("/sys/class/net/{}", n.name),
                        format!(
                            "its netdev {} ({}) is in this network namespace",
                            n.name,
                            describe_netdev(n)
                        ),
                    );
                }
            }
        }
        self.pcidevice_without_netdev(own_netns);
        let context = self.context;
        if context.is_container() && !tallies.is_empty() && !tallies.iter().any(Tally::voted) {
            self.findings.push(format!(
                "no source narrows the {} RDMA devices down to this container's (no /dev/infiniband/uverbs<N> missing, no PCIDEVICE_* variable, no RDMA netdev in this network namespace): a privileged container, a shared device plugin that gave them all, or a capture without /dev",
                tallies.len()
            ));
        }
        topo.rdma_devices
            .iter()
            .zip(tallies)
            .map(|(d, t)| {
                let (state, evidence) = t.decide(
                    &format!("RDMA device {}", d.name),
                    context,
                    &mut self.findings,
                );
                Owned {
                    key: d.name.clone(),
                    state,
                    evidence,
                }
            })
            .collect()
    }

    /// A RoCE VF given to a pod with its own network namespace should bring its netdev.
    fn pcidevice_without_netdev(&mut self, own_netns: bool) {
        if !own_netns {
            return;
        }
        for (addr, var) in &self.pcidevice {
            let Some(d) = self.topo.rdma_devices.iter().find(|d| d.pci == Some(*addr)) else {
                continue;
            };
            let roce = d
                .ports
                .iter()
                .any(|p| p.link_layer == Some(crate::parse::LinkLayer::Ethernet));
            if roce && self.netdevs_of(d).is_empty() {
                self.findings.push(format!(
                    "{var} gives {addr} ({}), but no netdev of it is in this network namespace: the SR-IOV CNI did not move it in, so RoCE has no GID to use",
                    d.name
                ));
            }
        }
    }
}
