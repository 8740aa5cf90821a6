//! This namespace's netdevs. In a container's own namespace every one is its own; in
//! the host's (a host-network pod) each is owned as the RDMA devices behind it are,
//! else where a `PCIDEVICE_*` variable names it, else by its kind: a VF netdev no
//! variable names and the host end of another namespace's veth are someone else's, a
//! bond follows its slaves, the rest are shared.

use super::analysis::Analysis;
use super::context::{describe_netdev, is_stacked};
use super::ownership::{Evidence, Owned, Ownership, state_of};
use crate::model::{Netdev, NetdevKind};

impl Analysis<'_> {
    pub(super) fn netdevs(&self, rdma: &[Owned<String>]) -> Vec<Owned<String>> {
        let topo = self.topo;
        topo.netdevs
            .iter()
            .map(|n| {
                let (state, mut evidence) = self.netdev_state(n, rdma, true);
                if self.context.is_container() && !self.host_network {
                    for d in self.rdma_behind(n) {
                        evidence.push(Evidence::new(
                            format!("RDMA device {}", d.name),
                            format!("{} (its netdev is {})", state_of(rdma, &d.name), n.name),
                        ));
                    }
                }
                Owned {
                    key: n.name.clone(),
                    state,
                    evidence,
                }
            })
            .collect()
    }

    fn netdev_state(
        &self,
        n: &Netdev,
        rdma: &[Owned<String>],
        follow_slaves: bool,
    ) -> (Ownership, Vec<Evidence>) {
        let topo = self.topo;
        let path = format!("/sys/class/net/{}", n.name);
        let one =
            |state, source: String, value: String| (state, vec![Evidence::new(source, value)]);
        if !self.context.is_container() {
            return one(
                Ownership::Owned,
                path,
                "in the host's network namespace".into(),
            );
        }
        if !self.host_network {
            return one(
                Ownership::Owned,
                path,
                format!(
                    "in this container's own network namespace ({})",
                    describe_netdev(n)
                ),
            );
        }
        let behind = self.rdma_behind(n);
        if !behind.is_empty() {
            let states: Vec<Ownership> = behind.iter().map(|d| state_of(rdma, &d.name)).collect();
            let evidence = behind
                .iter()
                .zip(&states)
                .map(|(d, s)| {
                    Evidence::new(
                        format!("RDMA device {}", d.name),
                        format!("{s}; this is its netdev in the host's network namespace"),
                    )
                })
                .collect();
            return (combine(&states), evidence);
        }
        if let Some(var) = n.pci.and_then(|a| self.pcidevice.get(&a)) {
            return one(
                Ownership::Owned,
                var.clone(),
                format!("names {}", opt_pci(n)),
            );
        }
        match n.kind {
            NetdevKind::VirtualFunction => one(
                Ownership::Visible,
                path,
                "a VF netdev in the host's network namespace that no device-plugin variable names"
                    .into(),
            ),
            NetdevKind::Bond if follow_slaves => {
                let states: Vec<Ownership> = n
                    .bond
                    .iter()
                    .flat_map(|b| &b.slaves)
                    .filter_map(|s| topo.netdev(s))
                    .map(|s| self.netdev_state(s, rdma, false).0)
                    .collect();
                if states.is_empty() {
                    one(
                        Ownership::Owned,
                        path,
                        "a bond without slaves here, shared with this container".into(),
                    )
                } else {
                    one(
                        combine(&states),
                        format!("{path}/bonding/slaves"),
                        "follows its slaves".into(),
                    )
                }
            }
            _ if is_stacked(n) => one(
                Ownership::Visible,
                path,
                "the host end of another network namespace's veth".into(),
            ),
            _ => one(
                Ownership::Owned,
                path,
                "in the host's network namespace, shared with this container".into(),
            ),
        }
    }
}

/// Owned if any is, else unknown if any is, else visible.
fn combine(states: &[Ownership]) -> Ownership {
    if states.contains(&Ownership::Owned) {
        Ownership::Owned
    } else if states.contains(&Ownership::Unknown) || states.is_empty() {
        Ownership::Unknown
    } else {
        Ownership::Visible
    }
}

fn opt_pci(n: &Netdev) -> String {
    n.pci.map_or_else(|| n.name.clone(), |a| a.to_string())
}
