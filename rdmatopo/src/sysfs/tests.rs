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

/// Tables of these lengths, each at `/sys/t/<len>`, and beside them a file, a
/// directory of names that are not a table's, and a table with a gap (`0`-`9`, `200`).
const TABLE_LENS: [usize; 11] = [0, 1, 2, 3, 4, 16, 255, 256, 256, 257, 1000];

fn tables(mut add: impl FnMut(&str, bool)) {
    for len in TABLE_LENS {
        add(&format!("/sys/t/{len}"), true);
        for i in 0..len {
            add(&format!("/sys/t/{len}/{i}"), false);
        }
    }
    add("/sys/t/file", false);
    add("/sys/t/words", true);
    add("/sys/t/words/gid", false);
    add("/sys/t/words/4294967295", false);
    add("/sys/t/gap", true);
    for i in (0..10).chain([200]) {
        add(&format!("/sys/t/gap/{i}"), false);
    }
}

fn assert_table_lens(fs: &Sysfs) {
    // Every guess against every table: none, right, too short and too long.
    for guess in TABLE_LENS.iter().copied().chain([5, 300, 1 << 20]) {
        for len in TABLE_LENS {
            let dir = format!("/sys/t/{len}");
            assert_eq!(fs.table_len(&dir, guess), Ok(len), "{len}, guess {guess}");
        }
        assert_eq!(fs.table_len("/sys/t/words", guess), Ok(0));
        assert!(
            fs.table_len("/sys/t/missing", guess)
                .unwrap_err()
                .is_not_found()
        );
        assert!(matches!(
            fs.table_len("/sys/t/file", guess),
            Err(SysfsError::NotADirectory { .. })
        ));
        // No kernel leaves a gap: the table ends at a missing name the search met.
        assert!(fs.table_len("/sys/t/gap", guess).unwrap() <= 10);
    }
}

#[test]
fn a_table_is_as_long_as_its_numbered_names_in_memory_and_on_disk() {
    let mut t = MemTree::new();
    tables(|path, dir| {
        if dir {
            t.dir(path);
        } else {
            t.file(path, "0\n");
        }
    });
    assert_table_lens(&Sysfs::memory(t, "mem"));

    let root = tempfile::tempdir().unwrap();
    tables(|path, dir| {
        let at = root.path().join(path.trim_start_matches('/'));
        if dir {
            std::fs::create_dir_all(at).unwrap();
        } else {
            std::fs::write(at, "0\n").unwrap();
        }
    });
    assert_table_lens(&Sysfs::at(root.path()));
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
    let mut bytes = Vec::new();
    match backend.read_file("/sys/dev/secret", 100, &mut bytes) {
        Err(e) => assert_eq!(e.raw_os_error(), Some(libc::ELOOP), "{e}"),
        Ok(()) if !openat2_available() => {}
        Ok(()) => panic!("read through a link: {:?}", String::from_utf8_lossy(&bytes)),
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

/// A root whose bus links' targets name, as directories: a symlink inside the root
/// (`swap` → `nested/real`), a symlink out of it (`out`), and real directories (`good`).
/// On disk, reads beneath a link's target are checked by the kernel rather than by an
/// `lstat` per directory ([`Sysfs::resolve_for_reads`]); these trees must come out as
/// if every step had been checked.
fn tree_with_links_in_link_targets() -> (tempfile::TempDir, tempfile::TempDir) {
    let outside = tempfile::tempdir().unwrap();
    let o = outside.path();
    std::fs::create_dir_all(o.join("0000:02:00.0")).unwrap();
    std::fs::write(o.join("0000:02:00.0/class"), "host file\n").unwrap();
    std::os::unix::fs::symlink("/etc/hostname", o.join("0000:02:00.0/driver")).unwrap();
    let root = tempfile::tempdir().unwrap();
    let r = root.path();
    let devices = r.join("sys/devices/pci0000:00");
    for (dir, class) in [
        ("nested/real/0000:01:00.0", "0x030000\n"),
        ("nested/0000:05:00.0", "0x020000\n"),
        ("good/0000:03:00.0", "0x060400\n"),
    ] {
        std::fs::create_dir_all(devices.join(dir)).unwrap();
        std::fs::write(devices.join(dir).join("class"), class).unwrap();
    }
    std::os::unix::fs::symlink("nested/real", devices.join("swap")).unwrap();
    std::os::unix::fs::symlink(
        "../../swap/0000:01:00.0/class",
        devices.join("good/0000:03:00.0/gpu_class"),
    )
    .unwrap();
    std::os::unix::fs::symlink(o, devices.join("out")).unwrap();
    let bus = r.join("sys/bus/pci/devices");
    std::fs::create_dir_all(&bus).unwrap();
    for (name, target) in [
        ("0000:01:00.0", "swap/0000:01:00.0"),
        ("0000:02:00.0", "out/0000:02:00.0"),
        ("0000:03:00.0", "good/0000:03:00.0"),
        // `..` after a symlink leaves the link's target: `nested`, not `pci0000:00`.
        ("0000:05:00.0", "swap/../0000:05:00.0"),
    ] {
        let target = format!("../../../devices/pci0000:00/{target}");
        std::os::unix::fs::symlink(target, bus.join(name)).unwrap();
    }
    (outside, root)
}

/// Reads `class` beneath a bus link's target, as PCI discovery does.
fn class_of(fs: &Sysfs, function: &str) -> Result<String, SysfsError> {
    let dir = fs.resolve_for_reads(&format!("/sys/bus/pci/devices/{function}"))?;
    fs.read(&join(&dir, "class"))
}

#[test]
fn a_link_target_through_a_symlink_reads_as_if_every_step_were_checked() {
    let (_outside, root) = tree_with_links_in_link_targets();
    let fs = Sysfs::at(root.path());
    // A good device first: reads on this backend are now known to check paths.
    assert_eq!(class_of(&fs, "0000:03:00.0").unwrap(), "0x060400\n");
    assert_eq!(class_of(&fs, "0000:01:00.0").unwrap(), "0x030000\n");
    assert_eq!(
        fs.canonicalize("/sys/bus/pci/devices/0000:01:00.0")
            .unwrap(),
        "/sys/devices/pci0000:00/nested/real/0000:01:00.0"
    );
    assert_eq!(class_of(&fs, "0000:05:00.0").unwrap(), "0x020000\n");
    assert_eq!(class_of(&fs, "0000:03:00.0").unwrap(), "0x060400\n");
}

#[test]
fn a_file_link_whose_target_goes_through_a_symlink_is_read() {
    let (_outside, root) = tree_with_links_in_link_targets();
    let fs = Sysfs::at(root.path());
    assert_eq!(class_of(&fs, "0000:03:00.0").unwrap(), "0x060400\n");
    let good = fs
        .resolve_for_reads("/sys/bus/pci/devices/0000:03:00.0")
        .unwrap();
    assert_eq!(fs.read(&join(&good, "gpu_class")).unwrap(), "0x030000\n");
}

#[test]
fn a_link_target_through_a_symlink_out_of_the_root_is_not_followed_out() {
    let (_outside, root) = tree_with_links_in_link_targets();
    let fs = Sysfs::at(root.path());
    assert_eq!(class_of(&fs, "0000:03:00.0").unwrap(), "0x060400\n");
    // The absolute link is re-rooted: inside the root there is nothing there.
    assert!(class_of(&fs, "0000:02:00.0").unwrap_err().is_not_found());
    let fs = Sysfs::at(root.path());
    assert_eq!(class_of(&fs, "0000:03:00.0").unwrap(), "0x060400\n");
    // Nor do a listing, a readlink or an lstat beneath it, before any read there.
    let dir = fs
        .resolve_for_reads("/sys/bus/pci/devices/0000:02:00.0")
        .unwrap();
    assert!(fs.list(&dir).unwrap_err().is_not_found());
    assert!(
        fs.read_link(&join(&dir, "driver"))
            .unwrap_err()
            .is_not_found()
    );
    assert!(fs.kind(&join(&dir, "class")).unwrap_err().is_not_found());
    assert!(!fs.exists(&join(&dir, "class")));
}

/// A directory's files read by name ([`Sysfs::dir_files`]) answer as whole-path reads
/// do, on disk (one `openat2` beneath the open directory) and in memory: plain files, a
/// missing name, a FIFO (never a hang), a file past the size limit, a name that is a
/// symlink inside the root (followed there) and one out of it (re-rooted, so missing),
/// and a name with a slash; a recording keeps the same paths and bytes.
#[test]
fn files_read_by_name_answer_as_whole_paths() {
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret"), "host file\n").unwrap();
    let root = tempfile::tempdir().unwrap();
    let gids = root.path().join("sys/class/port/gids");
    std::fs::create_dir_all(&gids).unwrap();
    std::fs::write(gids.join("0"), "fe80:0000:0000:0000:0000:0000:0000:0001\n").unwrap();
    std::fs::write(gids.join("1"), "0000:0000:0000:0000:0000:0000:0000:0000\n").unwrap();
    std::fs::write(gids.join("big"), vec![b'x'; MAX_ATTR_BYTES + 1]).unwrap();
    std::fs::create_dir(gids.join("sub")).unwrap();
    std::fs::write(gids.join("sub/2"), "deeper\n").unwrap();
    std::os::unix::fs::symlink("0", gids.join("3")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("secret"), gids.join("4")).unwrap();
    rustix::fs::mknodat(
        rustix::fs::CWD,
        gids.join("fifo"),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o644),
        0,
    )
    .unwrap();
    let names = [
        "0", "1", "2", "3", "4", "big", "sub/2", "fifo", "sub", "", "..",
    ];
    let dir = "/sys/class/port/gids";
    let whole = Sysfs::at(root.path()).recording();
    let by_name = Sysfs::at(root.path()).recording();
    // A whole-path read first: from then on openat2 is known to work here.
    for fs in [&whole, &by_name] {
        fs.read("/sys/class/port/gids/0").unwrap();
    }
    let files = by_name.dir_files(dir);
    assert_eq!(files.open.is_some(), openat2_available());
    for name in names {
        let path = format!("{dir}/{name}");
        let expected = whole.read(&path);
        assert_eq!(files.read_with(name, str::to_owned), expected, "{name}");
        assert_eq!(files.path_of(name), path);
    }
    assert_eq!(by_name.journal(), whole.journal());
    for name in names {
        let path = format!("{dir}/{name}");
        assert_eq!(by_name.recorded(&path), whole.recorded(&path), "{name}");
    }
    assert_eq!(by_name.files_read(), whole.files_read());
    // In memory every name is read by its whole path.
    let mut t = MemTree::new();
    t.file("/sys/t/0", "a\n").link("/sys/t/1", "0");
    let fs = Sysfs::memory(t, "mem");
    let files = fs.dir_files("/sys/t");
    assert_eq!(files.read_with("1", str::to_owned).unwrap(), "a\n");
    assert!(
        files
            .read_with("2", str::to_owned)
            .unwrap_err()
            .is_not_found()
    );
}

/// Entries of a class's or a bus's directory are read as links first; those that are
/// not (`/sys/class/net/bonding_masters` is a file on every kernel with bonding, and a
/// capture may copy a device's directory) resolve as before, and a missing one says so.
#[test]
fn names_where_the_kernel_makes_links_resolve_when_they_are_not_links() {
    const FILES: [(&str, &str); 4] = [
        ("/sys/class/net/eth0/mtu", "1500\n"),
        ("/sys/class/net/bonding_masters", "bond0\n"),
        ("/sys/devices/pci0000:00/0000:00:01.0/vendor", "0x8086\n"),
        ("/sys/bus/pci/devices/0000:02:00.0/vendor", "0x15b3\n"),
    ];
    const LINK: (&str, &str) = (
        "/sys/bus/pci/devices/0000:00:01.0",
        "../../../devices/pci0000:00/0000:00:01.0",
    );
    let mut t = MemTree::new();
    let root = tempfile::tempdir().unwrap();
    let on_disk = |path: &str| root.path().join(path.trim_start_matches('/'));
    for (path, text) in FILES {
        t.file(path, text);
        let at = on_disk(path);
        std::fs::create_dir_all(at.parent().unwrap()).unwrap();
        std::fs::write(at, text).unwrap();
    }
    t.link(LINK.0, LINK.1);
    std::os::unix::fs::symlink(LINK.1, on_disk(LINK.0)).unwrap();
    for fs in [Sysfs::at(root.path()), Sysfs::memory(t, "mem")] {
        for (path, text) in FILES {
            assert_eq!(fs.read(path).unwrap(), text, "{path}");
        }
        assert_eq!(
            fs.canonicalize(LINK.0).unwrap(),
            "/sys/devices/pci0000:00/0000:00:01.0"
        );
        assert_eq!(fs.read(&join(LINK.0, "vendor")).unwrap(), "0x8086\n");
        let missing = fs.read("/sys/class/net/eth9/mtu").unwrap_err();
        assert!(missing.is_not_found(), "{missing}");
        assert!(
            missing.to_string().contains("/sys/class/net/eth9"),
            "{missing}"
        );
    }
}
