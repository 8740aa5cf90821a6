//! How findings name things: a port, a port's state, the sysfs directory of a function
//! or a port, a list of names.

/// `mlx5_0`, `mlx5_0 port 2` (port shown only on multi-port devices).
pub(super) fn port_name(dev: &crate::model::RdmaDevice, port: u32) -> String {
    if dev.ports.len() > 1 {
        format!("{} port {port}", dev.name)
    } else {
        dev.name.clone()
    }
}

/// A port state as the kernel prints it (`4: ACTIVE`).
pub(super) fn state_text(port: &crate::model::Port) -> String {
    use crate::parse::PortState as S;
    match port.state {
        Some(S::Nop) => "0: NOP",
        Some(S::Down) => "1: DOWN",
        Some(S::Init) => "2: INIT",
        Some(S::Armed) => "3: ARMED",
        Some(S::Active) => "4: ACTIVE",
        Some(S::ActiveDefer) => "5: ACTIVE_DEFER",
        Some(S::Unknown) => "UNKNOWN",
        None => "unreadable",
    }
    .to_string()
}

/// Logical sysfs directory of a PCI function (`/sys/bus/pci/devices/<bdf>`).
pub(super) fn pci_dir(addr: crate::parse::PciAddr) -> String {
    format!("/sys/bus/pci/devices/{addr}")
}

/// Logical sysfs directory of an RDMA port.
pub(super) fn port_dir(dev: &str, port: u32) -> String {
    format!("/sys/class/infiniband/{dev}/ports/{port}")
}

/// Join at most `max` names, then say how many there are in all.
pub(super) fn short_list<S: AsRef<str>>(names: &[S], max: usize) -> String {
    let first: Vec<String> = names
        .iter()
        .take(max)
        .map(|n| n.as_ref().to_string())
        .collect();
    if names.len() <= max {
        return list(&first);
    }
    format!("{}, … ({} in all)", first.join(", "), names.len())
}

/// Join names: `a, b and c`.
pub(super) fn list(names: &[String]) -> String {
    match names {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}
