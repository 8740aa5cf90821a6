use super::*;
use crate::sysfs::MemTree;

#[test]
fn natural_order() {
    let mut v = vec!["mlx5_10", "mlx5_2", "mlx5_bond_0", "mlx5_1"];
    v.sort_by(|a, b| natural_cmp(a, b));
    assert_eq!(v, ["mlx5_1", "mlx5_2", "mlx5_10", "mlx5_bond_0"]);
}

#[test]
fn a_root_without_sysfs_is_the_only_error() {
    let fs = Sysfs::memory(MemTree::new(), "empty");
    assert!(matches!(
        Discoverer::new(&fs).discover(),
        Err(DiscoverError::NoSysfs { .. })
    ));
}
