"""`rdmatopo k8s dra` on every fixture validates offline, strictly, against the
resource.k8s.io/v1 schemas of Kubernetes 1.34 (DRA GA) and 1.35 (DRA locked on).

Run from the repository root after `cargo build -p rdmatopo`:
    .venv/bin/python -m pytest deploy/tests/test_dra.py
RDMATOPO_BIN overrides the binary (default target/debug/rdmatopo).
"""

import json
import os
import pathlib
import subprocess

import kubernetes_validate
import pytest
import yaml

REPO = pathlib.Path(__file__).resolve().parents[2]
subprocess.run(["python3", str(REPO / "fixtures" / "tools" / "unpack.py")], check=True, stdout=subprocess.DEVNULL)
FIXTURES = sorted(p.name for p in (REPO / "fixtures").iterdir() if (p / "root").is_dir())
BIN = pathlib.Path(os.environ.get("RDMATOPO_BIN", REPO / "target" / "debug" / "rdmatopo"))
DRA_VERSIONS = ["1.34.0", "1.35.0"]
# More GPUs or NICs than this node can give: a usage error (README, exit codes).
EXIT_USAGE = 2


_VALID: set[tuple[str, str]] = set()


def validate(doc, version):
    """Strict validation, once per distinct document (the DeviceClasses of every run,
    and a format's second rendering of the same claim, are the same document)."""
    key = (json.dumps(doc, sort_keys=True), version)
    if key not in _VALID:
        kubernetes_validate.validate(doc, version, strict=True)
        _VALID.add(key)


def rdmatopo(*args):
    if not BIN.exists():
        pytest.fail(f"{BIN} is missing: run `cargo build -p rdmatopo` first")
    env = {k: v for k, v in os.environ.items() if k != "RDMATOPO_ROOT"}
    return subprocess.run([str(BIN), *map(str, args)], capture_output=True, text=True, env=env)


@pytest.mark.parametrize("fixture", FIXTURES)
@pytest.mark.parametrize("nic_driver", ["dra.net", "sriovnetwork.k8snetworkplumbingwg.io"])
@pytest.mark.parametrize("gpus", [1, 2, 4, 8])
@pytest.mark.parametrize("fmt", ["yaml", "json"])
def test_dra_claim_validates(fixture, nic_driver, gpus, fmt):
    out = rdmatopo(
        "k8s", "dra", "--root", REPO / "fixtures" / fixture / "root",
        "--gpus", gpus, "--nic-driver", nic_driver, "--format", fmt,
    )
    if out.returncode == EXIT_USAGE:
        assert out.stderr.strip(), "an error must say why"
        return
    assert out.returncode == 0, out.stderr
    docs = list(yaml.safe_load_all(out.stdout)) if fmt == "yaml" else json.loads(out.stdout)["items"]
    assert [d["kind"] for d in docs] == ["DeviceClass", "DeviceClass", "ResourceClaimTemplate"]
    for doc in docs:
        for v in DRA_VERSIONS:
            validate(doc, v)
    devices = docs[-1]["spec"]["spec"]["devices"]
    assert len(devices["requests"]) == 2 * gpus
    if fmt == "yaml":
        assert "# rdmatopo k8s dra" in out.stdout, "the node facts are stated as comments"
