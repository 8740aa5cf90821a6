//! The GPUs' votes: the driver's procfs list, the `/dev/nvidia<N>` nodes, the GPUs NVML
//! lists, `NVIDIA_VISIBLE_DEVICES` and `PCIDEVICE_*`; then the GPUs CUDA enumerates
//! (`CUDA_VISIBLE_DEVICES`).

use super::analysis::Analysis;
use super::context::nvidia_runtime_mounts;
use super::ownership::{Evidence, Owned, Ownership};
use super::voting::{Tally, Vote};
use crate::model::Gpu;
use crate::parse::PciAddr;
use std::collections::{BTreeMap, BTreeSet};

impl<'a> Analysis<'a> {
    /// `/dev/nvidia<N>` minor of each GPU: NVML's, else the driver's procfs line.
    fn gpu_minors(&mut self) -> BTreeMap<PciAddr, (u32, &'static str)> {
        let mut out = BTreeMap::new();
        for g in &self.topo.gpus {
            // NVML's own answer: `Gpu::minor` falls back to the driver's procfs line.
            let nvml = self
                .topo
                .nvml
                .as_ref()
                .and_then(|n| n.gpu(g.pci))
                .and_then(|n| n.minor_number);
            let procfs = self.proc_info(g.pci).and_then(|i| i.minor);
            match (nvml, procfs) {
                (Some(n), Some(m)) if n != m => {
                    self.findings.push(format!(
                        "GPU {}: NVML says minor {n}, /proc/driver/nvidia/gpus/{}/information says {m}",
                        g.pci, g.pci
                    ));
                    out.insert(g.pci, (n, "NVML"));
                }
                (Some(n), _) => {
                    out.insert(g.pci, (n, "NVML"));
                }
                (None, Some(m)) => {
                    out.insert(g.pci, (m, "procfs"));
                }
                (None, None) => {}
            }
        }
        out
    }

    fn proc_info(&self, pci: PciAddr) -> Option<&'a crate::model::NvidiaProcGpu> {
        self.topo
            .process
            .proc_nvidia_gpu_info
            .iter()
            .find(|i| i.bus_id.parse::<PciAddr>().ok() == Some(pci))
    }

    /// UUID of a GPU: NVML's, else the driver's procfs line.
    fn gpu_uuid(&self, g: &Gpu) -> Option<String> {
        g.uuid
            .clone()
            .or_else(|| self.proc_info(g.pci).and_then(|i| i.uuid.clone()))
    }

    pub(super) fn gpus(&mut self) -> Vec<Owned<PciAddr>> {
        let topo = self.topo;
        let mut tallies: BTreeMap<PciAddr, Tally> = topo
            .gpus
            .iter()
            .map(|g| (g.pci, Tally::default()))
            .collect();
        if topo.gpus.is_empty() {
            return Vec::new();
        }
        self.vote_gpu_procfs(&mut tallies);
        self.vote_gpu_dev_nodes(&mut tallies);
        self.vote_gpu_nvml(&mut tallies);
        self.vote_nvidia_visible_devices(&mut tallies);
        for (addr, var) in &self.pcidevice {
            if let Some(t) = tallies.get_mut(addr) {
                t.add(Vote::For, var.clone(), format!("names {addr}"));
            }
        }
        let context = self.context;
        if context.is_container() && !tallies.values().any(Tally::voted) {
            self.findings.push(format!(
                "no source narrows the {} GPUs down to this container's (no NVIDIA runtime mount, no device node, /proc/driver/nvidia entry or NVML GPU missing, no GPU list in NVIDIA_VISIBLE_DEVICES): a container without the NVIDIA runtime, a privileged one, or a capture without /dev",
                tallies.len()
            ));
        }
        let out: Vec<Owned<PciAddr>> = topo
            .gpus
            .iter()
            .map(|g| {
                let tally = tallies.remove(&g.pci).unwrap_or_default();
                let (state, evidence) =
                    tally.decide(&format!("GPU {}", g.pci), context, &mut self.findings);
                Owned {
                    key: g.pci,
                    state,
                    evidence,
                }
            })
            .collect();
        out
    }

    fn vote_gpu_procfs(&mut self, tallies: &mut BTreeMap<PciAddr, Tally>) {
        let p = &self.topo.process;
        if !p.proc_driver_nvidia {
            return;
        }
        let mut listed = BTreeSet::new();
        for name in &p.proc_nvidia_gpus {
            match name.parse::<PciAddr>() {
                Ok(a) if tallies.contains_key(&a) => {
                    listed.insert(a);
                }
                _ => self.findings.push(format!(
                    "/proc/driver/nvidia/gpus/{name} is not an NVIDIA GPU under /sys/bus/pci/devices"
                )),
            }
        }
        let subset = listed.len() < tallies.len();
        for (addr, t) in tallies.iter_mut() {
            let path = format!("/proc/driver/nvidia/gpus/{addr}");
            if listed.contains(addr) {
                if self.nvidia_procfs_masked {
                    t.add(
                        Vote::For,
                        path,
                        "listed in the NVIDIA runtime's /proc/driver/nvidia",
                    );
                } else if subset && self.context.is_container() {
                    t.add(Vote::For, path, "listed, while other GPUs are not");
                } else {
                    t.add(Vote::Note, path, "listed");
                }
            } else {
                let driver = self.topo.pci_function(*addr).and_then(|f| f.driver.clone());
                let why = match driver.as_deref() {
                    Some("nvidia") | None => "not listed".to_string(),
                    Some(d) => format!("not listed (bound to {d}, not nvidia)"),
                };
                t.add(Vote::Against, path, why);
            }
        }
    }

    /// NVML inside a container lists the GPUs this process may open and passes over the
    /// others (NVIDIA/nvidia-docker#170), whatever `/dev` holds: a device node can be
    /// created where the device cgroup refuses it (by NVML itself in CDI containers
    /// before the toolkit's `disable-device-node-modification` hook,
    /// NVIDIA/nvidia-container-toolkit#1203), so such a node is no vote
    /// ([`Self::vote_gpu_dev_nodes`]). A list of every GPU narrows nothing; a list short
    /// of GPUs NVML counted but could not read rules none out.
    fn vote_gpu_nvml(&mut self, tallies: &mut BTreeMap<PciAddr, Tally>) {
        let Some(nvml) = &self.topo.nvml else {
            return;
        };
        // An empty list says more of NVML than of the container.
        if !self.context.is_container() || nvml.gpus.is_empty() {
            return;
        }
        let opened = |addr: &PciAddr| nvml.gpu(*addr).is_some();
        let subset = !tallies.keys().all(opened);
        for (addr, t) in tallies.iter_mut() {
            if opened(addr) {
                if subset {
                    t.add(Vote::For, "NVML", "lists it, and not every GPU");
                } else {
                    t.add(Vote::Note, "NVML", "lists it, as every GPU");
                }
            } else if self.nvml_refuses(*addr) {
                t.add(
                    Vote::Against,
                    "NVML",
                    "does not list it: this container may not open it",
                );
            } else {
                let unread =
                    (nvml.device_count.unwrap_or(0) as usize).saturating_sub(nvml.gpus.len());
                t.add(
                    Vote::Note,
                    "NVML",
                    format!("does not list it, but could not read {unread} of the GPUs it counts"),
                );
            }
        }
    }

    /// Whether NVML in this container, having read every GPU it counts, leaves out the
    /// GPU at `pci`: the container may not open it, whatever `/dev` holds.
    fn nvml_refuses(&self, pci: PciAddr) -> bool {
        self.context.is_container()
            && self.topo.nvml.as_ref().is_some_and(|n| {
                !n.gpus.is_empty()
                    && n.device_count.is_none_or(|c| c as usize <= n.gpus.len())
                    && n.gpu(pci).is_none()
            })
    }

    fn vote_gpu_dev_nodes(&mut self, tallies: &mut BTreeMap<PciAddr, Tally>) {
        let p = &self.topo.process;
        if !p.dev_listed {
            return;
        }
        let minors = self.gpu_minors();
        let present: BTreeSet<u32> = p.dev_nvidia.iter().copied().collect();
        let mapped: BTreeSet<u32> = minors.values().map(|(m, _)| *m).collect();
        let unmapped: Vec<String> = present
            .difference(&mapped)
            .map(|m| format!("/dev/nvidia{m}"))
            .collect();
        if !unmapped.is_empty() && self.filtered_dev {
            self.findings.push(format!(
                "{} present but no GPU here has that minor number (minors come from NVML or /proc/driver/nvidia/gpus/*/information)",
                unmapped.join(", ")
            ));
        }
        let bind_mounted: BTreeSet<String> = p
            .device_mounts
            .iter()
            .map(|m| m.mount_point.clone())
            .collect();
        for (addr, t) in tallies.iter_mut() {
            let Some((minor, origin)) = minors.get(addr).copied() else {
                // Without its minor a GPU can still be ruled out: when every node
                // present is another GPU's, none is this one's.
                let (vote, value) = if present.is_empty() {
                    (Vote::Against, "no /dev/nvidia<N> node at all")
                } else if unmapped.is_empty() {
                    (
                        Vote::Against,
                        "minor number unknown, and every /dev/nvidia<N> present is another GPU's",
                    )
                } else {
                    (
                        Vote::Note,
                        "minor number unknown (no NVML, no /proc/driver/nvidia/gpus/*/information): cannot tell which /dev/nvidia<N> is this GPU",
                    )
                };
                let vote = if self.filtered_dev { vote } else { Vote::Note };
                t.add(vote, "/dev", value);
                continue;
            };
            let path = format!("/dev/nvidia{minor}");
            let from = match origin {
                "NVML" => "minor from NVML",
                _ => "minor from /proc/driver/nvidia/gpus/*/information",
            };
            if bind_mounted.contains(&path) {
                t.add(
                    Vote::For,
                    path,
                    format!("bind-mounted by the NVIDIA container runtime ({from})"),
                );
            } else if present.contains(&minor) && self.nvml_refuses(*addr) {
                t.add(
                    Vote::Note,
                    path,
                    format!(
                        "present ({from}), but NVML here does not list it: a node made inside the container, which may not open it"
                    ),
                );
            } else if present.contains(&minor) {
                let vote = if self.filtered_dev {
                    Vote::For
                } else {
                    Vote::Note
                };
                t.add(vote, path, format!("present ({from})"));
            } else {
                let vote = if self.filtered_dev {
                    Vote::Against
                } else {
                    Vote::Note
                };
                t.add(vote, path, format!("absent ({from})"));
            }
        }
    }

    /// `NVIDIA_VISIBLE_DEVICES`: what the NVIDIA container runtime was asked to give.
    /// Indices are the host's NVML indices, which follow PCI order, as `Gpu::index`.
    fn vote_nvidia_visible_devices(&mut self, tallies: &mut BTreeMap<PciAddr, Tally>) {
        const VAR: &str = "NVIDIA_VISIBLE_DEVICES";
        let Some(value) = self.topo.process.env.get(VAR).cloned() else {
            return;
        };
        if !self.context.is_container() {
            return;
        }
        let trimmed = value.trim();
        match trimmed {
            "" | "void" => {
                for t in tallies.values_mut() {
                    t.add(
                        Vote::Note,
                        VAR,
                        format!("{trimmed:?}: the NVIDIA runtime was told to change nothing"),
                    );
                }
                return;
            }
            "none" => {
                for t in tallies.values_mut() {
                    t.add(Vote::Against, VAR, "none: the NVIDIA runtime gives no GPU");
                }
                return;
            }
            "all" => {
                let runtime = !nvidia_runtime_mounts(self.topo).is_empty();
                for t in tallies.values_mut() {
                    if runtime {
                        t.add(
                            Vote::For,
                            VAR,
                            "all, and the NVIDIA runtime's mounts are present",
                        );
                    } else {
                        t.add(
                            Vote::Note,
                            VAR,
                            "all, but no NVIDIA runtime mount in /proc/self/mountinfo (CUDA images set it whatever the runtime does)",
                        );
                    }
                }
                return;
            }
            _ => {}
        }
        let (tokens, source): (Vec<String>, String) = if trimmed.starts_with('/') {
            let list = &self.topo.process.nvidia_container_devices;
            if trimmed.trim_end_matches('/') != "/var/run/nvidia-container-devices" {
                self.findings
                    .push(format!("{VAR}={trimmed}: not a form rdmatopo reads"));
                return;
            }
            if list.is_empty() {
                self.findings.push(format!(
                    "{VAR}={trimmed}, but that directory lists no device"
                ));
                return;
            }
            (list.clone(), format!("{VAR} ({trimmed})"))
        } else {
            (
                trimmed
                    .split(',')
                    .map(|s| s.trim().to_string())
                    .filter(|s| !s.is_empty())
                    .collect(),
                VAR.to_string(),
            )
        };
        let mut named: BTreeMap<PciAddr, String> = BTreeMap::new();
        let mut unresolved = false;
        for token in &tokens {
            match self.resolve_gpu_token(token) {
                Ok((addr, how)) => {
                    named.insert(addr, how);
                }
                Err(why) => {
                    unresolved = true;
                    self.findings.push(format!("{source}: {token}: {why}"));
                }
            }
        }
        for (addr, t) in tallies.iter_mut() {
            match named.get(addr) {
                Some(how) => t.add(Vote::For, source.clone(), format!("names it: {how}")),
                // An entry that could not be resolved may be this very GPU.
                None if unresolved => t.add(
                    Vote::Note,
                    source.clone(),
                    "does not name it by index or UUID",
                ),
                None => t.add(Vote::Against, source.clone(), "does not name it"),
            }
        }
    }

    /// One entry of `NVIDIA_VISIBLE_DEVICES`: an index, `<gpu>:<mig>`, a UUID or a
    /// unique UUID prefix.
    fn resolve_gpu_token(&self, token: &str) -> Result<(PciAddr, String), String> {
        let gpus = &self.topo.gpus;
        let by_index = |i: u32| gpus.iter().find(|g| g.index == i).map(|g| g.pci);
        if let Ok(i) = token.parse::<u32>() {
            return by_index(i)
                .map(|a| (a, format!("index {i}")))
                .ok_or_else(|| format!("index {i}, but there are {} GPUs", gpus.len()));
        }
        if let Some((gpu, mig)) = token.split_once(':')
            && let (Ok(i), Ok(_)) = (gpu.parse::<u32>(), mig.parse::<u32>())
        {
            return by_index(i)
                .map(|a| (a, format!("{token} (a MIG device of GPU {i})")))
                .ok_or_else(|| format!("GPU index {i}, but there are {} GPUs", gpus.len()));
        }
        if token.starts_with("MIG-") {
            return Err(
                "a MIG device UUID: which GPU holds it needs NVML's MIG listing".to_string(),
            );
        }
        if token.starts_with("GPU-") {
            let known: Vec<(PciAddr, String)> = gpus
                .iter()
                .filter_map(|g| Some((g.pci, self.gpu_uuid(g)?)))
                .collect();
            let hits: Vec<&(PciAddr, String)> = known
                .iter()
                .filter(|(_, u)| u.eq_ignore_ascii_case(token) || starts_with_ci(u, token))
                .collect();
            return match hits.as_slice() {
                [(a, u)] if u.eq_ignore_ascii_case(token) => Ok((*a, format!("UUID {u}"))),
                [(a, u)] => Ok((*a, format!("UUID prefix of {u}"))),
                [] => Err(format!(
                    "matches no GPU UUID known here (UUIDs known for {} of {} GPUs)",
                    known.len(),
                    gpus.len()
                )),
                many => Err(format!("a UUID prefix matching {} GPUs", many.len())),
            };
        }
        Err("not an index, a GPU UUID, all, none or void".to_string())
    }

    /// The GPUs CUDA will enumerate, and a note per GPU. Entries are resolved against
    /// the GPUs this process can open (owned, or unknown), in PCI order; an invalid
    /// entry hides itself and every entry after it, as CUDA does.
    #[allow(clippy::type_complexity)]
    pub(super) fn cuda_visible(
        &mut self,
        gpus: &[Owned<PciAddr>],
    ) -> (Option<Vec<PciAddr>>, Option<BTreeMap<PciAddr, Evidence>>) {
        const VAR: &str = "CUDA_VISIBLE_DEVICES";
        let Some(value) = self.topo.process.env.get(VAR).cloned() else {
            return (None, None);
        };
        let openable: Vec<PciAddr> = gpus
            .iter()
            .filter(|g| g.state != Ownership::Visible)
            .map(|g| g.key)
            .collect();
        let mut out: Vec<PciAddr> = Vec::new();
        let mut notes = BTreeMap::new();
        let mut used_index = false;
        let tokens: Vec<&str> = value.split(',').map(str::trim).collect();
        for (pos, token) in tokens.iter().enumerate() {
            let rest = if pos + 1 < tokens.len() {
                " and every entry after it"
            } else {
                ""
            };
            let resolved: Result<PciAddr, String> = if let Ok(i) = token.parse::<usize>() {
                used_index = true;
                openable.get(i).copied().ok_or_else(|| {
                    format!(
                        "index {i}, but this process can open {} GPU{}",
                        openable.len(),
                        if openable.len() == 1 { "" } else { "s" }
                    )
                })
            } else if token.starts_with("GPU-") {
                match self.resolve_gpu_token(token) {
                    Ok((a, _)) if openable.contains(&a) => Ok(a),
                    Ok((a, _)) => Err(format!("GPU {a}, which this container was not given")),
                    Err(why) => Err(why),
                }
            } else if token.is_empty() && tokens.len() == 1 {
                if !openable.is_empty() {
                    self.findings.push(format!(
                        "{VAR} is empty: CUDA sees none of the {} GPU{} this process can open",
                        openable.len(),
                        if openable.len() == 1 { "" } else { "s" }
                    ));
                }
                break;
            } else {
                Err("not an index or a GPU UUID".to_string())
            };
            match resolved {
                Ok(a) if out.contains(&a) => {
                    self.findings.push(format!(
                        "{VAR}={value}: {token} names GPU {a} twice; CUDA hides it{rest}"
                    ));
                    break;
                }
                Ok(a) => {
                    notes.insert(
                        a,
                        Evidence::new(VAR, format!("CUDA device {} ({token})", out.len())),
                    );
                    out.push(a);
                }
                Err(why) => {
                    self.findings.push(format!(
                        "{VAR}={value}: {token}: {why}; CUDA hides it{rest}"
                    ));
                    break;
                }
            }
        }
        if used_index {
            let order = self.topo.process.env.get("CUDA_DEVICE_ORDER");
            let models: BTreeSet<Option<&str>> = self
                .topo
                .gpus
                .iter()
                .filter(|g| openable.contains(&g.pci))
                .map(|g| g.name.as_deref())
                .collect();
            if order.map(String::as_str) != Some("PCI_BUS_ID") && models.len() > 1 {
                self.findings.push(format!(
                    "{VAR} uses indices, CUDA_DEVICE_ORDER is not PCI_BUS_ID and the GPUs differ: CUDA numbers the fastest first, so the indices were read in PCI order as an assumption"
                ));
            }
        }
        (Some(out), Some(notes))
    }
}

fn starts_with_ci(s: &str, prefix: &str) -> bool {
    s.len() >= prefix.len()
        && s.is_char_boundary(prefix.len())
        && s[..prefix.len()].eq_ignore_ascii_case(prefix)
}
