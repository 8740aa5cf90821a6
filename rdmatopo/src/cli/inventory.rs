use super::args::{Format, RootArgs};
use super::output::{Output, nothing_found_line};
use crate::Topology;
use crate::model::Severity;
use crate::view::container::{ContainerView, Context, Evidence, Ownership};
use clap::Args;
use std::fmt::Write;

#[derive(Args, Debug)]
pub struct InventoryArgs {
    #[command(flatten)]
    pub root: RootArgs,
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
    /// Every device in full, even inside a container. The default there, where its
    /// devices are certain, is the model of what it owns: its devices in full, the
    /// others by name only, as `discover()` in Python and C gives it.
    #[arg(long)]
    pub all: bool,
    /// The default; kept for scripts written when `--all` was.
    #[arg(long, hide = true, conflicts_with = "all")]
    pub owned: bool,
}

pub fn run(args: &InventoryArgs) -> Result<Output, String> {
    let topo = args.root.discover_owned(crate::Needs::ALL, args.all)?;
    let view = ContainerView::of(&topo);
    let text = match args.format {
        Format::Json => crate::inventory_json(&topo),
        Format::Table => table(&topo, &view),
    };
    Ok(Output::ok(text))
}

/// The ownership word and, inside a container or for a device that is not this
/// machine's, the evidence, one fact a line.
fn ownership(s: &mut String, view: &ContainerView, state: Ownership, evidence: &[Evidence]) {
    let _ = writeln!(s, "  {state}");
    if view.context.is_container() || state != Ownership::Owned {
        for e in evidence {
            let _ = writeln!(s, "      {e}");
        }
    }
}

fn context_section(s: &mut String, topo: &Topology, view: &ContainerView) {
    let network = match (view.context, view.host_network) {
        (Context::Host | Context::PodHostNetwork, _) => "",
        (_, true) => ", host network",
        (_, false) => ", own network namespace",
    };
    let netns = match view.rdma_netns_mode {
        Some(m) => format!("{m:?}").to_lowercase(),
        None => "unknown".to_string(),
    };
    let certainty = if view.certain {
        "known"
    } else {
        "not known for certain"
    };
    let _ = writeln!(
        s,
        "Context: {}{network}; RDMA netns mode {netns}; ownership of GPUs and RDMA devices {certainty}",
        view.context
    );
    for e in &view.context_evidence {
        let _ = writeln!(s, "  {e}");
    }
    if view.context.is_container() {
        let tally = |states: Vec<Ownership>| {
            let parts: Vec<String> = [Ownership::Owned, Ownership::Visible, Ownership::Unknown]
                .iter()
                .map(|s| (s, states.iter().filter(|x| *x == s).count()))
                .filter(|(_, n)| *n > 0)
                .map(|(s, n)| format!("{n} {s}"))
                .collect();
            if parts.is_empty() {
                "none".to_string()
            } else {
                parts.join(", ")
            }
        };
        let _ = writeln!(
            s,
            "  GPUs: {}; RDMA devices: {}; netdevs: {}",
            tally(view.gpus.iter().map(|o| o.state).collect()),
            match topo.other_rdma_device_count() {
                0 => tally(view.rdma.iter().map(|o| o.state).collect()),
                n => format!(
                    "{}, {n} named only",
                    tally(view.rdma.iter().map(|o| o.state).collect())
                ),
            },
            tally(view.netdevs.iter().map(|o| o.state).collect()),
        );
    }
    if let Some(cuda) = &view.cuda_visible {
        let list: Vec<String> = cuda.iter().map(ToString::to_string).collect();
        let _ = writeln!(
            s,
            "  CUDA_VISIBLE_DEVICES selects {}",
            if list.is_empty() {
                "no GPU".to_string()
            } else {
                list.join(", ")
            }
        );
    }
    if !view.findings.is_empty() {
        let _ = writeln!(s, "Container findings:");
        for f in &view.findings {
            let _ = writeln!(s, "  {f}");
        }
    }
}

fn opt<T: ToString>(v: &Option<T>) -> String {
    v.as_ref().map_or("-".to_string(), T::to_string)
}

fn table(topo: &Topology, view: &ContainerView) -> String {
    let mut s = String::new();
    if let Some(line) = nothing_found_line(topo) {
        s.push_str(&line);
    }
    let _ = writeln!(s, "Root: {}", topo.root);
    context_section(&mut s, topo, view);
    let _ = writeln!(s, "\nNUMA nodes:");
    for n in &topo.numa_nodes {
        let _ = writeln!(
            s,
            "  node{}  cpus {}  distances {:?}",
            n.id, n.cpus, n.distances
        );
    }
    if let Some(c) = &view.cpus {
        let _ = writeln!(s, "  this process may run on cpus {c}");
        if view.context.is_container() {
            for e in &view.cpus_evidence {
                let _ = writeln!(s, "      {e}");
            }
        }
    }
    let _ = writeln!(s, "\nGPUs:");
    let names = crate::view::GpuNames::of_view(view);
    for (g, o) in topo.gpus.iter().zip(&view.gpus) {
        let _ = write!(
            s,
            "  {}  {}  {}  numa {}  {}",
            names.name_and_host(g),
            g.pci,
            g.name.as_deref().unwrap_or("-"),
            opt(&g.numa_node),
            g.uuid.as_deref().unwrap_or("-")
        );
        ownership(&mut s, view, o.state, &o.evidence);
    }
    for f in topo.unnumbered_gpus() {
        let _ = writeln!(
            s,
            "  -     {}  {}  {}: not the NVIDIA driver's, no GPU number (nvidia-smi, CUDA and NCCL do not see it)",
            f.address,
            f.device_name.as_deref().unwrap_or("-"),
            f.driver
                .as_deref()
                .map_or("bound to no driver".into(), |d| format!("bound to {d}"))
        );
    }
    let _ = writeln!(s, "\nRDMA devices:");
    let others = topo.other_rdma_devices();
    let count = topo.other_rdma_device_count();
    if count > 0 {
        let shown = others.len().min(8);
        let _ = writeln!(
            s,
            "  {count} other device(s), named only (another container's): {}{}",
            others[..shown].join(" "),
            if shown < count { " …" } else { "" }
        );
    }
    for d in &topo.rdma_devices {
        let f = d.pci.and_then(|a| topo.pci_function(a));
        let id = f
            .map(|f| format!("{} {}", f.id(), f.device_name.as_deref().unwrap_or("")))
            .unwrap_or_default();
        let vf = if f.is_some_and(|f| f.is_vf) {
            " (VF)"
        } else {
            ""
        };
        let _ = write!(
            s,
            "  {}  {}  {}{}  fw {}",
            d.name,
            opt(&d.pci),
            id.trim(),
            vf,
            d.fw_ver.as_deref().unwrap_or("-")
        );
        match view.rdma.iter().find(|o| o.key == d.name) {
            Some(o) => ownership(&mut s, view, o.state, &o.evidence),
            None => s.push('\n'),
        }
        for p in &d.ports {
            let _ = writeln!(
                s,
                "    port {}  {:?}  {}  {}  netdev {}  {} GIDs",
                p.number,
                p.state.map_or("-".into(), |st| format!("{st:?}")),
                p.link_layer.map_or("-", |l| l.as_str()),
                p.rate.as_ref().map_or("-".into(), |r| format!(
                    "{} Gb/s ({}X {})",
                    r.gbps, r.lanes, r.speed
                )),
                p.netdev.as_deref().unwrap_or("-"),
                p.gids.len()
            );
        }
    }
    let _ = writeln!(s, "\nNetdevs:");
    for n in &topo.netdevs {
        let line = format!(
            "  {}  {:?}  pci {}  mtu {}  {}  {}",
            n.name,
            n.kind,
            opt(&n.pci),
            opt(&n.mtu),
            n.operstate.as_deref().unwrap_or("-"),
            n.ipv4.join(" ")
        );
        s.push_str(line.trim_end());
        match view.netdevs.iter().find(|o| o.key == n.name) {
            Some(o) => ownership(&mut s, view, o.state, &o.evidence),
            None => s.push('\n'),
        }
    }
    let bridges = topo.pci.iter().filter(|f| f.is_bridge()).count();
    let _ = writeln!(
        s,
        "\nPCI: {} functions ({} bridges) under {} host bridges",
        topo.pci.len(),
        bridges,
        topo.host_bridges.len()
    );
    let warnings = topo
        .diagnostics
        .iter()
        .filter(|d| d.severity >= Severity::Warning)
        .count();
    let _ = writeln!(
        s,
        "Diagnostics: {} ({} warnings or worse)",
        topo.diagnostics.len(),
        warnings
    );
    for d in topo
        .diagnostics
        .iter()
        .filter(|d| d.severity >= Severity::Warning)
    {
        let _ = writeln!(s, "  {:?} {}: {}", d.severity, d.code, d.message);
    }
    s
}
