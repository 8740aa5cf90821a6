//! Where the NVIDIA driver shows itself in sysfs: its GPUs, and whether it is loaded.

/// The driver whose GPUs NVML and nvidia-smi number.
pub const NVIDIA_DRIVER: &str = "nvidia";
/// The driver's directory: a link for each PCI function it holds, beside its `bind`,
/// `unbind`, `new_id`, `remove_id` and `uevent` files (drivers/base/bus.c,
/// drivers/pci/pci-driver.c) and its `module` link.
pub const NVIDIA_DRIVER_DIR: &str = "/sys/bus/pci/drivers/nvidia";
/// The PCI driver that binds ConnectX-8 Data Direct DMA functions (`15b3:2100`, its
/// only id): drivers/infiniband/hw/mlx5/data_direct.c registers it as `KBUILD_MODNAME`,
/// and data_direct.o is part of mlx5_ib.ko, so it is named `mlx5_ib`.
pub const DATA_DIRECT_DRIVER_DIR: &str = "/sys/bus/pci/drivers/mlx5_ib";
