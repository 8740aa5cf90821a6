//! Live NVML through nvml-wrapper. `libnvidia-ml.so.1` is loaded at run time, so this
//! builds anywhere; without the driver, without a GPU, or without permission it reports
//! [`SourceError::Unavailable`] and discovery goes on with sysfs alone.

use super::facts::{FactSource, Facts, SourceError};
use crate::model::{MigMode, NvLink, NvLinkRemote, NvmlGpu, NvmlPcie, NvmlSnapshot, TopologyLevel};
use crate::parse::{CpuSet, PciAddr};
use crate::sysfs::Sysfs;
use nvml_wrapper::enum_wrappers::device::TopologyLevel as NvmlLevel;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::{Device, Nvml};
use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::os::raw::{c_uint, c_ulong};

/// `NVML_NVLINK_MAX_LINKS` of nvml-wrapper-sys 0.10 (H100/H200 have 18 links).
const NVLINK_MAX_LINKS: u32 = 18;

/// Words asked of `nvmlDeviceGetCpuAffinity`: enough for the kernel's `NR_CPUS` limit
/// (8192 CPUs).
const CPU_AFFINITY_WORDS: usize = 8192 / c_ulong::BITS as usize;

/// PCI device ids (vendor 0x10de) of NVSwitch chips, from pci.ids: GA100 [A100 NVSwitch],
/// GH100 [H100 NVSwitch]. Used when the driver cannot say what a link's far end is.
const NVSWITCH_DEVICE_IDS: [u16; 2] = [0x1af1, 0x22a3];

const NVIDIA_VENDOR: u32 = 0x10de;

/// `nvmlIntNvLinkDeviceType_t` values (nvml.h).
const NVLINK_DEVICE_GPU: c_uint = 0;
const NVLINK_DEVICE_IBMNPU: c_uint = 1;
const NVLINK_DEVICE_SWITCH: c_uint = 2;

/// Reads NVML on the running system.
#[derive(Debug, Clone, Copy, Default)]
pub struct LiveNvml;

impl FactSource for LiveNvml {
    fn collect(&self, _fs: &Sysfs) -> Result<Facts, SourceError> {
        collect_with(None).map(Facts::Nvml)
    }
    /// `nvmlInit` loads the driver library and waits on the kernel driver.
    fn blocks(&self) -> bool {
        true
    }
}

/// Initialise NVML (from `lib_path`, else the default `libnvidia-ml.so.1`) and read it.
fn collect_with(lib_path: Option<&OsStr>) -> Result<NvmlSnapshot, SourceError> {
    let nvml = match lib_path {
        Some(p) => Nvml::builder().lib_path(p).init(),
        None => Nvml::init(),
    }
    .map_err(|e| init_error(&e))?;
    read_snapshot(&nvml)
}

/// Why NVML could not start, in terms of what the user can do about it.
fn init_error(e: &NvmlError) -> SourceError {
    const SYSFS_ONLY: &str =
        "GPU names, UUIDs, MIG and NVLink are unknown; the matrix is PCIe-only";
    match e {
        NvmlError::LibloadingError(inner) => SourceError::Unavailable(format!(
            "NVML: the NVIDIA driver library could not be loaded ({inner}); {SYSFS_ONLY}"
        )),
        NvmlError::LibraryNotFound => SourceError::Unavailable(format!(
            "NVML: libnvidia-ml.so.1 was not found (no NVIDIA driver installed, or not mounted into this container); {SYSFS_ONLY}"
        )),
        NvmlError::DriverNotLoaded => SourceError::Unavailable(format!(
            "NVML: the NVIDIA kernel driver is not running (nvmlInit: {e}); {SYSFS_ONLY}"
        )),
        NvmlError::NoPermission => SourceError::Unavailable(format!(
            "NVML: permission denied initialising NVML (check access to /dev/nvidiactl and /dev/nvidia*); {SYSFS_ONLY}"
        )),
        other => SourceError::Failed {
            source_name: "NVML",
            message: format!("nvmlInit failed: {other}; {SYSFS_ONLY}"),
        },
    }
}

/// Why no GPU could be listed.
fn enumerate_error(e: &NvmlError) -> SourceError {
    match e {
        NvmlError::NoPermission => SourceError::Unavailable(
            "NVML: permission denied listing GPUs (check access to /dev/nvidia*)".into(),
        ),
        other => SourceError::Failed {
            source_name: "NVML",
            message: format!("listing GPUs failed: {other}"),
        },
    }
}

fn read_snapshot(nvml: &Nvml) -> Result<NvmlSnapshot, SourceError> {
    let count = nvml.device_count().map_err(|e| enumerate_error(&e))?;
    if count == 0 {
        return Err(SourceError::Unavailable(
            "NVML: the NVIDIA driver is loaded but reports no GPU (none installed, or none passed into this container)".into(),
        ));
    }
    let mut gpus = Vec::new();
    let mut nvml_indices = Vec::new();
    let mut first_error = None;
    for i in 0..count {
        match nvml.device_by_index(i).and_then(|d| read_gpu(nvml, &d, i)) {
            Ok(g) => {
                nvml_indices.push(i);
                gpus.push(g);
            }
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    if gpus.is_empty() {
        let e = first_error.unwrap_or(NvmlError::Unknown);
        return Err(enumerate_error(&e));
    }
    // Pairwise common-ancestor levels, keyed by the other GPU's bus id.
    for (a, &ia) in nvml_indices.iter().enumerate() {
        for (b, &ib) in nvml_indices.iter().enumerate() {
            if a == b {
                continue;
            }
            let level = nvml.device_by_index(ia).and_then(|da| {
                let db = nvml.device_by_index(ib)?;
                da.topology_common_ancestor(db)
            });
            if let Ok(level) = level {
                let other = gpus[b].bus_id.clone();
                gpus[a].topology.insert(other, topology_level(level));
            }
        }
    }
    settle_remote_kinds(&mut gpus);
    Ok(NvmlSnapshot {
        schema: NvmlSnapshot::SCHEMA.to_string(),
        driver_version: nvml.sys_driver_version().ok(),
        cuda_driver_version: nvml.sys_cuda_driver_version().ok(),
        device_count: Some(count),
        gpus,
    })
}

/// One GPU. Only the PCI bus id is required (it is how NVML facts meet sysfs); every
/// other query that the GPU or driver does not support is left out.
fn read_gpu(nvml: &Nvml, dev: &Device, position: u32) -> Result<NvmlGpu, NvmlError> {
    let pci = dev.pci_info()?;
    let mig_mode = dev.mig_mode().ok().map(|m| {
        let current = m.current == 1;
        let (instances, uuids) = if current {
            mig_devices(dev)
        } else {
            (0, Vec::new())
        };
        MigMode {
            current,
            pending: m.pending == 1,
            instances,
            uuids,
        }
    });
    let pcie = NvmlPcie {
        max_gen: dev.max_pcie_link_gen().ok(),
        max_width: dev.max_pcie_link_width().ok(),
        current_gen: dev.current_pcie_link_gen().ok(),
        current_width: dev.current_pcie_link_width().ok(),
    };
    let has_pcie = pcie.max_gen.is_some()
        || pcie.max_width.is_some()
        || pcie.current_gen.is_some()
        || pcie.current_width.is_some();
    Ok(NvmlGpu {
        index: dev.index().unwrap_or(position),
        bus_id: pci.bus_id,
        name: dev.name().ok(),
        uuid: dev.uuid().ok(),
        minor_number: dev.minor_number().ok(),
        numa_node: dev.numa_node_id().ok(),
        cpu_affinity: dev
            .cpu_affinity(CPU_AFFINITY_WORDS)
            .ok()
            .map(|words| cpuset_from_words(&words))
            .filter(|s| !s.is_empty()),
        mig_mode,
        pcie: has_pcie.then_some(pcie),
        nvlinks: read_nvlinks(nvml, dev),
        topology: Default::default(),
        c2c_links: c2c_links(nvml, dev),
    })
}

/// Active NVLink-C2C links, counted as NCCL does (`ncclTopoGetXmlFromGpu`,
/// src/graph/xml.cc, v2.30.7-1): `NVML_FI_DEV_C2C_LINK_COUNT`, then per link (the
/// field's scope) `NVML_FI_DEV_C2C_LINK_GET_STATUS` = 1. nvml-wrapper's field query has
/// no scope, so the function is called directly.
fn c2c_links(nvml: &Nvml, dev: &Device) -> Option<u32> {
    use nvml_wrapper_sys::bindings::{field_id, nvmlFieldValue_t};
    let sym = nvml.lib().nvmlDeviceGetFieldValues.as_ref().ok()?;
    let query = |id: u32, scope: u32| -> Option<u32> {
        // SAFETY: nvmlFieldValue_t is plain C data; all-zero is a valid value.
        let mut v: nvmlFieldValue_t = unsafe { std::mem::zeroed() };
        v.fieldId = id;
        v.scopeId = scope;
        // SAFETY: `sym` is libnvidia-ml's nvmlDeviceGetFieldValues with this prototype;
        // the handle belongs to `nvml`, alive for the call; `v` is one writable value.
        let status = unsafe { sym(dev.handle(), 1, &mut v) };
        // SAFETY: these fields are unsigned ints (nvml.h), so `uiVal` is the member set;
        // unset, it is the zero written above.
        let value = unsafe { v.value.uiVal };
        (status == 0 && v.nvmlReturn == 0).then_some(value)
    };
    let count = query(field_id::NVML_FI_DEV_C2C_LINK_COUNT, 0)?;
    Some(
        (0..count)
            .filter(|l| query(field_id::NVML_FI_DEV_C2C_LINK_GET_STATUS, *l) == Some(1))
            .count() as u32,
    )
}

/// MIG devices present on a GPU in MIG mode (empty slots answer `NotFound`): how
/// many, and the UUIDs of those that tell theirs.
fn mig_devices(dev: &Device) -> (u32, Vec<String>) {
    let max = dev.mig_device_count().unwrap_or(0);
    let present: Vec<Device> = (0..max)
        .filter_map(|i| dev.mig_device_by_index(i).ok())
        .collect();
    let uuids = present.iter().filter_map(|m| m.uuid().ok()).collect();
    (present.len() as u32, uuids)
}

/// Every link the GPU answers for; a GPU without NVLink answers for none.
fn read_nvlinks(nvml: &Nvml, dev: &Device) -> Vec<NvLink> {
    let mut links = Vec::new();
    for link in 0..NVLINK_MAX_LINKS {
        let wrapper = dev.link_wrapper_for(link);
        let Ok(active) = wrapper.is_active() else {
            continue;
        };
        let (remote_bus_id, remote_kind) = if active {
            let remote = wrapper.remote_pci_info().ok();
            let kind = remote_kind(
                remote_device_type(nvml, dev, link),
                remote.as_ref().map(|r| r.pci_device_id),
            );
            (remote.map(|r| r.bus_id), kind)
        } else {
            (None, NvLinkRemote::Unknown)
        };
        links.push(NvLink {
            link,
            active,
            remote_bus_id,
            remote_kind,
        });
    }
    links
}

/// `nvmlDeviceGetNvLinkRemoteDeviceType`, called directly: nvml-wrapper 0.13's
/// `remote_device_type` writes into a temporary and always answers `Unknown`.
fn remote_device_type(nvml: &Nvml, dev: &Device, link: u32) -> Option<c_uint> {
    let sym = nvml
        .lib()
        .nvmlDeviceGetNvLinkRemoteDeviceType
        .as_ref()
        .ok()?;
    let mut kind: c_uint = 255;
    // SAFETY: `sym` was resolved from the loaded libnvidia-ml with this function's C
    // prototype; the handle belongs to `nvml`, which is alive for the whole call; `kind`
    // is a valid, writable out-parameter.
    let status = unsafe { sym(dev.handle(), link, &mut kind) };
    (status == 0).then_some(kind)
}

/// What a link's far end is: the driver's answer when it has one, else an NVSwitch
/// recognised by PCI id, else unknown (a GPU is recognised later by its bus id).
fn remote_kind(driver_says: Option<c_uint>, remote_pci_device_id: Option<u32>) -> NvLinkRemote {
    match driver_says {
        Some(NVLINK_DEVICE_GPU) => return NvLinkRemote::Gpu,
        Some(NVLINK_DEVICE_IBMNPU) => return NvLinkRemote::Cpu,
        Some(NVLINK_DEVICE_SWITCH) => return NvLinkRemote::Nvswitch,
        _ => {}
    }
    // pciDeviceId is (device << 16) | vendor.
    match remote_pci_device_id {
        Some(id)
            if id & 0xffff == NVIDIA_VENDOR
                && NVSWITCH_DEVICE_IDS.contains(&((id >> 16) as u16)) =>
        {
            NvLinkRemote::Nvswitch
        }
        _ => NvLinkRemote::Unknown,
    }
}

/// Links whose far end is still unknown but whose remote bus id is one of the GPUs NVML
/// listed are GPU-to-GPU links.
fn settle_remote_kinds(gpus: &mut [NvmlGpu]) {
    let gpu_addrs: BTreeSet<PciAddr> = gpus.iter().filter_map(NvmlGpu::pci).collect();
    for link in gpus.iter_mut().flat_map(|g| g.nvlinks.iter_mut()) {
        let remote = link
            .remote_bus_id
            .as_deref()
            .and_then(|r| r.parse::<PciAddr>().ok());
        if link.remote_kind == NvLinkRemote::Unknown
            && remote.is_some_and(|r| gpu_addrs.contains(&r))
        {
            link.remote_kind = NvLinkRemote::Gpu;
        }
    }
}

/// NVML's CPU affinity bitmask: word `i`, bit `b` is CPU `i * bits + b`, where `bits` is
/// the width of C `unsigned long`.
fn cpuset_from_words(words: &[c_ulong]) -> CpuSet {
    let bits = c_ulong::BITS;
    CpuSet::from_cpus(words.iter().enumerate().flat_map(|(i, &w)| {
        (0..bits)
            .filter(move |b| w & (1 << b) != 0)
            .map(move |b| i as u32 * bits + b)
    }))
}

fn topology_level(l: NvmlLevel) -> TopologyLevel {
    match l {
        NvmlLevel::Internal => TopologyLevel::Internal,
        NvmlLevel::Single => TopologyLevel::Single,
        NvmlLevel::Multiple => TopologyLevel::Multiple,
        NvmlLevel::HostBridge => TopologyLevel::Hostbridge,
        NvmlLevel::Node => TopologyLevel::Node,
        NvmlLevel::System => TopologyLevel::System,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_library_is_unavailable_not_an_error() {
        let err = collect_with(Some(OsStr::new("/nonexistent/libnvidia-ml.so.1"))).unwrap_err();
        let SourceError::Unavailable(msg) = err else {
            panic!("expected Unavailable, got {err:?}");
        };
        assert!(
            msg.starts_with("NVML: the NVIDIA driver library could not be loaded"),
            "{msg}"
        );
        assert!(msg.contains("/nonexistent/libnvidia-ml.so.1"), "{msg}");
        assert!(msg.contains("PCIe-only"), "{msg}");
    }

    #[test]
    fn init_errors_map_to_unavailable_or_failed() {
        for e in [
            NvmlError::LibraryNotFound,
            NvmlError::DriverNotLoaded,
            NvmlError::NoPermission,
        ] {
            assert!(
                matches!(init_error(&e), SourceError::Unavailable(m) if m.starts_with("NVML: ")),
                "{e:?}"
            );
        }
        assert!(matches!(
            init_error(&NvmlError::LibRmVersionMismatch),
            SourceError::Failed {
                source_name: "NVML",
                ..
            }
        ));
        assert!(matches!(
            enumerate_error(&NvmlError::NoPermission),
            SourceError::Unavailable(_)
        ));
        assert!(matches!(
            enumerate_error(&NvmlError::GpuLost),
            SourceError::Failed { .. }
        ));
    }

    #[test]
    fn affinity_words_become_cpus() {
        let bits = c_ulong::BITS;
        assert_eq!(cpuset_from_words(&[0xff, 0]).to_string(), "0-7");
        assert_eq!(cpuset_from_words(&[0, 1]).to_string(), bits.to_string());
        // Two sockets of 56 cores with SMT: CPUs 0-55 and 112-167.
        let cpus: Vec<u32> = (0..56).chain(112..168).collect();
        let mut words = vec![0 as c_ulong; 4];
        for c in &cpus {
            words[(c / bits) as usize] |= 1 << (c % bits);
        }
        assert_eq!(cpuset_from_words(&words).to_string(), "0-55,112-167");
        assert!(cpuset_from_words(&[0; 4]).is_empty());
    }

    #[test]
    fn remote_kinds() {
        let h100_switch = (0x22a3 << 16) | 0x10de;
        let a100_switch = (0x1af1 << 16) | 0x10de;
        let h100_gpu = (0x2330 << 16) | 0x10de;
        assert_eq!(remote_kind(Some(2), None), NvLinkRemote::Nvswitch);
        assert_eq!(remote_kind(Some(0), Some(h100_switch)), NvLinkRemote::Gpu);
        assert_eq!(remote_kind(Some(1), None), NvLinkRemote::Cpu);
        assert_eq!(
            remote_kind(Some(255), Some(h100_switch)),
            NvLinkRemote::Nvswitch
        );
        assert_eq!(remote_kind(None, Some(a100_switch)), NvLinkRemote::Nvswitch);
        assert_eq!(remote_kind(None, Some(h100_gpu)), NvLinkRemote::Unknown);
        // Same device id from another vendor is not an NVSwitch.
        assert_eq!(
            remote_kind(None, Some((0x22a3 << 16) | 0x8086)),
            NvLinkRemote::Unknown
        );
    }

    fn gpu(bus_id: &str, links: &[(&str, NvLinkRemote)]) -> NvmlGpu {
        NvmlGpu {
            nvlinks: links
                .iter()
                .enumerate()
                .map(|(i, (r, k))| NvLink {
                    link: i as u32,
                    active: true,
                    remote_bus_id: Some(r.to_string()),
                    remote_kind: *k,
                })
                .collect(),
            ..NvmlGpu::new(0, bus_id)
        }
    }

    #[test]
    fn unknown_links_to_listed_gpus_become_gpu_links() {
        let mut gpus = vec![
            gpu(
                "00000000:07:00.0",
                &[
                    ("00000000:0F:00.0", NvLinkRemote::Unknown),
                    ("00000000:99:00.0", NvLinkRemote::Unknown),
                    ("00000000:0F:00.0", NvLinkRemote::Nvswitch),
                ],
            ),
            gpu("0000:0f:00.0", &[]),
        ];
        settle_remote_kinds(&mut gpus);
        let kinds: Vec<NvLinkRemote> = gpus[0].nvlinks.iter().map(|l| l.remote_kind).collect();
        assert_eq!(
            kinds,
            [
                NvLinkRemote::Gpu,
                NvLinkRemote::Unknown,
                NvLinkRemote::Nvswitch
            ]
        );
    }

    #[test]
    fn levels_map_one_to_one() {
        assert_eq!(topology_level(NvmlLevel::Internal), TopologyLevel::Internal);
        assert_eq!(topology_level(NvmlLevel::Single), TopologyLevel::Single);
        assert_eq!(topology_level(NvmlLevel::Multiple), TopologyLevel::Multiple);
        assert_eq!(
            topology_level(NvmlLevel::HostBridge),
            TopologyLevel::Hostbridge
        );
        assert_eq!(topology_level(NvmlLevel::Node), TopologyLevel::Node);
        assert_eq!(topology_level(NvmlLevel::System), TopologyLevel::System);
    }
}
