//! What the readers share: the root, the needs, the diagnostics collected so far, and
//! how many threads a read may spread over.

use super::needs::Needs;
use crate::model::{Diagnostic, Severity};
use crate::parse::{ParseError, PciAddr};
use crate::sysfs::{DirFiles, Sysfs, SysfsError};
use std::collections::BTreeSet;

/// State shared by the readers: the root and the diagnostics collected so far.
pub(crate) struct Ctx<'a> {
    pub fs: &'a Sysfs,
    pub diags: Vec<Diagnostic>,
    pub needs: Needs,
    /// Reading every device in part, for a [`Narrowing`](super::Narrowing) to
    /// choose from.
    pub partial: bool,
    /// In a partial read, the functions this container names (its netdevs', `PCIDEVICE_*`)
    /// and those of its candidate RDMA devices: found by the partial RDMA read, placed by the
    /// PCI one.
    pub named_functions: BTreeSet<PciAddr>,
    /// On a reading thread of [`Ctx::par_filter_map`], the threads its share of the
    /// work may spread over, itself included: a device's GID table while devices are
    /// read side by side gets the CPUs the devices leave. `None`: all of them.
    threads: Option<usize>,
    /// The process view leaves the rdma cgroup's limits to be read once the devices
    /// are known (a pod's files list every device of the host).
    pub rdma_limits_later: bool,
    /// The length of the last kernel table read ([`Ctx::table_len`]), tried first for the
    /// next: a host's ports are alike.
    last_table_len: usize,
}

impl<'a> Ctx<'a> {
    pub(super) fn new(fs: &'a Sysfs, needs: Needs) -> Self {
        Self {
            fs,
            diags: Vec::new(),
            needs,
            partial: false,
            named_functions: BTreeSet::new(),
            threads: None,
            rdma_limits_later: false,
            last_table_len: 0,
        }
    }

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

    /// As [`Ctx::attr`] of a required attribute, for `name` among `files` (a table's
    /// slots).
    pub fn attr_in<T>(
        &mut self,
        files: &DirFiles,
        name: &str,
        parse: impl FnOnce(&str) -> Result<T, ParseError>,
    ) -> Option<T> {
        match files.read_with(name, |text| parse(trim_attr(text))) {
            Ok(Ok(v)) => Some(v),
            Ok(refused) => self.accept(&files.path_of(name), refused),
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

    /// The node's network table `name` (`route`, `fib_trie`). Under a root other than
    /// the live system, the host's init's `/proc/1/net/<name>` where it exists: such a
    /// root is a host's procfs mounted into a pod with a network namespace of its own,
    /// whose `/proc/net` (`self/net`) is the reader's, the pod's. Otherwise, and in a
    /// captured tree, `/proc/net/<name>`.
    pub fn net_table(&self, name: &str) -> String {
        let host = format!("/proc/1/net/{name}");
        if !self.fs.is_live() && self.fs.exists(&host) {
            host
        } else {
            format!("/proc/net/{name}")
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
    /// as they finish (items differ in cost: a bridge is not read at all in a
    /// [`PciFacts::Placement`](super::PciFacts::Placement) read); this one waits for
    /// them, which lets the scheduler give them every CPU at once (measured: working here
    /// too left one waiting). Each item's diagnostics are kept with it and appended in
    /// item order, so the result is the same as a sequential run's. Results are moved
    /// once more after `f` returns them (PCI functions are a few hundred bytes each).
    pub fn par_filter_map<T: Sync, R: Send>(
        &mut self,
        items: &[T],
        per_thread: usize,
        f: impl Fn(&mut Ctx, &T) -> Option<R> + Sync,
    ) -> Vec<R> {
        let threads = worker_threads(items.len(), per_thread, self.threads);
        if threads <= 1 {
            // Room for every item: untouched capacity costs no memory, growing copies.
            let mut out = Vec::with_capacity(items.len());
            out.extend(items.iter().filter_map(|item| f(self, item)));
            return out;
        }
        let limit = self.threads.unwrap_or_else(thread_limit);
        let (fs, needs, partial, last_table_len) =
            (self.fs, self.needs, self.partial, self.last_table_len);
        let next = std::sync::atomic::AtomicUsize::new(0);
        // A quarter of what makes a thread worth starting: one GID-table-sized device,
        // or a few PCI functions.
        let take = (per_thread / 4).max(1);
        // Each thread's chunks: where a chunk starts, and each item's result and
        // diagnostics.
        let work = || {
            let mut ctx = Ctx {
                partial,
                threads: Some((limit / threads).max(1)),
                last_table_len,
                ..Ctx::new(fs, needs)
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
            // This thread takes its share too. A pod at its pids limit cannot start a
            // thread: then this one does it all.
            let helpers: Vec<_> = (1..threads)
                .filter_map(|_| std::thread::Builder::new().spawn_scoped(s, work).ok())
                .collect();
            let mut chunks = work();
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

    /// How many entries a kernel table numbered from 0 holds (a port's GID slots): none
    /// where the table is missing or unreadable (a diagnostic says which).
    pub fn table_len(&mut self, path: &str) -> u32 {
        match self.fs.table_len(path, self.last_table_len) {
            Ok(len) => {
                self.last_table_len = len;
                u32::try_from(len).unwrap_or(u32::MAX)
            }
            Err(e) if e.is_not_found() => 0,
            Err(e) => {
                self.unreadable(&e);
                0
            }
        }
    }
}

/// An attribute's text without the newline (or NUL padding) the kernel ends it with.
pub(super) fn trim_attr(text: &str) -> &str {
    text.trim_end_matches(['\n', '\0'])
}

/// PCI functions per thread below which another thread costs more than it saves (a
/// thread starts in tens of microseconds; a sysfs file takes a few to read). Half of
/// what it was while the calling thread only waited: now it takes a share.
pub(crate) const FUNCTIONS_PER_THREAD: usize = 8;
/// Bus links per thread below which another thread costs more than it saves: a link
/// is one `readlink` and a little string work, and on a VM a thread's start and join
/// cost a few hundred microseconds (measured on the shared 2-core VM: h100-dgx's 174
/// links on one thread take 0.3 ms less CPU than on two, and no more time).
pub(crate) const LINKS_PER_THREAD: usize = 128;
/// Most reading threads: sysfs lookups share kernel locks, so more stop paying.
const MAX_THREADS: usize = 8;

/// Threads for `items`: `limit` ([`thread_limit`] where `None`), and fewer where each
/// would get less than `per_thread` items. One without asking the limit, whose first
/// answer costs reads of the cgroup's CPU quota.
pub(super) fn worker_threads(items: usize, per_thread: usize, limit: Option<usize>) -> usize {
    match items / per_thread.max(1) {
        0 | 1 => 1,
        wanted => limit.unwrap_or_else(thread_limit).min(wanted),
    }
}

/// The most threads a read spreads over: the CPUs this process may use, at most
/// [`MAX_THREADS`] or `RDMATOPO_THREADS` (1: read on the calling thread only).
pub(super) fn thread_limit() -> usize {
    // Asked once: on Linux the answer costs reads of the cgroup's CPU quota.
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    let cores = *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, usize::from));
    let cap = std::env::var("RDMATOPO_THREADS")
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .unwrap_or(MAX_THREADS);
    cores.min(MAX_THREADS).min(cap).max(1)
}
