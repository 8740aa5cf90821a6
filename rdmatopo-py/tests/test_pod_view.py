"""In a pod the binding answers as the CLI does: the view's GPUs and NICs by default, the
CLI's numbering for integers, the documented exception classes, and a captured tree
judged with the environment captured in it."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
from pathlib import Path

import pytest

import rdmatopo

from conftest import FIXTURES

POD = FIXTURES / "pod-h100-2gpu-2vf" / "root"


def test_gpus_are_the_pods_own_in_its_numbering() -> None:
    topo = rdmatopo.discover(POD)
    assert topo.view == "owned"
    assert [g.view_index for g in topo.gpus] == [0, 1]
    assert [g.view_name for g in topo.gpus] == ["GPU0", "GPU1"]
    assert len(topo.all_gpus) == 8
    assert {g.pci for g in topo.gpus} < {g.pci for g in topo.all_gpus}


def test_nics_are_the_pods_own_and_every_one_answers() -> None:
    topo = rdmatopo.discover(POD)
    names = [n.name for n in topo.nics]
    assert names == ["mlx5_17", "mlx5_19"]
    for nic in topo.nics:
        assert not nic.partial
        assert nic.ports  # no OutsideViewError
    partial_nics = [n for n in topo.all_nics if n.partial]
    assert partial_nics, "the PFs of its VFs are read in part"
    with pytest.raises(rdmatopo.OutsideViewError):
        partial_nics[0].ports


def test_an_integer_names_a_gpu_as_the_cli_does() -> None:
    topo = rdmatopo.discover(POD)
    # GPU0 of the pod is host GPU2: 0 and "GPU0" are the same device.
    assert topo.path(0, "mlx5_17") == topo.path("GPU0", "mlx5_17") == "PXB"
    assert topo.path(1, "mlx5_19") == topo.path("GPU1", "mlx5_19")
    with pytest.raises(rdmatopo.UnknownDeviceError):
        topo.path(5, "mlx5_17")


def test_a_rank_beyond_the_gpus_is_an_argument_error(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("LOCAL_RANK", "LOCAL_WORLD_SIZE", "CUDA_VISIBLE_DEVICES"):
        monkeypatch.delenv(var, raising=False)
    topo = rdmatopo.discover(POD)
    with pytest.raises(rdmatopo.ArgumentError):
        topo.plan(local_rank=5)


def test_a_corrupt_snapshot_is_a_discovery_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.tar.gz"
    bad.write_bytes(gzip.compress(b"this is not a tar archive" * 40)[:-20])
    with pytest.raises(rdmatopo.DiscoveryError):
        rdmatopo.discover(bad)
    with pytest.raises(FileNotFoundError):
        rdmatopo.discover(tmp_path / "absent.tar.gz")


def test_apply_on_a_captured_tree_binds_no_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("LOCAL_RANK", "LOCAL_WORLD_SIZE", "CUDA_VISIBLE_DEVICES"):
        monkeypatch.delenv(var, raising=False)
    before = os.sched_getaffinity(0)
    plan = rdmatopo.apply(0, root=POD)
    assert os.sched_getaffinity(0) == before
    assert plan.applied is not None and plan.applied.cpus is None
    for name in plan.applied.env_set:
        monkeypatch.delenv(name, raising=False)


def test_plan_and_exec_take_this_process_s_environment_on_a_captured_tree(
    cli: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The caller's launcher variables name this process's rank, whatever root the
    # machine is read from: plan() and `rdmatopo exec --root` agree on it.
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    plan = rdmatopo.discover(POD).plan()
    assert plan.local_rank == 1
    out = subprocess.run(
        [str(cli), "exec", "--print", "--root", str(POD), "--", "true"],
        capture_output=True, text=True, check=True,
    )
    assert "local rank 1: GPU " + plan.gpu.pci in out.stderr, out.stderr


def test_doctor_judges_the_root_s_environment_in_both(
    cli: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # NCCL_IB_DISABLE=1 in the caller's environment is not the captured pod's.
    monkeypatch.setenv("NCCL_IB_DISABLE", "1")
    report = rdmatopo.discover(POD).doctor()
    assert not any("NCCL_IB_DISABLE" in f.summary for f in report.findings)
    out = subprocess.run(
        [str(cli), "doctor", "--root", str(POD)], capture_output=True, text=True
    )
    assert "NCCL_IB_DISABLE" not in out.stdout
    assert "not this shell's" in out.stderr


def test_the_wheel_carries_every_json_schema(cli: Path) -> None:
    version = subprocess.run([str(cli), "--version"], capture_output=True, text=True, check=True)
    line = next(l for l in version.stdout.splitlines() if l.startswith("json schemas: "))
    ids = line.removeprefix("json schemas: ").split(", ")
    assert rdmatopo.json_schema_ids() == ids
    for id in ids:
        schema = json.loads(rdmatopo.json_schema(id))
        assert schema["$id"] == f"urn:rdmatopo:schema:{id}"
        assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    with pytest.raises(rdmatopo.ArgumentError):
        rdmatopo.json_schema("rdmatopo.nothing/1")
