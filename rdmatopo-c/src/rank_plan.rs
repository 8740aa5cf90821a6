//! One local rank's plan (`rdmatopo::Plan`): its GPU, the NCCL_IB_HCA value
//! and the other NCCL variables, its HCA ports, GID index and CPUs.

use crate::args::{OutBuf, arg_out, arg_ref, arg_str};
use crate::error::{FfiError, ffi_call, rdmatopo_status};
use crate::topology::rdmatopo_topology;
use rdmatopo::{LOCAL_RANK_VARS, Plan, RankChoice, RankOutcome, RankPlan, RankRequest, WhenNoRank};
use std::collections::BTreeMap;
use std::ffi::{CString, c_char};
use std::ptr;

/// The plan of one local rank. Immutable; free it with rdmatopo_rank_plan_free.
#[derive(Debug)]
pub struct rdmatopo_rank_plan {
    plan: Plan,
    rank: RankPlan,
    strings: PlanStrings,
}

// C threads may share one plan too.
const _: fn() = || {
    fn shareable<T: Send + Sync>() {}
    shareable::<rdmatopo_rank_plan>();
};

/// NUL-terminated copies of what C borrows.
#[derive(Debug)]
struct PlanStrings {
    gpu: CString,
    nccl_ib_hca: Option<CString>,
    hcas: CString,
    cpus: CString,
    env: Vec<(CString, CString)>,
}

/// What rdmatopo_rank_plan_info reports. The strings belong to the plan.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct rdmatopo_rank_info {
    pub local_rank: u32,
    /// The rank's GPU, PCI address in sysfs form (`0000:18:00.0`).
    pub gpu_pci_address: *const c_char,
    /// The value for NCCL_IB_HCA, in NCCL's exact-match form (`=mlx5_0:1,mlx5_3:1`):
    /// every usable compute-fabric port of the node. NULL when no HCA is usable.
    pub nccl_ib_hca: *const c_char,
    /// The HCA ports NCCL will prefer for this rank's GPU, comma-separated
    /// (`mlx5_0:1`); "" when none.
    pub hcas: *const c_char,
    /// The RoCE GID index of those ports when they agree, else -1 (also on InfiniBand).
    pub gid_index: i32,
    /// The CPUs to bind to, as a Linux CPU list (`0-55,112-167`).
    pub cpus: *const c_char,
    /// Number of CPUs in `cpus` (rdmatopo_rank_plan_cpu_ids lists them).
    pub cpu_count: usize,
    /// NUMA node of the GPU, -1 when unknown.
    pub numa_node: i32,
    /// Number of environment variables the plan sets (rdmatopo_rank_plan_env).
    pub env_count: usize,
}

fn c_string(value: &str) -> Result<CString, FfiError> {
    CString::new(value).map_err(|_| {
        FfiError::new(
            rdmatopo_status::Internal,
            format!("plan value {value:?} contains a NUL byte"),
        )
    })
}

/// `envp`: a NULL-terminated array of `NAME=VALUE` strings.
///
/// # Safety
/// `envp` is a valid NULL-terminated array of NUL-terminated strings.
unsafe fn read_envp(envp: *const *const c_char) -> Result<BTreeMap<String, String>, FfiError> {
    let mut env = BTreeMap::new();
    for i in 0.. {
        // SAFETY: the array is NULL-terminated, so every index up to the NULL is valid.
        let entry = unsafe { *envp.add(i) };
        if entry.is_null() {
            break;
        }
        // SAFETY: each entry is NUL-terminated.
        let text = unsafe { arg_str(entry, "envp entry") }?;
        let (name, value) = text
            .split_once('=')
            .ok_or_else(|| FfiError::invalid(format!("envp entry {text:?} is not NAME=VALUE")))?;
        env.insert(name.to_string(), value.to_string());
    }
    Ok(env)
}

fn optional_count(value: i64, what: &str) -> Result<Option<u32>, FfiError> {
    match value {
        -1 => Ok(None),
        v => u32::try_from(v).map(Some).map_err(|_| {
            FfiError::invalid(format!(
                "{what} {v} is neither -1 nor a non-negative number"
            ))
        }),
    }
}

impl rdmatopo_rank_plan {
    fn compute(
        topo: &rdmatopo_topology,
        local_rank: Option<u32>,
        local_world_size: Option<u32>,
        env: BTreeMap<String, String>,
    ) -> Result<Self, FfiError> {
        let captured = env.is_empty();
        let request = RankRequest {
            local_rank,
            local_world_size,
            env,
        };
        let RankOutcome { plan, choice, .. } =
            topo.devices().rank_plan(request, WhenNoRank::PlanTheNode)?;
        let rank = match choice {
            RankChoice::Planned(rank) => rank,
            RankChoice::NoGpu => {
                return Err(FfiError::not_found(format!(
                    "the plan has no GPU for this local rank ({})",
                    plan.notes.join("; ")
                )));
            }
            RankChoice::Unnamed => {
                return Err(FfiError::invalid(format!(
                    "no local rank given and none of {} is set in the {}",
                    LOCAL_RANK_VARS.join(", "),
                    if captured {
                        "environment discovery captured"
                    } else {
                        "environment passed"
                    }
                )));
            }
        };
        let strings = PlanStrings {
            gpu: c_string(&rank.gpu.to_string())?,
            nccl_ib_hca: plan
                .env
                .get("NCCL_IB_HCA")
                .map(|v| c_string(v))
                .transpose()?,
            hcas: c_string(&rank.hcas.join(","))?,
            cpus: c_string(&rank.cpus.to_string())?,
            env: plan
                .env
                .iter()
                .map(|(k, v)| Ok((c_string(k)?, c_string(v)?)))
                .collect::<Result<_, FfiError>>()?,
        };
        Ok(Self {
            plan,
            rank,
            strings,
        })
    }

    fn info(&self) -> rdmatopo_rank_info {
        let s = &self.strings;
        rdmatopo_rank_info {
            local_rank: self.rank.local_rank,
            gpu_pci_address: s.gpu.as_ptr(),
            nccl_ib_hca: s.nccl_ib_hca.as_ref().map_or(ptr::null(), |c| c.as_ptr()),
            hcas: s.hcas.as_ptr(),
            gid_index: self
                .rank
                .gid_index
                .and_then(|i| i32::try_from(i).ok())
                .unwrap_or(-1),
            cpus: s.cpus.as_ptr(),
            cpu_count: self.rank.cpus.len(),
            numa_node: self
                .rank
                .numa_node
                .and_then(|n| i32::try_from(n).ok())
                .unwrap_or(-1),
            env_count: s.env.len(),
        }
    }
}

/// Plan local rank `local_rank` of `local_world_size` on this node: the ranks map to
/// GPUs in CUDA order (PCI bus order, narrowed by CUDA_VISIBLE_DEVICES), each GPU gets
/// the HCA ports NCCL prefers for it, and the CPUs of its NUMA node are split among
/// the ranks that share it.
///
/// `local_rank` -1 takes it from LOCAL_RANK (or OMPI_COMM_WORLD_LOCAL_RANK,
/// SLURM_LOCALID, MPI_LOCALRANKID, PMI_LOCAL_RANK); `local_world_size` -1 from
/// LOCAL_WORLD_SIZE and the like, else one rank per visible GPU. `envp` (may be NULL)
/// is a NULL-terminated array of `NAME=VALUE` strings to read those and
/// CUDA_VISIBLE_DEVICES from; NULL (or an empty array) means the environment that
/// discovery captured (`/proc/self/environ` under the root, so for this machine the
/// process's environment at start-up).
///
/// On success `*out` receives a new plan; free it with rdmatopo_rank_plan_free.
/// Errors: RDMATOPO_STATUS_INVALID_ARGUMENT (a rank below -1 or not below the world
/// size, no rank given or found, a malformed envp entry or CUDA_VISIBLE_DEVICES),
/// RDMATOPO_STATUS_NOT_FOUND (no GPU for the rank).
///
/// # Safety
/// `topo` is a live handle; `envp` NULL or a NULL-terminated array of NUL-terminated
/// strings; `out` valid for a pointer write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdmatopo_rank_plan_compute(
    topo: *const rdmatopo_topology,
    local_rank: i64,
    local_world_size: i64,
    envp: *const *const c_char,
    out: *mut *mut rdmatopo_rank_plan,
) -> rdmatopo_status {
    ffi_call("rdmatopo_rank_plan_compute", || {
        // SAFETY: the caller's promise.
        let topo = unsafe { arg_ref(topo, "topo") }?;
        let out = arg_out(out, "out")?;
        let rank = optional_count(local_rank, "local_rank")?;
        let world = optional_count(local_world_size, "local_world_size")?;
        let env = if envp.is_null() {
            BTreeMap::new()
        } else {
            // SAFETY: the caller's promise.
            unsafe { read_envp(envp) }?
        };
        let plan = Box::new(rdmatopo_rank_plan::compute(topo, rank, world, env)?);
        // SAFETY: checked non-NULL.
        unsafe { out.write(Box::into_raw(plan)) };
        Ok(())
    })
}

/// The plan's facts, into `*out`; its strings live until rdmatopo_rank_plan_free.
///
/// # Safety
/// `plan` is a live plan; `out` valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdmatopo_rank_plan_info(
    plan: *const rdmatopo_rank_plan,
    out: *mut rdmatopo_rank_info,
) -> rdmatopo_status {
    ffi_call("rdmatopo_rank_plan_info", || {
        // SAFETY: the caller's promise.
        let plan = unsafe { arg_ref(plan, "plan") }?;
        let out = arg_out(out, "out")?;
        // SAFETY: checked non-NULL.
        unsafe { out.write(plan.info()) };
        Ok(())
    })
}

/// The CPUs to bind to, ascending, into `cpus` (room for `capacity`; may be NULL when
/// `capacity` is 0), ready for CPU_SET. `*count` receives how many there are, also
/// with RDMATOPO_STATUS_BUFFER_TOO_SMALL (then `cpus` is untouched).
///
/// # Safety
/// `plan` is a live plan; `cpus` NULL or valid for `capacity` writes; `count` valid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdmatopo_rank_plan_cpu_ids(
    plan: *const rdmatopo_rank_plan,
    cpus: *mut u32,
    capacity: usize,
    count: *mut usize,
) -> rdmatopo_status {
    ffi_call("rdmatopo_rank_plan_cpu_ids", || {
        // SAFETY: the caller's promise.
        let plan = unsafe { arg_ref(plan, "plan") }?;
        if cpus.is_null() && capacity > 0 {
            arg_out(cpus, "cpus")?;
        }
        let count = arg_out(count, "count")?;
        let ids: Vec<u32> = plan.rank.cpus.iter().collect();
        if ids.len() > capacity {
            // SAFETY: checked non-NULL.
            unsafe { count.write(ids.len()) };
            return Err(FfiError::new(
                rdmatopo_status::BufferTooSmall,
                format!("room for {capacity} CPUs; {} are needed", ids.len()),
            ));
        }
        // SAFETY: `cpus` holds `capacity` >= ids.len() entries, non-NULL when non-empty.
        unsafe {
            ptr::copy_nonoverlapping(ids.as_ptr(), cpus, ids.len());
            count.write(ids.len());
        }
        Ok(())
    })
}

/// Environment variable `index` (0 to env_count - 1, in name order) that the plan
/// sets: `*name` (`NCCL_IB_HCA`) and `*value`. Both strings belong to the plan.
/// Errors: RDMATOPO_STATUS_INDEX_OUT_OF_RANGE.
///
/// # Safety
/// `plan` is a live plan; `name` and `value` valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdmatopo_rank_plan_env(
    plan: *const rdmatopo_rank_plan,
    index: usize,
    name: *mut *const c_char,
    value: *mut *const c_char,
) -> rdmatopo_status {
    ffi_call("rdmatopo_rank_plan_env", || {
        // SAFETY: the caller's promise.
        let plan = unsafe { arg_ref(plan, "plan") }?;
        let name = arg_out(name, "name")?;
        let value = arg_out(value, "value")?;
        let env = &plan.strings.env;
        let (k, v) = env.get(index).ok_or_else(|| {
            FfiError::new(
                rdmatopo_status::IndexOutOfRange,
                format!(
                    "environment index {index} is out of range (the plan sets {})",
                    env.len()
                ),
            )
        })?;
        // SAFETY: both checked non-NULL.
        unsafe {
            name.write(k.as_ptr());
            value.write(v.as_ptr());
        }
        Ok(())
    })
}

/// The plan as an `rdmatopo.nccl-env/1` JSON document (this rank only, with the
/// reasons, exclusions and notes), NUL-terminated, into `buf` of `buf_len` bytes.
/// `*required` (may be NULL) as for rdmatopo_topology_to_json.
///
/// # Safety
/// `plan` is a live plan; `buf` NULL or valid for `buf_len` bytes; `required` NULL or
/// valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdmatopo_rank_plan_to_json(
    plan: *const rdmatopo_rank_plan,
    buf: *mut c_char,
    buf_len: usize,
    required: *mut usize,
) -> rdmatopo_status {
    ffi_call("rdmatopo_rank_plan_to_json", || {
        // SAFETY: the caller's promise.
        let plan = unsafe { arg_ref(plan, "plan") }?;
        let out = OutBuf::new(buf, buf_len, required)?;
        // SAFETY: the caller's promise about `buf` and `required`.
        unsafe { out.put(&plan.plan.to_json()) }
    })
}

/// Free a plan and its strings. NULL is ignored.
///
/// # Safety
/// `plan` is NULL or a plan from rdmatopo_rank_plan_compute not yet freed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdmatopo_rank_plan_free(plan: *mut rdmatopo_rank_plan) {
    let _ = ffi_call("rdmatopo_rank_plan_free", || {
        if !plan.is_null() {
            // SAFETY: a pointer from Box::into_raw in this module, freed once.
            drop(unsafe { Box::from_raw(plan) });
        }
        Ok(())
    });
}
