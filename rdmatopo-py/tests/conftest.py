"""Shared fixtures: the repository's sysfs fixture trees and the `rdmatopo` CLI binary
(built with cargo once per session) to compare the binding against."""

from __future__ import annotations

import functools
import json
import os
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    import rdmatopo

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "fixtures"
# Each fixture is stored as fixtures/<name>/root.tar.gz; the tests read the directory form.
subprocess.run(["python3", str(FIXTURES / "tools" / "unpack.py")], check=True, stdout=subprocess.DEVNULL)


def fixture_roots() -> list[Path]:
    """Every `fixtures/<name>/root`, sorted by name."""
    return sorted(p / "root" for p in FIXTURES.iterdir() if (p / "root").is_dir())


@functools.lru_cache(maxsize=None)
def discovered(root: Path) -> "rdmatopo.Topology":
    """`rdmatopo.discover(root)`, once per session (for tests about what comes after)."""
    import rdmatopo

    return rdmatopo.discover(root)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "fixture_root" in metafunc.fixturenames:
        roots = fixture_roots()
        metafunc.parametrize("fixture_root", roots, ids=[r.parent.name for r in roots])


@pytest.fixture(scope="session")
def cli() -> Path:
    """Path of the `rdmatopo` CLI of this checkout (`cargo build -p rdmatopo`)."""
    out = subprocess.run(
        ["cargo", "build", "--quiet", "-p", "rdmatopo", "--bin", "rdmatopo",
         "--message-format=json"],
        cwd=REPO, check=True, capture_output=True, text=True,
    ).stdout
    for line in out.splitlines():
        msg = json.loads(line)
        if msg.get("reason") == "compiler-artifact" and msg.get("executable"):
            return Path(msg["executable"])
    raise AssertionError("cargo built no rdmatopo executable")


def run_cli(cli: Path, *args: str, ok_codes: tuple[int, ...] = (0,)) -> str:
    """The CLI's stdout; any exit code outside `ok_codes` fails the test."""
    env = {k: v for k, v in os.environ.items() if k != "RDMATOPO_ROOT"}
    out = subprocess.run([str(cli), *args], capture_output=True, text=True, env=env)
    assert out.returncode in ok_codes, f"rdmatopo {' '.join(args)}: exit {out.returncode}: {out.stderr}"
    return out.stdout


@pytest.fixture(scope="session")
def largest_root() -> Path:
    """The fixture with the most RDMA devices plus GPUs: the most discovery work."""
    def size(root: Path) -> int:
        topo = discovered(root)
        return len(topo.nics) + len(topo.gpus)

    return max(fixture_roots(), key=size)
