//! The per-rank plan: for each local rank its GPU, the HCA ports NCCL will prefer for
//! it, the GID, and the CPUs to bind to; plus the NCCL variables that the facts justify,
//! each with its reason, and the devices left out, each with its reason.
//!
//! Ranks map to GPUs in CUDA order (PCI bus order, narrowed by `CUDA_VISIBLE_DEVICES`).
//! HCAs are chosen the way NCCL prefers them (nccl.md §4.1): per GPU the closest path
//! class, ties spread so that each GPU keeps its own rail, the ports of one adapter
//! (dual-port cards, a PF with its VFs) counted as one physical NIC. `NCCL_IB_HCA`
//! lists every usable compute-fabric port in NCCL's exact-match form; NCCL then assigns
//! NICs to channels itself (its maintainers advise against one HCA per rank).

use super::affinity::numa_of;
use super::affinity::{PathClass, path_class};
use super::container::{ContainerView, Ownership};
use super::error::ViewError;
use super::gid::{GidChoice, NcclGidEnv, choose_gid, is_roce, nccl_gid_index, unusable_reason};
use super::naming::GpuNames;
use super::words::{list_short, list_short_counted};
use crate::model::{
    Gpu, LOCAL_RANK_VARS, LOCAL_SIZE_VARS, PciFunction, Port, RdmaDevice, Topology,
};
use crate::parse::{CpuSet, PciAddr, PortState};
use crate::parse::{merge_natural, natural_cmp};
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// Schema tag of [`Plan::to_json`].
pub const NCCL_ENV_SCHEMA: &str = "rdmatopo.nccl-env/1";

/// What to plan for.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanOptions {
    /// Keep only this local rank in [`Plan::ranks`] (default: `LOCAL_RANK` and friends
    /// from the environment, else every rank).
    pub local_rank: Option<u32>,
    /// Number of ranks on this node (default: `LOCAL_WORLD_SIZE` and friends, else one
    /// per visible GPU).
    pub local_world_size: Option<u32>,
    /// The environment to read `CUDA_VISIBLE_DEVICES`, `LOCAL_RANK`, … from; when
    /// empty, the one discovery captured (`topo.process.env`).
    pub env: BTreeMap<String, String>,
}

/// One local rank's share of the node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct RankPlan {
    /// The local rank (`LOCAL_RANK`).
    pub local_rank: u32,
    /// The rank's GPU.
    pub gpu: PciAddr,
    /// HCA ports NCCL will prefer for this GPU (`mlx5_0:1`).
    pub hcas: Vec<String>,
    /// The RoCE GID index of those ports, when they agree.
    pub gid_index: Option<u32>,
    /// CPUs to bind to; never empty when the root says anything about CPUs.
    pub cpus: CpuSet,
    /// NUMA node of the GPU.
    pub numa_node: Option<u32>,
    /// The facts behind each choice.
    pub reasons: Vec<String>,
}

/// A device or port left out of `NCCL_IB_HCA`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Exclusion {
    /// RDMA device name, or `device:port` for one port of a multi-port device.
    pub device: String,
    /// Why it was left out.
    pub reason: String,
}

/// The plan for this node (`rdmatopo.nccl-env/1`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Plan {
    /// Variables to set, common to every local rank.
    pub env: BTreeMap<String, String>,
    /// Why each variable in `env` is set.
    pub env_reasons: BTreeMap<String, String>,
    /// The GID index of every RoCE port in `NCCL_IB_HCA` (`mlx5_0:1` → 3), also when
    /// they differ and `NCCL_IB_GID_INDEX` is therefore not set.
    pub gid_index: BTreeMap<String, u32>,
    /// The plan of each local rank planned, in rank order.
    pub ranks: Vec<RankPlan>,
    /// The devices and ports left out of `NCCL_IB_HCA`, each with its reason.
    pub excluded: Vec<Exclusion>,
    /// Assumptions and fallbacks, each said once.
    pub notes: Vec<String>,
}

/// A usable or candidate HCA port.
#[derive(Debug, Clone)]
struct Cand<'a> {
    dev: &'a RdmaDevice,
    port: &'a Port,
    func: Option<&'a PciFunction>,
    /// `mlx5_0:1`.
    label: String,
    fabric: Fabric,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Fabric {
    InfiniBand,
    Ethernet,
}

impl Fabric {
    fn name(self) -> &'static str {
        match self {
            Fabric::InfiniBand => "InfiniBand",
            Fabric::Ethernet => "Ethernet (RoCE)",
        }
    }
}

impl Cand<'_> {
    /// How the port is named in an exclusion: the device, or `dev:port` when the device
    /// has several ports.
    fn exclusion_name(&self) -> String {
        if self.dev.ports.len() == 1 {
            self.dev.name.clone()
        } else {
            self.label.clone()
        }
    }

    fn sysfs(&self, attr: &str) -> String {
        format!(
            "/sys/class/infiniband/{}/ports/{}/{attr}",
            self.dev.name, self.port.number
        )
    }
}

impl Plan {
    /// Plan every local rank of this node.
    ///
    /// # Errors
    /// [`ViewError::Argument`] when `opts.local_rank` is not below the local world
    /// size; [`ViewError::Invalid`] when the environment is contradictory: a local rank
    /// that is not a number or not below the local world size, or a
    /// `CUDA_VISIBLE_DEVICES` that names GPUs by UUID when no UUID is known.
    #[doc(hidden)]
    pub fn compute(topo: &Topology, opts: &PlanOptions) -> Result<Plan, ViewError> {
        let topo = canonical(topo);
        let env = if opts.env.is_empty() {
            &topo.process.env
        } else {
            &opts.env
        };
        let mut notes = Vec::new();
        let view = ContainerView::of(&topo);
        let visible = visible_gpus(&topo, &view, env, &mut notes)?;

        let world = match opts.local_world_size {
            Some(n) => Some(n),
            None => env_number(env, &LOCAL_SIZE_VARS)?,
        }
        .unwrap_or(visible.len() as u32);
        let wanted = match opts.local_rank {
            Some(r) => Some(r),
            None => env_number(env, &LOCAL_RANK_VARS)?,
        };
        if let Some(r) = wanted
            && world > 0
            && r >= world
        {
            let msg = format!("local rank {r} is not below the local world size {world}");
            // The caller's own number is a usage error; one read from the environment
            // is the environment's.
            return Err(if opts.local_rank.is_some() {
                ViewError::Argument(msg)
            } else {
                ViewError::Invalid(msg)
            });
        }
        if visible.is_empty() {
            notes.push(match wanted {
                Some(r) => {
                    format!("no GPU is visible, so local rank {r} gets no GPU, HCA or CPU binding")
                }
                None => "no GPU is visible: no per-rank plan".to_string(),
            });
        } else if world as usize > visible.len() {
            notes.push(format!(
                "{world} local ranks but {} visible GPU{}: ranks share GPUs round-robin (rank r uses CUDA device r mod {})",
                visible.len(),
                plural(visible.len()),
                visible.len()
            ));
        }
        let rank_gpu: Vec<(u32, &Gpu)> = if visible.is_empty() {
            Vec::new()
        } else {
            (0..world)
                .map(|r| (r, visible[r as usize % visible.len()]))
                .collect()
        };
        let mut gpus_in_use: Vec<PciAddr> = rank_gpu.iter().map(|(_, g)| g.pci).collect();
        gpus_in_use.sort();
        gpus_in_use.dedup();

        let mut excluded = Vec::new();
        let data_direct = DataDirect::from_env(env);
        let usable = select_ports(
            &topo,
            &view,
            &gpus_in_use,
            data_direct,
            &mut excluded,
            &mut notes,
        );
        data_direct_note(&topo, &usable, data_direct, &mut notes);
        c2c_note(&topo, &gpus_in_use, &usable, env, &mut notes);
        let nics = physical_nics(&usable);
        let policy = NetDevsPolicy::from_env(env);
        let per_gpu = assign_nics(&topo, &gpus_in_use, &usable, &nics, policy);

        let mut env_out = BTreeMap::new();
        let mut env_reasons = BTreeMap::new();
        let gids = choose_gids(&topo, &usable);
        hca_env(
            &usable,
            &visible,
            &mut env_out,
            &mut env_reasons,
            &mut notes,
        );
        let gid_index = gid_env(
            &topo,
            &gids,
            &usable,
            env,
            &mut env_out,
            &mut env_reasons,
            &mut notes,
        );
        merge_vfs_env(&usable, &nics, &mut env_out, &mut env_reasons);
        let fused = virtual_nics(&topo, &usable, env, &env_out, &mut notes);
        socket_env(&topo, &mut env_out, &mut env_reasons, &mut notes);
        // RoCE QoS (analysis/qos.rs): NCCL_IB_TC from the ports' configured traffic class.
        let qos_ports: Vec<(&str, u32)> = usable
            .iter()
            .map(|c| (c.dev.name.as_str(), c.port.number))
            .collect();
        super::qos::merge_into_plan(
            &topo,
            &qos_ports,
            &mut env_out,
            &mut env_reasons,
            &mut notes,
        );
        // end RoCE QoS
        for (k, v) in &env_out {
            if let Some(cur) = env.get(k)
                && cur != v
            {
                notes.push(format!(
                    "{k} is already set to {cur:?} in the environment; the plan says {v:?} (exec keeps the existing value unless --override)"
                ));
            }
        }

        let cpus = bind_cpus(&topo, &rank_gpu, &mut notes);
        let names = GpuNames::of_view(&view);
        let mut ranks = Vec::new();
        for (cuda_index, (rank, gpu)) in rank_gpu.iter().enumerate() {
            let cuda_index = cuda_index % visible.len();
            let mut reasons = vec![gpu_reason(gpu, &names, cuda_index, env)];
            let (hcas, hca_reason) = match per_gpu.get(&gpu.pci) {
                Some(a) => (a.ports.clone(), a.reason.clone()),
                None => (Vec::new(), "no usable HCA for this GPU".to_string()),
            };
            reasons.push(hca_reason);
            for v in fused.iter().filter(|v| v.iter().any(|p| hcas.contains(p))) {
                reasons.push(format!(
                    "NCCL fuses {} into one virtual NIC ({})",
                    v.join(" and "),
                    vnic_name(v)
                ));
            }
            let rank_gids: Vec<&GidChoice> =
                hcas.iter().filter_map(|h| gids.get(h.as_str())).collect();
            let gid = match rank_gids.as_slice() {
                [] => None,
                [first, rest @ ..] if rest.iter().all(|g| g.index == first.index) => {
                    Some(first.index)
                }
                _ => None,
            };
            for g in &rank_gids {
                reasons.push(gid_reason(g));
            }
            let (cpu_set, cpu_reason) = cpus.get(rank).cloned().unwrap_or_default();
            reasons.push(cpu_reason);
            ranks.push(RankPlan {
                local_rank: *rank,
                gpu: gpu.pci,
                hcas,
                gid_index: gid,
                cpus: cpu_set,
                numa_node: gpu.numa_node,
                reasons,
            });
        }
        if let Some(r) = wanted {
            ranks.retain(|p| p.local_rank == r);
        }
        excluded.sort_by(|a: &Exclusion, b: &Exclusion| natural_cmp(&a.device, &b.device));
        let mut seen = BTreeSet::new();
        notes.retain(|n| seen.insert(n.clone()));
        Ok(Plan {
            env: env_out,
            env_reasons,
            gid_index,
            ranks,
            excluded,
            notes,
        })
    }

    /// The `rdmatopo.nccl-env/1` JSON document.
    pub fn to_json(&self) -> String {
        #[derive(Serialize)]
        struct Doc<'a> {
            schema: &'static str,
            #[serde(flatten)]
            plan: &'a Plan,
        }
        let mut s = serde_json::to_string_pretty(&Doc {
            schema: NCCL_ENV_SCHEMA,
            plan: self,
        })
        .unwrap_or_default();
        s.push('\n');
        s
    }

    /// The plan of local rank `rank`, when it is in [`Plan::ranks`].
    pub fn rank(&self, rank: u32) -> Option<&RankPlan> {
        self.ranks.iter().find(|r| r.local_rank == rank)
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// The model with every list in its canonical order, so that the plan does not depend
/// on the order devices were listed in: borrowed when discovery's order is already
/// that (it always is), else a sorted copy.
fn canonical(topo: &Topology) -> Cow<'_, Topology> {
    fn sorted<'n>(names: impl Iterator<Item = &'n str>) -> bool {
        let names: Vec<&str> = names.collect();
        names.is_sorted_by(|a, b| natural_cmp(a, b).is_le())
    }
    let in_order = topo.pci.is_sorted_by_key(|f| f.address)
        && topo.gpus.is_sorted_by_key(|g| g.pci)
        && topo.numa_nodes.is_sorted_by_key(|n| n.id)
        && topo.host_bridges.is_sorted_by(|a, b| a.name <= b.name)
        && sorted(topo.netdevs.iter().map(|n| n.name.as_str()))
        && sorted(topo.rdma_devices.iter().map(|d| d.name.as_str()))
        && topo.rdma_devices.iter().all(|d| {
            d.ports.is_sorted_by_key(|p| p.number)
                && d.ports.iter().all(|p| p.gids.is_sorted_by_key(|g| g.index))
        });
    if in_order {
        return Cow::Borrowed(topo);
    }
    let mut t = topo.clone();
    t.pci.sort_by_key(|f| f.address);
    t.gpus.sort_by_key(|g| g.pci);
    t.numa_nodes.sort_by_key(|n| n.id);
    t.host_bridges.sort_by(|a, b| a.name.cmp(&b.name));
    t.netdevs.sort_by(|a, b| natural_cmp(&a.name, &b.name));
    t.rdma_devices.sort_by(|a, b| natural_cmp(&a.name, &b.name));
    for d in &mut t.rdma_devices {
        d.ports.sort_by_key(|p| p.number);
        for p in &mut d.ports {
            p.gids.sort_by_key(|g| g.index);
        }
    }
    Cow::Owned(t)
}

/// The first of `vars` that is set, as a number.
fn env_number(env: &BTreeMap<String, String>, vars: &[&str]) -> Result<Option<u32>, ViewError> {
    for var in vars {
        if let Some(v) = env.get(*var) {
            return v.trim().parse().map(Some).map_err(|_| {
                ViewError::Invalid(format!("{var}={v:?} is not a non-negative number"))
            });
        }
    }
    Ok(None)
}

/// GPUs this process may use, in CUDA order.
fn visible_gpus<'t>(
    topo: &'t Topology,
    view: &ContainerView,
    env: &BTreeMap<String, String>,
    notes: &mut Vec<String>,
) -> Result<Vec<&'t Gpu>, ViewError> {
    let all = owned_gpus(topo, view, notes);
    if let Some(order) = env.get("CUDA_DEVICE_ORDER")
        && order != "PCI_BUS_ID"
    {
        notes.push(format!(
            "CUDA_DEVICE_ORDER={order}: CUDA numbers GPUs fastest first, which matches PCI bus order only when all GPUs are the same model; the plan assumes PCI bus order"
        ));
    }
    let Some(cvd) = env.get("CUDA_VISIBLE_DEVICES") else {
        return Ok(all);
    };
    let mut out: Vec<&Gpu> = Vec::new();
    if cvd.trim().is_empty() {
        notes.push("CUDA_VISIBLE_DEVICES is empty: no GPU is visible to CUDA".to_string());
        return Ok(out);
    }
    for entry in cvd.split(',').map(str::trim) {
        let found = resolve_cvd_entry(&all, entry)?;
        match found {
            Some(g) if !out.iter().any(|o| o.pci == g.pci) => out.push(g),
            _ => {
                notes.push(format!(
                    "CUDA_VISIBLE_DEVICES={cvd}: entry {entry:?} matches no GPU here (or repeats one), so CUDA ignores it and every entry after it"
                ));
                break;
            }
        }
    }
    Ok(out)
}

/// One `CUDA_VISIBLE_DEVICES` entry: an index in PCI order, a full UUID, a unique
/// `GPU-` prefix of one, or a UUID without its `GPU-` prefix.
fn resolve_cvd_entry<'t>(all: &[&'t Gpu], entry: &str) -> Result<Option<&'t Gpu>, ViewError> {
    if let Ok(i) = entry.parse::<i64>() {
        return Ok(usize::try_from(i).ok().and_then(|i| all.get(i).copied()));
    }
    if entry.starts_with("MIG-") {
        return Err(ViewError::Invalid(format!(
            "CUDA_VISIBLE_DEVICES names a MIG instance ({entry}); per-rank plans for MIG instances are not supported"
        )));
    }
    if all.iter().all(|g| g.uuid.is_none()) {
        return Err(ViewError::Invalid(format!(
            "CUDA_VISIBLE_DEVICES names {entry:?} by UUID, but no GPU UUID is known here (they come from NVML or /proc/driver/nvidia/gpus)"
        )));
    }
    let want = entry.to_ascii_lowercase();
    let want = want.strip_prefix("gpu-").unwrap_or(&want);
    let matches: Vec<&&Gpu> = all
        .iter()
        .filter(|g| {
            g.uuid.as_deref().is_some_and(|u| {
                let u = u.to_ascii_lowercase();
                u.strip_prefix("gpu-").unwrap_or(&u).starts_with(want)
            })
        })
        .collect();
    Ok(match matches.as_slice() {
        [one] if !want.is_empty() => Some(**one),
        _ => None,
    })
}

/// GPUs this process owns (`view::container`): those given to another container
/// are left out; those whose ownership is unknown are kept, and the assumption said.
fn owned_gpus<'t>(
    topo: &'t Topology,
    view: &ContainerView,
    notes: &mut Vec<String>,
) -> Vec<&'t Gpu> {
    let mut hidden = Vec::new();
    let mut assumed = Vec::new();
    let mut out = Vec::new();
    for g in &topo.gpus {
        match view.gpu(g.pci) {
            Ownership::Visible => hidden.push(g.pci.to_string()),
            Ownership::Unknown => {
                assumed.push(g.pci.to_string());
                out.push(g);
            }
            Ownership::Owned => out.push(g),
        }
    }
    if !hidden.is_empty() {
        notes.push(format!(
            "GPUs of another container are left out ({}): {}",
            view.context,
            hidden.join(", ")
        ));
    }
    if !assumed.is_empty() {
        notes.push(format!(
            "assumed these GPUs are this process's, though the {} gives no proof either way: {}",
            view.context,
            assumed.join(", ")
        ));
    }
    out
}

/// The rank's GPU and why CUDA calls it what it does; in a container also the name
/// every answer gives it ([`GpuNames::label`]: `GPU0 (host GPU5, 0000:c3:00.0)`).
fn gpu_reason(
    gpu: &Gpu,
    names: &GpuNames,
    cuda_index: usize,
    env: &BTreeMap<String, String>,
) -> String {
    let how = match env.get("CUDA_VISIBLE_DEVICES") {
        Some(cvd) => format!("CUDA_VISIBLE_DEVICES={cvd} makes it CUDA device {cuda_index}"),
        None => format!("CUDA device {cuda_index} in PCI bus order"),
    };
    if names.is_container() {
        let name = gpu
            .name
            .as_deref()
            .map(|n| format!(", {n}"))
            .unwrap_or_default();
        return format!("{}{name}: {how}", names.label(gpu));
    }
    let name = gpu
        .name
        .as_deref()
        .map(|n| format!(" ({n})"))
        .unwrap_or_default();
    format!("GPU {}{name}: {how}", gpu.pci)
}

fn gid_reason(g: &GidChoice) -> String {
    let addr = g.ipv4.clone().unwrap_or_else(|| format!("IPv6 {}", g.gid));
    format!(
        "{}:{} uses GID index {} ({addr} on {}; /sys/class/infiniband/{}/ports/{}/gids/{})",
        g.device,
        g.port,
        g.index,
        g.netdev.as_deref().unwrap_or("?"),
        g.device,
        g.port,
        g.index
    )
}

/// The class between a GPU and an HCA's function (SYS when either is not in the tree).
fn gpu_nic_class(topo: &Topology, gpu: PciAddr, nic: Option<&PciFunction>) -> PathClass {
    match (topo.pci_function(gpu), nic) {
        (Some(g), Some(n)) => path_class(topo, g, n),
        _ => PathClass::Sys,
    }
}

/// The closest class from any of `gpus` to a port.
fn best_class(topo: &Topology, gpus: &[PciAddr], c: &Cand) -> Option<PathClass> {
    gpus.iter()
        .map(|g| gpu_nic_class(topo, *g, c.func))
        .min_by_key(PathClass::rank)
}

/// Walk every HCA port and keep those that may carry collective traffic; the others
/// go to `excluded` with their reason.
fn select_ports<'t>(
    topo: &'t Topology,
    view: &ContainerView,
    gpus: &[PciAddr],
    data_direct: DataDirect,
    excluded: &mut Vec<Exclusion>,
    notes: &mut Vec<String>,
) -> Vec<Cand<'t>> {
    fn exclude(excluded: &mut Vec<Exclusion>, c: &Cand, reason: String) {
        excluded.push(Exclusion {
            device: c.exclusion_name(),
            reason,
        })
    }
    let mut cands: Vec<Cand> = Vec::new();
    let mut assumed: Vec<&str> = Vec::new();
    let mut others: Vec<&str> = Vec::new();
    // One lookup a device: a host's `--all` read in a pod has hundreds.
    let states: HashMap<&str, Ownership> = view
        .rdma
        .iter()
        .map(|o| (o.key.as_str(), o.state))
        .collect();
    for dev in &topo.rdma_devices {
        // A partial read (another container's device in an owned view) has no function
        // read; it is left out below as the other containers' devices are.
        if dev.pci.is_none() && topo.holds_rdma_details(&dev.name) {
            excluded.push(Exclusion {
                device: dev.name.clone(),
                reason: format!(
                    "software RDMA device (rxe/siw): /sys/class/infiniband/{}/device is not a PCI function",
                    dev.name
                ),
            });
            continue;
        }
        match states
            .get(dev.name.as_str())
            .copied()
            .unwrap_or(Ownership::Unknown)
        {
            Ownership::Visible => {
                others.push(dev.name.as_str());
                continue;
            }
            Ownership::Unknown => assumed.push(dev.name.as_str()),
            Ownership::Owned => {}
        }
        // NCCL's place for the device: its Data Direct DMA function where NCCL uses it.
        let func = dev
            .data_direct
            .filter(|_| data_direct.uses_dma())
            .or(dev.pci)
            .and_then(|a| topo.pci_function(a));
        for port in &dev.ports {
            let fabric = if port.link_layer == Some(crate::parse::LinkLayer::InfiniBand) {
                Some(Fabric::InfiniBand)
            } else if is_roce(port) {
                Some(Fabric::Ethernet)
            } else {
                None
            };
            let c = Cand {
                dev,
                port,
                func,
                label: format!("{}:{}", dev.name, port.number),
                fabric: fabric.unwrap_or(Fabric::Ethernet),
            };
            if port.state != Some(PortState::Active) {
                let state = port.state.map_or("unreadable".to_string(), |s| {
                    format!("{s:?}").to_uppercase()
                });
                exclude(
                    excluded,
                    &c,
                    format!("port not ACTIVE: {} is {state}", c.sysfs("state")),
                );
                continue;
            }
            if fabric.is_none() {
                exclude(
                    excluded,
                    &c,
                    format!(
                        "link layer unknown ({} unreadable or Unknown)",
                        c.sysfs("link_layer")
                    ),
                );
                continue;
            }
            if c.fabric == Fabric::Ethernet && choose_gid(topo, &dev.name, port.number).is_none() {
                let why = gid_summary(topo, port);
                exclude(
                    excluded,
                    &c,
                    format!("RoCE port without a GID usable from this network namespace ({why})"),
                );
                continue;
            }
            cands.push(c);
        }
    }

    // With those an owned view only names.
    let others = merge_natural(others, topo.other_rdma_devices());
    let unnamed = topo.other_rdma_device_count() - topo.other_rdma_devices().len();
    if !others.is_empty() {
        notes.push(format!(
            "RDMA devices of another container are left out ({}; their /dev/infiniband nodes or netdevs are not here): {}",
            view.context,
            list_short_counted(&others, unnamed)
        ));
    }
    if !assumed.is_empty() {
        notes.push(format!(
            "assumed these RDMA devices are this process's, though the {} gives no proof either way: {}",
            view.context,
            list_short(&assumed)
        ));
    }

    // The compute fabric: the link layer with most ports close (≤ PXB) to a GPU in
    // use, then most ports; InfiniBand on a tie.
    let fabrics: BTreeSet<Fabric> = cands.iter().map(|c| c.fabric).collect();
    if fabrics.len() > 1 {
        let score = |f: Fabric| {
            let ports: Vec<&Cand> = cands.iter().filter(|c| c.fabric == f).collect();
            let close = ports
                .iter()
                .filter(|c| best_class(topo, gpus, c).is_some_and(|k| k.allows_gdr()))
                .count();
            (close, ports.len(), std::cmp::Reverse(f))
        };
        let compute = fabrics
            .iter()
            .copied()
            .max_by_key(|f| score(*f))
            .unwrap_or(Fabric::InfiniBand);
        let on_compute: Vec<&str> = cands
            .iter()
            .filter(|c| c.fabric == compute)
            .map(|c| c.dev.name.as_str())
            .collect();
        let summary = list_short(&on_compute);
        cands.retain(|c| {
            if c.fabric == compute {
                return true;
            }
            exclude(
                excluded,
                c,
                format!(
                    "link layer {} differs from the compute fabric ({}, on {summary}): {}",
                    c.fabric.name(),
                    compute.name(),
                    c.sysfs("link_layer")
                ),
            );
            false
        });
    }

    // The front-end NIC: its netdev carries the default route.
    if let Some(route_if) = &topo.host.default_route_interface {
        let carries = |c: &Cand| {
            c.port.netdev.as_deref().is_some_and(|n| {
                n == route_if
                    || topo
                        .netdev(n)
                        .and_then(|d| d.master.as_deref())
                        .is_some_and(|m| m == route_if)
            })
        };
        if cands.iter().any(|c| !carries(c)) {
            cands.retain(|c| {
                if !carries(c) {
                    return true;
                }
                exclude(
                    excluded,
                    c,
                    format!(
                        "front-end NIC: its netdev {} carries the default route (/proc/net/route) and other HCAs exist",
                        route_if
                    ),
                );
                false
            });
        }
    }

    // A PF and its VFs share one physical port: keep one of them.
    let mut kept_ports: BTreeMap<(PciAddr, u32), String> = BTreeMap::new();
    let mut order: Vec<usize> = (0..cands.len()).collect();
    // PFs first, then VFs, each in address order.
    order.sort_by_key(|i| {
        let c = &cands[*i];
        (c.func.is_some_and(|f| f.is_vf), c.dev.pci)
    });
    let mut drop = BTreeSet::new();
    for i in order {
        let c = &cands[i];
        let Some(f) = c.func else { continue };
        let port_owner = f.physfn.unwrap_or(f.address);
        match kept_ports.get(&(port_owner, c.port.number)) {
            Some(first) => {
                exclude(
                    excluded,
                    c,
                    format!(
                        "virtual function on the same physical port as {first} (physfn {port_owner}); NCCL would fuse the two into one NIC (NVIDIA/nccl#1422)"
                    ),
                );
                drop.insert(i);
            }
            None => {
                kept_ports.insert((port_owner, c.port.number), c.label.clone());
            }
        }
    }
    let mut i = 0;
    cands.retain(|_| {
        i += 1;
        !drop.contains(&(i - 1))
    });

    // Storage and front-end rails: ports at NODE or SYS from every GPU in use, while
    // every GPU in use has a PIX/PXB port of its own. NCCL sees NODE as PHB, beyond
    // its default NCCL_NET_GDR_LEVEL (PXB; nccl src/graph/paths.cc ncclTopoCheckGdr,
    // v2.30.7-1), and never prefers such a port for a GPU that has a closer one
    // (src/graph/topo.cc ncclTopoGetLocal); left in NCCL_IB_HCA, rings may still put
    // traffic on it (src/graph/search.cc ncclTopoSelectNets takes any NIC up to the
    // search's typeInter), sharing the storage fabric. The DGX H100/H200 and B200
    // guides give these ports to storage and in-band management and the compute fabric
    // to the eight single-port ConnectX-7 (docs.nvidia.com/dgx-basepod, "Core
    // Components"; docs.nvidia.com/dgx-superpod, H100 RA "Network Fabrics").
    if !gpus.is_empty() {
        let own: Vec<Option<&str>> = gpus
            .iter()
            .map(|g| {
                cands
                    .iter()
                    .filter(|c| gpu_nic_class(topo, *g, c.func).allows_gdr())
                    .map(|c| c.dev.name.as_str())
                    .next()
            })
            .collect();
        if own.iter().all(Option::is_some) {
            let far: Vec<Option<PathClass>> = cands
                .iter()
                .map(|c| {
                    best_class(topo, gpus, c)
                        .filter(|k| matches!(k, PathClass::Node | PathClass::Sys))
                })
                .collect();
            let mut close: Vec<&str> = own.iter().flatten().copied().collect();
            close.sort_by(|a, b| natural_cmp(a, b));
            close.dedup();
            let summary = list_short(&close);
            let mut k = far.iter();
            cands.retain(|c| {
                let Some(Some(class)) = k.next() else {
                    return true;
                };
                // A GPU outside the job may own it: then it is that GPU's rail.
                let owner = topo.gpus.iter().find_map(|g| {
                    let k = gpu_nic_class(topo, g.pci, c.func);
                    (!gpus.contains(&g.pci) && k.allows_gdr()).then_some((g.pci, k))
                });
                let what = match owner {
                    Some((gpu, k)) => format!("rail of GPU {gpu} ({k}), which is not in use"),
                    None => "storage or front-end rail".to_string(),
                };
                exclude(
                    excluded,
                    c,
                    format!(
                        "{what}: no GPU in use is closer to it than {class}, while each has a PIX/PXB HCA of its own ({summary}); NCCL would not use GPUDirect RDMA over it and rings could spill onto it"
                    ),
                );
                false
            });
        }
    }

    // HCAs that every GPU in use reaches only across NUMA nodes, when others are closer.
    if !gpus.is_empty() {
        let classes: Vec<PathClass> = cands
            .iter()
            .map(|c| best_class(topo, gpus, c).unwrap_or(PathClass::Sys))
            .collect();
        let close: Vec<&str> = cands
            .iter()
            .zip(&classes)
            .filter(|(_, k)| **k != PathClass::Sys)
            .map(|(c, _)| c.dev.name.as_str())
            .collect();
        if !close.is_empty() {
            let summary = list_short(&close);
            let mut k = classes.iter();
            cands.retain(|c| {
                if k.next() != Some(&PathClass::Sys) {
                    return true;
                }
                exclude(
                    excluded,
                    c,
                    format!(
                        "every GPU in use is SYS from it (across NUMA nodes) while {summary} {} closer",
                        if close.len() == 1 { "is" } else { "are" }
                    ),
                );
                false
            });
        } else if !cands.is_empty() {
            notes.push(
                "every usable HCA is SYS from the GPUs in use (across NUMA nodes): expect GPUDirect RDMA to be off"
                    .to_string(),
            );
        }
    }
    cands
}

/// Why a RoCE port has no usable GID, in a few words.
fn gid_summary(topo: &Topology, port: &Port) -> String {
    if port.gids.is_empty() {
        return "its GID table is empty".to_string();
    }
    let mut reasons: BTreeMap<&str, usize> = BTreeMap::new();
    for g in &port.gids {
        if let Some(r) = unusable_reason(topo, g).map(|r| r.as_str()) {
            *reasons.entry(r).or_default() += 1;
        }
    }
    reasons
        .iter()
        .map(|(r, n)| format!("{n} GID{}: {r}", plural(*n)))
        .collect::<Vec<_>>()
        .join("; ")
}

/// Ports grouped by physical NIC: one adapter shows the same `sys_image_guid` on all its
/// functions; functions of one bus:device and a VF with its PF are one card too.
/// Groups are in the order of their first port.
fn physical_nics(cands: &[Cand]) -> Vec<Vec<usize>> {
    let n = cands.len();
    let mut parent: Vec<usize> = (0..n).collect();
    fn find(p: &mut [usize], mut x: usize) -> usize {
        while p[x] != x {
            p[x] = p[p[x]];
            x = p[x];
        }
        x
    }
    fn guid<'a>(c: &Cand<'a>) -> Option<&'a str> {
        c.dev
            .sys_image_guid
            .as_deref()
            .filter(|g| g.chars().any(|ch| ch.is_ascii_hexdigit() && ch != '0'))
    }
    for i in 0..n {
        for j in 0..i {
            let (a, b) = (&cands[i], &cands[j]);
            let same_guid = guid(a).is_some() && guid(a) == guid(b);
            let same_slot = match (a.func, b.func) {
                (Some(x), Some(y)) => {
                    (x.address.domain, x.address.bus, x.address.device)
                        == (y.address.domain, y.address.bus, y.address.device)
                        || x.physfn == Some(y.address)
                        || y.physfn == Some(x.address)
                        || (x.physfn.is_some() && x.physfn == y.physfn)
                }
                _ => false,
            };
            if same_guid || same_slot {
                let (ri, rj) = (find(&mut parent, i), find(&mut parent, j));
                parent[ri.max(rj)] = ri.min(rj);
            }
        }
    }
    let mut groups: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for i in 0..n {
        let r = find(&mut parent, i);
        groups.entry(r).or_default().push(i);
    }
    groups.into_values().collect()
}

/// HCA ports chosen for one GPU.
#[derive(Debug, Clone)]
struct Assignment {
    ports: Vec<String>,
    class: PathClass,
    reason: String,
}

/// For every GPU, the HCA ports NCCL prefers for it and their class, among all ACTIVE
/// ports of PCI-backed HCAs and without the plan's other exclusions: what a topology
/// read from an NCCL dump (or any other source) says about GPU–NIC pairing.
pub fn preferred_hcas(topo: &Topology) -> BTreeMap<PciAddr, (Vec<String>, PathClass)> {
    let topo = canonical(topo);
    let mut cands = Vec::new();
    for dev in topo.rdma_devices.iter().filter(|d| d.pci.is_some()) {
        let func = dev.pci.and_then(|a| topo.pci_function(a));
        for port in dev.ports.iter().filter(|p| p.is_active()) {
            cands.push(Cand {
                dev,
                port,
                func,
                label: format!("{}:{}", dev.name, port.number),
                fabric: Fabric::InfiniBand,
            });
        }
    }
    let gpus: Vec<PciAddr> = topo.gpus.iter().map(|g| g.pci).collect();
    let nics = physical_nics(&cands);
    assign_nics(&topo, &gpus, &cands, &nics, NetDevsPolicy::Auto)
        .into_iter()
        .map(|(g, a)| (g, (a.ports, a.class)))
        .collect()
}

/// `NCCL_IB_DATA_DIRECT` (`ncclIbInitDevices`, src/transport/net_ib/init.cc, v2.30.7-1;
/// the same since v2.28.3-1, src/transport/net_ib.cc): for an mlx5 device with a Data
/// Direct DMA function, 1 (the default; any value above 0 but 2) exposes only
/// `<dev>_dma`, placed at the DMA function; 2 exposes `<dev>` at its PF and
/// `<dev>_dma`; 0 (or below) only `<dev>`. 2.27 (where the variable came) exposed both
/// whenever it was not 0. Read as `ncclLoadParam` does; a
/// value it refuses keeps the default.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DataDirect {
    /// `<dev>` at its PF only.
    Off,
    /// `<dev>_dma` at the DMA function only (the default).
    #[default]
    DmaOnly,
    /// Both.
    Both,
}

impl DataDirect {
    /// The mode of `NCCL_IB_DATA_DIRECT` in `env`.
    pub fn from_env(env: &BTreeMap<String, String>) -> Self {
        match env
            .get("NCCL_IB_DATA_DIRECT")
            .and_then(|v| crate::parse::parse_nccl_int(v).ok())
        {
            Some(v) if v <= 0 => Self::Off,
            Some(2) => Self::Both,
            _ => Self::DmaOnly,
        }
    }

    /// Whether NCCL places a Data Direct device at its DMA function. Under 2 it exposes
    /// both, and its search takes the closer, the DMA function beside the GPU.
    pub fn uses_dma(self) -> bool {
        self != Self::Off
    }
}

/// Which devices NCCL exposes under which name and where, once for the node.
fn data_direct_note(
    topo: &Topology,
    usable: &[Cand],
    data_direct: DataDirect,
    notes: &mut Vec<String>,
) {
    let mut devices: Vec<(&str, PciAddr)> = Vec::new();
    for c in usable {
        if let Some(d) = c.dev.data_direct
            && !devices.iter().any(|(n, _)| *n == c.dev.name)
        {
            devices.push((c.dev.name.as_str(), d));
        }
    }
    if devices.is_empty() {
        return;
    }
    let list = |f: &dyn Fn(&str, PciAddr) -> String| {
        devices
            .iter()
            .map(|(n, a)| f(n, *a))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let pf = |n: &str| {
        topo.rdma_device(n)
            .and_then(|d| d.pci)
            .map_or("?".to_string(), |a| a.to_string())
    };
    notes.push(match data_direct {
        DataDirect::DmaOnly => format!(
            "ConnectX-8 Data Direct: NCCL 2.28+ (NCCL_IB_DATA_DIRECT=1, its default) exposes {} at the Data Direct DMA function beside the GPU, in place of the device at its PF (2.27 exposed both); the plan places it there. NCCL_IB_HCA names the verbs device (mlx5_0 selects mlx5_0_dma). Without DMA-BUF or rdma-core's mlx5dv_get_data_direct_sysfs_path (MLX5_1.25) NCCL falls back to the PF",
            list(&|n, a| format!("{n}_dma ({a})")),
        ),
        DataDirect::Both => format!(
            "ConnectX-8 Data Direct: NCCL_IB_DATA_DIRECT=2 exposes each device twice, at its PF and as <dev>_dma at its DMA function ({}); the plan places them at the DMA function, the closer to the GPU",
            list(&|n, a| format!("{n} at {}, {n}_dma at {a}", pf(n))),
        ),
        DataDirect::Off => format!(
            "ConnectX-8 Data Direct: NCCL_IB_DATA_DIRECT at 0 leaves the DMA functions unused ({}); NCCL places each device at its PF",
            list(&|n, a| format!("{n}: {a}")),
        ),
    });
}

/// GPUs whose closest NIC hangs from their own CPU, which NVML says they reach over
/// NVLink-C2C: NCCL types that path P2C and, under `NCCL_NET_GDR_C2C=1` (default since
/// 2.27.3; src/graph/paths.cc, v2.30.7-1), uses GPUDirect RDMA on it. Said once for
/// the node. Only NVML's word counts here (a placement read does not read a root
/// port's ids); the doctor also weighs the root port.
fn c2c_note(
    topo: &Topology,
    gpus: &[PciAddr],
    usable: &[Cand],
    env: &BTreeMap<String, String>,
    notes: &mut Vec<String>,
) {
    use super::affinity::{C2cAttach, c2c_attach};
    let over: Vec<String> = gpus
        .iter()
        .filter(|g| {
            let best = usable
                .iter()
                .map(|c| gpu_nic_class(topo, **g, c.func))
                .min_by_key(PathClass::rank);
            matches!(best, Some(PathClass::Node | PathClass::Phb))
                && topo
                    .pci_function(**g)
                    .and_then(|f| c2c_attach(topo, f))
                    .is_some_and(|a| matches!(a, C2cAttach::Nvml(_)))
        })
        .map(ToString::to_string)
        .collect();
    if over.is_empty() {
        return;
    }
    let gpus = over.join(", ");
    let off = env
        .get("NCCL_NET_GDR_C2C")
        .is_some_and(|v| crate::parse::parse_nccl_int(v) == Ok(0));
    notes.push(if let Some(level) = env.get("NCCL_NET_GDR_LEVEL") {
        format!(
            "GPU {gpus} reach their CPU over NVLink-C2C (NVML) and their NICs hang from that CPU, a P2C path; NCCL_NET_GDR_LEVEL={level} replaces NCCL's P2C level for GPUDirect RDMA"
        )
    } else if off {
        format!(
            "GPU {gpus} reach their CPU over NVLink-C2C (NVML) and their NICs hang from that CPU, a P2C path, where NCCL_NET_GDR_C2C=0 turns GPUDirect RDMA off: unset it (NCCL >= 2.27.3 defaults to 1)"
        )
    } else {
        format!(
            "GPU {gpus} reach their CPU over NVLink-C2C (NVML) and their NICs hang from that CPU, a P2C path: NCCL >= 2.27.3 uses GPUDirect RDMA on it (NCCL_NET_GDR_C2C=1, its default; 2.26 needs it set, older versions NCCL_NET_GDR_LEVEL=PHB)"
        )
    });
}

/// NCCL's preference per GPU: the physical NICs at the closest class; GPUs that tie on
/// the same NICs split them in PCI order, so that each keeps its own rail.
/// `NCCL_NETDEVS_POLICY` (NCCL 2.28+, `getNetDevsPolicyOnce` in src/graph/topo.cc,
/// v2.30.7-1): how many of its closest NICs each GPU uses. `AUTO` (default) shares
/// them among the GPUs that tie on them, `ALL` gives each GPU all of them, `MAX:n` at
/// most n. Case-blind; anything else, or `MAX:` with no number above 0, is `AUTO`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NetDevsPolicy {
    Auto,
    All,
    Max(usize),
}

impl NetDevsPolicy {
    fn from_env(env: &BTreeMap<String, String>) -> Self {
        let Some(v) = env.get("NCCL_NETDEVS_POLICY") else {
            return Self::Auto;
        };
        if v.eq_ignore_ascii_case("ALL") {
            return Self::All;
        }
        let max = v
            .get(..4)
            .filter(|p| p.eq_ignore_ascii_case("MAX:"))
            .and_then(|_| {
                let digits: String = v[4..]
                    .trim_start()
                    .chars()
                    .take_while(char::is_ascii_digit)
                    .collect();
                digits.parse::<usize>().ok()
            })
            .filter(|n| *n > 0);
        max.map_or(Self::Auto, Self::Max)
    }
}

fn assign_nics(
    topo: &Topology,
    gpus: &[PciAddr],
    cands: &[Cand],
    nics: &[Vec<usize>],
    policy: NetDevsPolicy,
) -> BTreeMap<PciAddr, Assignment> {
    let mut out = BTreeMap::new();
    if nics.is_empty() {
        return out;
    }
    let nic_class = |gpu: PciAddr, nic: &[usize]| {
        nic.iter()
            .map(|i| gpu_nic_class(topo, gpu, cands[*i].func))
            .min_by_key(PathClass::rank)
            .unwrap_or(PathClass::Sys)
    };
    /// GPUs whose closest NICs are the same set, at the same class.
    struct Tie {
        set: Vec<usize>,
        class: PathClass,
        gpus: Vec<PciAddr>,
    }
    let mut ties: Vec<Tie> = Vec::new();
    for g in gpus {
        let classes: Vec<PathClass> = nics.iter().map(|n| nic_class(*g, n)).collect();
        let Some(best) = classes.iter().min_by_key(|k| k.rank()).copied() else {
            continue;
        };
        let set: Vec<usize> = (0..nics.len()).filter(|i| classes[*i] == best).collect();
        match ties.iter_mut().find(|t| t.set == set && t.class == best) {
            Some(t) => t.gpus.push(*g),
            None => ties.push(Tie {
                set,
                class: best,
                gpus: vec![*g],
            }),
        }
    }
    // The most constrained GPUs (fewest candidates, closest class) choose first.
    ties.sort_by(|a, b| {
        (a.set.len(), a.class.rank(), &a.set).cmp(&(b.set.len(), b.class.rank(), &b.set))
    });
    let mut usage = vec![0usize; nics.len()];
    for Tie {
        set,
        class,
        gpus: group,
    } in ties
    {
        let mut ordered = set.clone();
        ordered.sort_by_key(|i| (usage[*i], *i));
        let (n, g) = (ordered.len(), group.len());
        for (k, gpu) in group.iter().enumerate() {
            // NCCL starts each GPU at its own offset among the shared NICs
            // (ncclTopoGetLocalNetType) and takes as many as the policy allows.
            let start = k * n / g;
            let mine: Vec<usize> = match policy {
                NetDevsPolicy::Auto if n >= g => ordered[start..(k + 1) * n / g].to_vec(),
                NetDevsPolicy::Auto => vec![ordered[start]],
                NetDevsPolicy::All => (0..n).map(|j| ordered[(start + j) % n]).collect(),
                NetDevsPolicy::Max(m) => (0..m.min(n)).map(|j| ordered[(start + j) % n]).collect(),
            };
            for m in &mine {
                usage[*m] += 1;
            }
            let mut ports: Vec<String> = mine
                .iter()
                .flat_map(|m| nics[*m].iter().map(|i| cands[*i].label.clone()))
                .collect();
            ports.sort_by(|a, b| natural_cmp(a, b));
            let nic_names = |ix: &[usize]| -> String {
                let v: Vec<String> = ix
                    .iter()
                    .map(|m| {
                        nics[*m]
                            .iter()
                            .map(|i| cands[*i].label.clone())
                            .collect::<Vec<_>>()
                            .join("+")
                    })
                    .collect();
                v.join(", ")
            };
            let reason = if policy != NetDevsPolicy::Auto && n > 1 {
                format!(
                    "{n} NIC{} at {class} ({}) are the closest to {g} GPU{}; this GPU takes {} (NCCL_NETDEVS_POLICY={})",
                    plural(n),
                    nic_names(&ordered),
                    plural(g),
                    nic_names(&mine),
                    match policy {
                        NetDevsPolicy::Max(m) => format!("MAX:{m}"),
                        _ => "ALL".to_string(),
                    }
                )
            } else if n == 1 && g == 1 {
                format!(
                    "{} is {class} from the GPU, the closest of any usable HCA",
                    nic_names(&mine)
                )
            } else if n >= g {
                format!(
                    "{n} NIC{} at {class} ({}) are the closest to {g} GPU{}; this GPU takes {}",
                    plural(n),
                    nic_names(&ordered),
                    plural(g),
                    nic_names(&mine)
                )
            } else {
                format!(
                    "{} is {class} from the GPU, the closest class; {g} GPUs share {n} NIC{} at that class",
                    nic_names(&mine),
                    plural(n)
                )
            };
            out.insert(
                *gpu,
                Assignment {
                    ports,
                    class,
                    reason,
                },
            );
        }
    }
    out
}

fn choose_gids<'c>(topo: &Topology, cands: &'c [Cand]) -> BTreeMap<&'c str, GidChoice> {
    cands
        .iter()
        .filter(|c| c.fabric == Fabric::Ethernet)
        .filter_map(|c| {
            Some((
                c.label.as_str(),
                choose_gid(topo, &c.dev.name, c.port.number)?,
            ))
        })
        .collect()
}

fn hca_env(
    cands: &[Cand],
    visible: &[&Gpu],
    env: &mut BTreeMap<String, String>,
    why: &mut BTreeMap<String, String>,
    notes: &mut Vec<String>,
) {
    if cands.is_empty() {
        notes.push(
            "no usable HCA port: NCCL_IB_HCA is not set, and NCCL will use sockets unless another network plugin is present"
                .to_string(),
        );
        return;
    }
    let mut labels: Vec<&str> = cands.iter().map(|c| c.label.as_str()).collect();
    labels.sort_by(|a, b| natural_cmp(a, b));
    env.insert("NCCL_IB_HCA".into(), format!("={}", labels.join(",")));
    let scope = if visible.is_empty() {
        "every usable HCA port (no GPU is visible)".to_string()
    } else {
        format!(
            "the usable HCA ports for the {} GPU{} in use",
            visible.len(),
            plural(visible.len())
        )
    };
    why.insert(
        "NCCL_IB_HCA".into(),
        format!(
            "{scope}; exact names (=) with explicit ports, because NCCL matches names by prefix otherwise (mlx5_1 would also select mlx5_10…)"
        ),
    );
}

/// `NCCL_IB_GID_INDEX` only where NCCL's own choice (under the environment's
/// `NCCL_IB_ADDR_FAMILY`, `NCCL_IB_ADDR_RANGE`, `NCCL_IB_ROCE_VERSION_NUM`, and the
/// family this plan sets) would differ from the right GID on some RoCE port.
fn gid_env(
    topo: &Topology,
    gids: &BTreeMap<&str, GidChoice>,
    cands: &[Cand],
    user_env: &BTreeMap<String, String>,
    env: &mut BTreeMap<String, String>,
    why: &mut BTreeMap<String, String>,
    notes: &mut Vec<String>,
) -> BTreeMap<String, u32> {
    let gid_index = gids
        .iter()
        .map(|(label, g)| (label.to_string(), g.index))
        .collect();
    let roce = cands
        .iter()
        .filter(|c| c.fabric == Fabric::Ethernet)
        .count();
    if roce == 0 || gids.is_empty() {
        return gid_index;
    }
    let describe = |g: &GidChoice| {
        format!(
            "{}:{}={} ({} on {})",
            g.device,
            g.port,
            g.index,
            g.ipv4.as_deref().unwrap_or(&g.gid),
            g.netdev.as_deref().unwrap_or("?")
        )
    };
    let per_hca: Vec<String> = gids.values().map(describe).collect();
    let ipv6 = gids.values().filter(|g| g.is_ipv6()).count();
    let mut nccl_vars = user_env.clone();
    nccl_vars.remove("NCCL_IB_GID_INDEX");
    if ipv6 == gids.len() {
        env.insert("NCCL_IB_ADDR_FAMILY".into(), "AF_INET6".into());
        why.insert(
            "NCCL_IB_ADDR_FAMILY".into(),
            "no RoCE port in NCCL_IB_HCA has an IPv4 GID here; NCCL looks for IPv4 GIDs unless told AF_INET6"
                .into(),
        );
        nccl_vars.insert("NCCL_IB_ADDR_FAMILY".into(), "AF_INET6".into());
    } else if ipv6 > 0 {
        notes.push(
            "some RoCE ports have only IPv6 GIDs and others IPv4: NCCL's address family cannot suit both"
                .to_string(),
        );
    }
    // What NCCL would pick by itself, port by port, where it is not the right GID.
    let nccl_env = NcclGidEnv::from_env(&nccl_vars);
    let wrong: Vec<String> = gids
        .iter()
        .filter_map(|(label, g)| {
            let c = cands.iter().find(|c| c.label == *label)?;
            let nccl = nccl_gid_index(c.port, &nccl_env)?;
            (nccl != g.index).then(|| {
                let what = c.port.gids.iter().find(|x| x.index == nccl).map_or(
                    "an empty slot".to_string(),
                    |x| {
                        let addr = x.ipv4.clone().unwrap_or_else(|| x.gid.clone());
                        match unusable_reason(topo, x) {
                            Some(r) => format!("{addr}, {r}"),
                            None => addr,
                        }
                    },
                );
                format!("{label} would get {nccl} ({what}) instead of {}", g.index)
            })
        })
        .collect();
    let steering: Vec<&str> = [
        "NCCL_IB_ADDR_FAMILY",
        "NCCL_IB_ADDR_RANGE",
        "NCCL_IB_ROCE_VERSION_NUM",
    ]
    .into_iter()
    .filter(|k| user_env.contains_key(*k))
    .collect();
    let under = if steering.is_empty() {
        String::new()
    } else {
        format!(" under this environment's {}", steering.join(", "))
    };
    let indexes: BTreeSet<u32> = gids.values().map(|g| g.index).collect();
    if wrong.is_empty() {
        notes.push(format!(
            "NCCL_IB_GID_INDEX is not set: NCCL ≥ 2.21.5's own choice{under} is the right GID on every RoCE port ({})",
            per_hca.join(", ")
        ));
    } else if let [only] = indexes.iter().collect::<Vec<_>>().as_slice() {
        env.insert("NCCL_IB_GID_INDEX".into(), only.to_string());
        why.insert(
            "NCCL_IB_GID_INDEX".into(),
            format!(
                "NCCL's own choice{under} would be wrong: {}; every RoCE port in NCCL_IB_HCA has its right GID (RoCE v2, a netdev of this namespace) at index {only}: {}",
                wrong.join("; "),
                per_hca.join(", ")
            ),
        );
    } else {
        notes.push(format!(
            "NCCL's own GID choice{under} would be wrong ({}), and the right index differs between HCAs ({}), so no one NCCL_IB_GID_INDEX fits: steer NCCL with NCCL_IB_ADDR_RANGE, or expose one interface per HCA",
            wrong.join("; "),
            per_hca.join(", ")
        ));
    }
    gid_index
}

/// NCCL merges an HCA's PCI address by zeroing its device and function digits
/// (`NCCL_IB_MERGE_VFS=1`, its default). Different adapters that collapse onto one
/// address (VFs passed into a VM on bus 0) are then taken for one NIC.
fn merge_vfs_env(
    cands: &[Cand],
    nics: &[Vec<usize>],
    env: &mut BTreeMap<String, String>,
    why: &mut BTreeMap<String, String>,
) {
    let nic_of: BTreeMap<usize, usize> = nics
        .iter()
        .enumerate()
        .flat_map(|(n, ix)| ix.iter().map(move |i| (*i, n)))
        .collect();
    let mut by_merged: BTreeMap<PciAddr, BTreeMap<usize, String>> = BTreeMap::new();
    for (i, c) in cands.iter().enumerate() {
        let Some(a) = c.dev.pci else { continue };
        let merged = PciAddr::new(a.domain, a.bus, 0, 0);
        by_merged
            .entry(merged)
            .or_default()
            .entry(nic_of.get(&i).copied().unwrap_or(i))
            .or_insert_with(|| format!("{} ({a})", c.dev.name));
    }
    let clashes: Vec<String> = by_merged
        .iter()
        .filter(|(_, nics)| nics.len() > 1)
        .map(|(m, nics)| {
            format!(
                "{} all become {m}",
                nics.values().cloned().collect::<Vec<_>>().join(", ")
            )
        })
        .collect();
    if !clashes.is_empty() {
        env.insert("NCCL_IB_MERGE_VFS".into(), "0".into());
        why.insert(
            "NCCL_IB_MERGE_VFS".into(),
            format!(
                "different adapters would merge into one NIC when NCCL zeroes their PCI device digits: {}",
                clashes.join("; ")
            ),
        );
    }
}

/// `mlx5_0:1` → `mlx5_0`; the virtual NIC's name joins its devices with `+`.
fn vnic_name(ports: &[String]) -> String {
    ports
        .iter()
        .map(|p| p.rsplit_once(':').map_or(p.as_str(), |(d, _)| d))
        .collect::<Vec<_>>()
        .join("+")
}

/// The HCA ports NCCL ≥ 2.24 fuses into one virtual NIC, in NCCL's device order
/// (PCI order since 2.29.7). NCCL places each IB port at its function's address with
/// the function digit zeroed (and the device digits, `NCCL_IB_MERGE_VFS=1`;
/// `ncclIbGetPciPath`, src/transport/net_ib/init.cc), so the ports of a dual-port card
/// share a `<nic>`, which is `PATH_PORT` apart (`ncclTopoGetPath`); the default
/// `NCCL_NET_MERGE_LEVEL=PORT` fuses them (`ncclTopoAutoMerge`, src/graph/topo.cc,
/// v2.30.7-1), never across NUMA nodes (`ncclTopoMakeVnic`). `NCCL_IB_MERGE_NICS=0`
/// or `NCCL_NET_MERGE_LEVEL=LOC` turn fusion off; `NCCL_NET_MERGE_POLICY=RAIL` (2.28+)
/// fuses only ports given the same rail id in `NCCL_IB_HCA`.
fn virtual_nics(
    topo: &Topology,
    cands: &[Cand],
    user_env: &BTreeMap<String, String>,
    plan_env: &BTreeMap<String, String>,
    notes: &mut Vec<String>,
) -> Vec<Vec<String>> {
    let var = |k: &str| {
        plan_env
            .get(k)
            .or_else(|| user_env.get(k))
            .map(String::as_str)
    };
    if var("NCCL_IB_MERGE_NICS").is_some_and(|v| crate::parse::parse_nccl_int(v) == Ok(0)) {
        return Vec::new();
    }
    match var("NCCL_NET_MERGE_LEVEL") {
        None | Some("PORT") => {}
        Some("LOC") => return Vec::new(),
        Some(other) => {
            notes.push(format!(
                "NCCL_NET_MERGE_LEVEL={other}: NCCL may fuse HCAs farther apart than one card's ports into virtual NICs; this plan lists only the ports of one card"
            ));
        }
    }
    let merge_vfs =
        var("NCCL_IB_MERGE_VFS").is_none_or(|v| crate::parse::parse_nccl_int(v) != Ok(0));
    let rail_policy = var("NCCL_NET_MERGE_POLICY").is_some_and(|v| v.eq_ignore_ascii_case("RAIL"));
    // Rail ids come from the list NCCL will read: the user's, which exec keeps.
    let filter = user_env
        .get("NCCL_IB_HCA")
        .or_else(|| plan_env.get("NCCL_IB_HCA"))
        .and_then(|v| crate::parse::parse_nccl_ib_hca(v).ok());
    let mut ordered: Vec<&Cand> = cands.iter().filter(|c| c.dev.pci.is_some()).collect();
    ordered.sort_by_key(|c| (c.dev.pci, c.port.number));
    // (merged address, NUMA node, rail id): the ports NCCL puts in one virtual NIC.
    type Key = (PciAddr, Option<u32>, Option<i16>);
    let mut groups: Vec<(Key, Vec<String>)> = Vec::new();
    for c in ordered {
        let Some(a) = c.dev.pci else { continue };
        let merged = if merge_vfs {
            PciAddr::new(a.domain, a.bus, 0, 0)
        } else {
            PciAddr::new(a.domain, a.bus, a.device, 0)
        };
        let numa = c.func.and_then(|f| numa_of(topo, f));
        let rail = filter
            .as_ref()
            .and_then(|f| f.entry_for(&c.dev.name, c.port.number))
            .and_then(|e| e.rail);
        let joins = |g: &&mut (Key, Vec<String>)| {
            let (m, n, r) = g.0;
            m == merged && n == numa && (!rail_policy || (rail.is_some() && r == rail))
        };
        match groups.iter_mut().find(joins) {
            Some(g) => g.1.push(c.label.clone()),
            None => groups.push(((merged, numa, rail), vec![c.label.clone()])),
        }
    }
    let fused: Vec<Vec<String>> = groups
        .into_iter()
        .map(|g| g.1)
        .filter(|ports| ports.len() > 1)
        .collect();
    for v in &fused {
        notes.push(format!(
            "NCCL (2.24 or later) fuses {} into one virtual NIC, {}: ports of one PCI device (NCCL_NET_MERGE_LEVEL=PORT); set NCCL_IB_MERGE_NICS=0 to keep them apart",
            v.join(" and "),
            vnic_name(v)
        ));
    }
    fused
}

/// The bootstrap interface: the one with the default route.
fn socket_env(
    topo: &Topology,
    env: &mut BTreeMap<String, String>,
    why: &mut BTreeMap<String, String>,
    notes: &mut Vec<String>,
) {
    let route_if = topo
        .host
        .default_route_interface
        .as_deref()
        .and_then(|n| topo.netdev(n));
    if let Some(n) = route_if {
        env.insert("NCCL_SOCKET_IFNAME".into(), format!("={}", n.name));
        why.insert(
            "NCCL_SOCKET_IFNAME".into(),
            format!(
                "{} carries the default route (/proc/net/route); exact name (=), because NCCL otherwise tries ib* interfaces first and matches names by prefix",
                n.name
            ),
        );
        return;
    }
    let skip = ["docker", "virbr", "veth", "lo"];
    let up: Vec<&str> = topo
        .netdevs
        .iter()
        .filter(|n| n.operstate.as_deref() == Some("up") && !n.ipv4.is_empty())
        .filter(|n| !skip.iter().any(|p| n.name.starts_with(p)))
        .map(|n| n.name.as_str())
        .collect();
    match up.as_slice() {
        [only] => {
            env.insert("NCCL_SOCKET_IFNAME".into(), format!("={only}"));
            why.insert(
                "NCCL_SOCKET_IFNAME".into(),
                format!(
                    "no default route here; {only} is the only interface that is up with an IPv4 address"
                ),
            );
        }
        [] => notes.push(
            "NCCL_SOCKET_IFNAME is not set: no default route and no interface up with an IPv4 address in this root"
                .to_string(),
        ),
        many => notes.push(format!(
            "NCCL_SOCKET_IFNAME is not set: no default route, and several interfaces could carry NCCL's bootstrap ({})",
            many.join(", ")
        )),
    }
}

/// CPUs for every rank: the CPUs of the GPU's NUMA node that this process may use,
/// split without overlap among the ranks on that node.
fn bind_cpus(
    topo: &Topology,
    ranks: &[(u32, &Gpu)],
    notes: &mut Vec<String>,
) -> BTreeMap<u32, (CpuSet, String)> {
    let mut out = BTreeMap::new();
    if ranks.is_empty() {
        return out;
    }
    let usable = topo.process.usable_cpus().filter(|c| !c.is_empty());
    let everything = usable.clone().or_else(|| topo.host.cpus_online.clone());
    if usable.is_none() {
        notes.push(
            "this process's CPU set is unknown (no /proc/self/status Cpus_allowed_list or cgroup cpuset in the root): binding to NUMA-local CPUs as they are"
                .to_string(),
        );
    }
    let restrict = |set: &CpuSet| match &usable {
        Some(u) => set.intersection(u),
        None => set.clone(),
    };
    // Ranks that share a locality share a pool.
    /// Ranks whose GPUs share a locality, and the CPUs they share.
    struct Pool {
        cpus: CpuSet,
        desc: String,
        ranks: Vec<u32>,
    }
    let mut pools: BTreeMap<(Option<u32>, String), Pool> = BTreeMap::new();
    for (rank, gpu) in ranks {
        let func = topo.pci_function(gpu.pci);
        let node = gpu
            .numa_node
            .or_else(|| func.and_then(|f| numa_of(topo, f)));
        let node_cpus = node
            .and_then(|n| topo.numa_node(n))
            .map(|n| n.cpus.clone())
            .filter(|c| !c.is_empty());
        let (local, source) = match (node, node_cpus) {
            (Some(n), Some(c)) => (Some(c), format!("NUMA node {n}'s CPUs")),
            _ => match gpu.local_cpus.clone().filter(|c| !c.is_empty()) {
                Some(c) => (
                    Some(c),
                    "the GPU's local_cpulist (its NUMA node is unknown)".to_string(),
                ),
                None => (None, "no NUMA locality known".to_string()),
            },
        };
        let key = (
            node,
            local.as_ref().map(|c| c.to_string()).unwrap_or_default(),
        );
        let pool = match &local {
            Some(l) => restrict(l),
            None => CpuSet::new(),
        };
        let desc = match &local {
            Some(l) => format!("{source} ({l})"),
            None => source,
        };
        pools
            .entry(key)
            .or_insert(Pool {
                cpus: pool,
                desc,
                ranks: Vec::new(),
            })
            .ranks
            .push(*rank);
    }
    let claimed: CpuSet = pools
        .values()
        .fold(CpuSet::new(), |acc, p| acc.union(&p.cpus));
    for (
        (node, _),
        Pool {
            cpus: pool,
            desc,
            ranks: group,
        },
    ) in &pools
    {
        let (pool, desc) = if !pool.is_empty() {
            let restricted = match &usable {
                Some(u) => format!("{desc} that this process may use ({u})"),
                None => desc.clone(),
            };
            (pool.clone(), restricted)
        } else {
            let Some(all) = &everything else {
                for r in group {
                    out.insert(
                        *r,
                        (
                            CpuSet::new(),
                            "no CPU facts in this root: no CPU binding".to_string(),
                        ),
                    );
                }
                notes.push(
                    "no CPU facts in this root (no NUMA cpulists, no CPU set): no CPU binding"
                        .to_string(),
                );
                continue;
            };
            let spare = all.difference(&claimed);
            let fallback = if spare.is_empty() { all.clone() } else { spare };
            let lost = match node {
                Some(n) => format!("NUMA node {n}"),
                None => "its NUMA node".to_string(),
            };
            notes.push(format!(
                "local rank{} {} lose{} CPU locality: {desc} has no CPU this process may use; binding to {fallback} instead",
                if group.len() == 1 { "" } else { "s" },
                join_ranks(group),
                if group.len() == 1 { "s" } else { "" },
            ));
            (
                fallback.clone(),
                format!(
                    "fallback to {fallback}: {desc} has no CPU this process may use (lost: {lost} locality)"
                ),
            )
        };
        let parts = split_cpus(&pool, group.len());
        let overlap = pool.len() < group.len();
        if overlap {
            notes.push(format!(
                "local ranks {} share {} CPU{} ({pool}): not enough CPUs to give each its own",
                join_ranks(group),
                pool.len(),
                plural(pool.len())
            ));
        }
        for (k, r) in group.iter().enumerate() {
            let mine = parts[k].clone();
            let reason = if group.len() == 1 {
                format!("CPUs {mine}: {desc}")
            } else {
                format!(
                    "CPUs {mine}: {desc}, split among local ranks {} ({} of {})",
                    join_ranks(group),
                    k + 1,
                    group.len()
                )
            };
            out.insert(*r, (mine, reason));
        }
    }
    out
}

fn join_ranks(ranks: &[u32]) -> String {
    ranks
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Split `pool` into `k` non-empty parts. When the set is several runs of equal length
/// (`0-27,56-83`: the second run is usually the SMT siblings of the first), each part
/// takes the same slice of every run, so hyperthread pairs stay together. With fewer
/// CPUs than parts, parts reuse CPUs round-robin.
fn split_cpus(pool: &CpuSet, k: usize) -> Vec<CpuSet> {
    let k = k.max(1);
    let cpus: Vec<u32> = pool.iter().collect();
    if cpus.len() < k {
        return (0..k)
            .map(|i| {
                cpus.get(i % cpus.len().max(1))
                    .map(|c| CpuSet::from_cpus([*c]))
                    .unwrap_or_default()
            })
            .collect();
    }
    let mut runs: Vec<Vec<u32>> = Vec::new();
    for c in &cpus {
        match runs.last_mut() {
            Some(r) if r.last().is_some_and(|l| l + 1 == *c) => r.push(*c),
            _ => runs.push(vec![*c]),
        }
    }
    let len = runs[0].len();
    if runs.len() > 1 && runs.iter().all(|r| r.len() == len) && len >= k {
        return (0..k)
            .map(|i| {
                CpuSet::from_cpus(
                    runs.iter()
                        .flat_map(|r| r[i * len / k..(i + 1) * len / k].iter().copied()),
                )
            })
            .collect();
    }
    pool.split(k)
}

#[cfg(test)]
pub(crate) mod testkit;

#[cfg(test)]
mod tests;
