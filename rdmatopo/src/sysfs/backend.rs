//! Where the bytes come from: a directory on disk, or an in-memory tree.

use rustix::fs::{self as rfs, AtFlags, Mode, OFlags};
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};

/// What a path names, without following a final symlink.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    File,
    Dir,
    Symlink,
    /// FIFO, socket or device node: never read.
    Other,
}

/// Primitive, non-following operations on canonical logical paths. Symlink
/// resolution and sandboxing live above this, in [`super::Sysfs`], so every backend
/// gets the same guarantees.
pub trait Backend: Send + Sync {
    /// `lstat`: the kind of the entry itself.
    fn kind(&self, path: &str) -> io::Result<EntryKind>;
    /// The stored target of a symlink.
    fn read_link(&self, path: &str) -> io::Result<String>;
    /// At most `limit` bytes of a regular file, in place of `buf`'s contents (its
    /// capacity is reused). A final symlink is not followed (`ELOOP`, as with
    /// `O_NOFOLLOW`); anything else that is not a file is `InvalidInput`.
    fn read_file(&self, path: &str, limit: usize, buf: &mut Vec<u8>) -> io::Result<()>;
    /// Each name in a directory (not `.` or `..`), unsorted, handed to `visit` with its
    /// kind when the listing tells it for free (`d_type`); `visit` returns `false` to
    /// stop. Nothing is kept: a caller that only counts a host's hundreds of other pods'
    /// devices allocates nothing for them.
    fn visit_dir(
        &self,
        path: &str,
        visit: &mut dyn FnMut(&str, Option<EntryKind>) -> bool,
    ) -> io::Result<()>;
    /// Whether [`Backend::read_file`] itself refuses a symlink anywhere on the path and
    /// any step out of the root, so a path taken from link targets may be read without
    /// checking it component by component first.
    fn reads_check_paths(&self) -> bool {
        false
    }
    /// Check, as `read_file` would, that everything on `path` is a real directory inside
    /// the root and `path` itself exists: `Some(Ok(false))` when a symlink or a
    /// non-directory is on the way, `None` where the backend cannot check.
    fn check_path(&self, _path: &str) -> Option<io::Result<bool>> {
        None
    }
    /// The directory at `path`, opened for [`Backend::read_file_in`] where the backend
    /// reads one name beneath a directory as safely as a whole path (`None`: it reads
    /// whole paths only).
    fn open_dir(&self, _path: &str) -> Option<Arc<OwnedFd>> {
        None
    }
    /// As [`Backend::read_file`], of the one name `name` beneath a directory from
    /// [`Backend::open_dir`].
    fn read_file_in(
        &self,
        _dir: BorrowedFd<'_>,
        _name: &str,
        _limit: usize,
        _buf: &mut Vec<u8>,
    ) -> io::Result<()> {
        Err(io::ErrorKind::Unsupported.into())
    }
}

/// A directory on disk (`/` for the live system).
///
/// Paths are looked up from the root's directory descriptor (`openat`), so the
/// root's own path is walked once, not once per attribute.
#[derive(Debug)]
pub struct DirBackend {
    base: PathBuf,
    /// The root, opened once (`None` when it cannot be opened: every call then fails
    /// as a plain path lookup would).
    root: Option<OwnedFd>,
    /// Whether `openat2` works here ([`OPENAT2_WORKS`]), is refused ([`OPENAT2_REFUSED`]:
    /// Linux before 5.6, or a seccomp profile that predates it, so files are opened with
    /// `openat`), or is not tried yet.
    openat2: AtomicU8,
    /// The directories names were last read or looked up in, opened once a fourth name
    /// is read from one: files and links come in runs from a few directories (a port's
    /// 255 GID slots, `/sys/bus/pci/devices/*`), and a lookup of one name costs less
    /// than of the whole path from the root (eleven components to a GID slot).
    dirs: Mutex<OpenDirs>,
}

/// How many directories [`OpenDirs`] keeps open, and remembers as seen: a GID slot's
/// reader goes round three (`gids`, `gid_attrs/types`, `gid_attrs/ndevs`).
const OPEN_DIRS: usize = 4;

/// Names read from a directory by their whole paths before it is opened. Opening one
/// costs two system calls (its open and its close) and saves a walk of the path per
/// name after: a placement read takes three names of each PCI function (`uevent`, then
/// `physfn` and `numa_node`, or `numa_node` and `local_cpulist`), where an open after
/// the second added 40 of h100-dgx `topo`'s 402 system calls and saved nothing worth
/// them.
const READS_BEFORE_OPEN: u8 = 3;

/// Directories read from lately ([`DirBackend::in_open_dir`]), the most recent last.
#[derive(Debug, Default)]
struct OpenDirs {
    /// Read from by the whole path, and how many times.
    seen: Vec<(String, u8)>,
    /// Open, for the names read from them since.
    open: Vec<(String, Arc<OwnedFd>)>,
}

/// Add `item` as the most recent of `list`, forgetting the oldest past [`OPEN_DIRS`].
fn remember<T>(list: &mut Vec<T>, item: T) {
    if list.len() == OPEN_DIRS {
        list.remove(0);
    }
    list.push(item);
}

const OPENAT2_UNTRIED: u8 = 0;
const OPENAT2_WORKS: u8 = 1;
const OPENAT2_REFUSED: u8 = 2;

impl DirBackend {
    pub fn new(base: impl AsRef<Path>) -> Self {
        let base = base.as_ref().to_path_buf();
        let root = rfs::open(
            &base,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .ok();
        Self {
            base,
            root,
            openat2: AtomicU8::new(OPENAT2_UNTRIED),
            dirs: Mutex::new(OpenDirs::default()),
        }
    }

    /// The descriptor of `path`'s directory and its last name, when
    /// [`READS_BEFORE_OPEN`] names were read from that directory before: the directory
    /// is opened beneath the root without following symlinks (as reads are) and kept for
    /// the next names. `None` before that, where `openat2` is not known to work here,
    /// where another thread is looking (never waited for), or where the directory cannot
    /// be opened: the caller then takes the whole path (which reports why it fails).
    fn in_open_dir<'p>(&self, path: &'p str) -> Option<(Arc<OwnedFd>, &'p str)> {
        let slash = path.bytes().rposition(|b| b == b'/')?;
        let (dir, name) = (&path[..slash], &path[slash + 1..]);
        if name.is_empty() || name == "." || name == ".." || !self.reads_check_paths() {
            return None;
        }
        // Threads read side by side: one that would wait takes the whole path instead.
        let mut dirs = self.dirs.try_lock().ok()?;
        let OpenDirs { seen, open } = &mut *dirs;
        if let Some(i) = open.iter().position(|(d, _)| d == dir) {
            let hit = open.remove(i);
            let fd = Arc::clone(&hit.1);
            open.push(hit);
            return Some((fd, name));
        }
        match seen.iter().position(|(d, _)| d == dir) {
            None => {
                remember(seen, (dir.to_string(), 1));
                return None;
            }
            Some(i) if seen[i].1 < READS_BEFORE_OPEN => {
                seen[i].1 += 1;
                return None;
            }
            Some(i) => {
                seen.remove(i);
            }
        }
        let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
        let root_or_dir = if dir.is_empty() { "/" } else { dir };
        let fd = Arc::new(self.open_beneath(root_or_dir, flags)?.ok()?);
        remember(open, (dir.to_string(), Arc::clone(&fd)));
        Some((fd, name))
    }

    /// Open a canonical path for reading. The kernel refuses any symlink on the way
    /// (`RESOLVE_NO_SYMLINKS`, `ELOOP` like `O_NOFOLLOW`) and any step out of the root
    /// (`RESOLVE_BENEATH`), so a directory swapped for a link after it was resolved
    /// cannot lead a read outside the root.
    fn open_canonical(&self, path: &str) -> io::Result<OwnedFd> {
        if let Some((dir, name)) = self.in_open_dir(path) {
            return open_in(dir.as_fd(), name);
        }
        if let Some(opened) = self.open_beneath(path, READ_FLAGS) {
            return opened;
        }
        // O_NOFOLLOW: the path is already canonical, so a symlink here is a race or an
        // attack.
        Ok(rfs::openat(
            self.root()?,
            relative(path)?,
            READ_FLAGS,
            Mode::empty(),
        )?)
    }

    /// `openat2` with `RESOLVE_NO_SYMLINKS | RESOLVE_BENEATH`, or `None` where the kernel
    /// refuses the call itself.
    fn open_beneath(&self, path: &str, flags: OFlags) -> Option<io::Result<OwnedFd>> {
        let state = self.openat2.load(Ordering::Relaxed);
        if state == OPENAT2_REFUSED {
            return None;
        }
        let (root, rel) = match self.root().and_then(|root| Ok((root, relative(path)?))) {
            Ok(found) => found,
            Err(e) => return Some(Err(e)),
        };
        let resolve = rfs::ResolveFlags::NO_SYMLINKS | rfs::ResolveFlags::BENEATH;
        match rfs::openat2(root, rel, flags, Mode::empty(), resolve) {
            // EPERM is also how old seccomp profiles refuse an unknown call (files
            // themselves say EACCES); once the call has worked, it is the file's answer.
            // Only from "untried", so that "works", once seen, is final: paths taken on
            // trust rely on it.
            Err(e)
                if state == OPENAT2_UNTRIED
                    && (e == rustix::io::Errno::NOSYS || e == rustix::io::Errno::PERM)
                    && self.settle(OPENAT2_REFUSED) == OPENAT2_REFUSED =>
            {
                None
            }
            Ok(fd) => {
                if state == OPENAT2_UNTRIED {
                    self.settle(OPENAT2_WORKS);
                }
                Some(Ok(fd))
            }
            Err(e) => Some(Err(e.into())),
        }
    }

    /// Record what `openat2` does here if nothing is recorded yet; the state it is in.
    fn settle(&self, seen: u8) -> u8 {
        match self.openat2.compare_exchange(
            OPENAT2_UNTRIED,
            seen,
            Ordering::Relaxed,
            Ordering::Relaxed,
        ) {
            Ok(_) => seen,
            Err(already) => already,
        }
    }

    fn root(&self) -> io::Result<&OwnedFd> {
        self.root.as_ref().ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!("{}: cannot open the root", self.base.display()),
            )
        })
    }
}

/// How a file is opened for reading. `O_NONBLOCK`: opening a FIFO must not wait for a
/// writer.
const READ_FLAGS: OFlags = OFlags::RDONLY
    .union(OFlags::NOFOLLOW)
    .union(OFlags::NONBLOCK)
    .union(OFlags::CLOEXEC);

/// One name beneath a directory opened beneath the root, for reading: still inside the
/// root, and no symlink followed.
fn open_in(dir: BorrowedFd<'_>, name: &str) -> io::Result<OwnedFd> {
    let resolve = rfs::ResolveFlags::NO_SYMLINKS | rfs::ResolveFlags::BENEATH;
    Ok(rfs::openat2(dir, name, READ_FLAGS, Mode::empty(), resolve)?)
}

/// A logical absolute path as a path relative to the root (`.` for the root itself).
/// `..` is refused: from the root's descriptor it would climb out of the root.
fn relative(path: &str) -> io::Result<&str> {
    if path.contains("..") && path.split('/').any(|c| c == "..") {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            "`..` in a resolved path",
        ));
    }
    Ok(match path.trim_start_matches('/') {
        "" => ".",
        rel => rel,
    })
}

impl Backend for DirBackend {
    fn kind(&self, path: &str) -> io::Result<EntryKind> {
        let st = match self.in_open_dir(path) {
            Some((dir, name)) => rfs::statat(&*dir, name, AtFlags::SYMLINK_NOFOLLOW)?,
            None => rfs::statat(self.root()?, relative(path)?, AtFlags::SYMLINK_NOFOLLOW)?,
        };
        Ok(entry_kind(rfs::FileType::from_raw_mode(st.st_mode)))
    }

    fn read_link(&self, path: &str) -> io::Result<String> {
        let target = match self.in_open_dir(path) {
            Some((dir, name)) => rfs::readlinkat(&*dir, name, Vec::new())?,
            None => rfs::readlinkat(self.root()?, relative(path)?, Vec::new())?,
        };
        Ok(target
            .into_string()
            .unwrap_or_else(|e| String::from_utf8_lossy(e.into_cstring().as_bytes()).into_owned()))
    }

    fn read_file(&self, path: &str, limit: usize, buf: &mut Vec<u8>) -> io::Result<()> {
        read_bounded(File::from(self.open_canonical(path)?), limit, buf)
    }

    fn open_dir(&self, path: &str) -> Option<Arc<OwnedFd>> {
        // Only where the kernel refuses symlinks and steps out of the root itself.
        if !self.reads_check_paths() {
            return None;
        }
        // Already open when names were looked up in it (a GID table's length).
        if let Ok(dirs) = self.dirs.try_lock()
            && let Some((_, fd)) = dirs.open.iter().find(|(d, _)| d == path)
        {
            return Some(Arc::clone(fd));
        }
        let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
        Some(Arc::new(self.open_beneath(path, flags)?.ok()?))
    }

    fn read_file_in(
        &self,
        dir: BorrowedFd<'_>,
        name: &str,
        limit: usize,
        buf: &mut Vec<u8>,
    ) -> io::Result<()> {
        read_bounded(File::from(open_in(dir, name)?), limit, buf)
    }

    fn reads_check_paths(&self) -> bool {
        self.openat2.load(Ordering::Relaxed) == OPENAT2_WORKS
    }

    fn check_path(&self, path: &str) -> Option<io::Result<bool>> {
        if !self.reads_check_paths() {
            return None;
        }
        // Not O_NOFOLLOW: with O_PATH it would open a final symlink itself.
        let flags = OFlags::PATH | OFlags::CLOEXEC;
        Some(match self.open_beneath(path, flags)? {
            Ok(_) => Ok(true),
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::ELOOP | libc::EXDEV | libc::ENOTDIR)
                ) =>
            {
                Ok(false)
            }
            Err(e) => Err(e),
        })
    }

    fn visit_dir(
        &self,
        path: &str,
        visit: &mut dyn FnMut(&str, Option<EntryKind>) -> bool,
    ) -> io::Result<()> {
        // Beneath the root without following symlinks, as files are read.
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let dir = match self.open_beneath(path, flags) {
            Some(opened) => opened?,
            None => rfs::openat(self.root()?, relative(path)?, flags, Mode::empty())?,
        };
        // Names straight from the kernel's records: a host's listing is hundreds of
        // other pods' devices.
        let mut buf = Vec::with_capacity(LISTING_BUFFER);
        let mut records = rfs::RawDir::new(dir, buf.spare_capacity_mut());
        while let Some(record) = records.next() {
            let record = record?;
            let name = record.file_name().to_bytes();
            if name == b"." || name == b".." {
                continue;
            }
            // From `d_type` on sysfs, procfs and local filesystems; unknown elsewhere.
            let kind = match record.file_type() {
                rfs::FileType::Unknown => None,
                known => Some(entry_kind(known)),
            };
            let more = match std::str::from_utf8(name) {
                Ok(name) => visit(name, kind),
                Err(_) => visit(&String::from_utf8_lossy(name), kind),
            };
            if !more {
                break;
            }
        }
        Ok(())
    }
}

/// What a file type is to the reader.
fn entry_kind(file_type: rfs::FileType) -> EntryKind {
    match file_type {
        rfs::FileType::Symlink => EntryKind::Symlink,
        rfs::FileType::Directory => EntryKind::Dir,
        rfs::FileType::RegularFile => EntryKind::File,
        _ => EntryKind::Other,
    }
}

/// The buffer a directory's records are read into: a few hundred names a `getdents64`.
const LISTING_BUFFER: usize = 16 * 1024;

/// At most `limit` bytes of an open file, in as few reads as the kernel allows.
///
/// A sysfs attribute comes whole from one read, and a regular file shorter than the
/// buffer ends where the read ended: one `read` per attribute, no `fstat`. Only a read
/// that gives nothing (an empty file, or a FIFO without a writer) or fails asks what the
/// file is, so a FIFO or a directory is "not a file", never a hang.
fn read_bounded(file: File, limit: usize, buf: &mut Vec<u8>) -> io::Result<()> {
    let not_a_file = |file: &File| -> io::Result<bool> { Ok(!file.metadata()?.is_file()) };
    // Read into spare capacity: no zeroing of a page per attribute.
    let first = limit.clamp(1, SMALL_READ);
    buf.clear();
    buf.reserve(first);
    let n = match rustix::io::read(&file, rustix::buffer::spare_capacity(&mut *buf)) {
        Ok(n) => n,
        Err(_) if not_a_file(&file)? => return Err(io::Error::from(io::ErrorKind::InvalidInput)),
        Err(e) => return Err(e.into()),
    };
    if n == 0 && not_a_file(&file)? {
        return Err(io::Error::from(io::ErrorKind::InvalidInput));
    }
    if n >= first && limit > n {
        // A whole page: a longer file (a snapshot's JSON). Room for all of it at once
        // where its size is known (procfs says 0, sysfs a page).
        let size = file.metadata().map_or(0, |m| m.len());
        let rest = usize::try_from(size)
            .unwrap_or(usize::MAX)
            .min(limit)
            .saturating_sub(n);
        buf.reserve(rest + 1);
        file.take((limit - n) as u64).read_to_end(buf)?;
    }
    buf.truncate(limit);
    Ok(())
}

/// The first read's size: a page, the most a sysfs attribute holds.
const SMALL_READ: usize = 4096;
