"""The directory form these tests read is the machine its archive holds: the tree
`fixtures/tools/unpack.py` makes with GNU tar, overlays applied on their bases, against
the crate's own reader of the archive chain (`--root` given the archive)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import rdmatopo

from conftest import FIXTURES


# Chains of five and three archives; removals (pod-h100-1gpu-1vf's below
# pod-vf-ecn-partial, workstation-vfio's); the manifest's directory stored as an entry
# of its own (roce-qos-ecn-gap, workstation-vfio).
@pytest.mark.parametrize("name", ["pod-vf-ecn-partial", "roce-qos-ecn-gap", "workstation-vfio"])
def test_unpacked_tree_is_the_archive(name: str, tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, str(FIXTURES / "tools" / "unpack.py"), "--dest", str(tmp_path), name],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    tree = tmp_path / name / "root"
    archive = FIXTURES / name / "root.tar.gz"
    # The root is named where an answer says what it read; the rest must be the same.
    assert answers(rdmatopo.discover(tree), tree) == answers(rdmatopo.discover(archive), archive)


def answers(topology: rdmatopo.Topology, root: Path) -> list[str]:
    """The model's JSON and the doctor's, the root named `<root>`."""
    return [j.replace(str(root), "<root>") for j in (topology.to_json(), topology.doctor().to_json())]
