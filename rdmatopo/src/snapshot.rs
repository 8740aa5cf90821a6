//! `rdmatopo snapshot`: exactly the sysfs and procfs files a discovery read, with every
//! symlink on the way kept as a symlink (targets as stored), plus the NVML and verbs
//! facts of the model, as a `.tar.gz` whose untarred top directory is a valid `--root`
//! (the layout of `hwloc-gather-topology`). [`load`] reads such an archive back into a
//! [`MemTree`] without unpacking it, so `--root` accepts the tarball directly.
//!
//! ```no_run
//! use rdmatopo::snapshot::{Capture, Options};
//! let fs = rdmatopo::open_root(None)?.recording();
//! let topo = rdmatopo::discover_fs(&fs)?;
//! let mut capture = Capture::from_journal(&fs, &topo);
//! capture.scrub();
//! std::fs::write("node.tar.gz", capture.to_tar_gz(&Options::default())?).ok();
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod scrub;

use crate::model::Topology;
use crate::parse::PciAddr;
use crate::sources::{
    DATA_DIRECT_DRIVER_DIR, DEVICE_INDEX_SNAPSHOT_PATH, NVIDIA_DRIVER_DIR, NVML_SNAPSHOT_PATH,
    VERBS_SNAPSHOT_PATH,
};
use crate::sysfs::{EntryKind, MemEntry, MemTree, Sysfs, join};
use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// Largest total of file sizes accepted when loading an archive.
pub const MAX_UNPACKED_BYTES: u64 = 256 << 20;
/// Most entries accepted when loading an archive.
pub const MAX_ENTRIES: usize = 1 << 20;
/// Largest single file captured or loaded (NVML/verbs JSON of a big node fits easily).
pub const MAX_FILE_BYTES: usize = 64 << 20;

/// A PCI function's attribute files (and `driver` link) that its `uevent` also states.
const PCI_IDENTITY_FILES: [&str; 6] = [
    "class",
    "vendor",
    "device",
    "subsystem_vendor",
    "subsystem_device",
    "driver",
];

/// Why a snapshot could not be written or read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SnapshotError {
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}: unpacks to more than {limit} bytes; refusing it")]
    TooLarge { path: String, limit: u64 },
    #[error("{path}: more than {limit} entries; refusing it")]
    TooManyEntries { path: String, limit: usize },
    #[error("{path}: entry {entry:?} {reason}; refusing the archive")]
    UnsafeEntry {
        path: String,
        entry: String,
        reason: &'static str,
    },
    #[error("{path}: not a snapshot: {reason}")]
    NotASnapshot { path: String, reason: String },
}

/// How to write the archive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// The directory every entry sits in (`tar xzf` creates it; it is the `--root`).
    pub top_dir: String,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            top_dir: "rdmatopo-snapshot".to_string(),
        }
    }
}

/// What a capture holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    pub files: usize,
    pub symlinks: usize,
    pub dirs: usize,
    /// Bytes of file content.
    pub bytes: u64,
    /// Files discovery read before the capture started.
    pub discovery_reads: usize,
    /// Files the capture read to store them (each one discovery had read).
    pub capture_reads: usize,
    /// PCI functions' attribute files the capture added beside the `uevent` discovery
    /// read in their place (`class`, `vendor`, `device`, `subsystem_*`).
    pub identity_reads: usize,
    /// Logical paths in discovery's journal.
    pub journal_paths: usize,
}

/// A captured tree: canonical logical paths (`/sys/devices/…`) and their entries.
#[derive(Debug, Clone, Default)]
pub struct Capture {
    entries: BTreeMap<String, MemEntry>,
    stats: Stats,
}

/// Prefixes of `/a/b/c`: `/a`, `/a/b`, `/a/b/c`.
fn prefixes(path: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for c in path.split('/').filter(|c| !c.is_empty()) {
        cur.push('/');
        cur.push_str(c);
        out.push(cur.clone());
    }
    out
}

fn parent_and_name(path: &str) -> (&str, &str) {
    match path.rfind('/') {
        Some(0) => ("/", &path[1..]),
        Some(i) => (&path[..i], &path[i + 1..]),
        None => ("/", path),
    }
}

struct Walker<'a> {
    fs: &'a Sysfs,
    entries: BTreeMap<String, MemEntry>,
    seen: BTreeSet<String>,
}

impl Walker<'_> {
    /// Record `path` and everything met on the way: directories, each symlink as a
    /// symlink (and what it points to), and the final file's bytes.
    fn add(&mut self, path: &str, depth: usize) {
        let parts = prefixes(path);
        let last = parts.len();
        for (i, prefix) in parts.iter().enumerate() {
            if !self.seen.insert(prefix.clone()) {
                continue;
            }
            let (parent, name) = parent_and_name(prefix);
            let Ok(parent_real) = self.fs.canonicalize(parent) else {
                return;
            };
            let real = join(&parent_real, name);
            let Ok(kind) = self.fs.kind(prefix) else {
                return;
            };
            match kind {
                EntryKind::Dir => {
                    self.entries.entry(real).or_insert(MemEntry::Dir);
                }
                EntryKind::Symlink => {
                    let Ok(target) = self.fs.read_link(prefix) else {
                        return;
                    };
                    self.entries.insert(real, MemEntry::Symlink(target));
                    // What the link points to, along its canonical path. A link that
                    // dangles (`driver` of an unbound device) stays a link.
                    if depth < 8
                        && let Ok(resolved) = self.fs.canonicalize(prefix)
                    {
                        self.add(&resolved, depth + 1);
                    }
                }
                EntryKind::File if i + 1 == last => {
                    // Files whose read fails (EINVAL on empty GID slots, EACCES) stay
                    // absent, as in the fixtures.
                    // Discovery's own bytes when it read the file whole.
                    let bytes = match self.fs.recorded(prefix) {
                        Some(b) => Ok(b),
                        None => self.fs.read_bytes(prefix, MAX_FILE_BYTES),
                    };
                    if let Ok(bytes) = bytes {
                        self.entries.insert(real, MemEntry::File(bytes));
                    }
                }
                EntryKind::File => return,
                // Device nodes, FIFOs: empty regular files (the fixture convention).
                EntryKind::Other => {
                    self.entries.insert(real, MemEntry::File(Vec::new()));
                }
            }
        }
    }

    /// Keep every entry of `dir` without reading it: where a listing is the fact (which
    /// device nodes a container got under `/dev`, which functions a driver holds).
    fn add_listing(&mut self, dir: &str) {
        let Ok(names) = self.fs.list(dir) else { return };
        let Ok(real_dir) = self.fs.canonicalize(dir) else {
            return;
        };
        for name in names {
            let logical = join(dir, &name);
            let real = join(&real_dir, &name);
            if self.entries.contains_key(&real) {
                continue;
            }
            let entry = match self.fs.kind(&logical) {
                Ok(EntryKind::Dir) => MemEntry::Dir,
                Ok(EntryKind::Symlink) => match self.fs.read_link(&logical) {
                    Ok(t) => MemEntry::Symlink(t),
                    Err(_) => continue,
                },
                Ok(EntryKind::File | EntryKind::Other) => MemEntry::File(Vec::new()),
                Err(_) => continue,
            };
            self.entries.insert(real, entry);
        }
    }
}

impl Capture {
    /// Capture what discovery read through `fs` (opened with [`Sysfs::recording`]),
    /// and the NVML and verbs facts of `topo` that did not come from files.
    /// `/proc/self/environ` keeps only the variables discovery kept.
    pub fn from_journal(fs: &Sysfs, topo: &Topology) -> Self {
        let journal = fs.journal();
        let discovery_reads = fs.files_read();
        let mut w = Walker {
            fs,
            entries: BTreeMap::new(),
            seen: BTreeSet::new(),
        };
        for path in &journal {
            if path == "/proc/self/environ" {
                // Its directory only: the file is rebuilt below.
                w.add("/proc/self", 0);
                continue;
            }
            w.add(path, 0);
        }
        // Discovery takes a PCI function's class and ids from its `uevent` where that
        // tells them all; the attribute files ride along, so that the archive reads
        // the same where they are read instead (an earlier rdmatopo, a capture without
        // `uevent`).
        let before_identity = fs.files_read();
        for function in journal
            .iter()
            .filter_map(|p| p.strip_suffix("/uevent"))
            .filter(|dir| PciAddr::from_component(parent_and_name(dir).1).is_some())
        {
            for name in PCI_IDENTITY_FILES {
                w.add(&join(function, name), 0);
            }
        }
        let identity_reads = fs.files_read() - before_identity;
        for path in &journal {
            if (path == "/dev" || path.starts_with("/dev/"))
                && matches!(fs.kind(path), Ok(EntryKind::Dir))
            {
                w.add_listing(path);
            }
        }
        // Which functions the nvidia driver holds: a read that places only the GPUs
        // (topo, a container's partial read) takes them from this listing, which the whole
        // read does not make (it reads every function).
        if fs.exists(NVIDIA_DRIVER_DIR) {
            w.add(NVIDIA_DRIVER_DIR, 0);
            w.add_listing(NVIDIA_DRIVER_DIR);
        }
        // Which functions are Data Direct DMA functions: discovery pairs them from it.
        if fs.exists(DATA_DIRECT_DRIVER_DIR) {
            w.add(DATA_DIRECT_DRIVER_DIR, 0);
            w.add_listing(DATA_DIRECT_DRIVER_DIR);
        }
        let mut entries = w.entries;
        if journal.iter().any(|p| p == "/proc/self/environ") {
            // The whole environment may hold secrets; discovery kept only these.
            let mut env = Vec::new();
            for (k, v) in &topo.process.env {
                env.extend_from_slice(k.as_bytes());
                env.push(b'=');
                env.extend_from_slice(v.as_bytes());
                env.push(0);
            }
            let real = fs
                .canonicalize("/proc/self")
                .map(|d| join(&d, "environ"))
                .unwrap_or_else(|_| "/proc/self/environ".to_string());
            entries.insert(real, MemEntry::File(env));
        }
        for (path, facts) in [
            (
                NVML_SNAPSHOT_PATH,
                topo.nvml.as_ref().map(serde_json::to_vec_pretty),
            ),
            (
                VERBS_SNAPSHOT_PATH,
                topo.verbs.as_ref().map(serde_json::to_vec_pretty),
            ),
            (
                DEVICE_INDEX_SNAPSHOT_PATH,
                topo.device_index.as_ref().map(serde_json::to_vec_pretty),
            ),
        ] {
            if let Some(Ok(mut json)) = facts
                && !entries.contains_key(path)
            {
                json.push(b'\n');
                entries.insert(path.to_string(), MemEntry::File(json));
            }
        }
        let mut c = Self {
            entries,
            stats: Stats {
                discovery_reads,
                capture_reads: fs.files_read() - discovery_reads - identity_reads,
                identity_reads,
                journal_paths: journal.len(),
                ..Stats::default()
            },
        };
        c.count();
        c
    }

    fn count(&mut self) {
        let s = &mut self.stats;
        (s.files, s.symlinks, s.dirs, s.bytes) = (0, 0, 0, 0);
        for e in self.entries.values() {
            match e {
                MemEntry::File(b) => {
                    s.files += 1;
                    s.bytes += b.len() as u64;
                }
                MemEntry::Symlink(_) => s.symlinks += 1,
                MemEntry::Dir => s.dirs += 1,
                _ => {}
            }
        }
    }

    /// Replace GUIDs, MACs, UUIDs, IP addresses (also inside GIDs, IPoIB hardware
    /// addresses and IPv4-mapped GIDs) and the host name, consistently: one input
    /// value gets one replacement everywhere. PCIe Device Serial Numbers in `config`
    /// files are zeroed.
    pub fn scrub(&mut self) {
        scrub::scrub(&mut self.entries);
        self.count();
    }

    pub fn stats(&self) -> Stats {
        self.stats
    }

    /// Every entry, by canonical logical path.
    pub fn entries(&self) -> impl Iterator<Item = (&str, &MemEntry)> {
        self.entries.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// The capture as an in-memory tree (what [`load`] gives back).
    pub fn to_tree(&self) -> MemTree {
        let mut t = MemTree::new();
        for (p, e) in &self.entries {
            t.insert(p, e.clone());
        }
        t
    }

    /// The `.tar.gz` bytes: every entry under `options.top_dir`, in path order, with
    /// fixed owners and times so the same capture gives the same bytes.
    ///
    /// # Errors
    /// When the archive cannot be built (a path tar cannot hold).
    pub fn to_tar_gz(&self, options: &Options) -> Result<Vec<u8>, SnapshotError> {
        let err = |e: std::io::Error| SnapshotError::Io {
            path: options.top_dir.clone(),
            source: e,
        };
        let top = options.top_dir.trim_matches('/');
        let gz = flate2::GzBuilder::new().write(Vec::new(), flate2::Compression::default());
        let mut tar = tar::Builder::new(gz);
        tar.mode(tar::HeaderMode::Deterministic);
        let header = |kind: tar::EntryType, mode: u32, size: u64| {
            let mut h = tar::Header::new_gnu();
            h.set_entry_type(kind);
            h.set_mode(mode);
            h.set_size(size);
            h.set_mtime(0);
            h.set_uid(0);
            h.set_gid(0);
            h
        };
        let mut h = header(tar::EntryType::Directory, 0o755, 0);
        tar.append_data(&mut h, format!("{top}/"), std::io::empty())
            .map_err(err)?;
        for (path, entry) in &self.entries {
            let name = format!("{top}{path}");
            match entry {
                MemEntry::Dir => {
                    let mut h = header(tar::EntryType::Directory, 0o755, 0);
                    tar.append_data(&mut h, format!("{name}/"), std::io::empty())
                        .map_err(err)?;
                }
                MemEntry::File(bytes) => {
                    let mut h = header(tar::EntryType::Regular, 0o644, bytes.len() as u64);
                    tar.append_data(&mut h, &name, bytes.as_slice())
                        .map_err(err)?;
                }
                MemEntry::Symlink(target) => {
                    let mut h = header(tar::EntryType::Symlink, 0o777, 0);
                    tar.append_link(&mut h, &name, target).map_err(err)?;
                }
                _ => {}
            }
        }
        let gz = tar.into_inner().map_err(err)?;
        gz.finish().map_err(err)
    }
}

/// Whether `path` names an archive `--root` accepts (`.tar`, `.tar.gz`, `.tgz`).
pub fn is_archive(path: &Path) -> bool {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    name.ends_with(".tar") || name.ends_with(".tar.gz") || name.ends_with(".tgz")
}

/// Where an overlay archive keeps its manifest (below the archive's top directory).
pub const OVERLAY_MANIFEST: &str = "/rdmatopo/overlay.json";
/// The manifest's schema id.
pub const OVERLAY_SCHEMA: &str = "rdmatopo.overlay/1";
/// Most archives in one overlay chain (the overlay and every base below it).
pub const MAX_OVERLAY_DEPTH: usize = 8;

/// `rdmatopo/overlay.json`: an archive that holds only what differs from a base archive
/// (the test fixtures' pod and fault variants are stored so).
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct OverlayManifest {
    schema: String,
    /// The base archive, relative to the directory of the overlay archive.
    base: String,
    /// Paths of the base that the overlay removes; a directory stands for its subtree.
    #[serde(default)]
    removed: Vec<String>,
}

/// What is left of the size limits while a chain of archives is read.
#[derive(Debug)]
struct Budget {
    bytes: u64,
    entries: usize,
}

impl Default for Budget {
    fn default() -> Self {
        Self {
            bytes: MAX_UNPACKED_BYTES,
            entries: MAX_ENTRIES,
        }
    }
}

/// Read a snapshot archive into memory. Entries are kept relative to the archive's
/// single top directory when it holds the tree (`<top>/sys/…`), else to its root.
/// An overlay archive ([`OVERLAY_MANIFEST`]) is applied on its base archive, which is
/// read first (a chain of at most [`MAX_OVERLAY_DEPTH`] archives, the limits below
/// counted over all of them).
///
/// # Errors
/// When the file cannot be read, is not a tar (or gzip) archive, unpacks to more
/// than [`MAX_UNPACKED_BYTES`] or [`MAX_ENTRIES`], or names a path outside itself
/// (`..`, absolute paths); when an overlay's manifest is malformed or its base is
/// missing, not an archive, absolute, or loops back into the chain.
pub fn load(path: &Path) -> Result<MemTree, SnapshotError> {
    load_with_bases(path).map(|(tree, _)| tree)
}

/// As [`load`], with the archives it read: `path`, then each base below it (canonical
/// paths), for a copy of the tree that must know when any of them changes.
///
/// # Errors
/// As [`load`].
pub fn load_with_bases(path: &Path) -> Result<(MemTree, Vec<PathBuf>), SnapshotError> {
    let mut chain = Vec::new();
    let tree = load_chain(path, &mut chain, &mut Budget::default())?;
    Ok((tree, chain))
}

fn load_chain(
    path: &Path,
    chain: &mut Vec<PathBuf>,
    budget: &mut Budget,
) -> Result<MemTree, SnapshotError> {
    let label = path.display().to_string();
    let io = |e: std::io::Error| SnapshotError::Io {
        path: label.clone(),
        source: e,
    };
    let not_a_snapshot = |reason: String| SnapshotError::NotASnapshot {
        path: label.clone(),
        reason,
    };
    let canonical = std::fs::canonicalize(path).map_err(io)?;
    if chain.contains(&canonical) {
        return Err(not_a_snapshot("its overlay chain comes back to it".into()));
    }
    if chain.len() >= MAX_OVERLAY_DEPTH {
        return Err(not_a_snapshot(format!(
            "overlay chain longer than {MAX_OVERLAY_DEPTH} archives"
        )));
    }
    chain.push(canonical);
    let file = std::fs::File::open(path).map_err(io)?;
    let name = path.to_string_lossy().to_ascii_lowercase();
    let reader: Box<dyn Read> = if name.ends_with(".gz") || name.ends_with(".tgz") {
        Box::new(flate2::read::GzDecoder::new(std::io::BufReader::new(file)))
    } else {
        Box::new(std::io::BufReader::new(file))
    };
    let (manifest, tree) = read_tree(reader, &label, budget)?;
    let Some(manifest) = manifest else {
        return Ok(tree);
    };
    let manifest: OverlayManifest = serde_json::from_slice(&manifest)
        .map_err(|e| not_a_snapshot(format!("{OVERLAY_MANIFEST}: {e}")))?;
    if manifest.schema != OVERLAY_SCHEMA {
        return Err(not_a_snapshot(format!(
            "{OVERLAY_MANIFEST}: schema {:?}, expected {OVERLAY_SCHEMA:?}",
            manifest.schema
        )));
    }
    let base = Path::new(&manifest.base);
    if base.is_absolute() || !is_archive(base) {
        return Err(not_a_snapshot(format!(
            "{OVERLAY_MANIFEST}: base {:?} is not a relative path to an archive",
            manifest.base
        )));
    }
    let dir = path.parent().unwrap_or(Path::new(""));
    let mut whole = load_chain(&dir.join(base), chain, budget)?;
    for gone in &manifest.removed {
        whole.remove(gone);
    }
    for (p, e) in tree.entries() {
        if p != "/" {
            whole.insert(p, e.clone());
        }
    }
    Ok(whole)
}

/// [`load`] from any reader of an uncompressed tar stream (`label` names it in errors).
///
/// # Errors
/// As [`load`]; an overlay archive is refused (nothing names the directory its base
/// is relative to).
pub fn load_reader(reader: impl Read, label: &str) -> Result<MemTree, SnapshotError> {
    match read_tree(reader, label, &mut Budget::default())? {
        (None, tree) => Ok(tree),
        (Some(_), _) => Err(SnapshotError::NotASnapshot {
            path: label.to_string(),
            reason: format!("an overlay ({OVERLAY_MANIFEST}): read it from its file"),
        }),
    }
}

/// One archive's tree, with its overlay manifest taken out when it has one.
fn read_tree(
    reader: impl Read,
    label: &str,
    budget: &mut Budget,
) -> Result<(Option<Vec<u8>>, MemTree), SnapshotError> {
    let items = read_items(reader, label, budget)?;
    let top = top_dir(&items).ok_or_else(|| SnapshotError::NotASnapshot {
        path: label.to_string(),
        reason: "no sys/ directory at its root or in its single top directory".into(),
    })?;
    let mut entries = Vec::with_capacity(items.len());
    let mut manifest = None;
    let manifest_dir = OVERLAY_MANIFEST.rsplit_once('/').map(|(dir, _)| dir);
    for (mut p, e) in items {
        if !p.strip_prefix(&top).is_some_and(|r| r.starts_with('/')) {
            continue;
        }
        p.drain(..top.len());
        match e {
            MemEntry::File(bytes) if p == OVERLAY_MANIFEST => manifest = Some(bytes),
            // The manifest's directory is the archive's, not the machine's: it stays
            // only where something else is under it.
            MemEntry::Dir if Some(p.as_str()) == manifest_dir => {}
            MemEntry::Dir | MemEntry::Symlink(_) | MemEntry::Other if p == OVERLAY_MANIFEST => {
                return Err(SnapshotError::NotASnapshot {
                    path: label.to_string(),
                    reason: format!("{OVERLAY_MANIFEST} is not a file"),
                });
            }
            e => entries.push((p, e)),
        }
    }
    Ok((manifest, MemTree::from_normalized(entries)))
}

/// A stream read forward only, which seeks forward by reading. tar skips the padding and
/// the unread bytes after each entry by seeking; on a plain reader it zeroes a 32 KiB
/// buffer for every skip instead, most of the time a large archive takes to read.
struct Forward<R> {
    inner: R,
    pos: u64,
}

impl<R: Read> Read for Forward<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.pos += n as u64;
        Ok(n)
    }
}

impl<R: Read> Seek for Forward<R> {
    fn seek(&mut self, to: SeekFrom) -> std::io::Result<u64> {
        let SeekFrom::Current(ahead @ 0..) = to else {
            return Err(std::io::Error::new(
                std::io::ErrorKind::Unsupported,
                "a snapshot is read forward only",
            ));
        };
        let ahead = ahead as u64;
        let skipped = std::io::copy(&mut (&mut self.inner).take(ahead), &mut std::io::sink())?;
        self.pos += skipped;
        if skipped < ahead {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        Ok(self.pos)
    }
}

/// Every entry of an uncompressed tar stream, paths cleaned (`/a/b`).
fn read_items(
    reader: impl Read,
    label: &str,
    budget: &mut Budget,
) -> Result<Vec<(String, MemEntry)>, SnapshotError> {
    // Headers take 512 bytes per entry on top of the contents.
    let stream_limit = budget.bytes + (budget.entries as u64) * 1024;
    let mut archive = tar::Archive::new(Forward {
        inner: reader.take(stream_limit),
        pos: 0,
    });
    // An error the system did not give (a stream that ends early, a header that does
    // not decode) is the archive's fault, not the disk's; its message may quote the
    // archive's bytes, so it is shortened and escaped, as a parse error quotes its input.
    let io = |e: std::io::Error| match e.raw_os_error() {
        Some(_) => SnapshotError::Io {
            path: label.to_string(),
            source: e,
        },
        None => SnapshotError::NotASnapshot {
            path: label.to_string(),
            reason: format!(
                "truncated, or not a tar archive ({})",
                e.to_string()
                    .chars()
                    .take(120)
                    .collect::<String>()
                    .escape_debug()
            ),
        },
    };
    let too_large = || SnapshotError::TooLarge {
        path: label.to_string(),
        limit: MAX_UNPACKED_BYTES,
    };
    let mut items: Vec<(String, MemEntry)> = Vec::new();
    let result = (|| -> Result<(), SnapshotError> {
        for entry in archive.entries_with_seek().map_err(io)? {
            let mut entry = entry.map_err(io)?;
            if budget.entries == 0 {
                return Err(SnapshotError::TooManyEntries {
                    path: label.to_string(),
                    limit: MAX_ENTRIES,
                });
            }
            budget.entries -= 1;
            let bytes = entry.path_bytes();
            let raw = String::from_utf8_lossy(&bytes);
            let unsafe_entry = |reason| SnapshotError::UnsafeEntry {
                path: label.to_string(),
                entry: raw.to_string(),
                reason,
            };
            // `/a/b`: no empty or `.` component; `..` and absolute paths refused.
            if raw.starts_with('/') {
                return Err(unsafe_entry("is an absolute path"));
            }
            let mut clean = String::with_capacity(raw.len() + 1);
            for part in raw.split('/') {
                match part {
                    "" | "." => {}
                    ".." => return Err(unsafe_entry("contains `..`")),
                    name => {
                        clean.push('/');
                        clean.push_str(name);
                    }
                }
            }
            if clean.is_empty() {
                continue;
            }
            let size = entry.header().size().map_err(io)?;
            if size > budget.bytes || size > MAX_FILE_BYTES as u64 {
                return Err(too_large());
            }
            budget.bytes -= size;
            let kind = entry.header().entry_type();
            let item = match kind {
                tar::EntryType::Directory => MemEntry::Dir,
                tar::EntryType::Regular | tar::EntryType::Continuous => {
                    let mut buf = Vec::with_capacity(size as usize);
                    entry.read_to_end(&mut buf).map_err(io)?;
                    MemEntry::File(buf)
                }
                tar::EntryType::Symlink => {
                    let target = entry
                        .link_name()
                        .map_err(io)?
                        .ok_or_else(|| unsafe_entry("is a symlink without a target"))?;
                    MemEntry::Symlink(target.to_string_lossy().into_owned())
                }
                tar::EntryType::Link => {
                    // A hard link: the same bytes as an earlier file.
                    let target = entry
                        .link_name()
                        .map_err(io)?
                        .ok_or_else(|| unsafe_entry("is a hard link without a target"))?;
                    let target = format!("/{}", target.to_string_lossy().trim_start_matches('/'));
                    match items.iter().rev().find(|(p, _)| *p == target) {
                        Some((_, e @ MemEntry::File(_))) => e.clone(),
                        _ => return Err(unsafe_entry("is a hard link to no earlier file")),
                    }
                }
                tar::EntryType::Char | tar::EntryType::Block | tar::EntryType::Fifo => {
                    MemEntry::Other
                }
                // pax/GNU metadata entries are consumed by the tar reader.
                _ => continue,
            };
            items.push((clean, item));
        }
        Ok(())
    })();
    if let Err(e) = result {
        // Running out of the stream budget shows up as a truncated archive.
        if archive.into_inner().inner.limit() == 0 {
            return Err(too_large());
        }
        return Err(e);
    }
    Ok(items)
}

/// The directory that holds the tree (`sys/`, or an overlay's manifest): the archive
/// root, or its single top directory.
fn top_dir(items: &[(String, MemEntry)]) -> Option<String> {
    let holds_tree = |top: &str| {
        items.iter().any(|(p, _)| {
            p.strip_prefix(top).is_some_and(|r| {
                r == OVERLAY_MANIFEST
                    || r.strip_prefix("/sys").is_some_and(|r| r.is_empty() || r.starts_with('/'))
            })
        })
    };
    if holds_tree("") {
        return Some(String::new());
    }
    fn top_of(path: &str) -> Option<&str> {
        path.split('/').nth(1)
    }
    let one = top_of(&items.first()?.0)?;
    let top = format!("/{one}");
    (items.iter().all(|(p, _)| top_of(p) == Some(one)) && holds_tree(&top)).then_some(top)
}

/// Write `bytes` to `path` (create or replace).
///
/// # Errors
/// When the file cannot be written.
pub fn write_file(path: &Path, bytes: &[u8]) -> Result<(), SnapshotError> {
    let mut f = std::fs::File::create(path).map_err(|e| SnapshotError::Io {
        path: path.display().to_string(),
        source: e,
    })?;
    f.write_all(bytes).map_err(|e| SnapshotError::Io {
        path: path.display().to_string(),
        source: e,
    })
}

#[cfg(test)]
mod tests;
