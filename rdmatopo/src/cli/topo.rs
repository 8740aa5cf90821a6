use super::args::{Format, RootArgs};
use super::output::{Output, json, nothing_found_line};
use crate::Topology;
use crate::view::container::{ContainerView, Context, Ownership};
use crate::view::nic_order::{self, NicOrder};
use crate::view::{GpuNames, TopoMatrix};
use clap::Args;
use std::io::IsTerminal;

#[derive(Args, Debug)]
pub struct TopoArgs {
    #[command(flatten)]
    pub root: RootArgs,
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
    /// Only the GPUs and RDMA devices this container owns. The default inside a
    /// container when ownership is known for certain.
    #[arg(long, conflicts_with = "all")]
    pub owned: bool,
    /// Every GPU and RDMA device visible, even inside a container.
    #[arg(long)]
    pub all: bool,
    /// The matrix, which is all `topo` prints: taken, as `nvidia-smi topo -m` takes it.
    #[arg(short = 'm', long = "matrix")]
    pub matrix: bool,
}

pub fn run(args: &TopoArgs) -> Result<Output, String> {
    let fs = args.root.open()?;
    // A host's matrix needs only the affinity facts (about a tenth of the files of a
    // full read); a container's ownership view and the nothing-found line need the
    // model but the GID tables (`Needs::TOPO_IN_CONTAINER`), inside a container only of the
    // devices it owns (unless --all). The context itself comes from the process view.
    let view = if args.all {
        crate::View::All
    } else {
        crate::View::Owned
    };
    let mut topo =
        crate::discover_view(&fs, crate::Needs::TOPO, view).map_err(|e| e.to_string())?;
    // On a host without --owned the matrix is all there is: which devices are this
    // process's is worked out only where it can change the output.
    let container = Context::of(&topo).is_container();
    let view = if args.owned || container || nothing_found_line(&topo).is_some() {
        // Inside a container the owned read above was made for the container's needs.
        if !(container && view == crate::View::Owned) {
            topo = crate::discover_view(&fs, crate::Needs::TOPO_IN_CONTAINER, view)
                .map_err(|e| e.to_string())?;
        }
        Some(ContainerView::of(&topo))
    } else {
        None
    };
    let owned_view = view
        .as_ref()
        .is_some_and(|v| args.owned || (!args.all && v.context.is_container() && v.certain));
    let matrix = match &view {
        Some(v) if owned_view => {
            let gpus = v.owned_gpus();
            let nics = v.owned_rdma();
            let nics: Vec<&str> = nics.iter().map(String::as_str).collect();
            TopoMatrix::build(&topo, &gpus, &nics)
        }
        _ => TopoMatrix::for_topology(&topo),
    };
    // A header says which devices are shown and why (none on a host without --owned:
    // the output is nvidia-smi's, unchanged).
    let shown = view
        .as_ref()
        .filter(|v| owned_view || v.context.is_container())
        .map(|v| (v, header(&topo, v, owned_view, &matrix)));
    let mut header = String::new();
    let mut notes = String::new();
    let text = match args.format {
        Format::Json => match &shown {
            None => json(&matrix),
            Some((v, h)) => {
                let mut value = serde_json::to_value(&matrix).map_err(|e| e.to_string())?;
                if let Some(obj) = value.as_object_mut() {
                    obj.insert(
                        "view".into(),
                        serde_json::json!({
                            "devices": if owned_view { "owned" } else { "all" },
                            "context": v.context,
                            "certain": v.certain,
                            "description": h,
                        }),
                    );
                }
                json(&value)
            }
        },
        Format::Table => match (nothing_found_line(&topo), &shown) {
            // Said, not answered: stdout stays empty, as a matrix of nothing.
            (Some(line), _) => {
                notes = line;
                String::new()
            }
            (None, Some((v, h))) if owned_view && matrix.devices().is_empty() => {
                notes = format!(
                    "{h}\nrdmatopo: this {} owns none of the {} GPUs and {} RDMA devices visible; `rdmatopo inventory` shows why, `rdmatopo topo --all` shows them\n",
                    v.context,
                    topo.gpus.len(),
                    topo.rdma_device_count(),
                );
                String::new()
            }
            // The View line goes to stderr: stdout is `nvidia-smi topo -m`'s, whose
            // parsers take the first line (or the first holding GPU0) as the header.
            (None, Some((_, h))) => {
                header = format!("{h}\n");
                crate::export::table::nvidia_smi_table(&matrix, std::io::stdout().is_terminal())
            }
            (None, None) => {
                crate::export::table::nvidia_smi_table(&matrix, std::io::stdout().is_terminal())
            }
        },
    };
    // Said once, on stderr: stdout stays parseable as nvidia-smi's.
    if !text.is_empty()
        && let (NicOrder::Name, true) = nic_order::of_matrix(&topo, &matrix)
    {
        notes.push_str(NIC_ORDER_NOTE);
    }
    Ok(Output::ok(text).with_header(header).with_notes(notes))
}

/// Where the registration order is unknown and the names alone may mislead.
const NIC_ORDER_NOTE: &str = "rdmatopo: NICs are numbered by name: the order they registered, which nvidia-smi numbers them in, is unknown here (no device index: live, neither the kernel's RDMA netlink nor libibverbs gave one; a snapshot, taken by an rdmatopo that recorded none)\n";

/// One line saying which view is shown and why.
fn header(topo: &Topology, view: &ContainerView, owned_view: bool, matrix: &TopoMatrix) -> String {
    let count = |states: &[Ownership], s| states.iter().filter(|x| **x == s).count();
    let gpu_states: Vec<Ownership> = view.gpus.iter().map(|g| g.state).collect();
    let rdma_states: Vec<Ownership> = view.rdma.iter().map(|r| r.state).collect();
    let plural = |n: usize, word: &str| format!("{n} {word}{}", if n == 1 { "" } else { "s" });
    let gpu_names: Vec<String> = matrix
        .devices()
        .iter()
        .filter(|d| d.kind == "gpu")
        .map(|d| match d.host_index {
            Some(h) => format!("{} = host GPU{h} at {}", d.name, d.pci),
            None => format!("{} = {}", d.name, d.pci),
        })
        .collect();
    // Name the GPUs only when the matrix numbers them differently from the machine.
    let names = if gpu_names.is_empty() || gpu_names.len() == topo.gpus.len() {
        String::new()
    } else {
        format!(" ({})", gpu_names.join(", "))
    };
    if owned_view {
        let unknown =
            count(&gpu_states, Ownership::Unknown) + count(&rdma_states, Ownership::Unknown);
        let caveat = if unknown > 0 {
            format!(
                " Ownership is not certain: {} of unknown ownership left out, see `rdmatopo inventory`.",
                plural(unknown, "device")
            )
        } else {
            String::new()
        };
        format!(
            "View: devices owned by this {}: {} of {} GPUs{names}, {} of {} RDMA devices.{caveat} `--all` shows every visible device.",
            view.context,
            count(&gpu_states, Ownership::Owned),
            topo.gpus.len(),
            count(&rdma_states, Ownership::Owned),
            topo.rdma_device_count(),
        )
    } else if view.certain {
        // The matrix numbers every GPU as the host does: say what the container calls
        // its own where that differs.
        let names = GpuNames::of_view(view);
        let its: Vec<String> = topo
            .gpus
            .iter()
            .filter_map(|g| {
                let i = names.container_index(g.pci)?;
                (i != g.index).then(|| format!("its GPU{i} = GPU{}", g.index))
            })
            .collect();
        let its = if its.is_empty() {
            String::new()
        } else {
            format!(" ({})", its.join(", "))
        };
        format!(
            "View: every visible device (--all); this {} owns {} of {} GPUs{its} and {} of {} RDMA devices.",
            view.context,
            count(&gpu_states, Ownership::Owned),
            topo.gpus.len(),
            count(&rdma_states, Ownership::Owned),
            topo.rdma_device_count(),
        )
    } else {
        let owned = count(&gpu_states, Ownership::Owned) + count(&rdma_states, Ownership::Owned);
        format!(
            "View: every visible device: in this {}, ownership of {} is not known for certain (see `rdmatopo inventory`). {}",
            view.context,
            plural(
                count(&gpu_states, Ownership::Unknown) + count(&rdma_states, Ownership::Unknown),
                "device"
            ),
            if owned == 0 {
                "No device is known to be owned.".to_string()
            } else {
                format!(
                    "`--owned` shows the {} known to be owned.",
                    plural(owned, "device")
                )
            }
        )
    }
}
