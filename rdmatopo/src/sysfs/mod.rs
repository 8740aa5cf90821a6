//! The only layer that touches the filesystem.
//!
//! Every read names an absolute *logical* Linux path (`/sys/class/infiniband`) and is
//! served under one root directory, like hwloc's `HWLOC_FSROOT`. Symlinks are resolved
//! here, component by component, so a link can never leave the root: `..` stops at the
//! root and absolute link targets are re-rooted. Where the kernel checks every read
//! itself (`openat2` refusing symlinks and steps out of the root), the directories a
//! link's target names are taken on trust, as sysfs writes them, and checked by the
//! first read beneath them; any other use checks them first, and one that proves false
//! makes every later step checked. Reads are bounded in size, and errors carry the
//! logical path so that diagnostics read the same on every machine.

mod backend;
mod mem;

pub use backend::{Backend, DirBackend, EntryKind};
pub use mem::{MemEntry, MemTree};

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use std::borrow::Cow;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;
use std::sync::{Arc, Mutex};

/// Largest attribute file read whole. sysfs attributes are at most one page; procfs
/// files we read whole (`status`, `limits`) are a few KiB.
pub const MAX_ATTR_BYTES: usize = 64 * 1024;
/// Most symlinks followed while resolving one path (the kernel's own limit is 40).
pub const MAX_SYMLINKS: usize = 40;
/// Most entries taken from one directory listing.
pub const MAX_DIR_ENTRIES: usize = 1 << 16;
/// A directory entry: its name and, where the listing says, its kind.
type Entry = (String, Option<EntryKind>);
/// Most times one operation starts over after a link target named a symlink as a
/// directory (each time, everything taken on trust is forgotten).
const MAX_RETRACTIONS: usize = 3;

/// A failed read, named by its logical path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SysfsError {
    #[error("{path}: not found")]
    NotFound { path: String },
    #[error("{path}: permission denied")]
    PermissionDenied { path: String },
    #[error("{path}: too many levels of symbolic links")]
    SymlinkLoop { path: String },
    #[error("{path}: larger than {limit} bytes")]
    TooLarge { path: String, limit: usize },
    #[error("{path}: not a regular file")]
    NotAFile { path: String },
    #[error("{path}: not a directory")]
    NotADirectory { path: String },
    #[error("{path}: {message}")]
    Io {
        path: String,
        message: String,
        os_code: Option<i32>,
    },
}

impl SysfsError {
    /// The logical path the error is about.
    pub fn path(&self) -> &str {
        match self {
            Self::NotFound { path }
            | Self::PermissionDenied { path }
            | Self::SymlinkLoop { path }
            | Self::TooLarge { path, .. }
            | Self::NotAFile { path }
            | Self::NotADirectory { path }
            | Self::Io { path, .. } => path,
        }
    }

    /// True for "the file is not there", which callers usually treat as optional.
    pub fn is_not_found(&self) -> bool {
        matches!(self, Self::NotFound { .. })
    }

    fn from_io(path: &str, err: io::Error) -> Self {
        let path = path.to_string();
        match err.kind() {
            io::ErrorKind::NotFound => Self::NotFound { path },
            io::ErrorKind::PermissionDenied => Self::PermissionDenied { path },
            _ if err.raw_os_error() == Some(libc::ELOOP) => Self::SymlinkLoop { path },
            _ if err.raw_os_error() == Some(libc::ENOTDIR) => Self::NotADirectory { path },
            _ => Self::Io {
                path,
                os_code: err.raw_os_error(),
                message: err.to_string(),
            },
        }
    }
}

/// A root directory holding `sys`, `proc` and `dev`, and everything read from it.
///
/// Resolved directories are cached, so reading many attributes of one device costs
/// one `lstat` per path component once (none for those a link's target names, where
/// reads are kernel-checked), then one `open` per file.
pub struct Sysfs {
    backend: Box<dyn Backend>,
    label: String,
    live: bool,
    /// Logical path → canonical path, for directories (a canonical one maps to itself).
    resolved: Mutex<HashMap<String, Arc<str>>>,
    /// Canonical paths that a directory listing showed to be symlinks: resolution
    /// reads their target without an `lstat` first.
    known_links: Mutex<HashSet<String>>,
    /// Canonical directories taken from link targets without an `lstat` each, not yet
    /// proved by a read beneath them or a check ([`Sysfs::resolve_for_reads`]).
    unchecked: Mutex<HashSet<Arc<str>>>,
    /// Set once a link target named a symlink as a directory: nothing is taken on trust
    /// from then on.
    careful: std::sync::atomic::AtomicBool,
    reads: std::sync::atomic::AtomicUsize,
    /// When recording, every logical path looked at (for `snapshot`).
    journal: Option<Mutex<std::collections::BTreeSet<String>>>,
    /// When recording, the bytes of every file read whole, by logical path, so the
    /// capture does not read them again.
    kept: Option<Mutex<HashMap<String, Vec<u8>>>>,
}

impl std::fmt::Debug for Sysfs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sysfs")
            .field("root", &self.label)
            .field("live", &self.live)
            .finish()
    }
}

impl Sysfs {
    /// The live system (`/`).
    pub fn live() -> Self {
        Self::with_backend(Box::new(DirBackend::new("/")), "/".into(), true)
    }

    /// A directory holding a captured tree (`DIR/sys`, `DIR/proc`, `DIR/dev`). `/` is live.
    pub fn at(dir: impl AsRef<Path>) -> Self {
        let dir = dir.as_ref();
        let live = dir == Path::new("/");
        Self::with_backend(
            Box::new(DirBackend::new(dir)),
            dir.display().to_string(),
            live,
        )
    }

    /// An in-memory tree (tests, fuzzing, snapshot tarballs).
    pub fn memory(tree: MemTree, label: impl Into<String>) -> Self {
        Self::with_backend(Box::new(tree), label.into(), false)
    }

    fn with_backend(backend: Box<dyn Backend>, label: String, live: bool) -> Self {
        Self {
            backend,
            label,
            live,
            resolved: Mutex::new(HashMap::default()),
            known_links: Mutex::new(HashSet::default()),
            unchecked: Mutex::new(HashSet::default()),
            careful: std::sync::atomic::AtomicBool::new(false),
            reads: std::sync::atomic::AtomicUsize::new(0),
            journal: None,
            kept: None,
        }
    }

    /// Remember every logical path that is read, listed or resolved from now on, so a
    /// snapshot can capture exactly what discovery needed.
    pub fn recording(mut self) -> Self {
        self.journal = Some(Mutex::new(std::collections::BTreeSet::new()));
        self.kept = Some(Mutex::new(HashMap::default()));
        self
    }

    /// The bytes of `path` as a read since [`Sysfs::recording`] got them whole, if one did.
    pub fn recorded(&self, path: &str) -> Option<Vec<u8>> {
        self.kept
            .as_ref()?
            .lock()
            .ok()?
            .get(&normalize(path))
            .cloned()
    }

    /// The logical paths touched since [`Sysfs::recording`] (sorted).
    pub fn journal(&self) -> Vec<String> {
        self.journal
            .as_ref()
            .and_then(|j| j.lock().ok())
            .map(|j| j.iter().cloned().collect())
            .unwrap_or_default()
    }

    fn note(&self, path: &str) {
        if let Some(j) = &self.journal
            && let Ok(mut j) = j.lock()
        {
            j.insert(normalize(path));
        }
    }

    /// What the root was given as (a directory, or a tarball's name).
    pub fn label(&self) -> &str {
        &self.label
    }

    /// True when this is the running system, where actions (binding CPUs) make sense.
    pub fn is_live(&self) -> bool {
        self.live
    }

    /// Number of files read so far (for benchmarks).
    pub fn files_read(&self) -> usize {
        self.reads.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Resolve every symlink in `path` inside the root; the result names no symlink.
    pub fn canonicalize(&self, path: &str) -> Result<String, SysfsError> {
        self.note(path);
        self.checked(path)
    }

    /// Resolve `path` for reading files beneath it: like [`Sysfs::canonicalize`], but
    /// where the backend's reads refuse symlinks themselves, the directories a link's
    /// target names are taken as the kernel wrote them, without an `lstat` each (sysfs
    /// link targets name canonical directories). A read beneath the result is checked
    /// as it happens; anything else done under it checks it first.
    pub fn resolve_for_reads(&self, path: &str) -> Result<String, SysfsError> {
        self.note(path);
        self.resolve(path, true)
    }

    /// [`Sysfs::resolve`] with the result checked before the backend is asked about it
    /// (a listing, `readlink` and `lstat` follow symlinks in the directories they name).
    fn checked(&self, path: &str) -> Result<String, SysfsError> {
        for _ in 0..MAX_RETRACTIONS {
            let real = self.resolve(path, true)?;
            if !self.is_unchecked(&real) || self.check(&real) {
                return Ok(real);
            }
            self.distrust();
        }
        // Other threads kept handing out what was taken on trust: refuse rather than
        // let the backend follow a symlink.
        Err(SysfsError::SymlinkLoop {
            path: path.to_string(),
        })
    }

    /// [`Sysfs::checked`] for the directories of `path` but not its last component.
    fn checked_parent(&self, path: &str) -> Result<String, SysfsError> {
        let (dir, name) = split_last(path);
        if matches!(name, "" | "." | "..") {
            // No final name to leave alone; joining `..` would step above the root.
            return self.checked(path);
        }
        Ok(join(&self.checked(dir)?, name))
    }

    /// Resolve the directories of `path` but not its last component. A path in a
    /// directory known to be canonical is its own answer (no copy): discovery reads
    /// most attributes by the canonical paths it resolved.
    fn resolve_parent<'p>(&self, path: &'p str) -> Result<Cow<'p, str>, SysfsError> {
        let (dir, name) = split_last(path);
        if matches!(name, "" | "." | "..") {
            return self.resolve(path, true).map(Cow::Owned);
        }
        // As `resolve` starts: a cached directory is its answer.
        if path.len() == dir.len() + 1 + name.len()
            && let Some(real) = self.cache_join(path, dir, name)
        {
            return Ok(real);
        }
        let dir = self.resolve(dir, true)?;
        Ok(Cow::Owned(join(&dir, name)))
    }

    fn resolve(&self, path: &str, follow_last: bool) -> Result<String, SysfsError> {
        for _ in 0..MAX_RETRACTIONS {
            if let Some(real) = self.resolve_once(path, follow_last)? {
                return Ok(real);
            }
            self.distrust();
        }
        Err(SysfsError::SymlinkLoop {
            path: path.to_string(),
        })
    }

    /// One resolution of `path`; `None` when a directory taken from a link target
    /// turned out not to be one.
    fn resolve_once(&self, path: &str, follow_last: bool) -> Result<Option<String>, SysfsError> {
        let normalized = normalized(path);
        if let Some(hit) = self.cache_get(&normalized) {
            return Ok(Some(hit));
        }
        let trust_links = self.backend.reads_check_paths()
            && !self.careful.load(std::sync::atomic::Ordering::Relaxed);
        // `done` is the canonical path resolved so far, `""` for the root. Attributes
        // of one directory are read in a row: start from the directory's resolution
        // when it is known, instead of walking (and re-reading links) from `/`.
        // Components still to walk, the next one last: byte ranges of the path (`None`)
        // or of a link target read on the way (`Some(i)`: `targets[i]`).
        let mut targets: Vec<String> = Vec::new();
        let mut pending: Vec<(Option<usize>, usize, usize)> = Vec::new();
        let (dir, name) = split_last(&normalized);
        let mut done = match self.cache_get(dir) {
            Some(real) if !matches!(name, "" | "." | "..") => {
                pending.push((None, normalized.len() - name.len(), normalized.len()));
                below_root(real)
            }
            _ => {
                push_components(&mut pending, None, &normalized);
                String::new()
            }
        };
        // Whether what `done` names is a directory (`/` is), and whether it was taken
        // from a link target without being checked.
        let mut is_dir = true;
        let mut unchecked = self.is_unchecked(&done);
        if trust_links
            && follow_last
            && !unchecked
            && pending.len() == 1
            && done == dir
            && self.is_known_link(&normalized)
            && let Some((mut real, trusted)) = self.follow_plain_link(&normalized, &done)?
        {
            if real.is_empty() {
                real.push('/');
            }
            self.cache_remember(normalized, &real, trusted);
            return Ok(Some(real));
        }
        let mut hops = 0;
        while let Some((source, start, end)) = pending.pop() {
            let comp = match source {
                None => &normalized[start..end],
                Some(i) => &targets[i][start..end],
            };
            match comp {
                "" | "." => continue,
                ".." => {
                    // `..` after a symlink leaves the link's target, not its directory:
                    // what was taken on trust is checked before stepping back.
                    if unchecked && !self.check(&done) {
                        return Ok(None);
                    }
                    unchecked = false;
                    // At the root, `..` stays there.
                    done.truncate(done.rfind('/').unwrap_or(0));
                    is_dir = true;
                    continue;
                }
                _ => {}
            }
            if pending.is_empty() && !follow_last {
                done.push('/');
                done.push_str(comp);
                break;
            }
            if source.is_some() && trust_links {
                // A directory the kernel named in a link target (checked on use).
                done.push('/');
                done.push_str(comp);
                is_dir = true;
                unchecked = true;
                continue;
            }
            let candidate = join_slash(&done, comp);
            if let Some(hit) = self.cache_get(&candidate) {
                unchecked = self.is_unchecked(&hit);
                done = below_root(hit);
                is_dir = true;
                continue;
            }
            // `lstat` and `readlink` follow symlinks in the directories they name.
            if unchecked && !self.check(&done) {
                return Ok(None);
            }
            unchecked = false;
            // A name in a directory whose entries the kernel makes links is read as a
            // link straight away: `readlink` says whether it is one, and saves an `lstat`.
            let mut target = None;
            let kind = if self.is_known_link(&candidate) {
                EntryKind::Symlink
            } else if names_links(&done) {
                match self.backend.read_link(&candidate) {
                    Ok(read) => {
                        target = Some(read);
                        EntryKind::Symlink
                    }
                    // Not a link (a capture that copied the directory): asked as any name.
                    Err(e) if e.raw_os_error() == Some(libc::EINVAL) => self
                        .backend
                        .kind(&candidate)
                        .map_err(|e| SysfsError::from_io(&candidate, e))?,
                    Err(e) => return Err(SysfsError::from_io(&candidate, e)),
                }
            } else {
                self.backend
                    .kind(&candidate)
                    .map_err(|e| SysfsError::from_io(&candidate, e))?
            };
            if kind != EntryKind::Symlink {
                is_dir = kind == EntryKind::Dir;
                if is_dir {
                    self.cache_remember(Cow::Borrowed(&candidate), &candidate, false);
                }
                done = candidate;
                continue;
            }
            hops += 1;
            if hops > MAX_SYMLINKS {
                return Err(SysfsError::SymlinkLoop {
                    path: path.to_string(),
                });
            }
            let target = match target {
                Some(read) => read,
                None => self
                    .backend
                    .read_link(&candidate)
                    .map_err(|e| SysfsError::from_io(&candidate, e))?,
            };
            if target.starts_with('/') {
                done.clear();
            }
            is_dir = true; // a link with an empty target names the directory it is in
            push_components(&mut pending, Some(targets.len()), &target);
            targets.push(target);
        }
        if done.is_empty() {
            done.push('/');
        }
        if follow_last && is_dir {
            self.cache_remember(normalized, &done, unchecked);
        }
        Ok(Some(done))
    }

    /// Remember that the directory `logical` is `real`, and `real` itself (canonical).
    /// Only directories are remembered: each file is read once, and a cache of every
    /// attribute path would grow with the tree. `unchecked`: `real` was taken from a
    /// link target on trust.
    #[inline(never)] // see `cache_get`
    fn cache_remember(&self, logical: Cow<'_, str>, real: &str, unchecked: bool) {
        let real: Arc<str> = Arc::from(real);
        if unchecked && let Ok(mut set) = self.unchecked.lock() {
            set.insert(Arc::clone(&real));
        }
        if let Ok(mut map) = self.resolved.lock() {
            // Reads beneath it name it canonically from now on.
            if !map.contains_key(&*real) {
                map.insert(real.to_string(), Arc::clone(&real));
            }
            if *logical != *real {
                map.insert(logical.into_owned(), real);
            }
        }
    }

    /// The usual link, resolved in one pass: a name in a listed directory
    /// (`/sys/bus/pci/devices/0000:3b:00.0`) whose target is `..`s and then names the
    /// kernel wrote (`../../../devices/pci0000:3a/...`), taken on trust, with whether
    /// it names any (else it is a checked directory above `dir`). `None` for any other
    /// target (absolute, or `..` after a name): the caller walks it.
    fn follow_plain_link(
        &self,
        link: &str,
        dir: &str,
    ) -> Result<Option<(String, bool)>, SysfsError> {
        let target = self
            .backend
            .read_link(link)
            .map_err(|e| SysfsError::from_io(link, e))?;
        if target.starts_with('/') {
            return Ok(None);
        }
        let mut real = String::with_capacity(dir.len() + target.len() + 1);
        real.push_str(dir);
        let mut named = false;
        for comp in target.split('/') {
            match comp {
                "" | "." => {}
                ".." if named => return Ok(None),
                // At the root, `..` stays there.
                ".." => real.truncate(real.rfind('/').unwrap_or(0)),
                name => {
                    named = true;
                    real.push('/');
                    real.push_str(name);
                }
            }
        }
        Ok(Some((real, named)))
    }

    /// `path` (`dir/name`) through the cached resolution of the directory `dir`: itself
    /// when `dir` is canonical, `None` when `dir` is not cached. One lookup for the
    /// attribute of a device named through a link (a port's GID slots under
    /// `/sys/class/infiniband/<dev>`), not a walk.
    #[inline(never)] // see `cache_get`
    fn cache_join<'p>(&self, path: &'p str, dir: &str, name: &str) -> Option<Cow<'p, str>> {
        let cache = self.resolved.lock().ok()?;
        let real = cache.get(dir)?;
        Some(if **real == *dir {
            Cow::Borrowed(path)
        } else {
            Cow::Owned(join(real, name))
        })
    }

    /// Whether `real`, or a directory above it, was taken from a link target and not
    /// checked yet.
    #[inline(never)] // see `cache_get`
    fn is_unchecked(&self, real: &str) -> bool {
        let Ok(set) = self.unchecked.lock() else {
            return true;
        };
        !set.is_empty() && prefixes(real).any(|p| set.contains(p))
    }

    /// Ask the backend to check `real` ([`Backend::check_path`]); `false` when it is not
    /// what its link target said (or the backend cannot tell). A resolution that checks
    /// every step then says precisely what is wrong (a missing directory, a loop).
    fn check(&self, real: &str) -> bool {
        let ok = matches!(self.backend.check_path(real), Some(Ok(true)));
        if ok {
            self.proven(real);
        }
        ok
    }

    /// `dir` and every directory above it are real directories inside the root (a
    /// read beneath it, or a check, succeeded).
    #[inline(never)] // see `cache_get`
    fn proven(&self, dir: &str) {
        if let Ok(mut set) = self.unchecked.lock()
            && !set.is_empty()
        {
            for p in prefixes(dir) {
                set.remove(p);
            }
        }
    }

    /// A link target named a symlink or a file as a directory: forget everything taken
    /// on trust and check every step from now on.
    #[inline(never)] // see `cache_get`
    fn distrust(&self) {
        self.careful
            .store(true, std::sync::atomic::Ordering::Relaxed);
        if let (Ok(mut resolved), Ok(mut unchecked)) = (self.resolved.lock(), self.unchecked.lock())
        {
            resolved.clear();
            unchecked.clear();
        }
    }

    #[inline(never)] // see `cache_get`
    fn is_known_link(&self, path: &str) -> bool {
        self.known_links
            .lock()
            .is_ok_and(|links| links.contains(path))
    }

    // The functions that touch the Mutex-guarded caches are never inlined: helgrind
    // cannot see std's futex-based locks, and its suppressions
    // (`rdmatopo-c/tests/helgrind.supp`) name these functions.
    #[inline(never)]
    fn cache_get(&self, key: &str) -> Option<String> {
        Some(self.resolved.lock().ok()?.get(key)?.to_string())
    }

    /// Read a whole attribute file as text (at most [`MAX_ATTR_BYTES`]).
    pub fn read(&self, path: &str) -> Result<String, SysfsError> {
        self.read_with(path, str::to_owned)
    }

    /// Read a whole attribute file (at most [`MAX_ATTR_BYTES`]) and hand its text to
    /// `f`. The bytes land in a buffer that every read on this thread reuses, so an
    /// attribute that is parsed and dropped costs no allocation.
    pub fn read_with<R>(&self, path: &str, f: impl FnOnce(&str) -> R) -> Result<R, SysfsError> {
        // Taken out, not borrowed: `f` may read another file.
        let mut buf = READ_BUFFER.take();
        let result = self
            .read_limited(path, MAX_ATTR_BYTES, &mut buf)
            .map(|()| with_text(&buf, f));
        READ_BUFFER.set(buf);
        result
    }

    /// The files of the directory `dir`, to be read by name ([`DirFiles::read_with`]).
    pub fn dir_files(&self, dir: &str) -> DirFiles<'_> {
        let open = self.resolve(dir, true).ok().and_then(|real| {
            let fd = self.backend.open_dir(&real)?;
            // Opened beneath the root with no symlink on the way.
            self.proven(&real);
            Some(fd)
        });
        DirFiles {
            fs: self,
            dir: dir.to_string(),
            open,
        }
    }

    /// Read a whole file as bytes, failing when it is larger than `limit`.
    pub fn read_bytes(&self, path: &str, limit: usize) -> Result<Vec<u8>, SysfsError> {
        let mut bytes = Vec::new();
        self.read_limited(path, limit, &mut bytes)?;
        Ok(bytes)
    }

    /// A whole file in place of `buf`'s contents, failing when it is larger than `limit`.
    fn read_limited(&self, path: &str, limit: usize, buf: &mut Vec<u8>) -> Result<(), SysfsError> {
        self.read_file(path, limit + 1, buf)?;
        self.finish_read(path, limit, buf)
    }

    /// A file read whole into `buf` (at most `limit` bytes), kept when recording.
    fn finish_read(&self, path: &str, limit: usize, buf: &[u8]) -> Result<(), SysfsError> {
        if buf.len() > limit {
            return Err(SysfsError::TooLarge {
                path: path.to_string(),
                limit,
            });
        }
        if let Some(kept) = &self.kept
            && let Ok(mut kept) = kept.lock()
        {
            kept.insert(normalize(path), buf.to_vec());
        }
        Ok(())
    }

    /// Read the first `limit` bytes of a file that may be longer (`/proc/cpuinfo`).
    pub fn read_prefix(&self, path: &str, limit: usize) -> Result<String, SysfsError> {
        let mut bytes = Vec::new();
        self.read_file(path, limit, &mut bytes)?;
        Ok(String::from_utf8(bytes)
            .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()))
    }

    /// At most `limit` bytes of the file at `path`, in place of `buf`'s contents. The
    /// directory resolves through the cache and the name is opened without following a
    /// final symlink (`O_NOFOLLOW`): one `openat` per attribute, no `lstat` first. A
    /// name that is a symlink (ELOOP) is resolved inside the root and read there.
    fn read_file(&self, path: &str, limit: usize, buf: &mut Vec<u8>) -> Result<(), SysfsError> {
        self.note(path);
        self.reads
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut follow_last = false;
        let mut result = Err(io::Error::from_raw_os_error(libc::ELOOP));
        for _ in 0..MAX_RETRACTIONS + 2 {
            let real = if follow_last {
                Cow::Owned(self.resolve(path, true)?)
            } else {
                self.resolve_parent(path)?
            };
            let dir = split_last(&real).0;
            result = self.backend.read_file(&real, limit, buf);
            let refused = result
                .as_ref()
                .is_err_and(|e| matches!(e.raw_os_error(), Some(libc::ELOOP | libc::EXDEV)));
            if !refused {
                if result.is_ok() && self.backend.reads_check_paths() {
                    self.proven(dir);
                }
                break;
            }
            // A symlink where a link's target, taken on trust, said a directory (or,
            // once the name is followed, a file) is: check every step from now on.
            let suspect = if follow_last { &*real } else { dir };
            if self.is_unchecked(suspect) && !self.check(suspect) {
                self.distrust();
                continue;
            }
            if follow_last {
                break;
            }
            follow_last = true;
        }
        result.map_err(|e| read_error(path, e))
    }

    /// Read an attribute, `None` when it does not exist.
    pub fn read_opt(&self, path: &str) -> Result<Option<String>, SysfsError> {
        match self.read(path) {
            Ok(s) => Ok(Some(s)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The target text of a symlink, as stored (not resolved).
    pub fn read_link(&self, path: &str) -> Result<String, SysfsError> {
        self.note(path);
        let real = self.checked_parent(path)?;
        self.backend
            .read_link(&real)
            .map_err(|e| SysfsError::from_io(path, e))
    }

    /// The last component of a symlink's target (`driver` → `mlx5_core`).
    pub fn link_name(&self, path: &str) -> Result<String, SysfsError> {
        let target = self.read_link(path)?;
        Ok(target
            .trim_end_matches('/')
            .rsplit('/')
            .next()
            .unwrap_or_default()
            .to_string())
    }

    /// Sorted names in a directory (following symlinks to it).
    pub fn list(&self, path: &str) -> Result<Vec<String>, SysfsError> {
        let (real, entries) = self.entries(path)?;
        // What the listing says about each entry saves an `lstat` when it is resolved
        // (a device's directory, or a `/sys/bus/pci/devices/*` link): directories are
        // resolved already, links go straight to `readlink`.
        if let (Ok(mut dirs), Ok(mut links)) = (self.resolved.lock(), self.known_links.lock()) {
            // Room for all at once (`/sys/bus/pci/devices` is hundreds of links).
            let count = |k| entries.iter().filter(|(_, kind)| *kind == Some(k)).count();
            links.reserve(count(EntryKind::Symlink));
            dirs.reserve(count(EntryKind::Dir));
            for (name, kind) in &entries {
                match kind {
                    Some(EntryKind::Dir) => {
                        let child = join(&real, name);
                        let canonical = Arc::from(child.as_str());
                        dirs.insert(child, canonical);
                    }
                    Some(EntryKind::Symlink) => {
                        links.insert(join(&real, name));
                    }
                    _ => {}
                }
            }
        }
        let mut names: Vec<String> = entries.into_iter().map(|(name, _)| name).collect();
        names.sort();
        Ok(names)
    }

    /// Each name in a directory (at most [`MAX_DIR_ENTRIES`]), in the directory's own
    /// order, handed to `visit` and not kept: for a listing whose names are only
    /// counted or compared (`/sys/class/infiniband` in a pod, where hundreds of devices
    /// are other pods').
    pub fn visit_names(&self, path: &str, mut visit: impl FnMut(&str)) -> Result<(), SysfsError> {
        self.visit_entries(path, |name, _| visit(name)).map(|_| ())
    }

    /// The directory's real path and its entries (at most [`MAX_DIR_ENTRIES`]), unsorted.
    fn entries(&self, path: &str) -> Result<(String, Vec<Entry>), SysfsError> {
        let mut entries = Vec::new();
        let real = self.visit_entries(path, |name, kind| entries.push((name.to_owned(), kind)))?;
        Ok((real, entries))
    }

    /// The directory's real path, each of its first [`MAX_DIR_ENTRIES`] entries handed
    /// to `visit`.
    fn visit_entries(
        &self,
        path: &str,
        mut visit: impl FnMut(&str, Option<EntryKind>),
    ) -> Result<String, SysfsError> {
        self.note(path);
        let real = self.checked(path)?;
        let mut left = MAX_DIR_ENTRIES;
        self.backend
            .visit_dir(&real, &mut |name, kind| {
                visit(name, kind);
                left -= 1;
                left > 0
            })
            .map_err(|e| SysfsError::from_io(path, e))?;
        Ok(real)
    }

    /// How many entries a table numbered from `0` holds (a port's `gids`: the kernel
    /// makes the names `0` to `len - 1`, no more, no gaps), found by looking names up
    /// rather than listing the directory. A listing reads every name (and, on the disk
    /// a capture is unpacked on, hashes each); a lookup finds one. `guess` (0 for none)
    /// is tried first, the length of another table of the host (its ports are alike):
    /// two lookups, else about `2 log2(len)`. Where names are missing below the last (no
    /// kernel leaves a gap), the table ends at a missing name the search met. At most
    /// [`MAX_DIR_ENTRIES`].
    pub fn table_len(&self, dir: &str, guess: usize) -> Result<usize, SysfsError> {
        self.note(dir);
        let real = self.checked(dir)?;
        let has = |index: usize| -> Result<bool, SysfsError> {
            let path = join(&real, &index.to_string());
            match self.backend.kind(&path) {
                Ok(_) => Ok(true),
                Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
                Err(e) => Err(SysfsError::from_io(&join(dir, &index.to_string()), e)),
            }
        };
        let guess = guess.min(MAX_DIR_ENTRIES);
        let len = if guess > 0 && has(guess - 1)? && (guess == MAX_DIR_ENTRIES || !has(guess)?) {
            guess
        } else if !has(0)? {
            // Empty, or not a directory (which a lookup beneath a file on disk says, and
            // one in memory does not).
            match self.backend.kind(&real) {
                Ok(EntryKind::Dir) => 0,
                Ok(_) => {
                    return Err(SysfsError::NotADirectory {
                        path: dir.to_string(),
                    });
                }
                Err(e) => return Err(SysfsError::from_io(dir, e)),
            }
        } else {
            // `low` names are known to be there; the name `high` is not (or is past the
            // most taken): doubling, then halving.
            let (mut low, mut high) = (1, 1);
            loop {
                if high >= MAX_DIR_ENTRIES {
                    high = MAX_DIR_ENTRIES;
                    break;
                }
                if !has(high)? {
                    break;
                }
                low = high + 1;
                high *= 2;
            }
            while low < high {
                let mid = low + (high - low) / 2;
                if has(mid)? {
                    low = mid + 1;
                } else {
                    high = mid;
                }
            }
            low
        };
        Ok(len)
    }

    /// Sorted names, or empty when the directory does not exist.
    pub fn list_opt(&self, path: &str) -> Result<Vec<String>, SysfsError> {
        match self.list(path) {
            Err(e) if e.is_not_found() => Ok(Vec::new()),
            other => other,
        }
    }

    /// Whether anything exists at `path` (after following links).
    pub fn exists(&self, path: &str) -> bool {
        self.note(path);
        // Resolution checks every component, the last one included.
        self.canonicalize(path).is_ok()
    }

    /// Whether `path` itself is a symlink.
    pub fn is_symlink(&self, path: &str) -> bool {
        self.checked_parent(path).is_ok_and(|real| {
            self.backend
                .kind(&real)
                .is_ok_and(|k| k == EntryKind::Symlink)
        })
    }

    /// The kind of entry at `path` without following a final symlink.
    pub fn kind(&self, path: &str) -> Result<EntryKind, SysfsError> {
        self.note(path);
        let real = self.checked_parent(path)?;
        self.backend
            .kind(&real)
            .map_err(|e| SysfsError::from_io(path, e))
    }
}

/// The files of one directory, read by name: a table's hundreds of slots (a port's
/// `gids/0` … `gids/254`). Where the backend reads beneath a directory's descriptor
/// (a directory on disk, with `openat2`), the directory resolves and opens once and a
/// name costs one `openat2` beneath it: no path walk, no lookup in the shared caches,
/// so reading threads do not wait on each other. Elsewhere, and for a name that is a
/// symlink, a name is read by its whole path ([`Sysfs::read_with`]).
#[derive(Debug)]
pub struct DirFiles<'s> {
    fs: &'s Sysfs,
    /// The directory's logical path.
    dir: String,
    open: Option<Arc<OwnedFd>>,
}

impl DirFiles<'_> {
    /// The logical path of `name` here.
    pub fn path_of(&self, name: &str) -> String {
        join(&self.dir, name)
    }

    /// As [`Sysfs::read_with`] of `name` in this directory.
    pub fn read_with<R>(&self, name: &str, f: impl FnOnce(&str) -> R) -> Result<R, SysfsError> {
        let plain = !matches!(name, "" | "." | "..") && !name.contains('/');
        let Some(dir) = self.open.as_ref().filter(|_| plain) else {
            return self.fs.read_with(&self.path_of(name), f);
        };
        let limit = MAX_ATTR_BYTES;
        let mut buf = READ_BUFFER.take();
        let read = self
            .fs
            .backend
            .read_file_in(dir.as_fd(), name, limit + 1, &mut buf);
        if read
            .as_ref()
            .is_err_and(|e| matches!(e.raw_os_error(), Some(libc::ELOOP | libc::EXDEV)))
        {
            // A symlink: the whole path's read follows it, inside the root.
            READ_BUFFER.set(buf);
            return self.fs.read_with(&self.path_of(name), f);
        }
        let fs = self.fs;
        fs.reads.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let recording = fs.journal.is_some() || fs.kept.is_some();
        let path = recording.then(|| self.path_of(name));
        if let Some(path) = &path {
            fs.note(path);
        }
        let result = match read {
            Ok(()) if buf.len() <= limit && path.is_none() => Ok(with_text(&buf, f)),
            Ok(()) => {
                let path = path.unwrap_or_else(|| self.path_of(name));
                fs.finish_read(&path, limit, &buf)
                    .map(|()| with_text(&buf, f))
            }
            Err(e) => Err(read_error(&self.path_of(name), e)),
        };
        READ_BUFFER.set(buf);
        result
    }
}

thread_local! {
    /// The buffer every attribute read on this thread lands in, so an attribute that is
    /// parsed and dropped costs no allocation.
    static READ_BUFFER: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
}

/// A file's bytes as text to `f`: validated a word at a time, and scanned again for the
/// lossy form only where a byte is bad.
fn with_text<R>(buf: &[u8], f: impl FnOnce(&str) -> R) -> R {
    match std::str::from_utf8(buf) {
        Ok(text) => f(text),
        Err(_) => f(&String::from_utf8_lossy(buf)),
    }
}

/// A failed read of `path` as the layer's error.
fn read_error(path: &str, e: io::Error) -> SysfsError {
    match e.kind() {
        io::ErrorKind::InvalidInput if e.raw_os_error().is_none() => SysfsError::NotAFile {
            path: path.to_string(),
        },
        _ => SysfsError::from_io(path, e),
    }
}

/// Join a logical directory and a name.
pub fn join(dir: &str, name: &str) -> String {
    if dir.ends_with('/') {
        let mut out = String::with_capacity(dir.len() + name.len());
        out.push_str(dir);
        out.push_str(name);
        out
    } else {
        join_slash(dir, name)
    }
}

/// `dir/name`, built without the formatting machinery (it runs for every file read).
fn join_slash(dir: &str, name: &str) -> String {
    let mut out = String::with_capacity(dir.len() + 1 + name.len());
    out.push_str(dir);
    out.push('/');
    out.push_str(name);
    out
}

/// A canonical path in `resolve`'s form: `""` for the root, else `/a/b`.
fn below_root(path: String) -> String {
    if path == "/" { String::new() } else { path }
}

/// Whether the kernel makes every entry of the canonical directory `dir` a symlink
/// (sysfs ABI): a bus's `devices` (`/sys/bus/pci/devices/0000:3b:00.0`) and a class's
/// directory (`/sys/class/infiniband/mlx5_0`, `/sys/class/net/eth0`).
fn names_links(dir: &str) -> bool {
    let one_name = |rest: &str| !rest.is_empty() && !rest.contains('/');
    dir.strip_prefix("/sys/class/").is_some_and(one_name)
        || dir
            .strip_prefix("/sys/bus/")
            .and_then(|rest| rest.strip_suffix("/devices"))
            .is_some_and(one_name)
}

fn components(path: &str) -> impl DoubleEndedIterator<Item = &str> {
    path.split('/').filter(|c| !c.is_empty())
}

/// `path` in [`normalize`]d form, without a copy when it is already (the usual case:
/// discovery builds its paths with [`join`]).
fn normalized(path: &str) -> Cow<'_, str> {
    let already = path == "/"
        || (path.starts_with('/')
            && !path.ends_with('/')
            && !path.contains("//")
            && !path.contains("/./")
            && !path.ends_with("/."));
    if already {
        Cow::Borrowed(path)
    } else {
        Cow::Owned(normalize(path))
    }
}

fn normalize(path: &str) -> String {
    let mut out = String::with_capacity(path.len() + 1);
    for c in components(path) {
        out.push('/');
        out.push_str(c);
    }
    if out.is_empty() {
        out.push('/');
    }
    out
}

/// Push the byte ranges of `text`'s components onto `pending`, the first one last.
fn push_components(
    pending: &mut Vec<(Option<usize>, usize, usize)>,
    source: Option<usize>,
    text: &str,
) {
    let first = pending.len();
    let mut start = 0;
    for (i, b) in text.bytes().chain([b'/']).enumerate() {
        if b == b'/' {
            if i > start {
                pending.push((source, start, i));
            }
            start = i + 1;
        }
    }
    pending[first..].reverse();
}

/// `/a`, `/a/b`, ... `path` (none for the root).
fn prefixes(path: &str) -> impl Iterator<Item = &str> {
    path.match_indices('/')
        .skip(1)
        .map(|(i, _)| &path[..i])
        .chain((path.len() > 1).then_some(path))
}

fn split_last(path: &str) -> (&str, &str) {
    let trimmed = path.trim_end_matches('/');
    // From the end, a byte at a time: the last name is short. (A vector search would
    // first ask the CPU what it has, and on a VM every `cpuid` traps.)
    match trimmed.bytes().rposition(|b| b == b'/') {
        Some(0) => ("/", &trimmed[1..]),
        Some(i) => (&trimmed[..i], &trimmed[i + 1..]),
        None => ("/", trimmed),
    }
}

#[cfg(test)]
mod tests;

/// The public kind of each: a file error, or no machine to read.
#[doc(hidden)]
impl From<SysfsError> for crate::error::Error {
    fn from(e: SysfsError) -> Self {
        use crate::error::Error;
        use std::io::ErrorKind;
        let (kind, os_code, reason) = match &e {
            SysfsError::NotFound { .. } => (ErrorKind::NotFound, None, "not found".to_string()),
            SysfsError::PermissionDenied { .. } => (
                ErrorKind::PermissionDenied,
                None,
                "permission denied".to_string(),
            ),
            SysfsError::Io {
                message, os_code, ..
            } => (ErrorKind::Other, *os_code, message.clone()),
            _ => return Error::Discovery(e.to_string()),
        };
        Error::Io {
            path: e.path().to_string(),
            kind,
            os_code,
            reason,
        }
    }
}
