//! `rdmatopo k8s …`: Kubernetes configuration from the node's topology, as YAML (the
//! facts behind each choice as comments) or JSON. `k8s nfd --write` keeps an NFD
//! feature file up to date, atomically, for the node DaemonSet in `deploy/`.

use super::args::RootArgs;
use super::files::write_atomically;
use super::output::{Output, json};
use crate::export::k8s::{
    self, ConfigMap, Generated, NfdOptions, PodManifests, PodNetwork, PodOptions, PoolBy,
    SharedDevPluginOptions, SriovDpOptions, WorkloadKind,
};
use crate::view::ViewError;
use clap::{Args, Subcommand, ValueEnum};
use serde::Serialize;
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

#[derive(Args, Debug)]
pub struct K8sArgs {
    #[command(subcommand)]
    pub command: K8sCommand,
}

#[derive(Subcommand, Debug)]
pub enum K8sCommand {
    /// ConfigMap (config.json) for k8s-rdma-shared-dev-plugin: one pool per compute rail.
    #[command(after_help = super::output::EXIT_CODES)]
    RdmaSharedDevPlugin(SharedArgs),
    /// ConfigMap (config.json) for sriov-network-device-plugin: RDMA VF pools per rail or PCIe switch.
    #[command(after_help = super::output::EXIT_CODES)]
    SriovDevicePlugin(SriovArgs),
    /// Node Feature Discovery labels as a features.d file (RDMA rails, link, GPU-NIC path, GPUDirect).
    #[command(after_help = super::output::EXIT_CODES)]
    Nfd(NfdArgs),
    /// A Guaranteed Pod or Job asking for N GPUs with their rails, whole CPUs and memory, IPC_LOCK, the node facts as comments; with --network sriov, the NetworkAttachmentDefinitions it names.
    #[command(after_help = format!("{POD_HELP}\n{}", super::output::EXIT_CODES))]
    Pod(PodArgs),
    /// DeviceClasses and a ResourceClaimTemplate (resource.k8s.io/v1) for N GPUs, each with an RDMA NIC at its best class on this node.
    #[command(after_help = super::output::EXIT_CODES)]
    Dra(DraArgs),
    /// Every pod on the node judged against the topology, from the kubelet's PodResources API (exit 0 clean, 1 warnings, 2 errors, 3 kubelet unreachable).
    #[command(after_help = super::output::EXIT_CODES)]
    Audit(super::audit::AuditArgs),
    /// Exit 0 when FILE was written within --max-age (and, with --up, says rdmatopo_audit_up 1): a DaemonSet's exec probe.
    #[command(after_help = super::output::EXIT_CODES)]
    Probe(super::audit::ProbeArgs),
}

/// `k8s pod --help`'s epilogue, before the exit codes: what the output is and why.
const POD_HELP: &str = "\
The pod is Guaranteed (requests = limits for cpu and memory in every container), so
the kubelet's static CPU manager gives it exclusive whole CPUs and the topology manager
can align them with the GPUs (and, with --network sriov, the VFs). CPUs and memory come
from the node unless --cpus and --memory say otherwise: each GPU's share of its NUMA
node's CPUs, one less, and the node's MemTotal in the same proportion; a root that
does not show them is a usage error (exit 2) naming the flag to pass.

With --network sriov the output also holds one NetworkAttachmentDefinition per VF pool
the pod names (k8s.cni.cncf.io/v1, its k8s.v1.cni.cncf.io/resourceName the pool):
sriov-cni (ib-sriov-cni on InfiniBand), then the tuning plugin setting the rail's MTU,
with whereabouts IPAM over the rail's subnet where the node has an address on it. YAML
is then several documents (the networks first), JSON a v1 List.
";

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum ManifestFormat {
    Yaml,
    Json,
}

#[derive(Args, Debug)]
pub struct SharedArgs {
    #[command(flatten)]
    pub root: RootArgs,
    #[arg(long, value_enum, default_value = "yaml")]
    pub format: ManifestFormat,
    /// Print only config.json (the file the plugin reads), not the ConfigMap.
    #[arg(long)]
    pub config_json: bool,
    /// Pods that may use one pool at once (rdmaHcaMax).
    #[arg(long, default_value_t = 63, value_name = "N")]
    pub rdma_hca_max: u32,
    /// resourcePrefix of the pools (the plugin's default is `rdma`).
    #[arg(long, value_name = "PREFIX")]
    pub resource_prefix: Option<String>,
    /// Also make pools of the ports left out of the compute rails (storage, front-end, down).
    #[arg(long)]
    pub include_excluded: bool,
    /// periodicUpdateInterval in seconds (the plugin's default is 60; 0 turns it off).
    #[arg(long, value_name = "SECONDS")]
    pub periodic_update_interval: Option<u32>,
    #[arg(long, default_value = "kube-system")]
    pub namespace: String,
    #[arg(long, default_value = "rdma-devices")]
    pub configmap_name: String,
}

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum PoolByArg {
    Rail,
    Switch,
}

impl From<PoolByArg> for PoolBy {
    fn from(p: PoolByArg) -> Self {
        match p {
            PoolByArg::Rail => PoolBy::Rail,
            PoolByArg::Switch => PoolBy::Switch,
        }
    }
}

#[derive(Args, Debug)]
pub struct SriovArgs {
    #[command(flatten)]
    pub root: RootArgs,
    #[arg(long, value_enum, default_value = "yaml")]
    pub format: ManifestFormat,
    /// Print only config.json (the file the plugin reads), not the ConfigMap.
    #[arg(long)]
    pub config_json: bool,
    /// One pool per rail, or one per PCIe switch.
    #[arg(long, value_enum, default_value = "rail")]
    pub pool_by: PoolByArg,
    /// resourcePrefix of the pools.
    #[arg(long, default_value = "nvidia.com", value_name = "PREFIX")]
    pub resource_prefix: String,
    /// Also make pools of the ports left out of the compute rails.
    #[arg(long)]
    pub include_excluded: bool,
    #[arg(long, default_value = "kube-system")]
    pub namespace: String,
    #[arg(long, default_value = "sriovdp-config")]
    pub configmap_name: String,
}

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum NfdFormat {
    /// NFD's local feature file (`key=value` lines).
    Features,
    Yaml,
    Json,
}

#[derive(Args, Debug)]
pub struct NfdArgs {
    #[command(flatten)]
    pub root: RootArgs,
    #[arg(long, value_enum, default_value = "features")]
    pub format: NfdFormat,
    /// Label namespace.
    #[arg(long, default_value = "rdmatopo.io", value_name = "DNS-SUBDOMAIN")]
    pub label_prefix: String,
    /// Write the feature file to FILE (through a dot file and a rename, so NFD never
    /// reads half of it) instead of printing it.
    #[arg(long, value_name = "FILE", conflicts_with = "format")]
    pub write: Option<PathBuf>,
    /// With --write: rewrite the file every SECONDS, for ever (a DaemonSet's loop).
    #[arg(long, value_name = "SECONDS", requires = "write", value_parser = clap::value_parser!(u64).range(1..))]
    pub interval: Option<u64>,
    /// Labels expire SECONDS after they are written (NFD's `# +expiry-time`), so a node
    /// whose writer stopped loses them.
    #[arg(long, value_name = "SECONDS", value_parser = clap::value_parser!(u64).range(1..))]
    pub expiry: Option<u64>,
}

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum NetworkArg {
    /// k8s-rdma-shared-dev-plugin pools.
    RdmaShared,
    /// sriov-network-device-plugin VFs, each with a Multus network.
    Sriov,
}

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum KindArg {
    Pod,
    Job,
}

#[derive(Args, Debug)]
pub struct PodArgs {
    #[command(flatten)]
    pub root: RootArgs,
    #[arg(long, value_enum, default_value = "yaml")]
    pub format: ManifestFormat,
    /// GPUs the pod asks for (at least one; at most the node's).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub gpus: u32,
    /// Where the pod's RDMA devices come from.
    #[arg(long, value_enum, default_value = "rdma-shared")]
    pub network: NetworkArg,
    #[arg(long, value_enum, default_value = "pod")]
    pub kind: KindArg,
    #[arg(long, default_value = "rdma-workload")]
    pub name: String,
    #[arg(long, default_value = "example.invalid/your-image:latest")]
    pub image: String,
    /// Extended resource of the GPUs.
    #[arg(long, default_value = "nvidia.com/gpu")]
    pub gpu_resource: String,
    /// Pool naming as in `k8s rdma-shared-dev-plugin --resource-prefix`.
    #[arg(long, value_name = "PREFIX")]
    pub rdma_resource_prefix: Option<String>,
    /// Pool naming as in `k8s sriov-device-plugin --resource-prefix`.
    #[arg(long, default_value = "nvidia.com", value_name = "PREFIX")]
    pub sriov_resource_prefix: String,
    /// Pool cut as in `k8s sriov-device-plugin --pool-by`.
    #[arg(long, value_enum, default_value = "rail")]
    pub pool_by: PoolByArg,
    /// Whole CPUs the pod asks for (requests = limits). Default: each GPU's share of its
    /// NUMA node's CPUs (the node's CPUs split among its GPUs, as `nccl-env` binds
    /// ranks), one less, so a pod of every GPU leaves the kubelet's reserved CPUs free.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub cpus: Option<u32>,
    /// Memory the pod asks for (requests = limits), a Kubernetes quantity such as 64Gi.
    /// Default: the NUMA nodes' MemTotal in the proportion of their CPUs the pod takes,
    /// in whole GiB.
    #[arg(long, value_name = "QUANTITY")]
    pub memory: Option<String>,
}

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum GpuDriverArg {
    #[value(name = "gpu.nvidia.com")]
    NvidiaGpu,
}

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum NicDriverArg {
    #[value(name = "dra.net")]
    Dranet,
    #[value(name = "sriovnetwork.k8snetworkplumbingwg.io")]
    Sriov,
}

#[derive(Args, Debug)]
pub struct DraArgs {
    #[command(flatten)]
    pub root: RootArgs,
    #[arg(long, value_enum, default_value = "yaml")]
    pub format: ManifestFormat,
    /// GPUs the claim asks for, each with one NIC.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub gpus: u32,
    /// The DRA driver of the GPUs.
    #[arg(long, value_enum, default_value = "gpu.nvidia.com")]
    pub gpu_driver: GpuDriverArg,
    /// The DRA driver of the RDMA NICs.
    #[arg(long, value_enum, default_value = "dra.net")]
    pub nic_driver: NicDriverArg,
    /// The ResourceClaimTemplate's name.
    #[arg(long, default_value = "gpu-nic-aligned")]
    pub name: String,
    #[arg(long)]
    pub namespace: Option<String>,
    /// Print why the claim is built as it is (whether pcieRoot alone is enough, each
    /// GPU's best class) instead of the manifests.
    #[arg(long)]
    pub explain: bool,
}

impl K8sCommand {
    /// The root every `k8s` command reads.
    pub fn root_args_mut(&mut self) -> Result<&mut RootArgs, &'static str> {
        match self {
            K8sCommand::RdmaSharedDevPlugin(a) => Ok(&mut a.root),
            K8sCommand::SriovDevicePlugin(a) => Ok(&mut a.root),
            K8sCommand::Nfd(a) => Ok(&mut a.root),
            K8sCommand::Pod(a) => Ok(&mut a.root),
            K8sCommand::Dra(a) => Ok(&mut a.root),
            K8sCommand::Audit(a) => Ok(&mut a.root),
            K8sCommand::Probe(_) => Err("k8s probe"),
        }
    }
}

pub fn run(args: &K8sArgs) -> Result<Output, String> {
    match &args.command {
        K8sCommand::RdmaSharedDevPlugin(a) => shared(a),
        K8sCommand::SriovDevicePlugin(a) => sriov(a),
        K8sCommand::Nfd(a) => nfd(a),
        K8sCommand::Pod(a) => pod(a),
        K8sCommand::Dra(a) => dra(a),
        K8sCommand::Audit(a) => super::audit::run(a),
        K8sCommand::Probe(a) => super::audit::probe(a),
    }
}

/// `# ` lines, then the YAML document.
fn yaml<T: Serialize>(header: &str, notes: &[String], value: &T) -> Result<String, String> {
    let mut s = format!("# {header}\n");
    for n in notes {
        s.push_str("# ");
        s.push_str(&n.replace(['\n', '\r'], " "));
        s.push('\n');
    }
    s.push_str(&serde_yaml_ng::to_string(value).map_err(|e| e.to_string())?);
    Ok(s)
}

fn manifest<T: Serialize>(
    format: ManifestFormat,
    header: &str,
    notes: &[String],
    value: &T,
) -> Result<String, String> {
    match format {
        ManifestFormat::Yaml => yaml(header, notes, value),
        ManifestFormat::Json => Ok(json(value)),
    }
}

fn plugin_output<T: Serialize>(
    generated: &Generated<T>,
    config_json: bool,
    format: ManifestFormat,
    header: &str,
    (name, namespace): (&str, &str),
) -> Result<Output, String> {
    if config_json {
        return Ok(Output::ok(json(&generated.value)));
    }
    let cm = ConfigMap::with_json(name, namespace, "config.json", &generated.value)
        .map_err(|e| e.to_string())?;
    manifest(format, header, &generated.notes, &cm).map(Output::ok)
}

fn shared(a: &SharedArgs) -> Result<Output, String> {
    let topo = a.root.discover(crate::Needs::K8S)?;
    let opts = SharedDevPluginOptions {
        rdma_hca_max: a.rdma_hca_max,
        resource_prefix: a.resource_prefix.clone(),
        include_excluded: a.include_excluded,
        periodic_update_interval: a.periodic_update_interval,
    };
    let g = k8s::rdma_shared_dev_plugin(&topo, &opts).map_err(|e| e.to_string())?;
    plugin_output(
        &g,
        a.config_json,
        a.format,
        &format!("rdmatopo k8s rdma-shared-dev-plugin for {}", topo.root),
        (&a.configmap_name, &a.namespace),
    )
}

fn sriov(a: &SriovArgs) -> Result<Output, String> {
    let topo = a.root.discover(crate::Needs::K8S)?;
    let opts = SriovDpOptions {
        resource_prefix: a.resource_prefix.clone(),
        pool_by: a.pool_by.into(),
        include_excluded: a.include_excluded,
    };
    let g = k8s::sriov_device_plugin(&topo, &opts).map_err(|e| e.to_string())?;
    plugin_output(
        &g,
        a.config_json,
        a.format,
        &format!("rdmatopo k8s sriov-device-plugin for {}", topo.root),
        (&a.configmap_name, &a.namespace),
    )
}

/// The feature file for the root, with the expiry counted from now.
fn nfd_file(a: &NfdArgs) -> Result<(String, usize), String> {
    let topo = a.root.discover(crate::Needs::K8S)?;
    let opts = NfdOptions {
        prefix: a.label_prefix.clone(),
    };
    let mut g = k8s::nfd_labels(&topo, &opts).map_err(|e| e.to_string())?;
    g.notes.insert(
        0,
        format!("rdmatopo {} k8s nfd for {}", crate::VERSION, topo.root),
    );
    let expiry = a.expiry.map(|s| {
        humantime::format_rfc3339_seconds(SystemTime::now() + Duration::from_secs(s)).to_string()
    });
    Ok((k8s::nfd_feature_file(&g, expiry.as_deref()), g.value.len()))
}

fn nfd(a: &NfdArgs) -> Result<Output, String> {
    let Some(path) = &a.write else {
        return nfd_print(a);
    };
    let once = || -> Result<(), String> {
        let (text, n) = nfd_file(a)?;
        write_atomically(path, &text)?;
        eprintln!("rdmatopo: wrote {n} labels to {}", path.display());
        Ok(())
    };
    let Some(every) = a.interval else {
        once()?;
        return Ok(Output::ok(String::new()));
    };
    loop {
        // A failed round is reported and retried; the last good file stays (and
        // expires, with --expiry).
        if let Err(e) = once() {
            eprintln!("rdmatopo: {e}");
        }
        std::thread::sleep(Duration::from_secs(every));
    }
}

fn nfd_print(a: &NfdArgs) -> Result<Output, String> {
    if a.format == NfdFormat::Features {
        return nfd_file(a).map(|(text, _)| Output::ok(text));
    }
    let topo = a.root.discover(crate::Needs::K8S)?;
    let opts = NfdOptions {
        prefix: a.label_prefix.clone(),
    };
    let g = k8s::nfd_labels(&topo, &opts).map_err(|e| e.to_string())?;
    Ok(Output::ok(match a.format {
        NfdFormat::Json => json(&g.value),
        _ => yaml(
            &format!("rdmatopo k8s nfd for {}", topo.root),
            &g.notes,
            &g.value,
        )?,
    }))
}

fn pod(a: &PodArgs) -> Result<Output, String> {
    let topo = a.root.discover(crate::Needs::K8S)?;
    let opts = PodOptions {
        gpus: a.gpus,
        network: match a.network {
            NetworkArg::RdmaShared => PodNetwork::RdmaShared,
            NetworkArg::Sriov => PodNetwork::Sriov,
        },
        kind: match a.kind {
            KindArg::Pod => WorkloadKind::Pod,
            KindArg::Job => WorkloadKind::Job,
        },
        name: a.name.clone(),
        image: a.image.clone(),
        gpu_resource: a.gpu_resource.clone(),
        shared: SharedDevPluginOptions {
            resource_prefix: a.rdma_resource_prefix.clone(),
            ..Default::default()
        },
        sriov: SriovDpOptions {
            resource_prefix: a.sriov_resource_prefix.clone(),
            pool_by: a.pool_by.into(),
            include_excluded: false,
        },
        cpus: a.cpus,
        memory: a.memory.clone(),
    };
    let g = match k8s::pod(&topo, &opts) {
        Ok(g) => g,
        Err(ViewError::Argument(msg)) => return Ok(Output::usage_error(&msg)),
        Err(e) => return Err(e.to_string()),
    };
    let header = format!("rdmatopo k8s pod --gpus {} for {}", a.gpus, topo.root);
    let PodManifests { networks, workload } = &g.value;
    if networks.is_empty() {
        return manifest(a.format, &header, &g.notes, workload).map(Output::ok);
    }
    // The networks first: Multus looks them up when the pod is created.
    Ok(Output::ok(match a.format {
        ManifestFormat::Json => {
            let mut items: Vec<serde_json::Value> = Vec::new();
            for n in networks {
                items.push(serde_json::to_value(n).map_err(|e| e.to_string())?);
            }
            items.push(serde_json::to_value(workload).map_err(|e| e.to_string())?);
            json(&serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items}))
        }
        ManifestFormat::Yaml => {
            let mut s = yaml(&header, &g.notes, &networks[0])?;
            for n in &networks[1..] {
                s.push_str("---\n");
                s.push_str(&serde_yaml_ng::to_string(n).map_err(|e| e.to_string())?);
            }
            s.push_str("---\n");
            s.push_str(&serde_yaml_ng::to_string(workload).map_err(|e| e.to_string())?);
            s
        }
    }))
}

fn dra(a: &DraArgs) -> Result<Output, String> {
    use crate::export::dra::{self, DraOptions};
    use crate::view::dra::DraDriver;
    let topo = a.root.discover(crate::Needs::K8S)?;
    let GpuDriverArg::NvidiaGpu = a.gpu_driver;
    let opts = DraOptions {
        gpus: a.gpus as usize,
        nic_driver: match a.nic_driver {
            NicDriverArg::Dranet => DraDriver::Dranet,
            NicDriverArg::Sriov => DraDriver::Sriov,
        },
        name: a.name.clone(),
        namespace: a.namespace.clone(),
    };
    let m = match dra::dra_claim(&topo, &opts) {
        Ok(m) => m,
        Err(ViewError::Argument(msg)) => return Ok(Output::usage_error(&msg)),
        Err(e) => return Err(e.to_string()),
    };
    if a.explain {
        return Ok(Output::ok(match a.format {
            ManifestFormat::Json => json(&m.explain),
            ManifestFormat::Yaml => {
                serde_yaml_ng::to_string(&m.explain).map_err(|e| e.to_string())?
            }
        }));
    }
    let header = format!(
        "rdmatopo k8s dra --gpus {} --nic-driver {} for {}",
        a.gpus, opts.nic_driver, topo.root
    );
    Ok(Output::ok(match a.format {
        ManifestFormat::Json => {
            let mut items: Vec<serde_json::Value> = Vec::new();
            for c in &m.device_classes {
                items.push(serde_json::to_value(c).map_err(|e| e.to_string())?);
            }
            items.push(serde_json::to_value(&m.template).map_err(|e| e.to_string())?);
            json(&serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items}))
        }
        ManifestFormat::Yaml => {
            let mut s = String::new();
            for c in &m.device_classes {
                s.push_str(&serde_yaml_ng::to_string(c).map_err(|e| e.to_string())?);
                s.push_str("---\n");
            }
            s.push_str(&yaml(&header, &m.notes, &m.template)?);
            s
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yaml_comments_come_first_and_stay_one_line() {
        let s = yaml("head", &["two\nlines".into()], &vec![1]).unwrap();
        assert_eq!(s, "# head\n# two lines\n- 1\n");
    }
}
