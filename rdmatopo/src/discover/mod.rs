//! Discovery: read a root through [`Sysfs`], parse with [`crate::parse`], and build a
//! [`Topology`]. Odd or missing attributes become [`Diagnostic`]s; the only error is a
//! root that holds no sysfs at all.

mod ctx;
mod host;
mod needs;
mod net;
mod pci;
mod qos;
mod rdma;

pub use needs::{DeviceFacts, GidFacts, HostFacts, Needs, NetdevFacts, OtherNames, PciFacts};

use crate::model::{DetailView, Diagnostic, Process, Severity, Topology};
use crate::parse::PciAddr;
use crate::sources::{FactSource, SourceError};
use crate::sysfs::{Sysfs, SysfsError};
use ctx::{Ctx, worker_threads};
use std::collections::BTreeSet;

/// Discovery could not build any model.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DiscoverError {
    #[error(
        "{root}: no sysfs here (expected {root}/sys/devices or {root}/sys/class); pass --root a captured tree or a snapshot"
    )]
    NoSysfs { root: String },
    #[error(transparent)]
    Sysfs(#[from] SysfsError),
}

/// The devices a container's answer is about, read in full while every other device
/// stays read in part (see [`crate::model::DetailView`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Focus {
    /// RDMA devices by name.
    pub rdma_devices: BTreeSet<String>,
    /// PCI functions (GPUs); the RDMA devices' functions, the PFs of VFs and the bridges
    /// above them all are added by discovery.
    pub functions: BTreeSet<PciAddr>,
    /// Why, for the model's [`crate::model::DetailView::reason`].
    pub reason: String,
}

/// How a container's read is narrowed to what it owns: decide the view first, then
/// read. Discovery cannot judge ownership itself (that is the view layer's), so the
/// caller hands the two questions in (`rdmatopo::discover_view` passes the container
/// view's answers).
#[derive(Debug, Clone, Copy)]
pub struct Narrowing {
    /// From the process facts alone: whether this is a container (else the read is
    /// as the needs say, unchanged).
    pub in_container: fn(&Topology) -> bool,
    /// From a partial read of every device (names, functions, uverbs nodes, this
    /// namespace's netdevs, the process view): the devices to read in full, or `None`
    /// when ownership is not certain, and everything is read.
    pub focus: fn(&Topology) -> Option<Focus>,
}

/// Builds a [`Topology`] from a root and optional NVML / verbs sources.
pub struct Discoverer<'a> {
    fs: &'a Sysfs,
    sources: Vec<&'a dyn FactSource>,
    needs: Needs,
    cross_check: Option<CrossCheck>,
    narrowing: Option<Narrowing>,
}

/// A check of the sources' facts against sysfs, run on the finished model of a read
/// that needs it ([`Needs::cross_check`]); its diagnostics join the model's. The
/// caller hands it in (`rdmatopo::discover_needs` passes the sources cross-check of
/// `checks`), so discovery never imports the layers that judge its output.
pub type CrossCheck = fn(&Topology) -> Vec<Diagnostic>;

impl std::fmt::Debug for Discoverer<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Discoverer")
            .field("fs", &self.fs)
            .field("sources", &self.sources.len())
            .field("cross_check", &self.cross_check.is_some())
            .finish()
    }
}

impl<'a> Discoverer<'a> {
    pub fn new(fs: &'a Sysfs) -> Self {
        Self {
            fs,
            sources: Vec::new(),
            needs: Needs::ALL,
            cross_check: None,
            narrowing: None,
        }
    }

    /// Inside a container, read only what it owns (see [`Narrowing`]); on a host, or
    /// where ownership is uncertain, the read is unchanged.
    pub fn narrow(mut self, narrowing: Narrowing) -> Self {
        self.narrowing = Some(narrowing);
        self
    }

    /// Check the sources' facts against sysfs with `check` once a model whose needs
    /// ask for it is built (none by default).
    pub fn cross_check(mut self, check: CrossCheck) -> Self {
        self.cross_check = Some(check);
        self
    }

    /// Read only what `needs` asks for ([`Needs::ALL`] by default).
    pub fn needs(mut self, needs: Needs) -> Self {
        self.needs = needs;
        self
    }

    /// Add a source of NVML or verbs facts.
    pub fn source(mut self, source: &'a dyn FactSource) -> Self {
        self.sources.push(source);
        self
    }

    /// Read everything.
    ///
    /// # Errors
    /// [`DiscoverError::NoSysfs`] when the root has neither `sys/devices` nor `sys/class`.
    pub fn discover(&self) -> Result<Topology, DiscoverError> {
        if !self.fs.exists("/sys/devices") && !self.fs.exists("/sys/class") {
            return Err(DiscoverError::NoSysfs {
                root: self.fs.label().to_string(),
            });
        }
        let Some(narrowing) = self.narrowing else {
            return Ok(self.read(self.needs, false, None));
        };
        // The process view first: it alone tells a container from a host.
        let mut probe = Topology::empty(self.fs.label());
        let mut ctx = Ctx::new(self.fs, self.needs);
        ctx.rdma_limits_later = true;
        host::read_process(&mut ctx, &mut probe);
        let in_container = (narrowing.in_container)(&probe);
        if !in_container {
            if self.needs.limits {
                host::read_rdma_limits(&mut ctx, &mut probe.process, None);
            }
            return Ok(self.read(self.needs, false, Some((probe.process, ctx.diags))));
        }
        let needs = self.needs.in_container();
        // The probe read the process view as this answer needs it; a container may
        // need the rest of it.
        if needs.process_whole && !self.needs.process_whole {
            ctx.needs = needs;
            host::read_process_rest(&mut ctx, &mut probe.process);
        }
        let mut partial = self.read(needs, true, Some((probe.process, ctx.diags)));
        let mut doubts = doubts(&partial);
        if doubts.is_empty()
            && let Some(focus) = (narrowing.focus)(&partial)
        {
            match self.complete(&mut partial, needs, &focus) {
                Ok(()) => return Ok(partial),
                Err(more) => doubts.extend(more),
            }
        }
        // Uncertain: the whole machine, as without narrowing, saying why. The sources'
        // facts are the partial read's: NVML's initialisation can cost more than the read.
        let mut ctx = Ctx::new(self.fs, needs);
        let mut topo = Self::read_sysfs(&mut ctx, None);
        topo.nvml = partial.nvml;
        topo.verbs = partial.verbs;
        topo.device_index = partial.device_index;
        ctx.diags.extend(
            partial
                .diagnostics
                .into_iter()
                .filter(|d| SOURCE_CODES.contains(&d.code.as_str())),
        );
        let mut topo = self.finish(ctx, topo);
        topo.diagnostics.extend(doubts);
        Ok(topo)
    }

    /// Read the root for `needs`: every device in full, or (`partial`) every device in
    /// part for [`Narrowing::focus`] to choose from. `process`: the process view and
    /// its diagnostics, already read for these needs.
    fn read(
        &self,
        needs: Needs,
        partial: bool,
        process: Option<(Process, Vec<Diagnostic>)>,
    ) -> Topology {
        let mut ctx = Ctx::new(self.fs, needs);
        ctx.partial = partial;
        ctx.rdma_limits_later = partial;
        // Only where the answer needs them ([`Needs::sources`]).
        let sources: &[&dyn FactSource] = if needs.machine && needs.sources {
            &self.sources
        } else {
            &[]
        };
        // Sources that wait on a driver are collected on a thread of their own while
        // sysfs is read here (NVML's initialisation alone can take longer than the
        // whole tree); the others after sysfs, in line (quicker than starting a thread).
        let collect = |blocking: bool| {
            sources
                .iter()
                .enumerate()
                .filter(|(_, source)| source.blocks() == blocking)
                .map(|(i, source)| (i, source.collect(self.fs)))
                .collect::<Vec<_>>()
        };
        std::thread::scope(|s| {
            let helper = (sources.iter().any(|source| source.blocks())
                && worker_threads(2, 1, None) > 1)
                .then(|| {
                    std::thread::Builder::new()
                        .spawn_scoped(s, move || collect(true))
                        .ok()
                })
                .flatten();
            let mut topo = Self::read_sysfs(&mut ctx, process);
            let mut collected = match helper {
                Some(helper) => helper
                    .join()
                    .unwrap_or_else(|p| std::panic::resume_unwind(p)),
                None => collect(true),
            };
            collected.extend(collect(false));
            // In the sources' order, whichever thread collected them.
            collected.sort_by_key(|(i, _)| *i);
            for (_, result) in collected {
                match result {
                    Ok(facts) => facts.apply(&mut topo),
                    Err(SourceError::Unavailable(why)) => {
                        ctx.diags
                            .push(Diagnostic::new(Severity::Info, SOURCE_CODES[0], None, why));
                    }
                    Err(e) => ctx.diags.push(Diagnostic::new(
                        Severity::Warning,
                        SOURCE_CODES[1],
                        None,
                        e.to_string(),
                    )),
                }
            }
            self.finish(ctx, topo)
        })
    }

    /// Everything sysfs and procfs hold for the needs (`process`: read already).
    fn read_sysfs(ctx: &mut Ctx, process: Option<(Process, Vec<Diagnostic>)>) -> Topology {
        let mut topo = Topology::empty(ctx.fs.label());
        if ctx.needs.machine {
            host::read_numa(ctx, &mut topo);
            host::read_host(ctx, &mut topo);
            match process {
                Some((process, diags)) => {
                    topo.process = process;
                    ctx.diags.extend(diags);
                }
                None => host::read_process(ctx, &mut topo),
            }
        }
        // RDMA devices before the PCI tree: a placement read takes their functions in
        // detail.
        rdma::read_rdma(ctx, &mut topo);
        if ctx.needs.machine {
            pci::read_pci(ctx, &mut topo);
        }
        net::read_netdevs(ctx, &mut topo);
        rdma::link_port_netdevs(&mut topo);
        if ctx.needs.qos && !ctx.partial {
            qos::read_qos(ctx, &mut topo);
        }
        topo
    }

    /// GPUs from the PCI tree and the sources' facts, then the cross-checks (of a
    /// complete model: a partial read is completed first).
    fn finish(&self, mut ctx: Ctx, mut topo: Topology) -> Topology {
        pci::fill_gpus(&mut topo);
        if !ctx.partial {
            self.run_cross_check(&mut ctx, &topo);
        }
        topo.diagnostics = ctx.diags;
        topo
    }

    fn run_cross_check(&self, ctx: &mut Ctx, topo: &Topology) {
        if ctx.needs.cross_check
            && let Some(check) = self.cross_check
        {
            ctx.diags.extend(check(topo));
        }
    }

    /// Read the devices of `focus` in full into a partial read: RDMA devices' ports, GIDs
    /// and attributes, their functions, the PFs of VFs and the bridges above them, and
    /// (when needed) the QoS of those ports and netdevs.
    /// `Err`: diagnostics saying why the partial read cannot be trusted after all (a uverbs
    /// node whose `ibdev` does not name its device).
    fn complete(
        &self,
        topo: &mut Topology,
        needs: Needs,
        focus: &Focus,
    ) -> Result<(), Vec<Diagnostic>> {
        let mut ctx = Ctx::new(self.fs, needs);
        ctx.diags = std::mem::take(&mut topo.diagnostics);
        let unconfirmed = rdma::read_focus(&mut ctx, topo, &focus.rdma_devices, needs.gids);
        if !unconfirmed.is_empty() {
            topo.diagnostics = ctx.diags;
            return Err(unconfirmed);
        }
        let mut functions = focus.functions.clone();
        functions.extend(
            topo.rdma_devices
                .iter()
                .filter(|d| focus.rdma_devices.contains(&d.name))
                .filter_map(|d| d.pci),
        );
        // A placement read's functions are whole in the partial read already, but for the
        // GPUs' nodes.
        let detailed = if needs.pci <= PciFacts::Named {
            pci::place_gpus(&mut ctx, topo, &focus.functions);
            BTreeSet::new()
        } else {
            // A GPU whose NICs are all elsewhere: what sits beside it, so that the
            // checks can name a nearer NIC and the switch ports on the way to it.
            let nics = functions
                .iter()
                .filter(|a| !focus.functions.contains(a))
                .copied()
                .collect();
            let neighbours = if needs.far_gpu_neighbours {
                pci::read_far_gpu_neighbours(&mut ctx, topo, &focus.functions, &nics)
            } else {
                Default::default()
            };
            rdma::hold_others(&ctx, topo, &neighbours.devices);
            functions.extend(neighbours.placed);
            let mut detailed = pci::read_focus(&mut ctx, topo, functions);
            detailed.extend(neighbours.read);
            detailed
        };
        // The RDMA devices of the PFs of its VFs: their ports carry the VFs' traffic
        // (QoS, link state), read where either is needed. Their GID tables name a netdev of this namespace only when
        // one sits on the PF's function or bonds it; else they are not read at all.
        let pfs: BTreeSet<PciAddr> = topo
            .rdma_devices
            .iter()
            .filter(|d| focus.rdma_devices.contains(&d.name))
            .filter_map(|d| topo.pci_function(d.pci?)?.physfn)
            .collect();
        // A PF's devices are those under its function; the partial read only named them.
        let under_pfs: Vec<(String, PciAddr)> = pfs
            .iter()
            .filter(|_| needs.qos || needs.device > DeviceFacts::None)
            .filter_map(|a| topo.pci_function(*a))
            .flat_map(|f| {
                let names = ctx.list(&format!("{}/infiniband", f.path));
                names.into_iter().map(move |n| (n, f.address))
            })
            .filter(|(name, _)| !focus.rdma_devices.contains(name))
            .collect();
        rdma::hold_others(&ctx, topo, &under_pfs);
        let pf_devices: BTreeSet<String> = under_pfs
            .into_iter()
            .map(|(name, _)| name)
            .filter(|name| topo.rdma_device(name).is_some())
            .collect();
        let pf_netdev_here = topo
            .netdevs
            .iter()
            .any(|n| n.bond.is_some() || n.pci.is_some_and(|a| pfs.contains(&a)));
        let pf_gids = if pf_netdev_here {
            needs.gids.min(GidFacts::UpToNetdev)
        } else {
            GidFacts::None
        };
        let unconfirmed = rdma::read_focus(&mut ctx, topo, &pf_devices, pf_gids);
        if !unconfirmed.is_empty() {
            topo.diagnostics = ctx.diags;
            return Err(unconfirmed);
        }
        rdma::link_port_netdevs(topo);
        // As the process view of a whole read, for the devices held.
        if needs.limits {
            let held = topo.rdma_devices.iter().map(|d| d.name.clone()).collect();
            host::read_rdma_limits(&mut ctx, &mut topo.process, Some(&held));
        }
        if needs.qos {
            qos::read_qos(&mut ctx, topo);
        }
        pci::fill_gpus(topo);
        self.run_cross_check(&mut ctx, topo);
        let partial = topo.view.take().unwrap_or_default();
        topo.view = Some(DetailView {
            rdma_devices: topo
                .rdma_devices
                .iter()
                .filter(|d| focus.rdma_devices.contains(&d.name))
                .map(|d| d.name.clone())
                .collect(),
            gpus: topo
                .gpus
                .iter()
                .map(|g| g.pci)
                .filter(|a| focus.functions.contains(a))
                .collect(),
            pf_rdma_devices: pf_devices.into_iter().collect(),
            pci: detailed.into_iter().collect(),
            reason: focus.reason.clone(),
            other_rdma_devices: partial.other_rdma_devices,
            unnamed_rdma_devices: partial.unnamed_rdma_devices,
        });
        topo.diagnostics = ctx.diags;
        Ok(())
    }
}

/// The diagnostics of the sources: unavailable, failed.
const SOURCE_CODES: [&str; 2] = ["source-unavailable", "source-failed"];

/// What in a partial read says the container's evidence does not hold together, so that its
/// view must not be narrowed: a uverbs node in `/dev/infiniband` that no RDMA device's
/// verbs device is, a `PCIDEVICE_*` function missing from sysfs. Each a diagnostic
/// naming the path.
fn doubts(partial: &Topology) -> Vec<Diagnostic> {
    let widened = |path: &str, why: String| {
        Diagnostic::new(
            Severity::Warning,
            "view-widened",
            Some(path),
            format!("{why}; the whole machine is read instead of this container's devices"),
        )
    };
    let mut out = Vec::new();
    for node in partial
        .process
        .dev_infiniband
        .iter()
        .filter(|n| n.starts_with("uverbs"))
    {
        if !partial
            .rdma_devices
            .iter()
            .any(|d| d.uverbs.as_deref() == Some(node.as_str()))
        {
            out.push(widened(
                &format!("/dev/infiniband/{node}"),
                format!("no RDMA device in /sys/class/infiniband has the verbs device {node}"),
            ));
        }
    }
    for (key, item) in partial.process.pcidevice_items() {
        if let Ok(addr) = item.parse::<PciAddr>()
            && partial.pci_function(addr).is_none()
        {
            out.push(widened(
                &format!("/sys/bus/pci/devices/{addr}"),
                format!("{key} names {addr}, which is not a PCI function here"),
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests;
