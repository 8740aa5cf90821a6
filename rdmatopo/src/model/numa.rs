//! Which NUMA nodes a PCI function is near: the one rule behind `topo`'s NUMA Affinity
//! column, the plan's and doctor's NUMA node, and the C and Python accessors.
//!
//! nvidia-smi takes the column from NVML's memory affinity (`nvmlDeviceGetMemoryAffinity`,
//! a node *set*), which follows the device's CPU affinity when the firmware gives the
//! function no node. Public captures: a Threadripper PRO host whose functions all have
//! `numa_node` -1 (noonghunna/club-3090#1140, modelled by `fixtures/workstation-2gpu`)
//! prints `CPU Affinity 0-63`, `NUMA Affinity 0`; a dual Xeon E5-2665 board (ASUS
//! Z9PE-D8 WS, `lscpu`: node 0 CPUs 0-7,16-23, node 1 CPUs 8-15,24-31) prints
//! `CPU Affinity 0-31`, `NUMA Affinity 0-1` for every GPU, an affinity of all CPUs that
//! the kernel gives only to a function without a node (`cpumask_of_pcibus` returns the
//! online CPUs for `NUMA_NO_NODE` on x86).

use super::{PciFunction, Topology};
use crate::parse::CpuSet;

impl Topology {
    /// The NUMA nodes near `f`, in id order: its `numa_node`, else its host bridge's,
    /// else every node (with CPUs) whose `cpulist` lies within the function's
    /// `local_cpulist`. Empty when none of these is known.
    pub fn numa_affinity(&self, f: &PciFunction) -> Vec<u32> {
        let bridge_node = || {
            self.host_bridges
                .iter()
                .find(|h| h.name == f.host_bridge)?
                .numa_node
        };
        if let Some(node) = f.numa_node.or_else(bridge_node) {
            return vec![node];
        }
        let Some(local) = f.local_cpus.as_ref().filter(|c| !c.is_empty()) else {
            return Vec::new();
        };
        self.numa_nodes
            .iter()
            .filter(|n| !n.cpus.is_empty() && n.cpus.is_subset(local))
            .map(|n| n.id)
            .collect()
    }

    /// The one NUMA node of `f`: [`numa_affinity`](Self::numa_affinity) when that is a
    /// single node. `None` when unknown, and when it is several nodes (a VM or board
    /// whose firmware gives devices no node): nothing then makes one of them nearer,
    /// so the plan binds to no node and the doctor does not judge the placement,
    /// rather than guess.
    pub fn numa_node_of(&self, f: &PciFunction) -> Option<u32> {
        match self.numa_affinity(f)[..] {
            [node] => Some(node),
            _ => None,
        }
    }

    /// [`numa_affinity`](Self::numa_affinity) as nvidia-smi's NUMA Affinity column
    /// writes it: a node list in the kernel's list form (`0`, `0-1`, `0,2`), `N/A` when
    /// unknown.
    pub fn numa_affinity_text(&self, f: &PciFunction) -> String {
        let nodes = self.numa_affinity(f);
        if nodes.is_empty() {
            return "N/A".to_string();
        }
        // A node list has the same text form as a CPU list (`nodelist` in sysfs).
        CpuSet::from_cpus(nodes).to_string()
    }
}

#[cfg(test)]
mod tests {
    use crate::model::{HostBridge, NumaNode, PciFunction, PciRole, PcieLink, Topology};
    use crate::parse::{CpuSet, PciAddr};

    fn node(id: u32, cpus: &str) -> NumaNode {
        NumaNode {
            id,
            cpus: cpus.parse().unwrap(),
            distances: Vec::new(),
            memory_kib: None,
        }
    }

    fn gpu(numa_node: Option<u32>, local: Option<&str>) -> PciFunction {
        PciFunction {
            address: "0000:41:00.0".parse::<PciAddr>().unwrap(),
            path: "/sys/devices/pci0000:40/0000:40:01.1/0000:41:00.0".into(),
            host_bridge: "pci0000:40".into(),
            parent: None,
            role: PciRole::Endpoint,
            class: 0x030000,
            vendor: 0x10de,
            device: 0x26b1,
            subsystem_vendor: None,
            subsystem_device: None,
            vendor_name: None,
            device_name: None,
            driver: None,
            numa_node,
            local_cpus: local.map(|l| l.parse::<CpuSet>().unwrap()),
            link: PcieLink::default(),
            sriov: None,
            physfn: None,
            vf_index: None,
            is_vf: false,
            iommu_group: None,
            acs: None,
        }
    }

    fn machine(nodes: Vec<NumaNode>, bridge_node: Option<u32>) -> Topology {
        let mut t = Topology::empty("/");
        t.numa_nodes = nodes;
        t.host_bridges = vec![HostBridge {
            name: "pci0000:40".into(),
            path: "/sys/devices/pci0000:40".into(),
            numa_node: bridge_node,
        }];
        t
    }

    #[test]
    fn numa_node_first_then_host_bridge() {
        let t = machine(vec![node(0, "0-15"), node(1, "16-31")], Some(0));
        let own = gpu(Some(1), Some("0-31"));
        assert_eq!(
            (t.numa_affinity(&own), t.numa_node_of(&own)),
            (vec![1], Some(1))
        );
        let bridged = gpu(None, Some("0-31"));
        assert_eq!(t.numa_affinity(&bridged), vec![0]);
    }

    #[test]
    fn one_node_machine_with_minus_one_everywhere_is_node_0() {
        // Threadripper PRO 5975WX (fixtures/workstation-2gpu): one node, numa_node -1.
        let t = machine(vec![node(0, "0-63")], None);
        let f = gpu(None, Some("0-63"));
        assert_eq!(t.numa_affinity_text(&f), "0");
        assert_eq!(t.numa_node_of(&f), Some(0));
    }

    #[test]
    fn several_nodes_are_listed_and_none_is_chosen() {
        // Dual E5-2665, numa_node -1: local_cpulist is every CPU.
        let t = machine(vec![node(0, "0-7,16-23"), node(1, "8-15,24-31")], None);
        let f = gpu(None, Some("0-31"));
        assert_eq!(t.numa_affinity_text(&f), "0-1");
        assert_eq!(t.numa_node_of(&f), None);
        // Nodes 0 and 2 of four: a list, not a range.
        let t = machine(
            vec![
                node(0, "0-7"),
                node(1, "8-15"),
                node(2, "16-23"),
                node(3, "24-31"),
            ],
            None,
        );
        assert_eq!(t.numa_affinity_text(&gpu(None, Some("0-7,16-23"))), "0,2");
    }

    #[test]
    fn a_node_only_partly_covered_or_without_cpus_is_not_near() {
        // Node 2 is memory only (CXL, HBM): no CPUs, never "near" by CPU affinity.
        let t = machine(vec![node(0, "0-7"), node(1, "8-15"), node(2, "")], None);
        assert_eq!(t.numa_affinity(&gpu(None, Some("0-11"))), vec![0]);
        assert_eq!(t.numa_affinity_text(&gpu(None, None)), "N/A");
        assert_eq!(t.numa_affinity_text(&gpu(None, Some(""))), "N/A");
        assert_eq!(
            machine(Vec::new(), None).numa_affinity_text(&gpu(None, Some("0-7"))),
            "N/A"
        );
    }
}
