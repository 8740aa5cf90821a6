use super::ctx::thread_limit;
use super::*;
use crate::sysfs::MemTree;

#[test]
fn a_root_without_sysfs_is_the_only_error() {
    let fs = Sysfs::memory(MemTree::new(), "empty");
    assert!(matches!(
        Discoverer::new(&fs).discover(),
        Err(DiscoverError::NoSysfs { .. })
    ));
}

#[test]
fn a_containers_needs_add_the_ownership_view_to_the_answers() {
    assert_eq!(Needs::TOPO.in_container(), Needs::TOPO_IN_CONTAINER);
    for needs in [Needs::ALL, Needs::NCCL_ENV, Needs::TOPO_IN_CONTAINER] {
        assert_eq!(needs.in_container(), needs);
    }
    // What `gids` and `netdevs` print is kept, without NVML.
    let gids = Needs::GIDS.in_container();
    assert_eq!(gids.gids, GidFacts::Whole);
    assert!(gids.machine && !gids.sources && gids.uverbs && gids.process_whole);
    let netdevs = Needs::NETDEVS.in_container();
    assert_eq!(netdevs.netdevs, NetdevFacts::Whole);
    assert_eq!(netdevs.gids, GidFacts::UpToNetdev);
    assert!(!netdevs.sources);
}

/// Work spread inside a reading thread (a device's GID slots while devices are read side
/// by side) uses only the CPUs the other threads leave: never more threads in all than a
/// read may use, and results and their order as a sequential run gives them.
#[test]
fn spreading_inside_a_reading_thread_stays_within_the_thread_limit() {
    use std::collections::HashSet;
    use std::sync::Mutex;
    let fs = Sysfs::memory(MemTree::new(), "empty");
    let mut ctx = Ctx::new(&fs, Needs::ALL);
    let seen = Mutex::new(HashSet::new());
    let note = || {
        // Long enough per item that a started thread takes some.
        std::thread::sleep(std::time::Duration::from_millis(1));
        seen.lock().unwrap().insert(std::thread::current().id());
    };
    let devices: Vec<usize> = (0..2).collect();
    let read = ctx.par_filter_map(&devices, 1, |ctx, device| {
        note();
        let slots: Vec<usize> = (0..64).collect();
        Some(ctx.par_filter_map(&slots, 1, |_, slot| {
            note();
            Some(device * 100 + slot)
        }))
    });
    let expected: Vec<Vec<usize>> = devices
        .iter()
        .map(|d| (0..64).map(|s| d * 100 + s).collect())
        .collect();
    assert_eq!(read, expected);
    let threads = seen.lock().unwrap().len();
    assert!(
        threads <= thread_limit(),
        "{threads} threads read, at most {} may",
        thread_limit()
    );
}
