//! Discovery: read a root through [`Sysfs`], parse with [`crate::parse`], and build a
//! [`Topology`]. Odd or missing attributes become [`Diagnostic`]s; the only error is a
//! root that holds no sysfs at all.

mod host;
mod net;
mod pci;
mod qos;
mod rdma;

use crate::model::{Diagnostic, Severity, Topology};
use crate::parse::ParseError;
use crate::sources::{FactSource, SourceError};
use crate::sysfs::{Sysfs, SysfsError};

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

/// How much of a root discovery reads.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Scope {
    /// Everything the model holds.
    #[default]
    Full,
    /// What the GPU/NIC affinity matrix and the host/container decision need, and no more: NUMA
    /// nodes and their CPUs (no distances); the PCI tree with every function's class (a
    /// function with functions below it is a PCI-to-PCI bridge by the tree: recorded as
    /// `0x060400` without reading), and vendor and device ids of display functions and RDMA
    /// devices' functions (0 elsewhere), from `uevent` where it states them; `numa_node` of
    /// GPUs and of RDMA devices' functions, `local_cpulist` of GPUs and of those functions that
    /// know no node, and the node of each host bridge holding such a GPU or function; each RDMA
    /// device's PCI function; of the process view, its CPU mask (status and cgroup cpuset) and
    /// container evidence (cgroups, environment, runtime mounts, marker files), not its limits,
    /// rdma cgroup, device nodes or the driver's GPU list; NVML facts. Ports, GID tables,
    /// netdevs, link state, SR-IOV, drivers, ACS, QoS, PCI names and host details stay empty.
    /// On a DGX-class tree this opens about a fifteenth of the files of [`Scope::Full`].
    Affinity,
    /// What `rdmatopo gids` needs: RDMA devices with their PCI function, each port's
    /// `link_layer` and whole GID table (GIDs, types, netdevs), and this namespace's
    /// netdevs by name, function and kind. No NUMA, PCI attributes, other port or
    /// netdev attributes, host or process facts, QoS or NVML/verbs facts. A netdev's
    /// kind tells a VF by its `device/physfn` link only, so a VF whose PF is not
    /// visible (a VM) reads as physical here.
    Gids,
    /// What `rdmatopo netdevs` needs (the `ibdev2netdev` relation): RDMA devices with
    /// their PCI function; per port its `link_layer` and, unless that is InfiniBand
    /// (whose GIDs name no netdev), the GID slots up to the first that names a netdev
    /// (types unread); this namespace's netdevs by name, function and kind, with
    /// `carrier`, `master` and bond for those named by a port or on an RDMA device's
    /// function (kinds as in [`Scope::Gids`]). Nothing else.
    PortNetdevs,
    /// What `rdmatopo topo` needs inside a container, where it shows the devices this
    /// process owns: everything [`Scope::Full`] reads except the GID tables (each
    /// port's GID slots only up to the first that names a netdev, as in
    /// [`Scope::PortNetdevs`], without types) and QoS, and without the cross-checks of
    /// NVML and verbs facts against sysfs.
    Container,
}

impl Scope {
    /// Whether the scope reads the machine around the RDMA devices: NUMA nodes, the
    /// PCI tree, the process view and NVML/verbs facts.
    pub fn reads_machine(self) -> bool {
        matches!(self, Self::Full | Self::Affinity | Self::Container)
    }

    /// Whether the scope reads the details of devices, ports and netdevs (all but GID
    /// tables and QoS).
    pub fn reads_details(self) -> bool {
        matches!(self, Self::Full | Self::Container)
    }
}

/// Builds a [`Topology`] from a root and optional NVML / verbs sources.
pub struct Discoverer<'a> {
    fs: &'a Sysfs,
    sources: Vec<&'a dyn FactSource>,
    scope: Scope,
    cross_check: Option<CrossCheck>,
}

/// A check of the sources' facts against sysfs, run on the finished model of a
/// [`Scope::Full`] read; its diagnostics join the model's. The caller hands it in
/// (`rdmatopo::discover_scope` passes the sources cross-check of `checks`), so
/// discovery never imports the floors that judge its output.
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
            scope: Scope::Full,
            cross_check: None,
        }
    }

    /// Check the sources' facts against sysfs with `check` once a [`Scope::Full`]
    /// model is built (none by default).
    pub fn cross_check(mut self, check: CrossCheck) -> Self {
        self.cross_check = Some(check);
        self
    }

    /// Read only what `scope` needs ([`Scope::Full`] by default).
    pub fn scope(mut self, scope: Scope) -> Self {
        self.scope = scope;
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
        let mut ctx = Ctx {
            fs: self.fs,
            diags: Vec::new(),
            scope: self.scope,
        };
        // Narrow scopes never collect: loading libnvidia-ml would cost more than their
        // whole read.
        let sources: &[&dyn FactSource] = if self.scope.reads_machine() {
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
            let helper = (sources.iter().any(|source| source.blocks()) && worker_threads(2, 1) > 1)
                .then(|| {
                    std::thread::Builder::new()
                        .spawn_scoped(s, move || collect(true))
                        .ok()
                })
                .flatten();
            let mut topo = self.read_sysfs(&mut ctx);
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
                        ctx.diags.push(Diagnostic::new(
                            Severity::Info,
                            "source-unavailable",
                            None,
                            why,
                        ));
                    }
                    Err(e) => ctx.diags.push(Diagnostic::new(
                        Severity::Warning,
                        "source-failed",
                        None,
                        e.to_string(),
                    )),
                }
            }
            Ok(self.finish(ctx, topo))
        })
    }

    /// Everything sysfs and procfs hold for the scope.
    fn read_sysfs(&self, ctx: &mut Ctx) -> Topology {
        let mut topo = Topology::empty(self.fs.label());
        if self.scope.reads_machine() {
            host::read_numa(ctx, &mut topo);
            host::read_host(ctx, &mut topo);
            host::read_process(ctx, &mut topo);
        }
        // RDMA devices before the PCI tree: the affinity scope reads their functions in
        // detail.
        rdma::read_rdma(ctx, &mut topo);
        if self.scope.reads_machine() {
            pci::read_pci(ctx, &mut topo);
        }
        net::read_netdevs(ctx, &mut topo);
        rdma::link_port_netdevs(&mut topo);
        if self.scope == Scope::Full {
            qos::read_qos(ctx, &mut topo);
        }
        topo
    }

    /// GPUs from the PCI tree and the sources' facts, then the cross-checks.
    fn finish(&self, mut ctx: Ctx, mut topo: Topology) -> Topology {
        pci::fill_gpus(&mut topo);
        if self.scope == Scope::Full {
            // Cross-checks need the link state and ports a narrower scope leaves out.
            if let Some(check) = self.cross_check {
                ctx.diags.extend(check(&topo));
            }
        }
        topo.diagnostics = ctx.diags;
        topo
    }
}

/// State shared by the readers: the root and the diagnostics collected so far.
pub(crate) struct Ctx<'a> {
    pub fs: &'a Sysfs,
    pub diags: Vec<Diagnostic>,
    pub scope: Scope,
}

impl Ctx<'_> {
    /// Read and parse an attribute. Missing: `None`, silently when `optional`.
    /// Unreadable or unparsable: `None` and a diagnostic naming the path.
    pub fn attr<T>(
        &mut self,
        path: &str,
        optional: bool,
        parse: impl FnOnce(&str) -> Result<T, ParseError>,
    ) -> Option<T> {
        // Parsed where it was read: no copy of the text.
        match self.fs.read_with(path, |text| parse(trim_attr(text))) {
            Ok(parsed) => self.accept(path, parsed),
            Err(e) if e.is_not_found() && optional => None,
            Err(e) => {
                self.unreadable(&e);
                None
            }
        }
    }

    /// The value parsed from the attribute at `path`; refused: `None` and a diagnostic
    /// naming the path.
    pub fn accept<T>(&mut self, path: &str, parsed: Result<T, ParseError>) -> Option<T> {
        match parsed {
            Ok(v) => Some(v),
            Err(e) => {
                self.diags.push(Diagnostic::new(
                    Severity::Warning,
                    "unparsable-attribute",
                    Some(path),
                    e.to_string(),
                ));
                None
            }
        }
    }

    /// Read an attribute's text, trimmed of its newline.
    pub fn text(&mut self, path: &str, optional: bool) -> Option<String> {
        match self.fs.read_with(path, |t| trim_attr(t).to_owned()) {
            Ok(t) => Some(t),
            Err(e) if e.is_not_found() && optional => None,
            Err(e) => {
                self.unreadable(&e);
                None
            }
        }
    }

    /// Read an attribute that legitimately fails on some kernels or slots (EINVAL on
    /// empty GID slots): any error is `None` without a diagnostic; empty text too.
    pub fn text_quiet(&self, path: &str) -> Option<String> {
        let t = self.fs.read_with(path, |t| trim_attr(t).to_owned()).ok()?;
        (!t.is_empty()).then_some(t)
    }

    pub fn unreadable(&mut self, e: &SysfsError) {
        let severity = if e.is_not_found() {
            Severity::Info
        } else {
            Severity::Warning
        };
        let code = if e.is_not_found() {
            "missing-attribute"
        } else {
            "unreadable-attribute"
        };
        self.diags.push(Diagnostic::new(
            severity,
            code,
            Some(e.path()),
            e.to_string(),
        ));
    }

    /// The results `f` gives over `items`, in order, spread over a few threads when
    /// each would get at least `per_thread` items: sysfs reads are system calls, and
    /// the machines this runs on have many cores. The threads take the next few items
    /// as they finish (items differ in cost: a bridge is not read at all in
    /// [`Scope::Affinity`]); this one waits for them, which lets the scheduler give them
    /// every CPU at once (measured: working here too left one waiting). Each item's
    /// diagnostics are kept with it and appended in item order, so the result is the
    /// same as a sequential run's. Results are moved once more after `f` returns them
    /// (PCI functions are a few hundred bytes each).
    pub fn par_filter_map<T: Sync, R: Send>(
        &mut self,
        items: &[T],
        per_thread: usize,
        f: impl Fn(&mut Ctx, &T) -> Option<R> + Sync,
    ) -> Vec<R> {
        let threads = worker_threads(items.len(), per_thread);
        if threads <= 1 {
            // Room for every item: untouched capacity costs no memory, growing copies.
            let mut out = Vec::with_capacity(items.len());
            out.extend(items.iter().filter_map(|item| f(self, item)));
            return out;
        }
        let (fs, scope) = (self.fs, self.scope);
        let next = std::sync::atomic::AtomicUsize::new(0);
        // A quarter of what makes a thread worth starting: one GID-table-sized device,
        // or a few PCI functions.
        let take = (per_thread / 4).max(1);
        // Each thread's chunks: where a chunk starts, and each item's result and
        // diagnostics.
        let work = || {
            let mut ctx = Ctx {
                fs,
                diags: Vec::new(),
                scope,
            };
            let mut chunks = Vec::new();
            loop {
                let start = next.fetch_add(take, std::sync::atomic::Ordering::Relaxed);
                let Some(taken) = items.get(start..(start + take).min(items.len())) else {
                    break;
                };
                let chunk: Vec<_> = taken
                    .iter()
                    .map(|item| (f(&mut ctx, item), std::mem::take(&mut ctx.diags)))
                    .collect();
                chunks.push((start, chunk));
            }
            chunks
        };
        let work = &work;
        let mut chunks = std::thread::scope(|s| {
            // A pod at its pids limit cannot start a thread: then this one does it all.
            let helpers: Vec<_> = (0..threads)
                .filter_map(|_| std::thread::Builder::new().spawn_scoped(s, work).ok())
                .collect();
            let mut chunks = if helpers.is_empty() {
                work()
            } else {
                Vec::new()
            };
            for helper in helpers {
                chunks.extend(
                    helper
                        .join()
                        .unwrap_or_else(|p| std::panic::resume_unwind(p)),
                );
            }
            chunks
        });
        chunks.sort_unstable_by_key(|(start, _)| *start);
        let found = chunks
            .iter()
            .flat_map(|(_, chunk)| chunk)
            .filter(|(result, _)| result.is_some())
            .count();
        let mut out = Vec::with_capacity(found);
        for (result, diags) in chunks.into_iter().flat_map(|(_, chunk)| chunk) {
            out.extend(result);
            self.diags.extend(diags);
        }
        out
    }

    pub fn list(&mut self, path: &str) -> Vec<String> {
        match self.fs.list_opt(path) {
            Ok(v) => v,
            Err(e) => {
                self.unreadable(&e);
                Vec::new()
            }
        }
    }
}

/// An attribute's text without the newline (or NUL padding) the kernel ends it with.
fn trim_attr(text: &str) -> &str {
    text.trim_end_matches(['\n', '\0'])
}

/// PCI functions per thread below which another thread costs more than it saves (a
/// thread starts in tens of microseconds; a sysfs file takes a few to read).
pub(crate) const FUNCTIONS_PER_THREAD: usize = 16;
/// Bus links per thread below which another thread costs more than it saves: a link
/// is one `readlink` and a little string work, and on a VM a thread's start and join
/// cost a few hundred microseconds (measured on the shared 2-core VM: h100-dgx's 174
/// links on one thread take 0.3 ms less CPU than on two, and no more time).
pub(crate) const LINKS_PER_THREAD: usize = 128;
/// Most reading threads: sysfs lookups share kernel locks, so more stop paying.
const MAX_THREADS: usize = 8;

/// Threads for `items`: the CPUs this process may use, at most [`MAX_THREADS`] or
/// `RDMATOPO_THREADS` (1: read on the calling thread only).
fn worker_threads(items: usize, per_thread: usize) -> usize {
    // Asked once: on Linux the answer costs reads of the cgroup's CPU quota.
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    let cores = *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, usize::from));
    let cap = std::env::var("RDMATOPO_THREADS")
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .unwrap_or(MAX_THREADS);
    cores
        .min(MAX_THREADS)
        .min(cap)
        .min(items / per_thread.max(1))
        .max(1)
}

#[cfg(test)]
mod tests;
