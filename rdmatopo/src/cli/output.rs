//! What a command hands back to be printed, and the text every command's output shares.

use rdmatopo::Topology;

/// What a command produced: text for stdout and an exit code.
pub struct Output {
    pub text: String,
    pub code: i32,
}

impl Output {
    pub fn ok(text: String) -> Self {
        Self { text, code: 0 }
    }
}

pub fn json<T: serde::Serialize>(value: &T) -> String {
    let mut s = serde_json::to_string_pretty(value).unwrap_or_default();
    s.push('\n');
    s
}

/// One line saying what a root holds when it has no GPU or RDMA device.
pub fn nothing_found_line(topo: &Topology) -> Option<String> {
    (topo.gpus.is_empty() && topo.rdma_devices.is_empty()).then(|| {
        format!(
            "rdmatopo: no NVIDIA GPU and no RDMA device under {} ({} PCI functions, {} NUMA node{}, {} netdev{})\n",
            topo.root,
            topo.pci.len(),
            topo.numa_nodes.len(),
            if topo.numa_nodes.len() == 1 { "" } else { "s" },
            topo.netdevs.len(),
            if topo.netdevs.len() == 1 { "" } else { "s" },
        )
    })
}
