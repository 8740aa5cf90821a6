//! `k8s dra`: on every host fixture, every allocation the generated claim allows keeps
//! each GPU at its best NIC class, and the claim can be met. The claim's CEL is
//! evaluated by a real CEL interpreter over the attributes each driver would publish;
//! a GPU's best class is taken from the nvidia-smi matrix the `topo` goldens check.
//! The same enumeration over a plain per-pair pcieRoot claim and over one pcieRoot
//! constraint on every request shows where those fail or fall short.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use cel_interpreter::{Context, Program, Value};
use rdmatopo::Topology;
use rdmatopo::export::dra::{
    self, DeviceClaim, DeviceConstraint, DeviceRequest, DraOptions, ExactDeviceRequest, Strategy,
};
use rdmatopo::view::dra::{DraDevice, DraDriver, gpu_devices, nic_devices};
use rdmatopo::view::{PathClass, TopoMatrix};
use std::collections::HashMap;

/// Every fixture that is a whole machine (not a container's view), by name.
fn host_fixtures() -> Vec<(String, Topology)> {
    let mut out = Vec::new();
    for dir in support::fixture_dirs() {
        let n = dir.file_name().unwrap().to_string_lossy().into_owned();
        let topo = support::discover(&dir.join("root.tar.gz"));
        // A pod's fixtures are container views of a host, not hosts.
        if n.starts_with("pod-") || topo.view.is_some() {
            continue;
        }
        out.push((n, topo));
    }
    assert!(out.len() >= 8, "host fixtures: {}", out.len());
    out
}

/// A CEL selector over one device, as the scheduler sees it: `device.driver` and
/// `device.attributes[domain][id]`.
struct Cel {
    programs: HashMap<String, Program>,
    /// Results by expression and device (driver, name, PCI address).
    seen: HashMap<(String, String), bool>,
}

impl Cel {
    fn new() -> Self {
        Self {
            programs: HashMap::new(),
            seen: HashMap::new(),
        }
    }

    fn select(&mut self, expr: &str, d: &DraDevice) -> Result<bool, String> {
        let key = (
            expr.to_string(),
            format!("{}/{}/{}", d.driver, d.name, d.pci),
        );
        if let Some(b) = self.seen.get(&key) {
            return Ok(*b);
        }
        let b = self.run(expr, d)?;
        self.seen.insert(key, b);
        Ok(b)
    }

    fn run(&mut self, expr: &str, d: &DraDevice) -> Result<bool, String> {
        if !self.programs.contains_key(expr) {
            let p = Program::compile(expr).map_err(|e| format!("{expr}: {e:?}"))?;
            self.programs.insert(expr.to_string(), p);
        }
        let mut attrs: HashMap<String, HashMap<String, serde_json::Value>> = HashMap::new();
        for (k, v) in &d.attributes {
            let (domain, id) = k.rsplit_once('/').unwrap();
            let v = match v {
                rdmatopo::view::dra::AttrValue::String(s) => serde_json::Value::from(s.clone()),
                rdmatopo::view::dra::AttrValue::Int(i) => serde_json::Value::from(*i),
                rdmatopo::view::dra::AttrValue::Bool(b) => serde_json::Value::from(*b),
            };
            attrs
                .entry(domain.to_string())
                .or_default()
                .insert(id.to_string(), v);
        }
        let device = serde_json::json!({"driver": d.driver.name(), "attributes": attrs});
        let mut ctx = Context::default();
        ctx.add_variable("device", device)
            .map_err(|e| format!("{e:?}"))?;
        match self.programs[expr].execute(&ctx) {
            Ok(Value::Bool(b)) => Ok(b),
            other => Err(format!("{expr} on {}: {other:?}", d.name)),
        }
    }
}

/// What enumerating a claim found.
#[derive(Debug, PartialEq)]
enum Verdict {
    /// No allocation.
    Never,
    /// Some allocation puts a GPU below its best class (the first such, in words).
    FallsShort(String),
    /// Allocations exist, each GPU at its best in all of them.
    Best(u64),
}

struct Node {
    devices: Vec<DraDevice>,
    matrix: TopoMatrix,
    /// Each GPU's best class, by PCI address.
    best: HashMap<String, PathClass>,
}

impl Node {
    fn new(topo: &Topology, devices: Vec<DraDevice>) -> Self {
        let mut node = Self {
            devices,
            matrix: TopoMatrix::for_topology(topo),
            best: HashMap::new(),
        };
        let best: HashMap<String, PathClass> = node
            .devices
            .iter()
            .filter(|d| d.driver == DraDriver::NvidiaGpu)
            .filter_map(|g| {
                let b = node
                    .devices
                    .iter()
                    .filter(|d| d.driver != DraDriver::NvidiaGpu)
                    .map(|n| node.class(g, n))
                    .min_by_key(PathClass::rank)?;
                Some((g.pci.to_string(), b))
            })
            .collect();
        node.best = best;
        node
    }

    /// The GPU-NIC class as the nvidia-smi matrix has it.
    fn class(&self, gpu: &DraDevice, nic: &DraDevice) -> PathClass {
        let at = |kind: &str, d: &DraDevice| {
            let dev = self.matrix.devices();
            dev.iter()
                .position(|m| m.kind == kind && m.pci == d.pci)
                .unwrap_or_else(|| panic!("{} not in the matrix", d.name))
        };
        self.matrix
            .class(at("gpu", gpu), at("nic", nic))
            .unwrap_or_else(|| panic!("no matrix cell {}/{}", gpu.name, nic.name))
    }

    fn best(&self, gpu: &DraDevice) -> PathClass {
        self.best[&gpu.pci.to_string()]
    }

    fn judge(&self, claim: &DeviceClaim, nic: DraDriver, cel: &mut Cel) -> Verdict {
        let classes = dra::device_classes(nic);
        let ordered = dra::interchangeable_gpu_requests(claim);
        let mut short: Option<String> = None;
        let n = claim.requests.len() / 2;
        let count = dra::enumerate_allocations(
            &classes,
            claim,
            &self.devices,
            &mut |e, d| cel.select(e, d),
            &ordered,
            &mut |a| {
                for i in 0..n {
                    let g = &self.devices[a[2 * i]];
                    let m = &self.devices[a[2 * i + 1]];
                    let (c, b) = (self.class(g, m), self.best(g));
                    if c.rank() != b.rank() {
                        short = Some(format!(
                            "{} gets {} ({c}, best {b})",
                            g.name,
                            m.rdma_device.as_deref().unwrap_or(&m.name)
                        ));
                        return false;
                    }
                }
                true
            },
        )
        .unwrap();
        match (count, short) {
            (0, _) => Verdict::Never,
            (_, Some(s)) => Verdict::FallsShort(s),
            (c, None) => Verdict::Best(c),
        }
    }
}

fn plain_claim(n: usize, per_pair: bool) -> DeviceClaim {
    let req = |name: String, class: &str| DeviceRequest {
        name,
        exactly: ExactDeviceRequest {
            device_class_name: class.into(),
            selectors: Vec::new(),
            allocation_mode: "ExactCount".into(),
            count: 1,
        },
    };
    let mut requests = Vec::new();
    let mut constraints = Vec::new();
    for i in 0..n {
        requests.push(req(format!("gpu-{i}"), dra::GPU_CLASS));
        requests.push(req(format!("nic-{i}"), dra::NIC_CLASS));
        if per_pair {
            constraints.push(DeviceConstraint {
                requests: vec![format!("gpu-{i}"), format!("nic-{i}")],
                match_attribute: "resource.kubernetes.io/pcieRoot".into(),
            });
        }
    }
    if !per_pair {
        constraints.push(DeviceConstraint {
            requests: requests.iter().map(|r| r.name.clone()).collect(),
            match_attribute: "resource.kubernetes.io/pcieRoot".into(),
        });
    }
    DeviceClaim {
        requests,
        constraints,
    }
}

/// Whether `n` GPUs can each have a distinct NIC at their best class (brute force).
fn best_pairs_exist(node: &Node, n: usize) -> bool {
    let gpus: Vec<&DraDevice> = node
        .devices
        .iter()
        .filter(|d| d.driver == DraDriver::NvidiaGpu)
        .collect();
    let nics: Vec<&DraDevice> = node
        .devices
        .iter()
        .filter(|d| d.driver != DraDriver::NvidiaGpu)
        .collect();
    fn go(
        node: &Node,
        gpus: &[&DraDevice],
        nics: &[&DraDevice],
        used: &mut Vec<usize>,
        need: usize,
        from: usize,
    ) -> bool {
        if need == 0 {
            return true;
        }
        for g in from..gpus.len() {
            for (m, nic) in nics.iter().enumerate() {
                if !used.contains(&m)
                    && node.class(gpus[g], nic).rank() == node.best(gpus[g]).rank()
                {
                    used.push(m);
                    if go(node, gpus, nics, used, need - 1, g + 1) {
                        return true;
                    }
                    used.pop();
                }
            }
        }
        false
    }
    go(node, &gpus, &nics, &mut Vec::new(), n, 0)
}

#[test]
fn every_allocation_of_the_generated_claim_keeps_each_gpu_at_its_best_class() {
    let mut cel = Cel::new();
    let mut report = Vec::new();
    let mut generated = 0;
    for (name, topo) in host_fixtures() {
        for nic in [DraDriver::Dranet, DraDriver::Sriov] {
            let mut devices = gpu_devices(&topo);
            devices.extend(nic_devices(&topo, nic));
            let node = Node::new(&topo, devices);
            for n in [1usize, 2, 4, 8] {
                if n > topo.gpus.len() {
                    continue;
                }
                let opts = DraOptions {
                    gpus: n,
                    nic_driver: nic,
                    name: "gpu-nic-aligned".into(),
                    namespace: None,
                };
                let m = match dra::dra_claim(&topo, &opts) {
                    Ok(m) => m,
                    Err(e) => {
                        // Refused only where no such claim exists.
                        assert!(
                            !best_pairs_exist(&node, n),
                            "{name} {nic} N={n}: refused ({e}) but {n} best pairs exist"
                        );
                        report.push(format!("{name:18} {nic:9} N={n}: refused: {e}"));
                        continue;
                    }
                };
                generated += 1;
                let claim = &m.template.spec.spec.devices;
                let got = node.judge(claim, nic, &mut cel);
                assert!(
                    matches!(got, Verdict::Best(_)),
                    "{name} {nic} N={n} ({:?}): {got:?}",
                    m.explain.strategy
                );
                let per_pair = node.judge(&plain_claim(n, true), nic, &mut cel);
                let single = node.judge(&plain_claim(n, false), nic, &mut cel);
                // The explanation agrees with the enumeration of a per-pair claim.
                assert_eq!(
                    m.explain.pcie_root_enough,
                    matches!(per_pair, Verdict::Best(_)),
                    "{name} {nic} N={n}: explain {:?} vs {per_pair:?}",
                    m.explain
                );
                assert_eq!(
                    m.explain.strategy == Strategy::PcieRoot,
                    m.explain.pcie_root_enough
                );
                eprintln!("{name} {nic} N={n} done");
                report.push(format!(
                    "{name:18} {nic:9} N={n}: {:?} {got:?}; per-pair pcieRoot {per_pair:?}; one pcieRoot {single:?}",
                    m.explain.strategy
                ));
            }
        }
    }
    println!("{}", report.join("\n"));
    assert!(generated >= 10, "{generated} claims generated");
}

#[test]
fn sriov_vfs_carry_their_pfs_root_and_numa_and_dranet_no_pci_bus_id() {
    let topo = support::discover(&support::root("host-h100-sriov"));
    let vfs = nic_devices(&topo, DraDriver::Sriov);
    assert!(!vfs.is_empty());
    for vf in &vfs {
        let f = topo.pci_function(vf.pci).unwrap();
        assert!(f.is_vf);
        let pf = topo.pci_function(f.physfn.unwrap()).unwrap();
        let root = rdmatopo::view::dra::pcie_root(pf).unwrap();
        assert_eq!(
            vf.attr("resource.kubernetes.io/pcieRoot"),
            Some(&rdmatopo::view::dra::AttrValue::String(root))
        );
        assert_eq!(
            vf.attr("dra.net/numaNode"),
            Some(&rdmatopo::view::dra::AttrValue::Int(
                pf.numa_node.map_or(-1, i64::from)
            ))
        );
        assert!(vf.attr("resource.kubernetes.io/numaNode").is_none());
        assert_eq!(vf.name, vf.pci.to_string().replace([':', '.'], "-"));
    }
    for d in nic_devices(&topo, DraDriver::Dranet) {
        assert!(d.attr("resource.kubernetes.io/pciBusID").is_none());
        assert!(d.name.starts_with("pci-"));
    }
}

/// Two PCIe switches under one root complex (as on hosts whose root complex has several
/// root ports): the DGX H100 with the first two GPUs' host bridges made one. A pair
/// sharing that root is PXB through its own switches, PHB through the other's, so a
/// per-pair pcieRoot claim falls short and the generated claim must not use it.
#[test]
fn a_root_with_two_switches_is_not_enough_for_pcie_root() {
    let mut topo = support::discover(&support::root("h100-dgx"));
    let hb = |i: usize| {
        topo.pci_function(topo.gpus[i].pci)
            .unwrap()
            .host_bridge
            .clone()
    };
    let (keep, merge) = (hb(0), hb(1));
    assert_ne!(keep, merge);
    for f in &mut topo.pci {
        if f.host_bridge == merge {
            f.host_bridge = keep.clone();
            f.path = f
                .path
                .replacen(&format!("/{merge}/"), &format!("/{keep}/"), 1);
        }
    }
    topo.host_bridges.retain(|b| b.name != merge);
    let mut devices = gpu_devices(&topo);
    devices.extend(nic_devices(&topo, DraDriver::Dranet));
    let node = Node::new(&topo, devices);
    let mut cel = Cel::new();
    for n in [1usize, 2, 8] {
        let opts = DraOptions {
            gpus: n,
            nic_driver: DraDriver::Dranet,
            name: "gpu-nic-aligned".into(),
            namespace: None,
        };
        let m = dra::dra_claim(&topo, &opts).unwrap();
        assert!(!m.explain.pcie_root_enough);
        let why = m.explain.pcie_root_problem.clone().unwrap();
        assert!(
            why.starts_with("GPU0 could get ")
                && why.contains("(PHB) while ")
                && (why.ends_with(" is PIX") || why.ends_with(" is PXB")),
            "{why}"
        );
        assert_ne!(m.explain.strategy, Strategy::PcieRoot);
        let got = node.judge(&m.template.spec.spec.devices, DraDriver::Dranet, &mut cel);
        assert!(matches!(got, Verdict::Best(_)), "N={n}: {got:?}");
        let plain = node.judge(&plain_claim(n, true), DraDriver::Dranet, &mut cel);
        assert!(matches!(plain, Verdict::FallsShort(_)), "N={n}: {plain:?}");
    }
}

/// `k8s audit --allocation FILE --resource-slices FILE --node-name`: a pod whose GPU
/// and VF came from a DRA claim is judged and named by its claim; a pod claiming a
/// device no slice of this node publishes gets a finding while the first is still
/// judged; a slices file that is not one is a clear error naming it.
#[test]
fn the_cli_judges_dra_pods_from_saved_slices() {
    use rdmatopo::model::allocation::{
        Allocation, ClaimAllocation, ClaimDevice, ContainerAllocation, PodAllocation,
    };
    let root = support::unpacked(&support::fixtures_dir().join("host-h100-sriov"));
    let topo = rdmatopo::discover(Some(&root)).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let slices = tmp.path().join("slices.json");
    std::fs::write(&slices, dra::resource_slices(&topo, "node-a").to_string()).unwrap();
    let gpus = gpu_devices(&topo);
    let vfs = nic_devices(&topo, DraDriver::Sriov);
    let g = &gpus[5];
    let node = Node::new(&topo, gpus.iter().chain(&vfs).cloned().collect());
    let vf = vfs
        .iter()
        .find(|v| node.class(g, v).rank() == node.best(g).rank())
        .unwrap();
    let pod = |name: &str, devices: Vec<(&str, &str)>| PodAllocation {
        namespace: "ml".into(),
        name: name.into(),
        containers: vec![ContainerAllocation {
            name: "main".into(),
            dynamic_resources: vec![ClaimAllocation {
                claim_name: format!("{name}-gpu-nic"),
                claim_namespace: "ml".into(),
                devices: devices
                    .into_iter()
                    .map(|(driver, device)| ClaimDevice {
                        driver_name: driver.into(),
                        pool_name: "node-a".into(),
                        device_name: device.into(),
                        cdi_devices: Vec::new(),
                    })
                    .collect(),
            }],
            ..Default::default()
        }],
        cpu_ids: Vec::new(),
    };
    let alloc = Allocation {
        pods: vec![
            pod(
                "aligned",
                vec![
                    ("gpu.nvidia.com", &g.name),
                    ("sriovnetwork.k8snetworkplumbingwg.io", &vf.name),
                ],
            ),
            pod("stale", vec![("gpu.nvidia.com", "gpu-99")]),
        ],
        allocatable: None,
    };
    let saved = tmp.path().join("allocation.json");
    std::fs::write(&saved, serde_json::to_vec(&alloc).unwrap()).unwrap();
    let run = |slices: &std::path::Path| {
        std::process::Command::new(env!("CARGO_BIN_EXE_rdmatopo"))
            .args(["k8s", "audit", "--format", "json", "--node-name", "node-a"])
            .arg("--root")
            .arg(&root)
            .arg("--allocation")
            .arg(&saved)
            .arg("--resource-slices")
            .arg(slices)
            .output()
            .unwrap()
    };
    let out = run(&slices);
    let report: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    let pods = report["pods"].as_array().unwrap();
    let by_name = |n: &str| {
        pods.iter()
            .find(|p| p["name"] == n)
            .unwrap_or_else(|| panic!("no pod {n}: {report:#}"))
    };
    let aligned = &by_name("aligned")["containers"][0];
    assert_eq!(aligned["gpus"][0]["pci"], g.pci.to_string());
    assert_eq!(aligned["gpus"][0]["resource"], "claim ml/aligned-gpu-nic");
    assert_eq!(aligned["nics"][0]["pci"], vf.pci.to_string());
    assert_eq!(aligned["nics"][0]["resource"], "claim ml/aligned-gpu-nic");
    let stale = &by_name("stale")["containers"][0];
    let findings = stale["findings"].as_array().unwrap();
    assert!(
        findings.iter().any(|f| f["check"] == "unknown-device"
            && f["summary"]
                .as_str()
                .unwrap()
                .contains("gpu.nvidia.com/node-a/gpu-99 is in no ResourceSlice")),
        "{findings:#?}"
    );
    // Not a slice list: an error naming the file.
    let bad = tmp.path().join("bad.json");
    std::fs::write(&bad, "{\"items\": [{\"spec\": {}}]}").unwrap();
    let out = run(&bad);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("bad.json") && err.contains("ResourceSlice list"),
        "{err}"
    );
}
