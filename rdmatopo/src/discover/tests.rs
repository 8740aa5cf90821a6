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
