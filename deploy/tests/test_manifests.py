"""Kubernetes manifests: everything in deploy/ and everything `rdmatopo k8s` generates
for every fixture validates offline against the Kubernetes API schema
(kubernetes-validate, strict: unknown fields fail), and against each device plugin's own
documented rules (research: ecosystem.md C.1-C.3).

Run from the repository root after `cargo build -p rdmatopo`:
    .venv/bin/python -m pytest deploy/tests
RDMATOPO_BIN overrides the binary (default target/debug/rdmatopo).
"""

import functools
import json
import os
import pathlib
import re
import shutil
import subprocess

import jsonschema
import kubernetes_validate
import pytest
import yaml

REPO = pathlib.Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
# Each fixture is stored as fixtures/<name>/root.tar.gz; the tests read the directory form.
subprocess.run(["python3", str(REPO / "fixtures" / "tools" / "unpack.py")], check=True, stdout=subprocess.DEVNULL)
FIXTURES = sorted(p.name for p in (REPO / "fixtures").iterdir() if (p / "root").is_dir())
BIN = pathlib.Path(os.environ.get("RDMATOPO_BIN", REPO / "target" / "debug" / "rdmatopo"))
# What `rdmatopo k8s` generates is checked against 1.31 and 1.37 (the newest schema
# bundled); deploy/ against DEPLOY_VERSIONS below.
K8S_VERSIONS = ["1.31.0", "1.37.0"]

EXIT_USAGE = 2
EXIT_COULD_NOT_RUN = 3


def validate(doc):
    for v in K8S_VERSIONS:
        kubernetes_validate.validate(doc, v, strict=True)


def rdmatopo(*args):
    if not BIN.exists():
        pytest.fail(f"{BIN} is missing: run `cargo build -p rdmatopo` first")
    env = {k: v for k, v in os.environ.items() if k != "RDMATOPO_ROOT"}
    return subprocess.run([str(BIN), *map(str, args)], capture_output=True, text=True, env=env)


def root(fixture):
    return REPO / "fixtures" / fixture / "root"


# ---------------------------------------------------------------------------------
# Plugin rules
# ---------------------------------------------------------------------------------

SHARED_NAME = re.compile(r"^[a-zA-Z0-9_]+$")
SRIOV_NAME_CODE = re.compile(r"^[a-zA-Z0-9_-]+$")
SELECTOR_KEYS = {"vendors", "deviceIDs", "drivers", "ifNames", "linkTypes"}


def check_shared_dev_plugin(cfg):
    """k8s-rdma-shared-dev-plugin `ValidateConfigs` (pkg/utils, README)."""
    assert set(cfg) <= {"periodicUpdateInterval", "configList"}, cfg.keys()
    if "periodicUpdateInterval" in cfg:
        assert isinstance(cfg["periodicUpdateInterval"], int) and cfg["periodicUpdateInterval"] >= 0
    entries = cfg["configList"]
    assert isinstance(entries, list) and entries, "configList must not be empty"
    names = set()
    for e in entries:
        name = e["resourceName"]
        assert SHARED_NAME.match(name), f"resourceName {name!r} breaks ^[a-zA-Z0-9_]+$"
        assert name not in names, f"resourceName {name!r} repeats"
        names.add(name)
        assert isinstance(e["rdmaHcaMax"], int) and e["rdmaHcaMax"] >= 0
        has_selectors = bool(e.get("selectors"))
        has_devices = bool(e.get("devices"))
        assert has_selectors != has_devices, f"{name}: exactly one of selectors and devices"
        if has_selectors:
            assert set(e["selectors"]) <= SELECTOR_KEYS, e["selectors"].keys()
            assert any(e["selectors"].values()), f"{name}: empty selectors"
            for v in e["selectors"].values():
                assert isinstance(v, list) and all(isinstance(x, str) and x for x in v)
    return names


PF_NAME = re.compile(r"^[^#]+(#\d+(-\d+)?(,\d+(-\d+)?)*)?$")


def check_pf_name(entry):
    assert PF_NAME.match(entry), f"pfNames entry {entry!r} does not parse"
    if "#" in entry:
        for part in entry.split("#", 1)[1].split(","):
            if "-" in part:
                a, b = map(int, part.split("-"))
                assert a <= b, f"{entry}: range {part} runs backwards"


def check_sriov_device_plugin(cfg):
    """sriov-network-device-plugin (pkg/types, cmd/sriovdp/manager.go, README)."""
    assert set(cfg) == {"resourceList"}
    names = set()
    for r in cfg["resourceList"]:
        name = r["resourceName"]
        assert SRIOV_NAME_CODE.match(name), f"resourceName {name!r}"
        assert "-" not in name, f"{name}: the README advises against '-'"
        full = f"{r.get('resourcePrefix', 'intel.com')}/{name}"
        assert full not in names, f"{full} repeats"
        names.add(full)
        assert r.get("deviceType", "netDevice") in {"netDevice", "accelerator", "auxNetDevice"}
        selectors = r["selectors"]
        selectors = selectors if isinstance(selectors, list) else [selectors]
        assert selectors
        for s in selectors:
            assert s["pfNames"], f"{name}: no pfNames"
            for pf in s["pfNames"]:
                check_pf_name(pf)
            assert isinstance(s.get("isRdma", False), bool)
            assert not (s.get("isRdma") and s.get("vdpaType")), "isRdma with vdpaType"
            for key in ("vendors", "devices"):
                for v in s.get(key, []):
                    assert re.fullmatch(r"[0-9a-f]{4}", v), f"{key} {v!r}: lowercase hex without 0x"
    return names


LABEL_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def check_label(key, value):
    prefix, _, name = key.rpartition("/")
    assert prefix, f"{key}: NFD wants namespaced keys"
    assert len(prefix) <= 253 and DNS_SUBDOMAIN.match(prefix), f"{key}: prefix"
    assert not (prefix == "kubernetes.io" or prefix.endswith(".kubernetes.io")) or prefix in {
        "feature.node.kubernetes.io",
        "profile.node.kubernetes.io",
    }, f"{key}: NFD denies this namespace"
    assert len(name) <= 63 and LABEL_NAME.match(name), f"{key}: name"
    assert len(value) <= 63 and LABEL_VALUE.match(value), f"{key}={value}: value"


def check_feature_file(text):
    """NFD local feature file: `key[=value]` lines, `#` comments, at most 64 KiB."""
    assert len(text.encode()) <= 64 * 1024
    labels = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            if line.startswith("# +"):
                assert re.fullmatch(r"# \+expiry-time=\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", line), line
            continue
        key, _, value = line.partition("=")
        check_label(key, value)
        labels[key] = value
    return labels


# The checkers must be able to fail.
@pytest.mark.parametrize(
    "bad",
    [
        {"configList": []},
        {"configList": [{"resourceName": "hca-x", "rdmaHcaMax": 1, "selectors": {"ifNames": ["x"]}}]},
        {"configList": [{"resourceName": "a", "rdmaHcaMax": -1, "selectors": {"ifNames": ["x"]}}]},
        {"configList": [{"resourceName": "a", "rdmaHcaMax": 1}]},
        {"configList": [{"resourceName": "a", "rdmaHcaMax": 1, "selectors": {"ifNames": ["x"]}}] * 2},
    ],
)
def test_shared_rules_reject_bad_configs(bad):
    with pytest.raises(AssertionError):
        check_shared_dev_plugin(bad)


@pytest.mark.parametrize("entry", ["#0-1", "ens1f0#", "ens1f0#3-1", "ens1f0#a", "ens1f0#0-"])
def test_sriov_rules_reject_bad_pf_names(entry):
    with pytest.raises(AssertionError):
        check_pf_name(entry)


@pytest.mark.parametrize("key", ["rails", "Rdmatopo.io/x", "kubernetes.io/x", "rdmatopo.io/-x", "rdmatopo.io/" + "a" * 64])
def test_label_rules_reject_bad_keys(key):
    with pytest.raises(AssertionError):
        check_label(key, "1")


def test_schema_rejects_a_bad_configmap():
    doc = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": {"a": 1}}
    with pytest.raises(kubernetes_validate.ValidationError):
        validate(doc)
    doc["data"] = {"a": "1"}
    doc["spec"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        validate(doc)


# ---------------------------------------------------------------------------------
# deploy/
# ---------------------------------------------------------------------------------

BASE = DEPLOY / "base"
MANIFESTS = sorted(p for p in BASE.glob("*.yaml") if p.name != "kustomization.yaml")
# What deploy/ supports: the oldest and newest Kubernetes the base must be valid for.
DEPLOY_VERSIONS = ["1.29.0", "1.35.0"]
# Each overlay's render and the versions it must be strict-valid for:
# recursiveReadOnly is in the API from 1.30.
OVERLAYS = {
    ".": DEPLOY_VERSIONS,
    "base": DEPLOY_VERSIONS,
    "overlays/monitoring": DEPLOY_VERSIONS,
    "overlays/recursive-readonly": ["1.30.0", "1.35.0"],
}
# Kinds of CRDs kubernetes-validate has no schema for; checked by test_monitoring.py.
CUSTOM_KINDS = {"PrometheusRule"}


def validate_for(doc, versions):
    for v in versions:
        kubernetes_validate.validate(doc, v, strict=True)


def base_daemonset():
    return next(d for d in yaml.safe_load_all((BASE / "daemonset.yaml").read_text()) if d)


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: p.name)
def test_deploy_manifest_validates(path):
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
    assert docs
    for d in docs:
        validate_for(d, DEPLOY_VERSIONS)


def check_container_security(c):
    sc = c["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["allowPrivilegeEscalation"] is False
    assert sc.get("privileged") is not True
    assert sc["capabilities"]["drop"] == ["ALL"]
    assert "add" not in sc["capabilities"]
    res = c["resources"]
    assert {"cpu", "memory"} <= set(res["requests"]) and {"cpu", "memory"} <= set(res["limits"])
    # Exec probes run the command itself (the image has no shell).
    for probe in ("livenessProbe", "readinessProbe"):
        cmd = c[probe]["exec"]["command"]
        assert cmd[:3] == ["/usr/local/bin/rdmatopo", "k8s", "probe"], cmd
        assert any(a.startswith("--max-age=") for a in cmd)


def check_host_mounts(spec, c, recursive=False):
    mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
    for path in ("/host/sys", "/host/proc"):
        assert mounts[path]["readOnly"] is True
        if recursive:
            assert mounts[path]["recursiveReadOnly"] == "Enabled"
        else:
            assert "recursiveReadOnly" not in mounts[path], "the base is for 1.29 too"
    host = {v["name"]: v["hostPath"]["path"] for v in spec["volumes"] if "hostPath" in v}
    assert host[mounts["/host/sys"]["name"]] == "/sys"
    assert host[mounts["/host/proc"]["name"]] == "/proc"
    return mounts, host


def check_daemonset(ds, recursive=False):
    """The NFD writer's arguments; the audit container is checked by check_audit."""
    spec = ds["spec"]["template"]["spec"]
    assert spec["automountServiceAccountToken"] is False
    assert spec.get("hostPID") is not True and spec.get("hostIPC") is not True
    assert spec.get("hostNetwork") is not True, "routes come from /host/proc/1/net"
    assert spec["priorityClassName"] == "rdmatopo-node-agent"
    assert spec["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in spec["tolerations"]
    containers = {c["name"]: c for c in spec["containers"]}
    assert sorted(containers) == ["audit", "rdmatopo"]
    c = containers["rdmatopo"]
    check_container_security(c)
    check_host_mounts(spec, c, recursive)
    writable = [m for m in c["volumeMounts"] if not m.get("readOnly")]
    assert [m["mountPath"] for m in writable] == ["/etc/kubernetes/node-feature-discovery/features.d"]
    args = c["args"]
    assert args[:2] == ["k8s", "nfd"]
    assert "--root=/host" in args
    write = next(a for a in args if a.startswith("--write="))
    assert write.startswith("--write=/etc/kubernetes/node-feature-discovery/features.d/")
    for probe in ("livenessProbe", "readinessProbe"):
        assert c[probe]["exec"]["command"][3] == write.removeprefix("--write=")
    return args


TEXTFILE_DIR = "/var/lib/node_exporter/textfile_collector"


def check_audit(ds, recursive=False):
    """The audit container: the kubelet's socket directory read-only, the host's /sys
    and /proc read-only, and only the textfile collector's directory writable."""
    spec = ds["spec"]["template"]["spec"]
    c = next(c for c in spec["containers"] if c["name"] == "audit")
    check_container_security(c)
    mounts, host = check_host_mounts(spec, c, recursive)
    pr = mounts["/var/lib/kubelet/pod-resources"]
    assert pr["readOnly"] is True
    assert host[pr["name"]] == "/var/lib/kubelet/pod-resources"
    writable = [m for m in c["volumeMounts"] if not m.get("readOnly")]
    assert [m["mountPath"] for m in writable] == [TEXTFILE_DIR]
    assert host[writable[0]["name"]] == TEXTFILE_DIR
    args = c["args"]
    assert args[:2] == ["k8s", "audit"]
    assert "--root=/host" in args
    assert "--format=prometheus" in args
    assert "--pod-resources-socket=/var/lib/kubelet/pod-resources/kubelet.sock" in args
    write = next(a for a in args if a.startswith("--write="))
    # node-exporter's textfile collector reads *.prom files only.
    assert write.startswith(f"--write={TEXTFILE_DIR}/") and write.endswith(".prom")
    for probe in ("livenessProbe", "readinessProbe"):
        assert c[probe]["exec"]["command"][3] == write.removeprefix("--write=")
    assert "--up" in c["readinessProbe"]["exec"]["command"]
    assert "--up" not in c["livenessProbe"]["exec"]["command"], "a kubelet away is not fixed by a restart"
    env = {e["name"]: e for e in c.get("env", [])}
    assert env["NODE_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"
    # The node's ResourceSlices from the API server, with a token this container alone
    # mounts (the pod mounts none: the NFD writer talks to no API).
    assert "--api-server" in args
    token = mounts[SA_DIR]
    assert token["readOnly"] is True
    sources = next(v for v in spec["volumes"] if v["name"] == token["name"])["projected"]["sources"]
    assert sources[0]["serviceAccountToken"]["path"] == "token"
    assert sources[1]["configMap"]["name"] == "kube-root-ca.crt"
    assert sources[2]["downwardAPI"]["items"][0]["fieldRef"]["fieldPath"] == "metadata.namespace"
    others = [c for c in spec["containers"] if c["name"] != "audit"]
    for other in others:
        assert SA_DIR not in {m["mountPath"] for m in other["volumeMounts"]}
    return args


SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


def check_rbac(docs):
    """The one grant: get/list/watch of resourceslices in resource.k8s.io, bound to
    the DaemonSet's service account."""
    roles = [d for d in docs if d["kind"] in ("Role", "ClusterRole")]
    bindings = [d for d in docs if d["kind"] in ("RoleBinding", "ClusterRoleBinding")]
    assert [r["kind"] for r in roles] == ["ClusterRole"]
    assert [b["kind"] for b in bindings] == ["ClusterRoleBinding"]
    role, binding = roles[0], bindings[0]
    assert role["rules"] == [{
        "apiGroups": ["resource.k8s.io"],
        "resources": ["resourceslices"],
        "verbs": ["get", "list", "watch"],
    }]
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role["metadata"]["name"],
    }
    ds = next(d for d in docs if d["kind"] == "DaemonSet")
    sa = next(d for d in docs if d["kind"] == "ServiceAccount")
    assert ds["spec"]["template"]["spec"]["serviceAccountName"] == sa["metadata"]["name"]
    assert binding["subjects"] == [{
        "kind": "ServiceAccount", "name": sa["metadata"]["name"], "namespace": sa["metadata"]["namespace"],
    }]


def render(overlay):
    """`kubectl kustomize` of a directory of deploy/; a missing kubectl fails."""
    kubectl = shutil.which("kubectl")
    assert kubectl is not None, "kubectl is not installed: the kustomize renders cannot be checked"
    out = subprocess.run([kubectl, "kustomize", str(DEPLOY / overlay)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return [d for d in yaml.safe_load_all(out.stdout) if d]


@pytest.mark.parametrize("overlay", sorted(OVERLAYS))
def test_kustomize_renders_and_validates(overlay):
    docs = render(overlay)
    kinds = sorted(d["kind"] for d in docs)
    expected = ["ClusterRole", "ClusterRoleBinding", "DaemonSet", "Namespace", "PriorityClass", "ServiceAccount"]
    if overlay == "overlays/monitoring":
        expected = sorted(expected + ["ConfigMap", "PrometheusRule"])
    assert kinds == expected
    cluster_scoped = {"Namespace", "PriorityClass", "ClusterRole", "ClusterRoleBinding"}
    for d in docs:
        if d["kind"] not in CUSTOM_KINDS:
            validate_for(d, OVERLAYS[overlay])
        if d["kind"] not in cluster_scoped:
            assert d["metadata"]["namespace"] == "rdmatopo"
    check_rbac(docs)
    ds = next(d for d in docs if d["kind"] == "DaemonSet")
    recursive = overlay == "overlays/recursive-readonly"
    check_daemonset(ds, recursive)
    check_audit(ds, recursive)
    for c in ds["spec"]["template"]["spec"]["containers"]:
        assert c["image"] == f"{IMAGE}:{VERSION}"


def test_rbac_check_rejects_a_wider_grant():
    """check_rbac can fail: one more verb, or another resource, is refused."""
    for widen in (lambda r: r["verbs"].append("create"), lambda r: r["resources"].append("resourceclaims")):
        docs = render("base")
        widen(next(d for d in docs if d["kind"] == "ClusterRole")["rules"][0])
        with pytest.raises(AssertionError):
            check_rbac(docs)


def test_recursive_readonly_is_unknown_to_1_29():
    """Why the recursive overlay is 1.30+ and the base has none: 1.29 refuses it."""
    ds = next(d for d in render("overlays/recursive-readonly") if d["kind"] == "DaemonSet")
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(ds, "1.29.0", strict=True)


# The image scripts/build-image.sh builds, and the version it tags it with.
IMAGE = re.search(r'^image=\$\{IMAGE:-([^}]+)\}', (REPO / "scripts" / "build-image.sh").read_text(), re.M).group(1)
VERSION = re.search(r'^version = "([^"]+)"', (REPO / "Cargo.toml").read_text(), re.M).group(1)


def test_daemonset_command_runs_against_a_fixture(tmp_path):
    """The DaemonSet's arguments, pointed at a fixture and a scratch features.d."""
    args = check_daemonset(base_daemonset())
    target = tmp_path / "rdmatopo"
    args = [a for a in args if not a.startswith(("--root=", "--write=", "--interval="))]
    out = rdmatopo(*args, f"--root={root('h100-dgx')}", f"--write={target}")
    assert out.returncode == 0, out.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rdmatopo"]
    labels = check_feature_file(target.read_text())
    assert labels["rdmatopo.io/rdma.rails"] == "8"
    assert "# +expiry-time=" in target.read_text()


def test_daemonset_audit_command_runs_against_a_fixture(tmp_path):
    """The audit container's arguments, pointed at a fixture, a saved kubelet answer
    (one pod holding GPU4 with node 0's HCA) and a scratch textfile directory; the
    metrics parsed by prometheus_client's own parser."""
    from prometheus_client.parser import text_string_to_metric_families

    ds = base_daemonset()
    args = check_audit(ds)
    allocation = tmp_path / "allocation.json"
    allocation.write_text(json.dumps({"pods": [{
        "namespace": "train", "name": "bad-0",
        "containers": [{"name": "main", "cpu_ids": [60, 61], "devices": [
            {"resource_name": "nvidia.com/gpu", "device_ids": ["4"], "numa_nodes": [1]},
            {"resource_name": "rdma/hca_ibp24s0", "device_ids": ["0"]},
        ]}],
    }]}))
    target = tmp_path / "rdmatopo-audit.prom"
    # No API server here: tests/apiserver.rs runs --api-server against a double of one.
    args = [a for a in args if not a.startswith(("--root=", "--write=", "--interval=", "--pod-resources-socket="))]
    args.remove("--api-server")
    out = rdmatopo(*args, f"--root={root('h100-dgx')}", f"--write={target}", f"--allocation={allocation}")
    assert out.returncode == 2, out.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["allocation.json", "rdmatopo-audit.prom"]
    samples = {
        (s.name, s.labels.get("pod"), s.labels.get("severity")): s
        for f in text_string_to_metric_families(target.read_text())
        for s in f.samples
    }
    worst = samples[("rdmatopo_audit_container_worst_path_rank", "bad-0", None)]
    assert worst.value == 6 and worst.labels["class"] == "SYS"
    assert samples[("rdmatopo_audit_container_numa_misaligned", "bad-0", None)].value == 1
    assert samples[("rdmatopo_audit_findings", None, "error")].value >= 1
    assert samples[("rdmatopo_audit_pods", None, None)].value == 1
    assert samples[("rdmatopo_audit_up", None, None)].value == 1
    # The probes, as the kubelet runs them, on the file just written.
    audit = next(c for c in ds["spec"]["template"]["spec"]["containers"] if c["name"] == "audit")
    for probe in ("livenessProbe", "readinessProbe"):
        cmd = audit[probe]["exec"]["command"]
        assert cmd[3] == "/var/lib/node_exporter/textfile_collector/rdmatopo-audit.prom"
        out = rdmatopo(*cmd[1:3], target, *cmd[4:])
        assert out.returncode == 0, out.stderr


# ---------------------------------------------------------------------------------
# Generated manifests, on every fixture
# ---------------------------------------------------------------------------------

PLUGINS = {
    "rdma-shared-dev-plugin": check_shared_dev_plugin,
    "sriov-device-plugin": check_sriov_device_plugin,
}


@functools.cache
def plugin_pools(fixture, plugin, *extra):
    """Resource names (`prefix/name`) of a plugin's pools, or None when the command
    says the node has none. Asked once per fixture and arguments: every pod test of a
    fixture reads the same pools."""
    out = rdmatopo("k8s", plugin, "--root", root(fixture), "--config-json", *extra)
    if out.returncode == EXIT_COULD_NOT_RUN:
        assert "no resource pool" in out.stderr, out.stderr
        return None
    assert out.returncode == 0, out.stderr
    cfg = json.loads(out.stdout)
    names = PLUGINS[plugin](cfg)
    if plugin == "rdma-shared-dev-plugin":
        return frozenset(f"{e.get('resourcePrefix', 'rdma')}/{e['resourceName']}" for e in cfg["configList"])
    return frozenset(names)


@pytest.mark.parametrize("plugin", sorted(PLUGINS))
@pytest.mark.parametrize("fixture", FIXTURES)
@pytest.mark.parametrize("fmt", ["yaml", "json"])
def test_plugin_configmap(fixture, plugin, fmt):
    out = rdmatopo("k8s", plugin, "--root", root(fixture), "--format", fmt)
    if out.returncode == EXIT_COULD_NOT_RUN:
        assert "no resource pool" in out.stderr, out.stderr
        return
    assert out.returncode == 0, out.stderr
    doc = yaml.safe_load(out.stdout) if fmt == "yaml" else json.loads(out.stdout)
    validate(doc)
    assert doc["kind"] == "ConfigMap"
    cfg = json.loads(doc["data"]["config.json"])
    PLUGINS[plugin](cfg)
    plain = rdmatopo("k8s", plugin, "--root", root(fixture), "--config-json")
    assert json.loads(plain.stdout) == cfg


@pytest.mark.parametrize("fixture", FIXTURES)
def test_plugin_options_keep_the_rules(fixture):
    for plugin, extra in [
        ("rdma-shared-dev-plugin", ["--include-excluded", "--rdma-hca-max", "0", "--periodic-update-interval", "0"]),
        ("sriov-device-plugin", ["--pool-by", "switch", "--include-excluded"]),
    ]:
        plugin_pools(fixture, plugin, *extra)


@pytest.mark.parametrize("fixture", FIXTURES)
def test_nfd_feature_file(fixture):
    out = rdmatopo("k8s", "nfd", "--root", root(fixture))
    assert out.returncode == 0, out.stderr
    labels = check_feature_file(out.stdout)
    as_json = json.loads(rdmatopo("k8s", "nfd", "--root", root(fixture), "--format", "json").stdout)
    assert labels == as_json
    assert labels["rdmatopo.io/rdma.capable"] in {"true", "false"}
    assert int(labels["rdmatopo.io/rdma.rails"]) >= 0


# The NetworkAttachmentDefinition CRD's schema (k8snetworkplumbingwg/
# network-attachment-definition-client artifacts/networks-crd.yaml, at 6fd0897f), closed
# where it is structural, as strict field validation reads it: a field it does not
# define would be pruned, and `kubectl apply --validate=strict` fails on it.
NAD_SCHEMA = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "additionalProperties": False,
    "properties": {
        "apiVersion": {"const": "k8s.cni.cncf.io/v1"},
        "kind": {"const": "NetworkAttachmentDefinition"},
        "metadata": {
            "type": "object",
            "additionalProperties": False,
            "required": ["name"],
            "properties": {
                "name": {"type": "string", "pattern": r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", "maxLength": 63},
                "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
            },
        },
        "spec": {
            "type": "object",
            "required": ["config"],
            "additionalProperties": False,
            "properties": {"config": {"type": "string"}},
        },
    },
}
NAD_RESOURCE = "k8s.v1.cni.cncf.io/resourceName"
MULTUS_NETWORKS = "k8s.v1.cni.cncf.io/networks"


def quantity(q):
    """A Kubernetes quantity in thousandths of its unit (apimachinery resource.Quantity,
    for the whole numbers and suffixes written here)."""
    if isinstance(q, int):
        return q * 1000
    m = re.fullmatch(r"(\d+)(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?", q)
    assert m, f"quantity {q!r}"
    scale = {None: 1000, "m": 1, "k": 10**3 * 1000, "M": 10**6 * 1000, "G": 10**9 * 1000,
             "T": 10**12 * 1000, "P": 10**15 * 1000, "E": 10**18 * 1000}
    scale.update({s: 1024 ** (i + 1) * 1000 for i, s in enumerate(["Ki", "Mi", "Gi", "Ti", "Pi", "Ei"])})
    return int(m.group(1)) * scale[m.group(2)]


def qos_class(pod_spec):
    """The QoS class Kubernetes gives the pod: requests default to limits where unset
    (SetDefaults_Pod), then ComputePodQOS (kubernetes pkg/apis/core/helper/qos/qos.go):
    per container (init containers too), cpu and memory each Guaranteed (request = limit
    > 0), BestEffort (both 0) or Burstable; the pod is Guaranteed when every container is."""
    pod = None
    for c in pod_spec.get("initContainers", []) + pod_spec.get("containers", []):
        limits = c.get("resources", {}).get("limits", {})
        requests = {**limits, **c.get("resources", {}).get("requests", {})}
        shapes = set()
        for res in ("cpu", "memory"):
            req, lim = quantity(requests.get(res, 0)), quantity(limits.get(res, 0))
            shapes.add("Burstable" if req != lim else "BestEffort" if req == 0 else "Guaranteed")
        container = shapes.pop() if len(shapes) == 1 else "Burstable"
        if container == "Burstable" or (pod is not None and pod != container):
            return "Burstable"
        pod = container
    return pod or "BestEffort"


def test_qos_class_reads_pods_as_kubernetes_does():
    spec = lambda r: {"containers": [{"name": "main", "resources": r}]}
    assert qos_class(spec({"limits": {"nvidia.com/gpu": 1}})) == "BestEffort"
    assert qos_class(spec({"limits": {"cpu": 4}})) == "Burstable"
    assert qos_class(spec({"limits": {"cpu": 4, "memory": "1Gi"}})) == "Guaranteed"
    assert qos_class(spec({"limits": {"cpu": 4, "memory": "1Gi"}, "requests": {"cpu": "4000m"}})) == "Guaranteed"
    assert qos_class(spec({"limits": {"cpu": 4, "memory": "1Gi"}, "requests": {"cpu": 2}})) == "Burstable"
    two = spec({"limits": {"cpu": 4, "memory": "1Gi"}})
    two["initContainers"] = [{"name": "init"}]
    assert qos_class(two) == "Burstable"


def pod_docs(out, fmt):
    if fmt == "yaml":
        return list(yaml.safe_load_all(out))
    doc = json.loads(out)
    return doc["items"] if doc["kind"] == "List" else [doc]


@pytest.mark.parametrize("fixture", FIXTURES)
@pytest.mark.parametrize(
    "network,kind",
    [("rdma-shared", "pod"), ("rdma-shared", "job"), ("sriov", "pod"), ("sriov", "job")],
)
@pytest.mark.parametrize("fmt", ["yaml", "json"])
def test_pod(fixture, network, kind, fmt):
    out = rdmatopo(
        "k8s", "pod", "--root", root(fixture), "--gpus", "1", "--network", network, "--kind", kind, "--format", fmt
    )
    if out.returncode == EXIT_USAGE:
        # More GPUs than the node has: the argument, not the node, is wrong.
        assert "GPUs asked for" in out.stderr, out.stderr
        return
    if out.returncode == EXIT_COULD_NOT_RUN:
        assert out.stderr.strip(), "an error must say why"
        return
    assert out.returncode == 0, out.stderr
    if fmt == "yaml":
        assert out.stdout.startswith("# rdmatopo k8s pod"), "the node facts come first, as comments"
    *nads, doc = pod_docs(out.stdout, fmt)
    validate(doc)
    assert doc["kind"] == {"pod": "Pod", "job": "Job"}[kind]
    template = doc["spec"]["template"] if kind == "job" else doc
    assert qos_class(template["spec"]) == "Guaranteed", template["spec"]["containers"]
    (c,) = template["spec"]["containers"]
    assert "IPC_LOCK" in c["securityContext"]["capabilities"]["add"]
    limits = c["resources"]["limits"]
    assert isinstance(limits["cpu"], int) and limits["cpu"] > 0, "the static CPU manager wants whole CPUs"
    assert limits["nvidia.com/gpu"] == 1
    plugin = "rdma-shared-dev-plugin" if network == "rdma-shared" else "sriov-device-plugin"
    pools = plugin_pools(fixture, plugin)
    rail_resources = {k: v for k, v in limits.items() if k not in ("nvidia.com/gpu", "cpu", "memory")}
    assert set(rail_resources) <= pools, "every resource asked for is a pool the plugin config defines"
    annotations = template.get("metadata", {}).get("annotations", {})
    if network == "sriov":
        networks = annotations[MULTUS_NETWORKS].split(",")
        assert len(networks) == sum(rail_resources.values()), "one Multus network per VF"
        for n in networks:
            assert re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", n) and len(n) <= 63
        assert sorted(n["metadata"]["name"] for n in nads) == sorted(set(networks)), "every network named is generated"
        for nad in nads:
            check_sriov_network(fixture, nad, limits)
    else:
        assert MULTUS_NETWORKS not in annotations
        assert nads == [], "nothing named, nothing generated"


def check_sriov_network(fixture, nad, limits):
    jsonschema.validate(nad, NAD_SCHEMA)
    resource = nad["metadata"]["annotations"][NAD_RESOURCE]
    assert resource in limits, f"{resource}: the network's pool is not one the pod asks for"
    config = json.loads(nad["spec"]["config"])
    assert config["name"] == nad["metadata"]["name"]
    first, *rest = config["plugins"]
    assert first["type"] in {"sriov", "ib-sriov"}
    # The rail's MTU, from the PF netdev the pool is named after (`--pool-by rail`).
    pf = resource.split("/", 1)[1].removeprefix("vf_")
    mtu = int((root(fixture) / "sys" / "class" / "net" / pf / "mtu").read_text())
    assert [p for p in rest if p["type"] == "tuning"] == [{"type": "tuning", "mtu": mtu}]
