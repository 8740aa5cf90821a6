//! Live libibverbs through rdma-sys (feature `verbs`): `ibv_query_device` limits,
//! `ibv_query_port` state, MTU, link layer, speed and width, and the GID table with its
//! types. No RDMA subsystem, no device, or no permission to open one is
//! [`SourceError::Unavailable`].

use super::facts::{FactSource, Facts, SourceError};
use crate::model::{Gid, VerbsDevice, VerbsPort, VerbsSnapshot};
use crate::parse::natural_cmp;
use crate::parse::{GidType, format_gid, gid_ipv4, gid_is_zero};
use crate::sysfs::Sysfs;
use rdma_sys::{
    ___ibv_query_port, ibv_close_device, ibv_context, ibv_device, ibv_device_attr,
    ibv_free_device_list, ibv_get_device_list, ibv_get_device_name, ibv_open_device, ibv_port_attr,
    ibv_query_device,
};
use std::collections::BTreeMap;
use std::ffi::CStr;
use std::io;
use std::mem::MaybeUninit;
use std::net::Ipv6Addr;
use std::os::raw::c_int;
use std::ptr::NonNull;

/// Reads libibverbs on the running system.
#[derive(Debug, Clone, Copy, Default)]
pub struct LiveVerbs;

impl FactSource for LiveVerbs {
    fn collect(&self, _fs: &Sysfs) -> Result<Facts, SourceError> {
        let list = DeviceList::get()?;
        if list.devices().is_empty() {
            return Err(SourceError::Unavailable(
                "verbs: libibverbs lists no RDMA device".into(),
            ));
        }
        // A device that cannot be opened or queried is left out (the cross-check with
        // sysfs names it); only when none answers is the whole source unavailable.
        let mut devices = Vec::new();
        let mut first_failure = None;
        let index_of = device_index_fn();
        let mut indices = BTreeMap::new();
        for &dev in list.devices() {
            let name = device_name(dev);
            if let Some(index) = index_of.and_then(|f| device_index(f, dev)) {
                indices.insert(name.clone(), index);
            }
            match Context::open(dev)
                .map_err(|e| open_error(&name, &e))
                .and_then(|ctx| read_device(&ctx, name))
            {
                Ok(d) => devices.push(d),
                Err(e) => {
                    first_failure.get_or_insert(e);
                }
            }
        }
        if devices.is_empty()
            && let Some(e) = first_failure
        {
            return Err(e);
        }
        devices.sort_by(|a, b| natural_cmp(&a.name, &b.name));
        Ok(Facts::Verbs(VerbsSnapshot {
            schema: VerbsSnapshot::SCHEMA.to_string(),
            devices,
            device_index: indices,
        }))
    }

    /// Opening each device goes through the provider library and the kernel driver.
    fn blocks(&self) -> bool {
        true
    }
}

/// The array `ibv_get_device_list` returns, freed on drop.
struct DeviceList {
    ptr: NonNull<*mut ibv_device>,
    len: usize,
}

impl DeviceList {
    fn get() -> Result<Self, SourceError> {
        let mut num: c_int = 0;
        // SAFETY: `num` is a valid out-parameter; the call returns NULL or an array that
        // we own until `ibv_free_device_list`.
        let ptr = unsafe { ibv_get_device_list(&mut num) };
        let err = io::Error::last_os_error();
        match NonNull::new(ptr) {
            Some(ptr) => Ok(Self {
                ptr,
                len: usize::try_from(num).unwrap_or(0),
            }),
            None => Err(list_error(&err)),
        }
    }

    fn devices(&self) -> &[*mut ibv_device] {
        // SAFETY: libibverbs returned `len` valid device pointers at `ptr`, alive until
        // the list is freed, which happens only when `self` drops.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for DeviceList {
    fn drop(&mut self) {
        // SAFETY: `ptr` came from `ibv_get_device_list` and is freed exactly once.
        unsafe { ibv_free_device_list(self.ptr.as_ptr()) }
    }
}

/// An open device context, closed on drop.
struct Context(NonNull<ibv_context>);

impl Context {
    fn open(dev: *mut ibv_device) -> io::Result<Self> {
        // SAFETY: `dev` is an element of a live device list.
        let ptr = unsafe { ibv_open_device(dev) };
        let err = io::Error::last_os_error();
        NonNull::new(ptr).map(Self).ok_or(err)
    }

    fn as_ptr(&self) -> *mut ibv_context {
        self.0.as_ptr()
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        // SAFETY: the context came from `ibv_open_device` and is closed exactly once.
        unsafe {
            ibv_close_device(self.0.as_ptr());
        }
    }
}

fn device_name(dev: *mut ibv_device) -> String {
    // SAFETY: `dev` is an element of a live device list; the name it returns is a
    // NUL-terminated string inside the device, valid while the list is.
    let name = unsafe { ibv_get_device_name(dev) };
    if name.is_null() {
        return String::from("?");
    }
    // SAFETY: non-NULL, NUL-terminated, and alive for this statement (see above).
    unsafe { CStr::from_ptr(name) }
        .to_string_lossy()
        .into_owned()
}

/// `int ibv_get_device_index(struct ibv_device *)`.
type GetDeviceIndex = unsafe extern "C" fn(*mut ibv_device) -> c_int;

/// `ibv_get_device_index`, looked up at run time: rdma-core added it in release 32
/// (libibverbs/device.c, IBVERBS_1.9), and rdma-sys binds it only from new headers.
fn device_index_fn() -> Option<GetDeviceIndex> {
    let this = libloading::os::unix::Library::this();
    // SAFETY: the symbol, when present, is libibverbs' `ibv_get_device_index`, whose C
    // prototype `GetDeviceIndex` spells out.
    let f = unsafe { this.get::<GetDeviceIndex>(b"ibv_get_device_index\0") }.ok()?;
    Some(*f)
}

/// The kernel's index of `dev` (`RDMA_NLDEV_ATTR_DEV_INDEX`, as rdma-core's netlink
/// device dump read it); `None` where the kernel or library gave none (-1).
fn device_index(f: GetDeviceIndex, dev: *mut ibv_device) -> Option<u32> {
    // SAFETY: `dev` is an element of a live device list.
    u32::try_from(unsafe { f(dev) }).ok()
}

fn read_device(ctx: &Context, name: String) -> Result<VerbsDevice, SourceError> {
    let attr = query_device(ctx).map_err(|e| SourceError::Failed {
        source_name: "verbs",
        message: format!("{name}: ibv_query_device: {e}"),
    })?;
    let mut ports: Vec<VerbsPort> = (1..=u32::from(attr.phys_port_cnt))
        .filter_map(|n| Some(port_facts(n, &query_port(ctx, n).ok()?)))
        .collect();
    for entry in query_gid_table(ctx, &ports) {
        if let Some(port) = ports.iter_mut().find(|p| p.port == entry.port_num) {
            let gid = Ipv6Addr::from(entry.gid);
            if gid_is_zero(&gid) {
                continue;
            }
            port.gids.push(Gid {
                index: entry.gid_index,
                gid: format_gid(&gid),
                ipv4: gid_ipv4(&gid).map(|a| a.to_string()),
                gid_type: gid_type(entry.gid_type),
                // The kernel reports the ifindex in the netdev's own namespace, which
                // need not be ours: sysfs `gid_attrs/ndevs` names it reliably.
                netdev: None,
            });
        }
    }
    for port in &mut ports {
        port.gids.sort_by_key(|g| g.index);
    }
    Ok(VerbsDevice {
        name,
        max_qp: u32::try_from(attr.max_qp).ok(),
        max_cq: u32::try_from(attr.max_cq).ok(),
        max_mr: u32::try_from(attr.max_mr).ok(),
        max_srq: u32::try_from(attr.max_srq).ok(),
        ports,
    })
}

fn query_device(ctx: &Context) -> io::Result<ibv_device_attr> {
    let mut attr = MaybeUninit::<ibv_device_attr>::zeroed();
    // SAFETY: `ctx` is open; `attr` is writable memory of the struct's size.
    let rc = unsafe { ibv_query_device(ctx.as_ptr(), attr.as_mut_ptr()) };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc));
    }
    // SAFETY: a zeroed plain C struct is a valid value, and the call filled it in.
    Ok(unsafe { attr.assume_init() })
}

fn query_port(ctx: &Context, port: u32) -> io::Result<ibv_port_attr> {
    let port = u8::try_from(port).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    let mut attr = MaybeUninit::<ibv_port_attr>::zeroed();
    // SAFETY: `ctx` is open; `attr` is writable memory of the struct's size, which the
    // call passes on to the provider so that it writes no more.
    let rc = unsafe { ___ibv_query_port(ctx.as_ptr(), port, attr.as_mut_ptr()) };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc));
    }
    // SAFETY: as in `query_device`.
    Ok(unsafe { attr.assume_init() })
}

fn port_facts(port: u32, a: &ibv_port_attr) -> VerbsPort {
    VerbsPort {
        port,
        state: port_state_name(a.state).map(str::to_string),
        active_mtu: mtu_bytes(a.active_mtu),
        max_mtu: mtu_bytes(a.max_mtu),
        link_layer: Some(link_layer_name(a.link_layer).to_string()),
        active_speed: Some(u32::from(a.active_speed)),
        active_width: Some(u32::from(a.active_width)),
        gid_tbl_len: u32::try_from(a.gid_tbl_len).ok(),
        gids: Vec::new(),
    }
}

/// `struct ibv_gid_entry` (verbs.h, rdma-core 32 and later). Declared here because
/// rdma-sys binds it only when the build host's headers are new enough.
#[repr(C, align(8))]
#[derive(Clone, Copy)]
struct GidEntry {
    gid: [u8; 16],
    gid_index: u32,
    port_num: u32,
    gid_type: u32,
    _ndev_ifindex: u32,
}

/// `_ibv_query_gid_table(context, entries, max_entries, flags, entry_size)`.
type QueryGidTable =
    unsafe extern "C" fn(*mut ibv_context, *mut GidEntry, usize, u32, usize) -> isize;

/// Every valid GID of the device. `_ibv_query_gid_table` is looked up at run time: it
/// is absent before rdma-core 32, and then the GID list stays empty.
fn query_gid_table(ctx: &Context, ports: &[VerbsPort]) -> Vec<GidEntry> {
    let capacity: usize = ports
        .iter()
        .map(|p| p.gid_tbl_len.unwrap_or(0) as usize)
        .sum();
    if capacity == 0 {
        return Vec::new();
    }
    let this = libloading::os::unix::Library::this();
    // SAFETY: the symbol, when present, is libibverbs' `_ibv_query_gid_table`, whose C
    // prototype `QueryGidTable` spells out.
    let Ok(query) = (unsafe { this.get::<QueryGidTable>(b"_ibv_query_gid_table\0") }) else {
        return Vec::new();
    };
    let mut entries = vec![
        GidEntry {
            gid: [0; 16],
            gid_index: 0,
            port_num: 0,
            gid_type: 0,
            _ndev_ifindex: 0,
        };
        capacity
    ];
    // SAFETY: `ctx` is open; `entries` holds `capacity` writable entries of
    // `size_of::<GidEntry>()` bytes, the layout of `struct ibv_gid_entry`.
    let n = unsafe {
        query(
            ctx.as_ptr(),
            entries.as_mut_ptr(),
            capacity,
            0,
            std::mem::size_of::<GidEntry>(),
        )
    };
    entries.truncate(usize::try_from(n).unwrap_or(0));
    entries
}

/// `enum ibv_port_state`, named as sysfs `ports/<n>/state` names it.
fn port_state_name(state: u32) -> Option<&'static str> {
    Some(match state {
        0 => "NOP",
        1 => "DOWN",
        2 => "INIT",
        3 => "ARMED",
        4 => "ACTIVE",
        5 => "ACTIVE_DEFER",
        _ => return None,
    })
}

/// `enum ibv_mtu` in bytes.
fn mtu_bytes(mtu: u32) -> Option<u32> {
    (1..=5).contains(&mtu).then(|| 128 << mtu)
}

/// `IBV_LINK_LAYER_*`, named as sysfs `link_layer` names it (unspecified is
/// InfiniBand, as in the kernel and `ibv_devinfo`).
fn link_layer_name(link_layer: u8) -> &'static str {
    match link_layer {
        0 | 1 => "InfiniBand",
        2 => "Ethernet",
        _ => "Unknown",
    }
}

/// `enum ibv_gid_type`: IB and RoCE v1 share sysfs's `IB/RoCE v1`.
fn gid_type(t: u32) -> Option<GidType> {
    match t {
        0 | 1 => Some(GidType::IbRoceV1),
        2 => Some(GidType::RoceV2),
        _ => None,
    }
}

const NO_RDMA_HINT: &str = "port MTU, QP limits and verbs GID types are unknown";

/// `ibv_get_device_list` returned NULL.
fn list_error(err: &io::Error) -> SourceError {
    match err.raw_os_error() {
        Some(libc::ENOSYS) => SourceError::Unavailable(format!(
            "verbs: no RDMA subsystem (ibv_get_device_list: {err}; the kernel has no /sys/class/infiniband_verbs); {NO_RDMA_HINT}"
        )),
        Some(libc::EPERM | libc::EACCES) => SourceError::Unavailable(format!(
            "verbs: permission denied listing RDMA devices (ibv_get_device_list: {err}); {NO_RDMA_HINT}"
        )),
        _ => SourceError::Failed {
            source_name: "verbs",
            message: format!("ibv_get_device_list failed: {err}"),
        },
    }
}

/// No device could be opened; `name` is the first that failed.
fn open_error(name: &str, err: &io::Error) -> SourceError {
    match err.raw_os_error() {
        Some(libc::EPERM | libc::EACCES) => SourceError::Unavailable(format!(
            "verbs: permission denied opening {name} ({err}; check /dev/infiniband/uverbs*); {NO_RDMA_HINT}"
        )),
        Some(libc::ENOENT | libc::ENODEV | libc::ENXIO) => SourceError::Unavailable(format!(
            "verbs: cannot open {name} ({err}; /dev/infiniband is not in this container, or no provider library for it); {NO_RDMA_HINT}"
        )),
        _ => SourceError::Failed {
            source_name: "verbs",
            message: format!("ibv_open_device({name}) failed: {err}"),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_rdma_subsystem_is_unavailable() {
        let e = list_error(&io::Error::from_raw_os_error(libc::ENOSYS));
        let SourceError::Unavailable(msg) = e else {
            panic!("{e:?}")
        };
        assert!(msg.starts_with("verbs: no RDMA subsystem"), "{msg}");
        assert!(msg.contains("Function not implemented"), "{msg}");
        assert!(matches!(
            list_error(&io::Error::from_raw_os_error(libc::EACCES)),
            SourceError::Unavailable(m) if m.contains("permission denied")
        ));
        assert!(matches!(
            list_error(&io::Error::from_raw_os_error(libc::ENOMEM)),
            SourceError::Failed {
                source_name: "verbs",
                ..
            }
        ));
    }

    #[test]
    fn open_failures() {
        assert!(matches!(
            open_error("mlx5_0", &io::Error::from_raw_os_error(libc::EACCES)),
            SourceError::Unavailable(m) if m.contains("mlx5_0") && m.contains("/dev/infiniband/uverbs")
        ));
        assert!(matches!(
            open_error("mlx5_0", &io::Error::from_raw_os_error(libc::ENOENT)),
            SourceError::Unavailable(_)
        ));
        assert!(matches!(
            open_error("mlx5_0", &io::Error::from_raw_os_error(libc::EIO)),
            SourceError::Failed { .. }
        ));
    }

    #[test]
    fn enum_names_match_sysfs() {
        assert_eq!(port_state_name(4), Some("ACTIVE"));
        assert_eq!(port_state_name(1), Some("DOWN"));
        assert_eq!(port_state_name(9), None);
        assert_eq!(mtu_bytes(1), Some(256));
        assert_eq!(mtu_bytes(5), Some(4096));
        assert_eq!(mtu_bytes(0), None);
        assert_eq!(mtu_bytes(6), None);
        assert_eq!(link_layer_name(0), "InfiniBand");
        assert_eq!(link_layer_name(2), "Ethernet");
        assert_eq!(link_layer_name(7), "Unknown");
        assert_eq!(gid_type(2), Some(GidType::RoceV2));
        assert_eq!(gid_type(0), Some(GidType::IbRoceV1));
        assert_eq!(gid_type(3), None);
        // The names parse as the sysfs vocabulary does.
        for s in 0..=5 {
            let name = port_state_name(s).unwrap();
            let parsed = crate::parse::parse_port_state(&format!("{s}: {name}")).unwrap();
            assert_eq!(
                serde_json::to_value(parsed).unwrap(),
                serde_json::Value::from(name)
            );
        }
        for l in 0..=3 {
            assert!(crate::parse::parse_link_layer(link_layer_name(l)).is_ok());
        }
    }

    #[test]
    fn a_negative_device_index_is_none() {
        unsafe extern "C" fn none(_: *mut ibv_device) -> c_int {
            -1
        }
        unsafe extern "C" fn seven(_: *mut ibv_device) -> c_int {
            7
        }
        assert_eq!(device_index(none, std::ptr::null_mut()), None);
        assert_eq!(device_index(seven, std::ptr::null_mut()), Some(7));
    }

    #[test]
    fn gid_entry_has_the_c_layout() {
        assert_eq!(std::mem::size_of::<GidEntry>(), 32);
        assert_eq!(std::mem::align_of::<GidEntry>(), 8);
    }
}
