use super::*;

fn tree() -> Sysfs {
    let mut t = MemTree::new();
    t.file(
        "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/vendor",
        "0x15b3\n",
    )
    .link(
        "/sys/bus/pci/devices/0000:01:00.0",
        "../../../devices/pci0000:00/0000:00:01.0/0000:01:00.0",
    )
    .link("/sys/class/abs", "/sys/devices/pci0000:00")
    .link("/sys/class/escape", "../../../../../../etc")
    .link("/sys/loop/a", "b")
    .link("/sys/loop/b", "a")
    .insert("/sys/fifo", MemEntry::Other)
    .insert("/sys/einval", MemEntry::Unreadable(libc::EINVAL))
    .file("/etc/passwd", "root");
    Sysfs::memory(t, "mem")
}

#[test]
fn relative_links_resolve_inside_the_root() {
    let fs = tree();
    assert_eq!(
        fs.read("/sys/bus/pci/devices/0000:01:00.0/vendor").unwrap(),
        "0x15b3\n"
    );
    assert_eq!(
        fs.canonicalize("/sys/bus/pci/devices/0000:01:00.0")
            .unwrap(),
        "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0"
    );
}

#[test]
fn absolute_links_are_rerooted() {
    let fs = tree();
    assert_eq!(
        fs.canonicalize("/sys/class/abs").unwrap(),
        "/sys/devices/pci0000:00"
    );
}

#[test]
fn dotdot_stops_at_the_root() {
    let fs = tree();
    // Six `..` from /sys/class clamp at `/`, so the link lands on the root's own /etc.
    assert_eq!(fs.canonicalize("/sys/class/escape").unwrap(), "/etc");
}

#[test]
fn symlink_loops_are_an_error_naming_the_path() {
    let err = tree().read("/sys/loop/a").unwrap_err();
    assert_eq!(
        err,
        SysfsError::SymlinkLoop {
            path: "/sys/loop/a".into()
        }
    );
}

#[test]
fn fifos_and_einval_are_errors_not_hangs() {
    let fs = tree();
    assert!(matches!(
        fs.read("/sys/fifo"),
        Err(SysfsError::NotAFile { .. })
    ));
    let err = fs.read("/sys/einval").unwrap_err();
    assert!(
        matches!(
            err,
            SysfsError::Io {
                os_code: Some(libc::EINVAL),
                ..
            }
        ),
        "{err:?}"
    );
}

#[test]
fn oversized_files_are_refused() {
    let mut t = MemTree::new();
    t.file("/sys/big", &"x".repeat(MAX_ATTR_BYTES + 10));
    let fs = Sysfs::memory(t, "mem");
    assert!(matches!(
        fs.read("/sys/big"),
        Err(SysfsError::TooLarge { .. })
    ));
    assert_eq!(fs.read_prefix("/sys/big", 5).unwrap(), "xxxxx");
}

#[test]
fn listing_is_sorted_and_missing_dirs_are_empty_with_list_opt() {
    let fs = tree();
    assert_eq!(fs.list("/sys/loop").unwrap(), vec!["a", "b"]);
    assert!(fs.list_opt("/sys/nothing").unwrap().is_empty());
    assert!(fs.list("/sys/nothing").unwrap_err().is_not_found());
}

#[test]
fn link_name_and_read_link_do_not_follow() {
    let fs = tree();
    assert_eq!(
        fs.read_link("/sys/class/abs").unwrap(),
        "/sys/devices/pci0000:00"
    );
    assert_eq!(fs.link_name("/sys/class/abs").unwrap(), "pci0000:00");
    assert!(fs.is_symlink("/sys/class/abs"));
}

#[test]
fn directory_backend_behaves_like_memory() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::create_dir_all(d.join("sys/devices/x")).unwrap();
    std::fs::write(d.join("sys/devices/x/a"), "1\n").unwrap();
    std::os::unix::fs::symlink("devices/x", d.join("sys/link")).unwrap();
    std::fs::create_dir_all(d.join("sys/class")).unwrap();
    std::os::unix::fs::symlink("/etc/hostname", d.join("sys/class/out")).unwrap();
    std::os::unix::fs::symlink("../../../../../../../../etc", d.join("sys/class/up")).unwrap();
    let fs = Sysfs::at(d);
    assert_eq!(fs.read("/sys/link/a").unwrap(), "1\n");
    // Both escapes stay inside the temporary root, where there is no /etc.
    assert!(fs.read("/sys/class/out").unwrap_err().is_not_found());
    assert!(fs.list("/sys/class/up").unwrap_err().is_not_found());
}

#[test]
fn recording_keeps_every_path_looked_at() {
    let mut t = MemTree::new();
    t.file("/sys/a/b", "1").link("/sys/l", "a");
    let fs = Sysfs::memory(t, "mem").recording();
    fs.read("/sys/l/b").unwrap();
    let _ = fs.list("/sys/a");
    assert!(!fs.exists("/sys/missing"));
    assert_eq!(fs.journal(), vec!["/sys/a", "/sys/l/b", "/sys/missing"]);
}

/// A directory resolved as canonical and then swapped for a link (a race, or a hostile
/// tree) must not lead the open out of the root: the kernel refuses the link
/// (`openat2` with `RESOLVE_NO_SYMLINKS`; kernels without it follow it, which is why
/// resolution never hands the backend a path it has not checked).
#[test]
fn the_backend_refuses_a_link_inside_a_canonical_path() {
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret"), "host file\n").unwrap();
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(root.path().join("sys")).unwrap();
    std::os::unix::fs::symlink(outside.path(), root.path().join("sys/dev")).unwrap();
    let backend = DirBackend::new(root.path());
    match backend.read_file("/sys/dev/secret", 100) {
        Err(e) => assert_eq!(e.raw_os_error(), Some(libc::ELOOP), "{e}"),
        Ok(_) if !openat2_available() => {}
        Ok(bytes) => panic!("read through a link: {:?}", String::from_utf8_lossy(&bytes)),
    }
    // Through the resolving layer the link is followed inside the root instead.
    let fs = Sysfs::at(root.path());
    assert!(fs.read("/sys/dev/secret").unwrap_err().is_not_found());
}

fn openat2_available() -> bool {
    let dir = tempfile::tempdir().unwrap();
    let probe = rustix::fs::openat2(
        rustix::fs::CWD,
        dir.path(),
        rustix::fs::OFlags::PATH,
        rustix::fs::Mode::empty(),
        rustix::fs::ResolveFlags::empty(),
    );
    probe.is_ok()
}
