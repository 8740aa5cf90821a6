#!/usr/bin/env bash
# Every check of deploy/ and the image, for CI; a missing tool is a failure.
#   1. deploy/tests (pytest): each kustomize render (`kubectl kustomize`) strict-valid
#      for Kubernetes 1.29 and 1.35 (recursive-readonly: 1.30 and 1.35), the
#      DaemonSet's least privilege, its commands and probes run on a fixture, the
#      dashboard's and rules' metric names against an actual exporter output.
#   2. promtool: the metrics `k8s audit` writes (a good round and a failed one), the
#      PrometheusRule's rules, and their unit tests (deploy/monitoring/rules-test.yaml).
#   3. The image: scripts/build-image.sh twice (same digest), `skopeo inspect` of the
#      archive (labels, user, entrypoint), the command and the NVML helper in its layer.
#
# Needs: kubectl with kustomize v5 (the upstream apt repository pkgs.k8s.io, or the
# Google Cloud SDK's `kubectl` package; Debian 12's kubernetes-client is 1.20, too
# old), and the Debian packages prometheus (promtool), umoci, skopeo, musl-tools (the static
# build's C compiler for ring); a venv with kubernetes-validate pytest pyyaml
# prometheus-client ($PYTHON, default .venv/bin/python); `cargo build -p rdmatopo`
# (RDMATOPO_BIN) and the static build (scripts/build-static.sh; build-image.sh runs it
# when target/static is empty).
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-.venv/bin/python}
bin=${RDMATOPO_BIN:-target/debug/rdmatopo}
fail() { echo "check-deploy.sh: $*" >&2; exit 1; }
step() { echo "== $*"; }

missing=()
for tool in kubectl promtool umoci skopeo tar; do
  command -v "$tool" >/dev/null || missing+=("$tool")
done
"$python" -c 'import kubernetes_validate, pytest, yaml, prometheus_client' 2>/dev/null \
  || missing+=("$python with kubernetes-validate pytest pyyaml prometheus-client")
[ ${#missing[@]} -eq 0 ] || fail "missing: ${missing[*]}"
[ -x "$bin" ] || fail "$bin is missing: run cargo build -p rdmatopo first"
export RDMATOPO_BIN=$bin

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

step "deploy/tests: kustomize renders for 1.29 and 1.35, probes, dashboard metrics"
"$python" -m pytest -q deploy/tests

step "promtool check metrics: k8s audit's output, a good round and a failed one"
python3 fixtures/tools/unpack.py >/dev/null
cat >"$work/allocation.json" <<'JSON'
{"pods": [{"namespace": "train", "name": "bad-0", "containers": [{"name": "main",
  "cpu_ids": [60, 61], "devices": [
    {"resource_name": "nvidia.com/gpu", "device_ids": ["4"], "numa_nodes": [1]},
    {"resource_name": "rdma/hca_ibp24s0", "device_ids": ["0"]}]}]}]}
JSON
rc=0
"$bin" k8s audit --root fixtures/h100-dgx/root --allocation "$work/allocation.json" \
  --format prometheus >"$work/good.prom" || rc=$?
[ "$rc" = 2 ] || fail "k8s audit on the fixture exited $rc, not 2"
promtool check metrics <"$work/good.prom"
rc=0
"$bin" k8s audit --root fixtures/h100-dgx/root --pod-resources-socket "$work/no.sock" \
  --format prometheus >"$work/down.prom" 2>/dev/null || rc=$?
[ "$rc" = 3 ] || fail "k8s audit without a kubelet exited $rc, not 3"
grep -qx 'rdmatopo_audit_up 0' "$work/down.prom" || fail "a failed round does not say up 0"
promtool check metrics <"$work/down.prom"
# An API server that cannot be reached (a kubeconfig naming a port nothing listens on).
printf 'apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: "http://127.0.0.1:9"}\ncontexts:\n- name: c\n  context: {cluster: c, user: u}\ncurrent-context: c\nusers:\n- name: u\n  user: {token: t}\n' >"$work/kubeconfig"
rc=0
KUBECONFIG="$work/kubeconfig" "$bin" k8s audit --root fixtures/h100-dgx/root --allocation "$work/allocation.json" \
  --api-server --node-name node-a --timeout 2s --format prometheus >"$work/apiserver-down.prom" 2>/dev/null || rc=$?
[ "$rc" = 3 ] || fail "k8s audit without its API server exited $rc, not 3"
grep -qx 'rdmatopo_audit_source_up{source="api-server"} 0' "$work/apiserver-down.prom" \
  || fail "a round without the API server does not say so"
promtool check metrics <"$work/apiserver-down.prom"

step "promtool check rules, promtool test rules"
mkdir "$work/rules"
"$python" - "$work/rules/rules.yaml" <<'PY'
import sys, yaml
doc = yaml.safe_load(open("deploy/monitoring/prometheusrule.yaml"))
assert doc["kind"] == "PrometheusRule"
yaml.safe_dump(doc["spec"], open(sys.argv[1], "w"), sort_keys=False)
PY
cp deploy/monitoring/rules-test.yaml "$work/rules/"
promtool check rules "$work/rules/rules.yaml"
promtool test rules "$work/rules/rules-test.yaml"

step "image: built twice, the same digest; skopeo inspect"
OUT="$work/image1" scripts/build-image.sh
OUT="$work/image2" scripts/build-image.sh
archive=$(echo "$work"/image1/rdmatopo-*.oci.tar)
cmp "$archive" "$work/image2/$(basename "$archive")" || fail "two builds differ: not reproducible"
skopeo inspect "oci-archive:$archive" >"$work/inspect.json"
skopeo inspect --config "oci-archive:$archive" >"$work/config.json"
mkdir "$work/layout"
tar -xf "$archive" -C "$work/layout"
"$python" - "$work" <<'PY'
import json, re, subprocess, sys, pathlib
work = pathlib.Path(sys.argv[1])
inspect = json.loads((work / "inspect.json").read_text())
config = json.loads((work / "config.json").read_text())
version = re.search(r'^version = "([^"]+)"', open("Cargo.toml").read(), re.M).group(1)
labels = inspect["Labels"]
assert labels["org.opencontainers.image.version"] == version, labels
assert labels["org.opencontainers.image.source"].startswith("https://"), labels
assert "MIT OR Apache-2.0" in labels["org.opencontainers.image.licenses"], labels
assert config["config"]["User"] == "65532:65532", config["config"]
assert config["config"]["Entrypoint"] == ["/usr/local/bin/rdmatopo"], config["config"]
layout = work / "layout"
index = json.loads((layout / "index.json").read_text())
(manifest_ref,) = index["manifests"]
assert manifest_ref["annotations"]["org.opencontainers.image.ref.name"] == version
blob = lambda d: layout / "blobs" / "sha256" / d["digest"].split(":")[1]
manifest = json.loads(blob(manifest_ref).read_text())
files = set()
for layer in manifest["layers"]:
    out = subprocess.run(["tar", "-tvzf", str(blob(layer))], capture_output=True, text=True, check=True)
    for line in out.stdout.splitlines():
        files.add(line.split()[-1].lstrip("./"))
        if line.split()[-1].lstrip("./").startswith("usr/local/bin/rdmatopo"):
            assert line.split()[1] == "0/0", line
for f in ("usr/local/bin/rdmatopo", "usr/local/bin/rdmatopo-nvml", "usr/share/doc/rdmatopo/LICENSE-MIT"):
    assert f in files, f"{f} not in the image: {sorted(files)}"
print(f"image {inspect['Digest']}: {len(files)} entries, labels and user as expected")
PY
# The image's own files run: the static command, and the helper with the loader and
# glibc the image carries (no NVML here: it says so and exits 3). chroot needs root.
if [ "$(id -u)" = 0 ]; then
  mkdir "$work/rootfs"
  "$python" - "$work/layout" "$work/rootfs" <<'PY'
import json, pathlib, subprocess, sys
layout, rootfs = pathlib.Path(sys.argv[1]), sys.argv[2]
blob = lambda d: layout / "blobs" / "sha256" / d["digest"].split(":")[1]
(ref,) = json.loads((layout / "index.json").read_text())["manifests"]
for layer in json.loads(blob(ref).read_text())["layers"]:
    subprocess.run(["tar", "-xzf", str(blob(layer)), "-C", rootfs], check=True)
PY
  chroot "$work/rootfs" /usr/local/bin/rdmatopo --version | head -n 1
  rc=0
  chroot "$work/rootfs" /usr/local/bin/rdmatopo-nvml >/dev/null 2>"$work/nvml.err" || rc=$?
  [ "$rc" = 0 ] || [ "$rc" = 3 ] || { cat "$work/nvml.err" >&2; fail "rdmatopo-nvml does not run in the image (exit $rc)"; }
else
  echo "the image's binaries not run: chroot needs root"
fi
echo "check-deploy.sh: all passed"
