//! One container's devices placed on the node and judged: the doctor's checks on a
//! scope of its allocation (`view::CheckedDevices`), then what only the kubelet's answer can
//! show.

use super::ids::{IdMap, Mapped};
use super::report::{
    AuditContainer, AuditCpus, AuditGpu, AuditNic, AuditOptions, DOCTOR_CHECKS, OtherResource,
};
use crate::checks::doctor::{Finding, judge_only};
use crate::model::allocation::{Allocation, ContainerAllocation, DeviceAllocation, PodAllocation};
use crate::model::{Gpu, RdmaDevice, Severity, Topology};
use crate::parse::{CpuSet, PciAddr};
use crate::view::affinity::{PathClass, numa_of, path_class};
use crate::view::plan::{Plan, PlanOptions};
use crate::view::{CheckedDevices, Context, GpuNames, Scope};
use std::collections::{BTreeSet, HashMap, HashSet};

/// What is computed once per node.
pub(super) struct Node<'a> {
    topo: &'a Topology,
    ids: IdMap,
    plan: Option<Plan>,
    /// The kubelet's shared CPU pool: online CPUs less every exclusive one.
    shared_pool: CpuSet,
    /// NIC functions with a free device (allocatable less allocated); `None` when the
    /// kubelet does not say what is allocatable.
    free_nics: Option<Vec<PciAddr>>,
}

fn source(pod: &PodAllocation, c: &ContainerAllocation) -> String {
    format!(
        "kubelet PodResources List: {}/{} container {}",
        pod.namespace, pod.name, c.name
    )
}

fn numa_list(nodes: &[u32]) -> String {
    nodes
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

impl<'a> Node<'a> {
    pub(super) fn new(topo: &'a Topology, allocation: &Allocation, opts: &AuditOptions) -> Self {
        let mut ids = IdMap::new(topo, opts.shared_pools.as_ref());
        if let Some(slices) = &opts.resource_slices {
            ids.add_slices(topo, slices, opts.node_name.as_deref());
        }
        let online = topo.host.cpus_online.clone().unwrap_or_else(|| {
            topo.numa_nodes
                .iter()
                .fold(CpuSet::new(), |a, n| a.union(&n.cpus))
        });
        let exclusive = CpuSet::from_cpus(allocation.pods.iter().flat_map(|p| {
            p.cpu_ids
                .iter()
                .chain(p.containers.iter().flat_map(|c| &c.cpu_ids))
                .copied()
        }));
        let free_nics = allocation.allocatable.as_ref().map(|a| {
            let mut used: HashMap<&str, HashSet<&str>> = HashMap::new();
            for d in allocation
                .pods
                .iter()
                .flat_map(|p| &p.containers)
                .flat_map(|c| &c.devices)
            {
                used.entry(d.resource_name.as_str())
                    .or_default()
                    .extend(d.device_ids.iter().map(String::as_str));
            }
            let mut free = Vec::new();
            for d in &a.devices {
                let taken = used.get(d.resource_name.as_str());
                for id in &d.device_ids {
                    if taken.is_some_and(|t| t.contains(id.as_str())) {
                        continue;
                    }
                    for &pci in ids.map(topo, &d.resource_name, id).nics() {
                        if !free.contains(&pci) {
                            free.push(pci);
                        }
                    }
                }
            }
            free
        });
        Self {
            topo,
            ids,
            plan: Plan::compute(topo, &PlanOptions::default()).ok(),
            shared_pool: online.difference(&exclusive),
            free_nics,
        }
    }

    /// The verdict on one container; `None` when it holds no GPU, NIC or device of
    /// a kind the audit recognises.
    pub(super) fn container(
        &self,
        pod: &PodAllocation,
        c: &ContainerAllocation,
    ) -> Option<AuditContainer> {
        let topo = self.topo;
        let mut gpus: Vec<AuditGpu> = Vec::new();
        let mut nics: Vec<AuditNic> = Vec::new();
        let mut others = Vec::new();
        let mut late: Vec<Finding> = Vec::new();
        for d in &c.devices {
            let mut other_ids = Vec::new();
            let mut placed: Vec<PciAddr> = Vec::new();
            for id in &d.device_ids {
                let mapped = self.ids.map(topo, &d.resource_name, id);
                match mapped {
                    Mapped::Gpu(pci) => {
                        placed.push(pci);
                        if let Some(g) = topo.gpus.iter().find(|g| g.pci == pci)
                            && !gpus.iter().any(|a| a.pci == pci)
                        {
                            gpus.push(AuditGpu {
                                resource: d.resource_name.clone(),
                                device_id: id.clone(),
                                index: g.index,
                                container_index: None,
                                pci,
                                numa_node: g.numa_node,
                            });
                        }
                    }
                    Mapped::Nic(_) | Mapped::Pool(_) => {
                        for &pci in mapped.nics() {
                            placed.push(pci);
                            if !nics.iter().any(|n| n.pci == pci) {
                                nics.push(self.nic(d, id, pci));
                            }
                        }
                    }
                    Mapped::Unknown(why) => late.push(unknown(pod, c, d, id, &why)),
                    Mapped::Other => other_ids.push(id.clone()),
                }
            }
            if !other_ids.is_empty() {
                others.push(OtherResource {
                    resource: d.resource_name.clone(),
                    device_ids: other_ids,
                });
            }
            late.extend(self.plugin_numa(pod, c, d, &placed));
        }
        // DRA claims: placed through the ResourceSlices' PCI attributes where given (else
        // NVIDIA GPUs by name) and judged like device-plugin devices; the rest listed.
        let mut dynamic_devices: Vec<String> = Vec::new();
        for claim in &c.dynamic_resources {
            for d in &claim.devices {
                let name = format!("{}/{}/{}", d.driver_name, d.pool_name, d.device_name);
                match self
                    .ids
                    .map_claim_in_pool(&d.driver_name, &d.pool_name, &d.device_name)
                {
                    Mapped::Gpu(pci) => {
                        if let Some(g) = topo.gpus.iter().find(|g| g.pci == pci)
                            && !gpus.iter().any(|a| a.pci == pci)
                        {
                            gpus.push(AuditGpu {
                                resource: format!("claim {}/{}", claim.claim_namespace, claim.claim_name),
                                device_id: d.device_name.clone(),
                                index: g.index,
                                container_index: None,
                                pci,
                                numa_node: g.numa_node,
                            });
                        }
                    }
                    Mapped::Nic(pci) => {
                        if !nics.iter().any(|n| n.pci == pci) {
                            let mut nic = self.claim_nic(pci);
                            nic.resource =
                                format!("claim {}/{}", claim.claim_namespace, claim.claim_name);
                            nic.device_id = name.clone();
                            nics.push(nic);
                        }
                    }
                    Mapped::Unknown(why) => late.push(
                        Finding::new("unknown-device", Severity::Warning, why)
                            .with(format!("{} dynamic_resources", source(pod, c)), &name)
                            .why("a device the audit cannot place on this node is left out of this container's judgement")
                            .fix("check the DRA driver's ResourceSlices for this node against its GPUs (`kubectl get resourceslices`)"),
                    ),
                    _ => dynamic_devices.push(name),
                }
            }
        }
        if gpus.is_empty() && nics.is_empty() && late.is_empty() && dynamic_devices.is_empty() {
            return None;
        }
        // The container's nvidia-smi numbers only its GPUs: so do its findings.
        let gpu_names = GpuNames::container(gpus.iter().map(|g| g.pci));
        for g in &mut gpus {
            g.container_index = gpu_names.container_index(g.pci);
        }
        let (cpus, cpu_text) = self.cpus(pod, c);
        let mut findings = Vec::new();
        if !gpus.is_empty() || !nics.is_empty() {
            let judged_gpus: Vec<&Gpu> = topo
                .gpus
                .iter()
                .filter(|g| gpus.iter().any(|a| a.pci == g.pci))
                .collect();
            let hcas: Vec<&RdmaDevice> = topo
                .rdma_devices
                .iter()
                .filter(|d| d.pci.is_some_and(|p| nics.iter().any(|n| n.pci == p)))
                .collect();
            let candidate_nics = self.free_nics.as_ref().map(|free| {
                let mut c: Vec<PciAddr> = nics.iter().map(|n| n.pci).collect();
                c.extend(free.iter().copied());
                c
            });
            // The kubelet's allocation, not this process: its CPUs, the NICs it could
            // still have been given, and an environment that is not ours to read.
            let judged = CheckedDevices {
                context: Context::Pod,
                host_network: false,
                gpus: judged_gpus,
                hcas,
                hca_ownership_known: true,
                cpus: Some(cpus.clone()),
                cpus_evidence: vec![(format!("{} cpu_ids", source(pod, c)), cpu_text.clone())],
                candidate_nics,
                own_environment: false,
                gpu_names,
            };
            let scope = Scope::judging_planned(topo, judged, self.plan.as_ref());
            findings = judge_only(&scope, |id| DOCTOR_CHECKS.contains(&id)).findings;
        }
        let numa_misaligned = findings
            .iter()
            .any(|f| f.check == "numa-affinity" && !f.skipped && f.severity == Severity::Error);
        findings.extend(late);
        let cpu_nodes: Vec<u32> = topo
            .numa_nodes
            .iter()
            .filter(|n| !n.cpus.intersection(&cpus).is_empty())
            .map(|n| n.id)
            .collect();
        let memory_numa_nodes: BTreeSet<u32> = c
            .memory
            .iter()
            .filter_map(|m| m.numa_nodes.as_ref())
            .flatten()
            .copied()
            .collect();
        Some(AuditContainer {
            name: c.name.clone(),
            worst_path: self.worst_path(&gpus, &nics).map(|p| p.to_string()),
            gpus,
            nics,
            cpus: AuditCpus {
                cpus: cpus.to_string(),
                shared_pool: c.cpu_ids.is_empty() && pod.cpu_ids.is_empty(),
                numa_nodes: cpu_nodes,
            },
            memory_numa_nodes: memory_numa_nodes.into_iter().collect(),
            numa_misaligned,
            other_resources: others,
            dynamic_devices,
            findings,
        })
    }

    fn nic(&self, d: &DeviceAllocation, id: &str, pci: PciAddr) -> AuditNic {
        let mut nic = self.claim_nic(pci);
        nic.resource = d.resource_name.clone();
        nic.device_id = id.to_string();
        nic
    }

    /// The NIC at `pci`, its resource and id left for the caller.
    fn claim_nic(&self, pci: PciAddr) -> AuditNic {
        let topo = self.topo;
        let f = topo.pci_function(pci);
        AuditNic {
            resource: String::new(),
            device_id: String::new(),
            pci,
            rdma_device: topo
                .rdma_devices
                .iter()
                .find(|r| r.pci == Some(pci))
                .map(|r| r.name.clone()),
            netdev: topo
                .netdevs
                .iter()
                .find(|n| n.pci == Some(pci))
                .map(|n| n.name.clone()),
            is_vf: f.is_some_and(|f| f.is_vf),
            numa_node: f.and_then(|f| numa_of(topo, f)),
        }
    }

    /// The container's exclusive CPUs (its own, else its pod's), else the shared
    /// pool; with the text the evidence shows.
    fn cpus(&self, pod: &PodAllocation, c: &ContainerAllocation) -> (CpuSet, String) {
        let own = if c.cpu_ids.is_empty() {
            &pod.cpu_ids
        } else {
            &c.cpu_ids
        };
        if own.is_empty() {
            let pool = self.shared_pool.clone();
            let text = format!("none: the shared pool {pool}");
            (pool, text)
        } else {
            let set = CpuSet::from_cpus(own.iter().copied());
            let text = set.to_string();
            (set, text)
        }
    }

    /// A plugin's reported NUMA nodes against sysfs, for the devices of one entry.
    fn plugin_numa(
        &self,
        pod: &PodAllocation,
        c: &ContainerAllocation,
        d: &DeviceAllocation,
        placed: &[PciAddr],
    ) -> Vec<Finding> {
        let Some(reported) = d.numa_nodes.as_ref().filter(|n| !n.is_empty()) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        // MIG devices of one GPU, or slots of one shared pool, are one device here.
        let mut seen = HashSet::new();
        for pci in placed {
            let Some(f) = self.topo.pci_function(*pci) else {
                continue;
            };
            let Some(node) = numa_of(self.topo, f) else {
                continue;
            };
            if reported.contains(&node) || !seen.insert(*pci) {
                continue;
            }
            out.push(
                Finding::new(
                    "plugin-numa",
                    Severity::Warning,
                    format!(
                        "{} reported NUMA node {} for {pci}, which sysfs puts on node {node}",
                        d.resource_name,
                        numa_list(reported)
                    ),
                )
                .with(format!("/sys/bus/pci/devices/{pci}/numa_node"), node)
                .with(
                    format!("{} {} topology", source(pod, c), d.resource_name),
                    numa_list(reported),
                )
                .why("the Topology Manager aligns CPUs and memory with the NUMA node the device plugin reports: with a wrong node it pins the container's CPUs away from the device, and single-numa-node admits what it should reject")
                .fix("fix what the plugin reads: sriov-network-device-plugin and the NVIDIA device plugin take the node from sysfs numa_node (or NVML); a plugin with a stale or hand-written topology must be reconfigured or restarted, then the pod recreated"),
            );
        }
        out
    }

    /// The worst, over the container's GPUs, of the class to the nearest of its NICs.
    fn worst_path(&self, gpus: &[AuditGpu], nics: &[AuditNic]) -> Option<PathClass> {
        let topo = self.topo;
        gpus.iter()
            .filter_map(|g| {
                let gf = topo.pci_function(g.pci)?;
                nics.iter()
                    .filter_map(|n| Some(path_class(topo, gf, topo.pci_function(n.pci)?)))
                    .min_by_key(PathClass::rank)
            })
            .max_by_key(PathClass::rank)
    }
}

fn unknown(
    pod: &PodAllocation,
    c: &ContainerAllocation,
    d: &DeviceAllocation,
    id: &str,
    why: &str,
) -> Finding {
    Finding::new(
        "unknown-device",
        Severity::Warning,
        format!("{} device {id}: {why}", d.resource_name),
    )
    .with(
        format!("{} {}", source(pod, c), d.resource_name),
        id,
    )
    .why("a device the audit cannot place on this node is left out of this container's judgement; a GPU UUID or PCI address from another node means the plugin reports devices this node does not have")
    .fix("check the device plugin's configuration (NVIDIA: deviceIDStrategy; k8s-rdma-shared-dev-plugin: give its config.json with --rdma-shared-config) and restart a plugin that reports foreign devices")
}
