//! Where the NVIDIA driver shows itself in sysfs: its GPUs, and whether it is loaded.

/// The driver whose GPUs NVML and nvidia-smi number.
pub const NVIDIA_DRIVER: &str = "nvidia";
/// The driver's directory: a link for each PCI function it holds, beside its `bind`,
/// `unbind`, `new_id`, `remove_id` and `uevent` files (drivers/base/bus.c,
/// drivers/pci/pci-driver.c) and its `module` link.
pub const NVIDIA_DRIVER_DIR: &str = "/sys/bus/pci/drivers/nvidia";
