"""Topology.plan() and rdmatopo.apply(): the core's plan, the launcher's variables,
no clobbering, a CPU affinity really set, and nothing changed on error."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import rdmatopo
from conftest import discovered, fixture_roots, run_cli

LAUNCHER_VARS = ("LOCAL_RANK", "LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
                 "OMPI_COMM_WORLD_LOCAL_SIZE", "SLURM_LOCALID", "MPI_LOCALRANKID",
                 "MPI_LOCALNRANKS", "PMI_LOCAL_RANK", "PMI_LOCAL_SIZE",
                 "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER")


@pytest.fixture(autouse=True)
def clean_process(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No launcher or NCCL variable leaks in or out; the affinity is restored."""
    for name in list(os.environ):
        if name in LAUNCHER_VARS or name.startswith("NCCL_"):
            monkeypatch.delenv(name)
    affinity = os.sched_getaffinity(0)
    yield
    os.sched_setaffinity(0, affinity)
    for name in list(os.environ):
        if name.startswith("NCCL_"):
            del os.environ[name]


def gpu_roots() -> list[Path]:
    return [r for r in fixture_roots() if discovered(r).gpus]


def nccl_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k.startswith("NCCL_")}


def test_plan_is_the_cli_plan(cli: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every rank's plan is that rank of `rdmatopo nccl-env --format json`, given the
    same environment (here: the one captured in the fixture)."""
    for root in gpu_roots():
        topo = discovered(root)
        world = len(topo.gpus)
        cli_doc = json.loads(run_cli(
            cli, "nccl-env", "--root", str(root), "--format", "json",
            "--local-world-size", str(world),
        ))
        with monkeypatch.context() as env:
            for name, value in json.loads(topo.to_json())["process"]["env"].items():
                env.setenv(name, value)
            for rank in range(world):
                plan = topo.plan(rank, world)
                doc = json.loads(plan.to_json())
                assert doc == dict(cli_doc, ranks=[r for r in cli_doc["ranks"] if r["local_rank"] == rank])
                [mine] = doc["ranks"]
                assert plan.local_rank == mine["local_rank"] == rank
                assert plan.gpu.pci == mine["gpu"]
                assert list(plan.hcas) == mine["hcas"]
                assert plan.gid_index == mine["gid_index"]
                assert plan.cpus == rdmatopo.parse_cpulist(mine["cpus"])
                assert plan.numa_node == mine["numa_node"]
                assert list(plan.reasons) == mine["reasons"]
                assert plan.env == doc["env"] and plan.env_reasons == doc["env_reasons"]
                assert plan.excluded == {e["device"]: e["reason"] for e in doc["excluded"]}
                assert list(plan.notes) == doc["notes"]
                assert plan.applied is None


def test_plan_defaults_come_from_the_launcher(monkeypatch: pytest.MonkeyPatch) -> None:
    root = gpu_roots()[0]
    topo = discovered(root)
    world = len(topo.gpus)
    monkeypatch.setenv("LOCAL_RANK", str(world - 1))
    monkeypatch.setenv("LOCAL_WORLD_SIZE", str(world))
    assert topo.plan().local_rank == world - 1
    assert topo.plan().gpu == topo.plan(world - 1, world).gpu
    monkeypatch.delenv("LOCAL_RANK")
    monkeypatch.delenv("LOCAL_WORLD_SIZE")
    # No launcher: rank 0 of 1, so the whole NUMA-local CPU set of GPU 0.
    alone = topo.plan()
    assert alone.local_rank == 0 and alone.gpu == topo.gpus[0]
    assert alone.cpus == topo.plan(0, 1).cpus
    assert len(alone.cpus) >= len(topo.plan(0, world).cpus)


def test_cuda_visible_devices_narrows_the_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    root = next(r for r in gpu_roots() if len(discovered(r).gpus) >= 2)
    topo = discovered(root)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    assert topo.plan(0, 1).gpu == topo.gpus[1]


@pytest.mark.parametrize("args", [(-1, None), (0, 0), (2, 2), (None, -3)])
def test_bad_rank_arguments(args: tuple[int | None, int | None]) -> None:
    topo = discovered(gpu_roots()[0])
    with pytest.raises(rdmatopo.ArgumentError):
        topo.plan(*args)


def test_bad_launcher_variable_is_an_analysis_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOCAL_RANK", "first")
    with pytest.raises(rdmatopo.AnalysisError, match="LOCAL_RANK"):
        discovered(gpu_roots()[0]).plan()


def test_no_gpu_is_an_analysis_error() -> None:
    gpuless = [r for r in fixture_roots() if not discovered(r).gpus]
    assert gpuless, "expected a fixture without GPUs (no-devices)"
    with pytest.raises(rdmatopo.AnalysisError, match="no plan for this rank"):
        discovered(gpuless[0]).plan()


def find_rank(
    predicate: Callable[[frozenset[int], set[int]], bool],
) -> tuple[Path, int, int]:
    """A fixture, rank and world size whose planned CPUs satisfy `predicate` (given
    this process's current CPUs)."""
    allowed = os.sched_getaffinity(0)
    for root in gpu_roots():
        topo = discovered(root)
        for world in (len(topo.gpus), 64, 128):
            for rank in range(min(world, 8)):
                if predicate(frozenset(topo.plan(rank, world).cpus), allowed):
                    return root, rank, world
    pytest.fail("no fixture rank has planned CPUs that fit this machine for this test")


class _AsIfLive:
    """A captured topology that `apply()` takes for this machine's (`root == "/"`), so
    that its binding is exercised: apply() binds no CPU of a captured tree."""

    def __init__(self, topology: rdmatopo.Topology) -> None:
        self._topology = topology
        self.root = "/"

    def plan(self, local_rank: int | None = None) -> rdmatopo.RankPlan:
        return self._topology.plan(local_rank)


def _as_if_live(monkeypatch: pytest.MonkeyPatch) -> None:
    import rdmatopo._apply

    real = rdmatopo.discover
    monkeypatch.setattr(rdmatopo._apply, "discover", lambda root: _AsIfLive(real(root)))


def test_apply_binds_the_cpus_and_sets_the_env(monkeypatch: pytest.MonkeyPatch) -> None:
    # A rank whose CPUs cover part of this machine's, so the change is visible.
    root, rank, world = find_rank(lambda cpus, allowed: bool(cpus & allowed) and not allowed <= cpus)
    _as_if_live(monkeypatch)
    monkeypatch.setenv("LOCAL_RANK", str(rank))
    monkeypatch.setenv("LOCAL_WORLD_SIZE", str(world))
    before = os.sched_getaffinity(0)
    plan = rdmatopo.apply(root=root)
    assert plan.local_rank == rank
    assert os.sched_getaffinity(0) == before & plan.cpus != before
    assert plan.applied is not None
    assert plan.applied.cpus == frozenset(os.sched_getaffinity(0))
    assert plan.env and nccl_env() == plan.env == plan.applied.env_set
    assert plan.applied.env_kept == {}


def test_apply_never_clobbers_unless_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    root = gpu_roots()[0]
    planned = discovered(root).plan()
    name = next(iter(planned.env))
    monkeypatch.setenv(name, "=user-choice")
    plan = rdmatopo.apply(root=root, bind_cpus=False)
    assert os.environ[name] == "=user-choice"
    assert plan.applied is not None
    assert plan.applied.env_kept == {name: "=user-choice"}
    assert name not in plan.applied.env_set
    assert plan.applied.cpus is None
    again = rdmatopo.apply(root=root, bind_cpus=False, override=True)
    assert os.environ[name] == planned.env[name]
    assert again.applied is not None and again.applied.env_set[name] == planned.env[name]


def test_apply_changes_nothing_when_the_kernel_refuses_the_cpus(monkeypatch: pytest.MonkeyPatch) -> None:
    root, rank, world = find_rank(lambda cpus, allowed: bool(cpus) and not cpus & allowed)
    _as_if_live(monkeypatch)
    monkeypatch.setenv("LOCAL_RANK", str(rank))
    monkeypatch.setenv("LOCAL_WORLD_SIZE", str(world))
    before_cpus, before_env = os.sched_getaffinity(0), dict(os.environ)
    with pytest.raises(OSError):
        rdmatopo.apply(root=root)
    assert os.sched_getaffinity(0) == before_cpus
    assert dict(os.environ) == before_env


def test_apply_changes_nothing_on_a_bad_root_or_rank(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    before_cpus, before_env = os.sched_getaffinity(0), dict(os.environ)
    with pytest.raises(FileNotFoundError):
        rdmatopo.apply(root=tmp_path / "missing")
    with pytest.raises(rdmatopo.DiscoveryError):
        rdmatopo.apply(root=tmp_path)
    with pytest.raises(rdmatopo.ArgumentError):
        rdmatopo.apply(-1, root=gpu_roots()[0])
    monkeypatch.setenv("LOCAL_RANK", "x")
    with pytest.raises(rdmatopo.AnalysisError):
        rdmatopo.apply(root=gpu_roots()[0])
    monkeypatch.delenv("LOCAL_RANK")
    assert os.sched_getaffinity(0) == before_cpus
    assert dict(os.environ) == before_env


def test_apply_rolls_back_when_setting_the_env_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    root, rank, world = find_rank(lambda cpus, allowed: bool(cpus & allowed) and not allowed <= cpus)
    monkeypatch.setenv("LOCAL_RANK", str(rank))
    monkeypatch.setenv("LOCAL_WORLD_SIZE", str(world))
    if len(discovered(root).plan().env) < 2:
        pytest.fail("the fixture plan sets fewer than two variables")
    before_cpus, before_env = os.sched_getaffinity(0), dict(os.environ)

    class FailingEnviron(dict):  # type: ignore[type-arg]
        writes = 0

        def __setitem__(self, key: str, value: str) -> None:
            FailingEnviron.writes += 1
            if FailingEnviron.writes == 2:
                raise OSError("simulated failure")
            super().__setitem__(key, value)

    fake = FailingEnviron(os.environ)
    monkeypatch.setattr(os, "environ", fake)
    with pytest.raises(OSError, match="simulated"):
        rdmatopo.apply(root=root)
    assert dict(fake) == before_env
    assert os.sched_getaffinity(0) == before_cpus
