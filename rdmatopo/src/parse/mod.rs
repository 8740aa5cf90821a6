//! Pure parsers: text from one sysfs or procfs file in, a typed value or a
//! [`ParseError`] out. Nothing here knows about paths or touches the filesystem; the
//! discovery layer attaches the path to an error.

mod cpuset;
mod error;
mod ib;
mod natural;
mod nccl_env;
mod nccl_hca;
mod pci;
mod pcicfg;
mod proc;
mod qos;
mod resource_slice;
mod vpd;

pub use cpuset::{CpuSet, parse_cpulist, parse_cpumask};
pub use error::ParseError;
pub use ib::{
    GidType, LinkLayer, PhysState, PortState, Rate, format_gid, gid_ipv4, gid_is_link_local,
    gid_is_zero, parse_gid, parse_gid_type, parse_link_layer, parse_phys_state, parse_port_state,
    parse_rate,
};
pub use natural::{ls_cmp, merge_natural, natural_cmp, sort_natural_by};
pub use nccl_env::{NcclPathLevel, parse_nccl_int, parse_nccl_path_level};
pub use nccl_hca::{HcaEntry, HcaFilter, MAX_HCA_ENTRIES, MAX_HCA_NAME, parse_nccl_ib_hca};
pub use pci::{
    LinkSpeed, PciAddr, PciIds, parse_hex_u16, parse_hex_u32, parse_link_speed, parse_numa_node,
    parse_pci_class, parse_pci_uevent,
};
pub use pcicfg::{ACS_CAP_ID, AcsFlags, AcsState, ExtCap, parse_acs, parse_ext_caps};
pub use proc::{
    CgroupEntry, CpuInfo, MemlockLimit, Mount, NvidiaProcGpu, RdmaLimit, RdmaLimitValue, Route,
    default_route, parse_cgroup, parse_cpuinfo, parse_environ, parse_fib_trie_local,
    parse_limits_memlock, parse_mountinfo, parse_node_mem_total, parse_nvidia_information,
    parse_rdma_cgroup, parse_rdma_cgroup_of, parse_route, parse_status_field, unescape_octal,
};
pub use qos::{
    PRIORITIES, PortBuffer, PortBuffers, TclassRule, TrafficClass, VfConfig, parse_buffer_size,
    parse_flag, parse_maxrate, parse_prio2buffer, parse_tos, parse_traffic_class, parse_vf_config,
};
pub use resource_slice::{
    PCI_ATTRIBUTES, SliceDevice, parse_device_metadata, parse_resource_slices,
};
pub use vpd::vpd_ro_keyword;

/// Parse a decimal integer attribute (`mtu`, `sriov_numvfs`).
pub fn parse_dec<T: std::str::FromStr>(what: &'static str, text: &str) -> Result<T, ParseError> {
    let t = text.trim();
    t.parse()
        .map_err(|_| ParseError::new(what, text, "not a decimal number"))
}
