//! The facade: what the three front ends (the CLI, `rdmatopo-py`, `rdmatopo-c`) ask of a
//! topology, answered once. Finding a device by any of its names, the class between
//! two devices, the NICs nearest a GPU, the NUMA node of a GPU or NIC, and the plan of
//! the rank the environment names. A front end converts its types to and from these and maps
//! [`Error`] in one place; it does not answer these questions itself.

use super::affinity::{PathClass, TopoMatrix, nearest_devices, numa_of, path_class};
use super::error::ViewError;
use crate::error::Error;
use super::naming::GpuNames;
use super::plan::{Plan, PlanOptions, RankPlan};
use crate::model::{Gpu, LOCAL_RANK_VARS, LOCAL_SIZE_VARS, RdmaDevice, Topology};
use crate::parse::PciAddr;
use std::collections::BTreeMap;
use std::sync::OnceLock;

/// The devices of one topology, as the front ends name and compare them.
#[derive(Debug)]
pub struct Devices<'t> {
    topo: &'t Topology,
    /// The `nvidia-smi topo -m` matrix whose `GPU<n>`/`NIC<n>` names a caller may use:
    /// one the caller already holds, or built on the first name lookup.
    given_matrix: Option<&'t TopoMatrix>,
    built_matrix: OnceLock<TopoMatrix>,
    gpu_names: OnceLock<GpuNames>,
}

/// Which rank a front end plans for when neither its caller nor a launcher variable
/// (`LOCAL_RANK` and the others of [`LOCAL_RANK_VARS`]) names one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WhenNoRank {
    /// Plan every rank of the node; a rank applies only when the node has just one
    /// (`rdmatopo exec`, C's `rdmatopo_rank_plan_compute`).
    PlanTheNode,
    /// A process started without a launcher is local rank 0 of 1, unless a launcher
    /// variable gives the world size (Python's `Topology.plan()`, called from a
    /// training script that may run alone).
    SingleProcess,
}

/// What a front end asks the rank plan for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RankRequest {
    /// The caller's local rank, if it gave one.
    pub local_rank: Option<u32>,
    /// The caller's local world size, if it gave one.
    pub local_world_size: Option<u32>,
    /// The environment to read launcher variables and `CUDA_VISIBLE_DEVICES` from;
    /// empty means the one discovery captured (`/proc/self/environ` under the root).
    pub env: BTreeMap<String, String>,
}

/// The rank that applies, if any.
#[derive(Debug, Clone, PartialEq)]
pub enum RankChoice {
    /// The plan of the rank that applies.
    Planned(RankPlan),
    /// A rank applies (given, named by the environment, or the lone process) but the
    /// plan has no GPU for it; the plan's notes say why.
    NoGpu,
    /// No rank was named and the node does not have exactly one.
    Unnamed,
}

/// A node's plan and the rank of it that applies.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct RankOutcome {
    /// The node's plan.
    pub plan: Plan,
    /// The rank of it that applies.
    pub choice: RankChoice,
}

impl<'t> Devices<'t> {
    /// The devices of `topo` (what `Topology::devices` answers).
    pub fn of(topo: &'t Topology) -> Self {
        Self {
            topo,
            given_matrix: None,
            built_matrix: OnceLock::new(),
            gpu_names: OnceLock::new(),
        }
    }

    /// Like [`of`](Self::of), with the matrix of `topo` a caller already built
    /// ([`TopoMatrix::for_topology`]).
    pub fn with_matrix(topo: &'t Topology, matrix: &'t TopoMatrix) -> Self {
        Self {
            topo,
            given_matrix: Some(matrix),
            built_matrix: OnceLock::new(),
            gpu_names: OnceLock::new(),
        }
    }

    /// The topology.
    pub fn topology(&self) -> &'t Topology {
        self.topo
    }

    fn matrix(&self) -> &TopoMatrix {
        match self.given_matrix {
            Some(m) => m,
            None => self
                .built_matrix
                .get_or_init(|| TopoMatrix::for_topology(self.topo)),
        }
    }

    /// The PCI address of the device called `name`: `GPU<n>` or `NIC<n>` as `rdmatopo
    /// topo` prints them (any case), a GPU's UUID, an RDMA device, a netdev, or a PCI
    /// address (sysfs `0000:3b:00.0` or NVML `00000000:3B:00.0` form) of a function
    /// in this topology.
    ///
    /// # Errors
    /// [`Error::UnknownDevice`] when nothing is called `name`;
    /// [`Error::Analysis`] when it names a device without a PCI function (a
    /// software RDMA device such as rxe, a virtual netdev); [`Error::OutsideView`]
    /// for an RDMA device another container owns, in an owned view.
    pub fn pci_of(&self, name: &str) -> Result<PciAddr, Error> {
        if let Some(d) = self
            .matrix()
            .devices()
            .iter()
            .find(|d| d.name.eq_ignore_ascii_case(name))
        {
            return Ok(d.pci);
        }
        if let Some(g) = self.topo.gpus.iter().find(|g| {
            g.uuid
                .as_deref()
                .is_some_and(|u| u.eq_ignore_ascii_case(name))
        }) {
            return Ok(g.pci);
        }
        if let Some(d) = self.topo.rdma_device(name) {
            return self.rdma_in_full(name).and_then(|_| self.nic_pci(d));
        }
        if let Some(n) = self.topo.netdev(name) {
            return n
                .pci
                .ok_or_else(|| Error::from(ViewError::Invalid(format!("netdev {name} has no PCI function"))));
        }
        match name.parse::<PciAddr>() {
            Ok(a) if self.topo.pci_function(a).is_some() => Ok(a),
            _ => Err(self.not_held(name)),
        }
    }

    /// Why the model has no device `name`: another container's, only named in an owned
    /// view ([`Error::OutsideView`]), or none at all.
    fn not_held(&self, name: &str) -> Error {
        if self.topo.other_rdma_devices().iter().any(|d| d == name) {
            ViewError::OutsideView(name.to_string()).into()
        } else {
            ViewError::UnknownDevice(name.to_string()).into()
        }
    }

    /// The RDMA device called `name`, read in full (every device of a whole read; in a
    /// container's owned view, its own).
    ///
    /// # Errors
    /// [`Error::UnknownDevice`] when there is none; [`Error::OutsideView`] when
    /// the view holds only its partial read.
    pub fn rdma_in_full(&self, name: &str) -> Result<&'t RdmaDevice, Error> {
        let d = self
            .topo
            .rdma_device(name)
            .ok_or_else(|| self.not_held(name))?;
        if self.topo.holds_rdma_details(name) {
            Ok(d)
        } else {
            Err(ViewError::OutsideView(name.to_string()).into())
        }
    }

    /// The PCI address of an RDMA device.
    ///
    /// # Errors
    /// [`Error::Analysis`] for a software device (rxe, siw), which has none.
    pub fn nic_pci(&self, dev: &RdmaDevice) -> Result<PciAddr, Error> {
        dev.pci.ok_or_else(|| {
            ViewError::Invalid(format!(
                "{} has no PCI function (software RDMA device)",
                dev.name
            ))
            .into()
        })
    }

    /// How every answer names this topology's GPUs: in a container its own numbering,
    /// else the host's ([`GpuNames::of`]).
    pub fn gpu_names(&self) -> &GpuNames {
        self.gpu_names.get_or_init(|| GpuNames::of(self.topo))
    }

    /// The GPU with host index `index` ([`Gpu::index`]: the host's nvidia-smi, CUDA's PCI
    /// bus order on the host).
    ///
    /// # Errors
    /// [`Error::UnknownDevice`] when there is none.
    pub fn gpu_by_index(&self, index: i64) -> Result<&'t Gpu, Error> {
        self.topo
            .gpus
            .iter()
            .find(|g| i64::from(g.index) == index)
            .ok_or_else(|| ViewError::UnknownDevice(format!("GPU index {index}")).into())
    }

    /// The position in [`Topology::gpus`] of the GPU at `addr`.
    ///
    /// # Errors
    /// [`Error::UnknownDevice`] when no GPU is there.
    pub fn gpu_position(&self, addr: PciAddr) -> Result<usize, Error> {
        self.topo
            .gpus
            .iter()
            .position(|g| g.pci == addr)
            .ok_or_else(|| ViewError::UnknownDevice(format!("GPU at {addr}")).into())
    }

    /// The position in [`Topology::rdma_devices`] of the RDMA device called `key`, or
    /// else of the first one at PCI address `key`.
    ///
    /// # Errors
    /// [`Error::UnknownDevice`] when there is none; [`Error::OutsideView`] for
    /// another container's device, only named in an owned view.
    pub fn nic_position(&self, key: &str) -> Result<usize, Error> {
        let devices = &self.topo.rdma_devices;
        let by_name = devices.iter().position(|d| d.name == key);
        let by_pci = || {
            let addr: PciAddr = key.parse().ok()?;
            devices.iter().position(|d| d.pci == Some(addr))
        };
        by_name.or_else(by_pci).ok_or_else(|| self.not_held(key))
    }

    /// The class between the functions at `a` and `b` as `rdmatopo topo` prints it:
    /// NVLink between two GPUs that have it (seen from `a`), else the PCIe class.
    ///
    /// # Errors
    /// [`Error::UnknownDevice`] when there is no PCI function at `a` or `b`.
    pub fn class_between(&self, a: PciAddr, b: PciAddr) -> Result<PathClass, Error> {
        let function = |addr: PciAddr| {
            self.topo
                .pci_function(addr)
                .ok_or_else(|| Error::from(ViewError::UnknownDevice(addr.to_string())))
        };
        let (fa, fb) = (function(a)?, function(b)?);
        let is_gpu = |addr: PciAddr| self.topo.gpus.iter().any(|g| g.pci == addr);
        if a != b && is_gpu(a) && is_gpu(b) {
            // Cells are computed pair by pair, so a two-GPU matrix has the same cell
            // as the whole one.
            let pair = TopoMatrix::build(self.topo, &[a, b], &[]);
            if let Some(class) = pair.get("GPU0", "GPU1") {
                return Ok(class);
            }
        }
        Ok(path_class(self.topo, fa, fb))
    }

    /// The RDMA devices with a PCI function nearest the GPU at `gpu` by PCIe class,
    /// all that tie, as positions in [`Topology::rdma_devices`] (in that order), and
    /// their class. Port state is not weighed; the rank plan is NCCL's full choice.
    ///
    /// # Errors
    /// [`Error::UnknownDevice`] when no GPU is at `gpu` or no RDMA device has a
    /// PCI function.
    pub fn nearest_nics(&self, gpu: PciAddr) -> Result<(Vec<usize>, PathClass), Error> {
        self.gpu_position(gpu)?;
        let gpu_function = self
            .topo
            .pci_function(gpu)
            .ok_or_else(|| ViewError::UnknownDevice(gpu.to_string()))?;
        let devices = &self.topo.rdma_devices;
        let (nearest, class) = nearest_devices(self.topo, gpu_function, devices.iter())
            .ok_or_else(|| {
                ViewError::UnknownDevice("an RDMA device with a PCI function".to_string())
            })?;
        let positions = devices
            .iter()
            .enumerate()
            .filter(|(_, d)| nearest.iter().any(|n| std::ptr::eq(*n, *d)))
            .map(|(i, _)| i)
            .collect();
        Ok((positions, class))
    }

    /// A GPU's NUMA node: its own `numa_node`, else its function's host bridge's.
    pub fn gpu_numa(&self, gpu: &Gpu) -> Option<u32> {
        gpu.numa_node.or_else(|| {
            self.topo
                .pci_function(gpu.pci)
                .and_then(|f| numa_of(self.topo, f))
        })
    }

    /// An RDMA device's NUMA node: its function's `numa_node`, else its host bridge's.
    pub fn nic_numa(&self, dev: &RdmaDevice) -> Option<u32> {
        dev.pci
            .and_then(|a| self.topo.pci_function(a))
            .and_then(|f| numa_of(self.topo, f))
    }

    /// The node's plan and the rank of it that applies: the one `request` gives, else
    /// the one a launcher variable in its environment names, else as `unnamed` says.
    ///
    /// # Errors
    /// What [`Plan::compute`] refuses (a rank not below the world size, a malformed
    /// launcher variable or `CUDA_VISIBLE_DEVICES`).
    pub fn rank_plan(
        &self,
        request: RankRequest,
        unnamed: WhenNoRank,
    ) -> Result<RankOutcome, Error> {
        let RankRequest {
            mut local_rank,
            mut local_world_size,
            env,
        } = request;
        let names = |vars: &[&str]| {
            let seen = if env.is_empty() {
                &self.topo.process.env
            } else {
                &env
            };
            vars.iter().any(|v| seen.contains_key(*v))
        };
        let rank_in_env = names(&LOCAL_RANK_VARS);
        let lone = unnamed == WhenNoRank::SingleProcess && local_rank.is_none() && !rank_in_env;
        if lone {
            local_rank = Some(0);
            if local_world_size.is_none() && !names(&LOCAL_SIZE_VARS) {
                local_world_size = Some(1);
            }
        }
        let plan = Plan::compute(
            self.topo,
            &PlanOptions {
                local_rank,
                local_world_size,
                env,
            },
        )?;
        let rank = match local_rank {
            Some(r) => Some(plan.rank(r)),
            // Plan::compute kept only the rank the environment names.
            None if rank_in_env => Some(plan.ranks.first()),
            // Without a rank, a node with one rank is still unambiguous.
            None if plan.ranks.len() == 1 => Some(plan.ranks.first()),
            None => None,
        };
        let choice = match rank {
            Some(Some(r)) => RankChoice::Planned(r.clone()),
            Some(None) => RankChoice::NoGpu,
            None => RankChoice::Unnamed,
        };
        Ok(RankOutcome { plan, choice })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::view::plan::testkit::dgx_like;

    #[test]
    fn every_name_of_a_device_finds_it() {
        let t = dgx_like();
        let d = Devices::of(&t);
        let gpu = t.gpus[1].pci;
        assert_eq!(d.pci_of("GPU1"), Ok(gpu));
        assert_eq!(d.pci_of("gpu1"), Ok(gpu));
        assert_eq!(d.pci_of(&gpu.to_string()), Ok(gpu));
        let nic = &t.rdma_devices[0];
        assert_eq!(d.pci_of(&nic.name), Ok(nic.pci.unwrap()));
        assert_eq!(d.pci_of("NIC0"), Ok(nic.pci.unwrap()));
        assert!(matches!(
            d.pci_of("no-such-device"),
            Err(Error::UnknownDevice { .. })
        ));
        assert_eq!(d.nic_position(&nic.name), Ok(0));
        assert_eq!(d.gpu_position(gpu), Ok(1));
        assert!(d.gpu_position(nic.pci.unwrap()).is_err());
    }

    #[test]
    fn nearest_nics_are_the_best_class_of_the_row() {
        let t = dgx_like();
        let d = Devices::of(&t);
        for g in &t.gpus {
            let (nics, class) = d.nearest_nics(g.pci).unwrap();
            assert!(!nics.is_empty());
            for (i, n) in t.rdma_devices.iter().enumerate() {
                let Some(pci) = n.pci else { continue };
                let c = d.class_between(g.pci, pci).map(|c| c.rank());
                if nics.contains(&i) {
                    assert_eq!(c, Ok(class.rank()));
                } else {
                    assert!(c.is_ok_and(|c| c > class.rank()));
                }
            }
        }
    }

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn the_rank_that_applies() {
        let t = dgx_like();
        let d = Devices::of(&t);
        let ask = |rank: Option<u32>, pairs: &[(&str, &str)], unnamed| {
            d.rank_plan(
                RankRequest {
                    local_rank: rank,
                    local_world_size: None,
                    env: env(pairs),
                },
                unnamed,
            )
        };
        let local = |o: &RankOutcome| match &o.choice {
            RankChoice::Planned(r) => Some(r.local_rank),
            _ => None,
        };
        // Given beats the environment.
        let o = ask(Some(2), &[("LOCAL_RANK", "5")], WhenNoRank::PlanTheNode);
        assert_eq!(o.as_ref().ok().and_then(local), Some(2));
        // The environment names it.
        let o = ask(None, &[("LOCAL_RANK", "5")], WhenNoRank::PlanTheNode);
        assert_eq!(o.as_ref().ok().and_then(local), Some(5));
        // Nothing names it: the node's plan, no rank...
        let o = ask(None, &[("PATH", "/bin")], WhenNoRank::PlanTheNode);
        assert!(
            o.as_ref()
                .is_ok_and(|o| o.choice == RankChoice::Unnamed && o.plan.ranks.len() > 1)
        );
        // ...or the lone process is rank 0 of 1.
        let o = ask(None, &[("PATH", "/bin")], WhenNoRank::SingleProcess);
        assert_eq!(o.as_ref().ok().and_then(local), Some(0));
        assert_eq!(o.map(|o| o.plan.ranks.len()).ok(), Some(1));
        // A launcher's rank wins over the lone-process default too.
        let o = ask(None, &[("SLURM_LOCALID", "3")], WhenNoRank::SingleProcess);
        assert_eq!(o.as_ref().ok().and_then(local), Some(3));
    }
}
