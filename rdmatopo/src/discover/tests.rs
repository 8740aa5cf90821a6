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
