"""examples/python/*.py run against the fixtures and print what the API says."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import rdmatopo
from conftest import REPO, discovered, fixture_roots

EXAMPLES = REPO / "examples" / "python"


def run_example(name: str, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    full_env = {k: v for k, v in os.environ.items()
                if k not in ("RDMATOPO_ROOT", "LOCAL_RANK", "LOCAL_WORLD_SIZE")
                and not k.startswith("NCCL_")}
    full_env.update(env)
    return subprocess.run([sys.executable, str(EXAMPLES / name), *args],
                          capture_output=True, text=True, env=full_env, timeout=120)


def test_rank_table_on_every_fixture() -> None:
    for root in fixture_roots():
        topo = discovered(root)
        out = run_example("rank_table.py", "--root", str(root))
        assert out.returncode == 0, out.stderr
        if not topo.gpus:
            assert "no NVIDIA GPU" in out.stdout
            continue
        lines = out.stdout.splitlines()
        header = next(i for i, line in enumerate(lines) if line.startswith("rank"))
        rows = lines[header + 1: header + 1 + len(topo.gpus)]
        for rank, row in enumerate(rows):
            plan = topo.plan(rank, len(topo.gpus))
            cells = row.split()
            assert cells[0] == str(rank) and cells[1] == plan.gpu.pci
            assert cells[-1] == (rdmatopo.format_cpulist(plan.cpus) or "-")
        for name, value in topo.plan(0, len(topo.gpus)).env.items():
            assert f"  {name}={value}" in lines


def test_rank_table_reports_a_bad_root(tmp_path: Path) -> None:
    out = run_example("rank_table.py", "--root", str(tmp_path))
    assert out.returncode == 3 and "no sysfs" in out.stderr


def test_torchrun_script_sets_up_each_rank() -> None:
    root = max((r for r in fixture_roots() if discovered(r).gpus), key=lambda r: len(discovered(r).gpus))
    topo = discovered(root)
    world = len(topo.gpus)
    for rank in range(world):
        out = run_example("torchrun_train.py", RDMATOPO_ROOT=str(root),
                          LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(world))
        assert out.returncode == 0, out.stderr
        plan = topo.plan(rank, world)
        assert f"[rank {rank}] GPU {plan.gpu.pci}" in out.stdout
        for name, value in plan.env.items():
            assert f"[rank {rank}] set  {name}={value}" in out.stdout
        assert f"on that machine: {rdmatopo.format_cpulist(plan.cpus)}" in out.stdout


def test_torchrun_script_keeps_user_settings() -> None:
    root = next(r for r in fixture_roots() if discovered(r).gpus)
    out = run_example("torchrun_train.py", RDMATOPO_ROOT=str(root), LOCAL_RANK="0",
                      LOCAL_WORLD_SIZE="1", NCCL_IB_HCA="=mlx5_7:1")
    assert out.returncode == 0, out.stderr
    assert "[rank 0] kept NCCL_IB_HCA==mlx5_7:1" in out.stdout


def test_torchrun_script_fails_clearly_without_gpus() -> None:
    root = next(r for r in fixture_roots() if not discovered(r).gpus)
    out = run_example("torchrun_train.py", RDMATOPO_ROOT=str(root), LOCAL_RANK="0")
    assert out.returncode == 1
    assert "rdmatopo: cannot set up this rank: no plan for this rank" in out.stderr
