//! An in-memory tree: unit tests, fuzzing, and snapshot tarballs read without unpacking.

use super::backend::{Backend, EntryKind};
use std::collections::{BTreeMap, BTreeSet};
use std::io;

/// One entry of a [`MemTree`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MemEntry {
    Dir,
    File(Vec<u8>),
    Symlink(String),
    /// Something that is neither file, directory nor link (a FIFO).
    Other,
    /// A file whose read fails with this errno (`EINVAL` for empty GID slots,
    /// `EACCES` for privileged files).
    Unreadable(i32),
}

/// A tree of logical paths. Parent directories are created implicitly.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MemTree {
    entries: BTreeMap<String, MemEntry>,
}

impl MemTree {
    pub fn new() -> Self {
        let mut t = Self::default();
        t.entries.insert("/".into(), MemEntry::Dir);
        t
    }

    /// Add an entry at `path`, creating its parent directories.
    pub fn insert(&mut self, path: &str, entry: MemEntry) -> &mut Self {
        self.insert_normalized(normalize(path), entry)
    }

    /// The tree that inserting each entry in turn makes (a later entry at a path
    /// replaces an earlier one; missing parent directories are created), built at once
    /// from paths already in the form `normalize` gives (`/a/b`: no empty, `.` or
    /// trailing component), as a snapshot's reader makes them.
    pub(crate) fn from_normalized(mut entries: Vec<(String, MemEntry)>) -> Self {
        // Stable: entries at one path keep their order, and the last one stays.
        if !entries.is_sorted_by(|a, b| a.0 <= b.0) {
            entries.sort_by(|a, b| a.0.cmp(&b.0));
        }
        let mut unique: Vec<(String, MemEntry)> = Vec::with_capacity(entries.len() + 1);
        for (path, entry) in entries {
            match unique.last_mut() {
                Some(last) if last.0 == path => last.1 = entry,
                _ => unique.push((path, entry)),
            }
        }
        let missing = missing_parents(&unique);
        unique.extend(missing.into_iter().map(|dir| (dir, MemEntry::Dir)));
        let mut entries: BTreeMap<String, MemEntry> = unique.into_iter().collect();
        entries.entry("/".into()).or_insert(MemEntry::Dir);
        Self { entries }
    }

    fn insert_normalized(&mut self, path: String, entry: MemEntry) -> &mut Self {
        // Parents from the nearest up, until one exists: its own parents came with it.
        let mut missing = Vec::new();
        let mut parent = path.as_str();
        while let Some(cut) = parent.rfind('/') {
            parent = if cut == 0 { "/" } else { &parent[..cut] };
            if parent == path || self.entries.contains_key(parent) {
                break;
            }
            missing.push(parent.to_string());
            if parent == "/" {
                break;
            }
        }
        for dir in missing {
            self.entries.insert(dir, MemEntry::Dir);
        }
        self.entries.insert(path, entry);
        self
    }

    /// Add a text file.
    pub fn file(&mut self, path: &str, text: &str) -> &mut Self {
        self.insert(path, MemEntry::File(text.as_bytes().to_vec()))
    }

    /// Add a symlink.
    pub fn link(&mut self, path: &str, target: &str) -> &mut Self {
        self.insert(path, MemEntry::Symlink(target.to_string()))
    }

    /// Add an empty directory.
    pub fn dir(&mut self, path: &str) -> &mut Self {
        self.insert(path, MemEntry::Dir)
    }

    /// Remove `path` and, when it is a directory, everything below it.
    pub fn remove(&mut self, path: &str) -> &mut Self {
        let path = normalize(path);
        if path == "/" {
            return self;
        }
        let below = format!("{path}/");
        let doomed: Vec<String> = self
            .entries
            .range(below.clone()..)
            .take_while(|(k, _)| k.starts_with(&below))
            .map(|(k, _)| k.clone())
            .collect();
        for k in doomed {
            self.entries.remove(&k);
        }
        self.entries.remove(&path);
        self
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.len() <= 1
    }

    /// The text of the file at `path` (`None` for anything else, or bytes that are not
    /// UTF-8).
    pub fn text(&self, path: &str) -> Option<&str> {
        match self.entries.get(&normalize(path))? {
            MemEntry::File(bytes) => std::str::from_utf8(bytes).ok(),
            _ => None,
        }
    }

    /// Every entry, in path order.
    pub fn entries(&self) -> impl Iterator<Item = (&str, &MemEntry)> {
        self.entries.iter().map(|(k, v)| (k.as_str(), v))
    }

    fn get(&self, path: &str) -> io::Result<&MemEntry> {
        self.entries
            .get(&normalize(path))
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))
    }
}

impl Backend for MemTree {
    fn kind(&self, path: &str) -> io::Result<EntryKind> {
        Ok(kind_of(self.get(path)?))
    }

    fn read_link(&self, path: &str) -> io::Result<String> {
        match self.get(path)? {
            MemEntry::Symlink(t) => Ok(t.clone()),
            _ => Err(io::Error::from_raw_os_error(libc::EINVAL)),
        }
    }

    fn read_file(&self, path: &str, limit: usize, buf: &mut Vec<u8>) -> io::Result<()> {
        match self.get(path)? {
            MemEntry::File(bytes) => {
                buf.clear();
                buf.extend_from_slice(&bytes[..bytes.len().min(limit)]);
                Ok(())
            }
            MemEntry::Unreadable(errno) => Err(io::Error::from_raw_os_error(*errno)),
            MemEntry::Dir => Err(io::Error::from_raw_os_error(libc::EISDIR)),
            // Like `open(O_NOFOLLOW)` on a symlink.
            MemEntry::Symlink(_) => Err(io::Error::from_raw_os_error(libc::ELOOP)),
            MemEntry::Other => Err(io::Error::from(io::ErrorKind::InvalidInput)),
        }
    }

    fn visit_dir(
        &self,
        path: &str,
        visit: &mut dyn FnMut(&str, Option<EntryKind>) -> bool,
    ) -> io::Result<()> {
        let dir = normalize(path);
        match self.get(&dir)? {
            MemEntry::Dir => {}
            _ => return Err(io::Error::from_raw_os_error(libc::ENOTDIR)),
        }
        let prefix = if dir == "/" {
            "/".to_string()
        } else {
            format!("{dir}/")
        };
        for (k, e) in self
            .entries
            .range(prefix.clone()..)
            .take_while(|(k, _)| k.starts_with(&prefix))
        {
            let rest = &k[prefix.len()..];
            if !rest.is_empty() && !rest.contains('/') && !visit(rest, Some(kind_of(e))) {
                break;
            }
        }
        Ok(())
    }
}

/// The parent directories of `sorted`'s paths (sorted, each once) that are not among
/// them. Most parents are the path just before or one already seen above it; only the
/// others are searched for.
fn missing_parents(sorted: &[(String, MemEntry)]) -> BTreeSet<String> {
    let exists = |dir: &str| sorted.binary_search_by(|(p, _)| p.as_str().cmp(dir)).is_ok();
    let mut missing = BTreeSet::new();
    // Directories known to exist or to be made, each below the one before.
    let mut known: Vec<&str> = Vec::new();
    let mut previous = "";
    for (path, _) in sorted {
        if let Some(parent) = parent_of(path) {
            while known.last().is_some_and(|k| !within(parent, k)) {
                known.pop();
            }
            let mut above = Vec::new();
            let mut dir = parent;
            while known.last() != Some(&dir) {
                above.push(dir);
                if dir != previous && !exists(dir) {
                    missing.insert(dir.to_string());
                }
                match parent_of(dir) {
                    Some(up) => dir = up,
                    None => break,
                }
            }
            known.extend(above.into_iter().rev());
        }
        previous = path;
    }
    missing
}

/// `/a` of `/a/b`, `/` of `/a`; none of `/`.
fn parent_of(path: &str) -> Option<&str> {
    match path.rfind('/')? {
        0 if path.len() == 1 => None,
        0 => Some("/"),
        cut => Some(&path[..cut]),
    }
}

/// Whether `path` is `dir` or below it.
fn within(path: &str, dir: &str) -> bool {
    dir == "/"
        || path
            .strip_prefix(dir)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

fn kind_of(entry: &MemEntry) -> EntryKind {
    match entry {
        MemEntry::Dir => EntryKind::Dir,
        MemEntry::File(_) | MemEntry::Unreadable(_) => EntryKind::File,
        MemEntry::Symlink(_) => EntryKind::Symlink,
        MemEntry::Other => EntryKind::Other,
    }
}

fn normalize(path: &str) -> String {
    let mut out = String::new();
    for c in path.split('/').filter(|c| !c.is_empty() && *c != ".") {
        out.push('/');
        out.push_str(c);
    }
    if out.is_empty() { "/".into() } else { out }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Paths whose names sort around `/` (`a-b` and `a.b` before `a/…`, `b` after), as
    /// sysfs names do.
    fn path() -> impl Strategy<Value = String> {
        prop::collection::vec(prop::sample::select(vec!["a", "b", "a-b", "a.b", "0"]), 1..5)
            .prop_map(|parts| format!("/{}", parts.join("/")))
    }

    fn entry() -> impl Strategy<Value = MemEntry> {
        prop_oneof![
            Just(MemEntry::Dir),
            any::<u8>().prop_map(|b| MemEntry::File(vec![b])),
            Just(MemEntry::Symlink("../x".into())),
        ]
    }

    proptest! {
        #[test]
        fn built_at_once_as_inserted_one_by_one(
            entries in prop::collection::vec((path(), entry()), 0..40),
        ) {
            let mut one_by_one = MemTree::new();
            for (p, e) in &entries {
                one_by_one.insert(p, e.clone());
            }
            prop_assert_eq!(MemTree::from_normalized(entries), one_by_one);
        }
    }

    #[test]
    fn parents_missing_from_the_entries_are_made() {
        let tree = MemTree::from_normalized(vec![
            ("/a/b-c".into(), MemEntry::Dir),
            ("/a/b/c/d".into(), MemEntry::File(b"1".to_vec())),
            ("/a/b.c/x".into(), MemEntry::Symlink("y".into())),
        ]);
        let paths: Vec<&str> = tree.entries().map(|(p, _)| p).collect();
        assert_eq!(
            paths,
            ["/", "/a", "/a/b", "/a/b-c", "/a/b.c", "/a/b.c/x", "/a/b/c", "/a/b/c/d"]
        );
        assert_eq!(MemTree::from_normalized(Vec::new()), MemTree::new());
    }
}
