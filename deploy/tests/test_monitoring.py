"""deploy/monitoring: the Grafana dashboard and the alert rules ask only for metrics
that exist: every rdmatopo metric they name is in an actual `k8s audit --format
prometheus` output on a fixture, and the others are the few named below (from
node-exporter and kube-state-metrics). `promtool check rules` and `promtool test
rules` run in scripts/check-deploy.sh.

Run from the repository root after `cargo build -p rdmatopo`.
"""

import json
import os
import pathlib
import re
import subprocess

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

REPO = pathlib.Path(__file__).resolve().parents[2]
MONITORING = REPO / "deploy" / "monitoring"
BIN = pathlib.Path(os.environ.get("RDMATOPO_BIN", REPO / "target" / "debug" / "rdmatopo"))
subprocess.run(["python3", str(REPO / "fixtures" / "tools" / "unpack.py")], check=True, stdout=subprocess.DEVNULL)

# Metrics of other exporters the rules use, with the exporter that writes them.
EXTERNAL = {
    "node_textfile_mtime_seconds": "node-exporter's textfile collector",
    "kube_node_labels": "kube-state-metrics",
}
FUNCTIONS = {
    "sum", "count", "max", "min", "avg", "topk", "bottomk", "time", "rate", "increase",
    "label_values", "absent", "clamp_min", "clamp_max", "max_over_time", "min_over_time",
}
KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless", "bool", "offset"}


def metric_names(expr):
    """The metric names a PromQL (or Grafana variable) expression selects."""
    expr = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # strings
    expr = re.sub(r"\{[^}]*\}", "", expr)  # label matchers
    expr = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", expr)
    expr = re.sub(r"\[[^\]]*\]", "", expr)  # ranges
    expr = re.sub(r"\$\{?\w+\}?", "", expr)  # Grafana variables
    expr = re.sub(r"label_values\(([^,()]*),\s*\w+\)", r"label_values(\1)", expr)  # its label
    names = set()
    for m in re.finditer(r"(?<![\w.])([a-zA-Z_:][a-zA-Z0-9_:]*)(\s*\()?", expr):
        name, call = m.group(1), m.group(2)
        if call:
            assert name in FUNCTIONS, f"unknown function {name} in {expr!r}"
            continue
        if name in KEYWORDS or re.fullmatch(r"\d+[smhdwy]", name):
            continue
        names.add(name)
    return names


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """The metric names `k8s audit --format prometheus` writes, on h100-dgx with a
    saved kubelet answer (one misaligned pod)."""
    if not BIN.exists():
        pytest.fail(f"{BIN} is missing: run `cargo build -p rdmatopo` first")
    allocation = tmp_path_factory.mktemp("audit") / "allocation.json"
    allocation.write_text(json.dumps({"pods": [{
        "namespace": "train", "name": "bad-0",
        "containers": [{"name": "main", "cpu_ids": [60, 61], "devices": [
            {"resource_name": "nvidia.com/gpu", "device_ids": ["4"], "numa_nodes": [1]},
            {"resource_name": "rdma/hca_ibp24s0", "device_ids": ["0"]},
        ]}],
    }]}))
    root = REPO / "fixtures" / "h100-dgx" / "root"
    out = subprocess.run(
        [str(BIN), "k8s", "audit", f"--root={root}", f"--allocation={allocation}", "--format=prometheus"],
        capture_output=True, text=True,
    )
    assert out.returncode == 2, out.stderr
    names = {s.name for f in text_string_to_metric_families(out.stdout) for s in f.samples}
    assert "rdmatopo_audit_up" in names and "rdmatopo_audit_container_worst_path_rank" in names
    return names


def dashboard_exprs():
    dash = json.loads((MONITORING / "grafana-dashboard.json").read_text())
    exprs = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
    for v in dash["templating"]["list"]:
        if v["type"] == "query":
            exprs.append(v["query"]["query"] if isinstance(v["query"], dict) else v["query"])
    return dash, exprs


def rule_exprs():
    doc = yaml.safe_load((MONITORING / "prometheusrule.yaml").read_text())
    assert doc["apiVersion"] == "monitoring.coreos.com/v1" and doc["kind"] == "PrometheusRule"
    return [r["expr"] for g in doc["spec"]["groups"] for r in g["rules"]]


def test_dashboard_names_only_exported_metrics(exported):
    dash, exprs = dashboard_exprs()
    assert dash["uid"] and dash["title"]
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids)), "panel ids are unique"
    assert len(exprs) >= 10
    for expr in exprs:
        names = metric_names(expr)
        assert names, f"{expr!r} selects no metric"
        assert names <= exported, f"{expr!r}: {sorted(names - exported)} not written by k8s audit"


def test_dashboard_shows_nodes_and_pods():
    _, exprs = dashboard_exprs()
    used = set().union(*(metric_names(e) for e in exprs))
    for name in ("rdmatopo_audit_up", "rdmatopo_audit_container_worst_path_rank",
                 "rdmatopo_audit_container_numa_misaligned", "rdmatopo_audit_last_success_timestamp_seconds"):
        assert name in used, name


def test_rules_name_only_exported_or_known_metrics(exported):
    exprs = rule_exprs()
    used = set()
    for expr in exprs:
        names = metric_names(expr)
        assert names, expr
        used |= names
        unknown = {n for n in names if n not in exported and n not in EXTERNAL}
        assert not unknown, f"{expr!r}: {sorted(unknown)}"
    assert {"rdmatopo_audit_up", "rdmatopo_audit_last_success_timestamp_seconds",
            "rdmatopo_audit_container_numa_misaligned", "rdmatopo_audit_container_worst_path_rank"} <= used


@pytest.mark.parametrize(
    "expr,names",
    [
        ('sum by (instance) (rdmatopo_audit_up{instance=~"$instance"})', {"rdmatopo_audit_up"}),
        ("time() - rdmatopo_audit_last_success_timestamp_seconds > 900", {"rdmatopo_audit_last_success_timestamp_seconds"}),
        ('rate(x_total{a="b(c)"}[5m]) or on (i) y', {"x_total", "y"}),
        ("label_values(rdmatopo_audit_up, instance)", {"rdmatopo_audit_up"}),
    ],
)
def test_metric_names_are_found(expr, names):
    assert metric_names(expr) == names


def test_an_unknown_metric_is_caught(exported):
    """The check can fail: a name the exporter does not write."""
    assert not metric_names("rdmatopo_audit_misaligned_pods > 0") <= exported
