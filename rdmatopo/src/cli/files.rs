//! Files the user names that more than one command writes.

use std::path::Path;

/// Write `text` to `path` through `.<name>.tmp` in the same directory and a rename:
/// NFD ignores dot files, and a rename is atomic.
pub(super) fn write_atomically(path: &Path, text: &str) -> Result<(), String> {
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .filter(|n| !n.starts_with('.'))
        .ok_or_else(|| {
            format!(
                "{}: --write needs a file name that does not start with '.' (NFD skips dot files)",
                path.display()
            )
        })?;
    let tmp = path.with_file_name(format!(".{name}.tmp"));
    std::fs::write(&tmp, text).map_err(|e| format!("{}: {e}", tmp.display()))?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        format!("{}: {e}", path.display())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_write_replaces_the_file_and_leaves_no_dot_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rdmatopo");
        write_atomically(&path, "a=1\n").unwrap();
        write_atomically(&path, "a=2\n").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "a=2\n");
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["rdmatopo"]);
        assert!(write_atomically(&dir.path().join(".hidden"), "x").is_err());
        assert!(write_atomically(&dir.path().join("missing/f"), "x").is_err());
    }
}
