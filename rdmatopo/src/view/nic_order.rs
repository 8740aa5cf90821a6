//! The order `nvidia-smi topo -m` numbers NICs in: the order the RDMA devices
//! registered with the kernel.
//!
//! Every published capture in `fixtures/pub-*` fits it: the adapters in the order the
//! driver probed them (PCI order) whatever udev renamed them to later
//! (`pub-h100-penny`: `mlx5_ib*` before `mlx5_eth*`), and a RoCE LAG device after every
//! other, since it registers when the bond forms (`pub-h200-bond-blog`: `mlx5_bond_0`
//! after `mlx5_9`). The kernel's device index records that order: ib_core hands it out
//! cyclically at registration (`assign_name`, `xa_alloc_cyclic`,
//! drivers/infiniband/core/device.c) and keeps it across renames, and rdma-core's
//! `ibv_get_device_list` lists devices by it (its RDMA netlink dump, `RDMA_NLDEV_CMD_GET`,
//! walks the devices' xarray in index order: `ib_enum_all_devs`; libibverbs/ibdev_nl.c,
//! init.c). sysfs does not show the index, and the `uverbs<N>` number is no stand-in: a
//! LAG device takes the lowest free one. So the index comes from the kernel's RDMA
//! netlink ([`crate::model::DeviceIndexSnapshot`], every build) or libibverbs
//! ([`crate::model::VerbsSnapshot::device_index`]), live or from a snapshot; without it
//! the NICs keep the order they were given (natural order of names).

use crate::model::Topology;
use std::collections::BTreeMap;

/// How a matrix numbered its NICs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NicOrder {
    /// In the order the devices registered (their kernel index): nvidia-smi's.
    Registration,
    /// In the order given (natural order of names): the registration order is unknown.
    #[default]
    Name,
}

/// Puts `names` in registration order where `index` (device name to kernel index)
/// holds every one of them; otherwise leaves them as given. A partial order is not
/// used: where a NIC's place is unknown every number after it would be a guess.
pub fn order_by_registration(names: &mut [&str], index: &BTreeMap<String, u32>) -> NicOrder {
    if names.is_empty() || !names.iter().all(|n| index.contains_key(*n)) {
        return NicOrder::Name;
    }
    // Stable: two devices of one index (a malformed capture) keep their order.
    names.sort_by_key(|n| index.get(*n).copied());
    NicOrder::Registration
}

/// The kernel indices the model holds: libibverbs' where it gave them, else the RDMA
/// netlink's (the same index, [`crate::model::DeviceIndexSnapshot`]); empty without
/// either.
pub fn device_index(topo: &Topology) -> &BTreeMap<String, u32> {
    static EMPTY: BTreeMap<String, u32> = BTreeMap::new();
    match (&topo.verbs, &topo.device_index) {
        (Some(v), _) if !v.device_index.is_empty() => &v.device_index,
        (_, Some(d)) => &d.device_index,
        _ => &EMPTY,
    }
}

/// How [`TopoMatrix::build`](super::TopoMatrix::build) numbered `matrix`'s NICs, and
/// whether, numbered by name, the numbers may differ from nvidia-smi's
/// ([`name_order_in_doubt`]).
pub fn of_matrix(topo: &Topology, matrix: &super::TopoMatrix) -> (NicOrder, bool) {
    let mut names: Vec<&str> = matrix
        .devices()
        .iter()
        .filter_map(|d| d.rdma.as_deref())
        .collect();
    let doubt = name_order_in_doubt(&names);
    match order_by_registration(&mut names, device_index(topo)) {
        NicOrder::Registration => (NicOrder::Registration, false),
        NicOrder::Name => (NicOrder::Name, doubt),
    }
}

/// Whether a name order may differ from the registration order in a way the names
/// cannot rule out: the names are not one series `<prefix><N>` (udev renames such as
/// `mlx5_ib*` beside `mlx5_eth*`, a `mlx5_bond_*` beside `mlx5_*`). One series of kernel
/// names follows registration unless a device left and came back.
pub fn name_order_in_doubt(names: &[&str]) -> bool {
    let mut prefixes = names
        .iter()
        .map(|n| n.trim_end_matches(|c: char| c.is_ascii_digit()));
    let Some(first) = prefixes.next() else {
        return false;
    };
    prefixes.any(|p| p != first)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index(pairs: &[(&str, u32)]) -> BTreeMap<String, u32> {
        pairs.iter().map(|(n, i)| (n.to_string(), *i)).collect()
    }

    #[test]
    fn renamed_devices_number_in_probe_order() {
        // pub-h100-penny: the InfiniBand adapters probed first, udev renamed them all.
        let idx = index(&[
            ("mlx5_eth0", 8),
            ("mlx5_eth1", 9),
            ("mlx5_ib0", 0),
            ("mlx5_ib1", 1),
        ]);
        let mut names = vec!["mlx5_eth0", "mlx5_eth1", "mlx5_ib0", "mlx5_ib1"];
        assert_eq!(
            order_by_registration(&mut names, &idx),
            NicOrder::Registration
        );
        assert_eq!(names, ["mlx5_ib0", "mlx5_ib1", "mlx5_eth0", "mlx5_eth1"]);
    }

    #[test]
    fn a_lag_device_comes_last_though_its_uverbs_number_is_low() {
        // pub-h200-bond-blog: mlx5_1/mlx5_2 (indices 1, 2) left when the bond formed;
        // the bond registered next, with index 10.
        let idx = index(&[
            ("mlx5_0", 0),
            ("mlx5_3", 3),
            ("mlx5_10", 12),
            ("mlx5_bond_0", 10),
        ]);
        let mut names = vec!["mlx5_0", "mlx5_3", "mlx5_10", "mlx5_bond_0"];
        order_by_registration(&mut names, &idx);
        assert_eq!(names, ["mlx5_0", "mlx5_3", "mlx5_bond_0", "mlx5_10"]);
    }

    #[test]
    fn without_every_index_the_names_keep_their_order() {
        let given = ["mlx5_eth0", "mlx5_ib0", "mlx5_ib1"];
        let mut names = given.to_vec();
        assert_eq!(
            order_by_registration(&mut names, &BTreeMap::new()),
            NicOrder::Name
        );
        assert_eq!(names, given);
        // One device without an index (listed by sysfs, not by libibverbs).
        let idx = index(&[("mlx5_ib0", 0), ("mlx5_ib1", 1)]);
        assert_eq!(order_by_registration(&mut names, &idx), NicOrder::Name);
        assert_eq!(names, given);
        assert_eq!(order_by_registration(&mut [], &idx), NicOrder::Name);
    }

    #[test]
    fn doubt_where_names_are_more_than_one_series() {
        assert!(!name_order_in_doubt(&[]));
        assert!(!name_order_in_doubt(&["mlx5_0", "mlx5_1", "mlx5_10"]));
        assert!(!name_order_in_doubt(&["mlx5_bond_0", "mlx5_bond_1"]));
        assert!(name_order_in_doubt(&["mlx5_eth0", "mlx5_ib0"]));
        assert!(name_order_in_doubt(&["mlx5_0", "mlx5_bond_0"]));
        assert!(name_order_in_doubt(&["rocep1s0f0", "roceP2p1s0f0"]));
    }
}
