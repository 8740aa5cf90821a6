//! What the doctor judges: the context (host or pod), the GPUs and RDMA devices this
//! process owns, and the NIC each GPU would use.

use crate::model::{Gpu, PciFunction, Port, RdmaDevice, Topology};
use crate::parse::{CpuSet, HcaFilter, LinkLayer, PciAddr, parse_nccl_ib_hca};
use crate::view::affinity::{PathClass, nearest_devices};
use crate::view::container::{ContainerView, Ownership};
use crate::view::naming::GpuNames;
use crate::view::plan::{Exclusion, Plan, PlanOptions};

pub use crate::view::container::Context;

/// The GPU and NICs one rank would use.
#[derive(Debug, Clone)]
pub struct GpuNics<'a> {
    pub gpu: &'a Gpu,
    /// The nearest usable RDMA devices (all at `class`), in device order.
    pub nics: Vec<&'a RdmaDevice>,
    pub class: PathClass,
}

/// What is being judged, wherever it is known from: this process's container
/// evidence ([`CheckedDevices::this_process`]) or elsewhere, e.g. the kubelet's allocation of
/// a pod (build the struct: exactly these GPUs, RDMA devices and CPUs; `k8s audit`
/// does, with `own_environment: false` and its free NICs as `candidate_nics`).
#[derive(Debug, Clone)]
pub struct CheckedDevices<'a> {
    /// Host or container, and which kind.
    pub context: Context,
    /// The judged side sees the host's netdevs (a host, or a host-network container).
    pub host_network: bool,
    pub gpus: Vec<&'a Gpu>,
    pub hcas: Vec<&'a RdmaDevice>,
    /// Every RDMA device in `hcas` is known to belong to the judged side.
    pub hca_ownership_known: bool,
    /// The CPUs the judged side may run on, when known.
    pub cpus: Option<CpuSet>,
    /// Where `cpus` came from: (logical path or named fact, the text there).
    pub cpus_evidence: Vec<(String, String)>,
    /// NIC functions the judged side could have been given (its own and the free
    /// ones); `None`: every RDMA-capable NIC on the machine.
    pub candidate_nics: Option<Vec<PciAddr>>,
    /// The judged side's environment is this process's (`Topology::process.env`): its
    /// `NCCL_IB_HCA` applies, and the ports NCCL would open beyond the compute rails
    /// are judged. False for another container, whose environment is unknown.
    pub own_environment: bool,
    /// How findings name the GPUs: as the judged side numbers them.
    pub gpu_names: GpuNames,
}

impl<'a> CheckedDevices<'a> {
    /// This process's devices: those its container owns and those whose owner is
    /// unknown (on a host, all but the VFs of its own PFs, which are there to be handed
    /// to pods and VMs), and the CPUs it may use.
    pub fn this_process(topo: &'a Topology) -> Self {
        let view = ContainerView::of(topo);
        let gpus: Vec<&Gpu> = topo
            .gpus
            .iter()
            .filter(|g| view.gpu(g.pci) != Ownership::Visible)
            .collect();
        let hcas: Vec<&RdmaDevice> = topo
            .rdma_devices
            .iter()
            .filter(|d| view.rdma_device(&d.name) != Ownership::Visible)
            .collect();
        // On a host, VFs of the host's own PFs are there to be handed to pods and VMs:
        // they are judged where they are used.
        let hcas: Vec<&RdmaDevice> = if view.context.is_container() {
            hcas
        } else {
            let pfs: Vec<PciAddr> = hcas.iter().filter_map(|d| d.pci).collect();
            hcas.iter()
                .copied()
                .filter(|d| {
                    !d.pci
                        .and_then(|a| topo.pci_function(a))
                        .and_then(|f| f.physfn)
                        .is_some_and(|pf| pfs.contains(&pf))
                })
                .collect()
        };
        let hca_ownership_known = hcas
            .iter()
            .all(|d| view.rdma_device(&d.name) == Ownership::Owned);
        Self {
            context: view.context,
            host_network: view.host_network,
            gpus,
            hcas,
            hca_ownership_known,
            cpus: topo.process.usable_cpus(),
            cpus_evidence: process_cpu_evidence(topo),
            candidate_nics: None,
            own_environment: true,
            gpu_names: GpuNames::of_view(&view),
        }
    }
}

/// Where this process's usable CPU set came from.
fn process_cpu_evidence(topo: &Topology) -> Vec<(String, String)> {
    let p = &topo.process;
    let mut out = Vec::new();
    if let Some(a) = &p.cpus_allowed {
        out.push((
            "/proc/self/status".to_string(),
            format!("Cpus_allowed_list: {a}"),
        ));
    }
    if let Some(c) = &p.cgroup_cpuset {
        out.push((
            "cpuset.cpus.effective (cgroup of this process)".to_string(),
            c.to_string(),
        ));
    }
    out
}

/// The slice of the topology the doctor judges.
#[derive(Debug)]
pub struct Scope<'a> {
    pub topo: &'a Topology,
    pub context: Context,
    /// The judged side sees the host's netdevs (a host, or a host-network container).
    pub host_network: bool,
    /// GPUs judged (in a container: those it owns, and those whose owner is unknown).
    pub gpus: Vec<&'a Gpu>,
    /// RDMA devices judged (likewise).
    pub hcas: Vec<&'a RdmaDevice>,
    /// Every RDMA device judged is known to be the judged side's.
    pub hca_ownership_known: bool,
    /// The CPUs the judged side may use, when known.
    pub cpus: Option<CpuSet>,
    /// Where `cpus` came from ([`CheckedDevices::cpus_evidence`]).
    pub cpus_evidence: Vec<(String, String)>,
    /// [`CheckedDevices::own_environment`].
    pub own_environment: bool,
    /// [`CheckedDevices::gpu_names`].
    pub gpu_names: GpuNames,
    candidate_nics: Option<Vec<PciAddr>>,
    /// Per judged GPU, the NIC(s) it would use.
    pub gpu_nics: Vec<GpuNics<'a>>,
    /// `NCCL_IB_HCA` as `rdmatopo nccl-env` recommends it, when the plan could be made.
    pub recommended_ib_hca: Option<String>,
    /// The judged side's `NCCL_IB_HCA`, parsed (known only for this process).
    pub user_filter: Option<HcaFilter>,
    plan_filter: Option<HcaFilter>,
    /// Ports `rdmatopo nccl-env` leaves out of `NCCL_IB_HCA`, with its reasons.
    plan_excluded: Vec<Exclusion>,
}

impl<'a> Scope<'a> {
    /// What this process owns ([`CheckedDevices::this_process`]).
    pub fn of(topo: &'a Topology) -> Self {
        Self::judging(topo, CheckedDevices::this_process(topo))
    }

    /// Exactly the devices and CPUs of `judged`.
    pub fn judging(topo: &'a Topology, judged: CheckedDevices<'a>) -> Self {
        let plan = Plan::compute(topo, &PlanOptions::default()).ok();
        Self::judging_planned(topo, judged, plan.as_ref())
    }

    /// [`Scope::judging`] with the node's default `plan` made by the caller (once per
    /// node when many sets are judged on it).
    pub fn judging_planned(
        topo: &'a Topology,
        judged: CheckedDevices<'a>,
        plan: Option<&Plan>,
    ) -> Self {
        let CheckedDevices {
            context,
            host_network,
            gpus,
            hcas,
            hca_ownership_known,
            cpus,
            cpus_evidence,
            candidate_nics,
            own_environment,
            gpu_names,
        } = judged;
        let recommended = plan.and_then(|p| p.env.get("NCCL_IB_HCA").cloned());
        let mut scope = Self {
            topo,
            context,
            host_network,
            gpus,
            hcas,
            hca_ownership_known,
            cpus,
            cpus_evidence,
            own_environment,
            gpu_names,
            candidate_nics,
            gpu_nics: Vec::new(),
            recommended_ib_hca: recommended.clone(),
            user_filter: topo
                .process
                .env
                .get("NCCL_IB_HCA")
                .filter(|_| own_environment)
                .and_then(|v| parse_nccl_ib_hca(v).ok()),
            plan_filter: recommended.and_then(|v| parse_nccl_ib_hca(&v).ok()),
            plan_excluded: plan.map(|p| p.excluded.clone()).unwrap_or_default(),
        };
        scope.gpu_nics = scope
            .gpus
            .iter()
            .filter_map(|g| scope.nearest_nics(g))
            .collect();
        scope
    }

    pub fn function(&self, addr: PciAddr) -> Option<&'a PciFunction> {
        self.topo.pci_function(addr)
    }

    /// Owned ACTIVE ports that `filter` selects (all of them without a filter).
    fn active_ports(&self, filter: Option<&HcaFilter>) -> Vec<(&'a RdmaDevice, &'a Port)> {
        self.hcas
            .iter()
            .flat_map(|d| d.ports.iter().map(move |p| (*d, p)))
            .filter(|(d, p)| p.is_active() && filter.is_none_or(|f| f.selects(&d.name, p.number)))
            .collect()
    }

    /// The rails judged: owned ACTIVE ports that pass this process's `NCCL_IB_HCA`;
    /// when it is unset, those `rdmatopo nccl-env` selects for compute traffic (or every
    /// active port, when the plan selects none).
    pub fn rails(&self) -> Vec<(&'a RdmaDevice, &'a Port)> {
        if let Some(f) = &self.user_filter {
            return self.active_ports(Some(f));
        }
        let planned = self.active_ports(self.plan_filter.as_ref());
        if planned.is_empty() {
            self.active_ports(None)
        } else {
            planned
        }
    }

    /// With `NCCL_IB_HCA` unset: owned ACTIVE ports NCCL would also open that are not
    /// compute rails.
    pub fn unplanned_ports(&self) -> Vec<(&'a RdmaDevice, &'a Port)> {
        if self.user_filter.is_some() {
            return Vec::new();
        }
        let rails = self.rails();
        self.active_ports(None)
            .into_iter()
            .filter(|(d, p)| {
                !rails
                    .iter()
                    .any(|(rd, rp)| rd.name == d.name && rp.number == p.number)
            })
            .collect()
    }

    /// Whether `NCCL_IB_HCA` (the process's, else the plan's) selects `dev` port `port`.
    pub fn selected(&self, dev: &str, port: u32) -> bool {
        self.user_filter
            .as_ref()
            .or(self.plan_filter.as_ref())
            .is_none_or(|f| f.selects(dev, port))
    }

    /// Owned ports (any state) of the compute fabric: those this process's
    /// `NCCL_IB_HCA` selects, or when it is unset, those of a link layer the rails use
    /// (every owned port when there is no rail).
    pub fn fabric_ports(&self) -> Vec<(&'a RdmaDevice, &'a Port)> {
        let all = self
            .hcas
            .iter()
            .flat_map(|d| d.ports.iter().map(move |p| (*d, p)));
        if let Some(f) = &self.user_filter {
            return all.filter(|(d, p)| f.selects(&d.name, p.number)).collect();
        }
        let layers = self.rail_link_layers();
        all.filter(|(_, p)| layers.is_empty() || layers.contains(&p.link_layer))
            .collect()
    }

    /// The link layers of the rails, one entry a rail.
    fn rail_link_layers(&self) -> Vec<Option<LinkLayer>> {
        self.rails().iter().map(|(_, p)| p.link_layer).collect()
    }

    /// Why `rdmatopo nccl-env` leaves `dev` port `port` out of `NCCL_IB_HCA`.
    pub fn plan_reason(&self, dev: &str, port: u32) -> Option<&str> {
        let with_port = format!("{dev}:{port}");
        self.plan_excluded
            .iter()
            .find(|e| e.device == dev || e.device == with_port)
            .map(|e| e.reason.as_str())
    }

    /// Owned, PCI-backed devices with a rail: what NCCL would open.
    pub fn usable_hcas(&self) -> Vec<&'a RdmaDevice> {
        let mut out: Vec<&RdmaDevice> = Vec::new();
        for (d, _) in self.rails() {
            if d.pci.is_some() && !out.iter().any(|o| o.name == d.name) {
                out.push(d);
            }
        }
        out
    }

    /// Whether `dev` is a virtual function.
    pub fn is_vf(&self, dev: &RdmaDevice) -> bool {
        dev.pci
            .and_then(|a| self.function(a))
            .is_some_and(|f| f.is_vf)
    }

    /// The usable devices nearest to `gpu` (or, when none is usable, the nearest owned).
    fn nearest_nics(&self, gpu: &'a Gpu) -> Option<GpuNics<'a>> {
        let gf = self.function(gpu.pci)?;
        let usable = self.usable_hcas();
        let pool: Vec<&RdmaDevice> = if usable.is_empty() {
            self.hcas.clone()
        } else {
            usable
        };
        let (nics, class) = nearest_devices(self.topo, gf, pool)?;
        Some(GpuNics { gpu, nics, class })
    }

    /// The GPUs whose nearest NICs include `dev`.
    pub fn gpus_using(&self, dev: &str) -> Vec<&'a Gpu> {
        self.gpu_nics
            .iter()
            .filter(|g| g.nics.iter().any(|n| n.name == dev))
            .map(|g| g.gpu)
            .collect()
    }

    /// Every RDMA-capable NIC function on the machine, assigned or not: the functions
    /// behind RDMA devices with an ACTIVE port of the compute fabric, and NVIDIA/Mellanox
    /// network functions (visible on the PCI bus even when their RDMA device is in
    /// another namespace). Only the [`CheckedDevices::candidate_nics`] when they are given.
    pub fn machine_nics(&self) -> Vec<&'a PciFunction> {
        let candidates = self.candidate_nics.as_ref();
        // The link layers of the rails: a port of another fabric (a front-end RoCE NIC
        // beside InfiniBand rails) or of a link layer not known cannot carry what the
        // rails carry, and `nccl-env` never selects it.
        let fabric = self.rail_link_layers();
        let of_fabric = |p: &Port| {
            fabric.is_empty() || (p.link_layer.is_some() && fabric.contains(&p.link_layer))
        };
        self.topo
            .pci
            .iter()
            .filter(|f| candidates.is_none_or(|c| c.contains(&f.address)))
            .filter(|f| {
                let devs: Vec<&RdmaDevice> = self
                    .topo
                    .rdma_devices
                    .iter()
                    .filter(|d| d.pci == Some(f.address))
                    .collect();
                if devs.is_empty() {
                    return f.vendor == 0x15b3 && matches!(f.class_code(), 0x0200 | 0x0207);
                }
                // A NIC whose every port is known to be down or off the fabric is no
                // alternative; a partial read's ports (a narrowed view's NIC beside a GPU)
                // are not known.
                devs.iter().any(|d| {
                    d.ports.is_empty() || d.ports.iter().any(|p| p.is_active() && of_fabric(p))
                })
            })
            .collect()
    }

    /// The name a function is known by here: its RDMA device, else its netdev, else
    /// its address.
    pub fn nic_label(&self, f: &PciFunction) -> String {
        let rdma = self
            .topo
            .rdma_devices
            .iter()
            .find(|d| d.pci == Some(f.address));
        let net = self.topo.netdevs.iter().find(|n| n.pci == Some(f.address));
        let kind = if f.is_vf { "VF " } else { "" };
        match (rdma, net) {
            (Some(d), _) => format!("{kind}{} ({})", d.name, f.address),
            (None, Some(n)) => format!("{kind}{} ({})", n.name, f.address),
            (None, None) => format!("{kind}{}", f.address),
        }
    }

    /// `GPU0 (0000:18:00.0)`; in a container `GPU0 (host GPU5, 0000:c3:00.0)`
    /// ([`GpuNames::label`]).
    pub fn gpu_label(&self, gpu: &Gpu) -> String {
        self.gpu_names.label(gpu)
    }

    /// `GPU0`, as the judged side numbers it ([`GpuNames::name`]).
    pub fn gpu_name(&self, gpu: &Gpu) -> String {
        self.gpu_names.name(gpu)
    }

    /// RoCE ports (Ethernet link layer) of the compute fabric.
    pub fn roce_ports(&self) -> Vec<(&'a RdmaDevice, &'a Port)> {
        self.fabric_ports()
            .into_iter()
            .filter(|(_, p)| p.link_layer == Some(LinkLayer::Ethernet))
            .collect()
    }
}
