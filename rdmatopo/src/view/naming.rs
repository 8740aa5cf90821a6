//! One name per GPU in every answer (topo, doctor, nccl-env, inventory, k8s audit,
//! the sources cross-check, Python and C).
//!
//! A container's nvidia-smi and CUDA number only the GPUs the container runtime gave
//! it, from 0 in PCI bus order: `GPU0` in a pod is often the host's `GPU5`. So inside a
//! container whose ownership is certain (the view `rdmatopo topo` shows by default),
//! its GPUs are named as the container numbers them, with the host index beside where
//! it differs (`GPU0 (host GPU5, 0000:c3:00.0)`); every other GPU is `host GPU<n>`, so
//! no two GPUs share a name. On a host, or where ownership is not certain (every device
//! is shown), the host index ([`Gpu::index`]) names every GPU, as before.
//!
//! A matrix of every device (`topo --all`) numbers what it shows, so there the names
//! are the host's; the other answers name the container's GPUs as the container does
//! whatever was read, because they are about those GPUs.

use crate::model::{Gpu, Topology};
use crate::parse::PciAddr;
use crate::view::container::ContainerView;

/// How the GPUs of one answer are numbered.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GpuNames {
    /// The container's GPUs in PCI bus order (position = its index); `None`: the host's
    /// numbering.
    container: Option<Vec<PciAddr>>,
}

impl GpuNames {
    /// The machine's numbering: every GPU by its host index.
    #[doc(hidden)]
    pub fn host() -> Self {
        Self::default()
    }

    /// The numbering of a container that was given `gpus` (any order): its nvidia-smi's,
    /// from 0 in PCI bus order. `k8s audit` names a pod's GPUs so, as the pod's user
    /// sees them.
    #[doc(hidden)]
    pub fn container(gpus: impl IntoIterator<Item = PciAddr>) -> Self {
        let mut gpus: Vec<PciAddr> = gpus.into_iter().collect();
        gpus.sort();
        gpus.dedup();
        Self {
            container: Some(gpus),
        }
    }

    /// This process's numbering: its container's when the container's devices are
    /// certain (the owned view), else the host's.
    pub fn of(topo: &Topology) -> Self {
        if let Some(v) = &topo.view {
            // An owned view is made only for certain ownership; its GPUs are the
            // container's, in PCI order.
            return Self::container(v.gpus.iter().copied());
        }
        Self::of_view(&ContainerView::of(topo))
    }

    /// [`GpuNames::of`] from a [`ContainerView`] the caller already holds.
    #[doc(hidden)]
    pub fn of_view(view: &ContainerView) -> Self {
        if view.context.is_container() && view.certain {
            Self::container(view.owned_gpus())
        } else {
            Self::host()
        }
    }

    /// Whether GPUs are numbered as a container numbers them.
    pub fn is_container(&self) -> bool {
        self.container.is_some()
    }

    /// The container's index of the GPU at `pci` (`None` on a host's numbering or for
    /// a GPU the container was not given).
    pub fn container_index(&self, pci: PciAddr) -> Option<u32> {
        let gpus = self.container.as_ref()?;
        gpus.binary_search(&pci)
            .ok()
            .and_then(|i| u32::try_from(i).ok())
    }

    /// The index this answer gives `gpu`, when it numbers it: the container's for its
    /// GPUs, the host's on a host; `None` for a GPU outside the container.
    pub fn index(&self, gpu: &Gpu) -> Option<u32> {
        match &self.container {
            None => Some(gpu.index),
            Some(_) => self.container_index(gpu.pci),
        }
    }

    /// `GPU0`: the GPU's name here; `host GPU1` for a GPU outside the container.
    pub fn name(&self, gpu: &Gpu) -> String {
        match self.index(gpu) {
            Some(i) => format!("GPU{i}"),
            None => format!("host GPU{}", gpu.index),
        }
    }

    /// The name and, where it differs, the host's: `GPU0 (host GPU5)`, `GPU3`.
    pub fn name_and_host(&self, gpu: &Gpu) -> String {
        match self.index(gpu) {
            Some(i) if i != gpu.index => format!("GPU{i} (host GPU{})", gpu.index),
            _ => self.name(gpu),
        }
    }

    /// The name with the PCI address, and the host index where it differs:
    /// `GPU0 (host GPU5, 0000:c3:00.0)`, `GPU3 (0000:3b:00.0)`.
    pub fn label(&self, gpu: &Gpu) -> String {
        match self.index(gpu) {
            Some(i) if i != gpu.index => {
                format!("GPU{i} (host GPU{}, {})", gpu.index, gpu.pci)
            }
            _ => format!("{} ({})", self.name(gpu), gpu.pci),
        }
    }

    /// The GPU of `topo` this answer calls `GPU<index>`.
    pub fn gpu<'t>(&self, topo: &'t Topology, index: u32) -> Option<&'t Gpu> {
        topo.gpus.iter().find(|g| self.index(g) == Some(index))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpu(index: u32, pci: &str) -> Gpu {
        Gpu {
            pci: pci.parse().unwrap(),
            index,
            name: None,
            uuid: None,
            numa_node: None,
            local_cpus: None,
            minor: None,
        }
    }

    #[test]
    fn a_container_numbers_its_gpus_from_zero_in_bus_order() {
        let (a, b, c) = (
            gpu(1, "0000:43:00.0"),
            gpu(5, "0000:c3:00.0"),
            gpu(6, "0000:d1:00.0"),
        );
        let names = GpuNames::container([c.pci, b.pci]);
        assert_eq!(names.name(&b), "GPU0");
        assert_eq!(names.name(&c), "GPU1");
        assert_eq!(names.label(&b), "GPU0 (host GPU5, 0000:c3:00.0)");
        assert_eq!(names.name_and_host(&c), "GPU1 (host GPU6)");
        assert_eq!(names.name(&a), "host GPU1");
        assert_eq!(names.label(&a), "host GPU1 (0000:43:00.0)");
        assert_eq!(names.index(&a), None);
    }

    #[test]
    fn a_host_keeps_its_index_and_equal_indices_are_not_repeated() {
        let g = gpu(3, "0000:3b:00.0");
        assert_eq!(GpuNames::host().label(&g), "GPU3 (0000:3b:00.0)");
        assert_eq!(GpuNames::host().name_and_host(&g), "GPU3");
        let first = gpu(0, "0000:1b:00.0");
        assert_eq!(
            GpuNames::container([first.pci]).label(&first),
            "GPU0 (0000:1b:00.0)"
        );
    }
}
