"""One exception hierarchy, builtin OSError subclasses for files, paths in messages."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

import rdmatopo


def test_hierarchy() -> None:
    for cls in (rdmatopo.DiscoveryError, rdmatopo.ParseError, rdmatopo.AnalysisError,
                rdmatopo.ArgumentError, rdmatopo.UnknownDeviceError):
        assert issubclass(cls, rdmatopo.RdmaTopoError)
    assert issubclass(rdmatopo.UnknownDeviceError, rdmatopo.AnalysisError)
    assert issubclass(rdmatopo.RdmaTopoError, Exception)
    assert not issubclass(rdmatopo.RdmaTopoError, OSError)


def test_missing_root_is_file_not_found(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-root"
    with pytest.raises(FileNotFoundError) as info:
        rdmatopo.discover(missing)
    assert info.value.errno == errno.ENOENT
    assert info.value.filename == str(missing)
    assert str(missing) in str(info.value)


def test_root_that_is_a_file_is_file_not_found(tmp_path: Path) -> None:
    file = tmp_path / "file"
    file.write_text("")
    with pytest.raises(FileNotFoundError, match="not a directory, nor a .tar") as info:
        rdmatopo.discover(file)
    assert info.value.filename == str(file)


def test_root_without_sysfs_is_a_discovery_error(tmp_path: Path) -> None:
    with pytest.raises(rdmatopo.DiscoveryError, match=r"no sysfs") as info:
        rdmatopo.discover(tmp_path)
    assert str(tmp_path) in str(info.value)


def test_bad_json_is_a_parse_error() -> None:
    with pytest.raises(rdmatopo.ParseError, match="invalid model JSON"):
        rdmatopo.Topology.from_json("{}")
    with pytest.raises(rdmatopo.ParseError):
        rdmatopo.Topology.from_json("not json")


def test_unknown_device(largest_root: Path) -> None:
    topo = rdmatopo.discover(largest_root)
    for bad in ("GPU99", "mlx5_99", "0000:ff:1f.7", "not a device", 99, -1):
        with pytest.raises(rdmatopo.UnknownDeviceError):
            topo.path(bad, "GPU0")
    with pytest.raises(TypeError):
        topo.path(1.5, "GPU0")  # type: ignore[arg-type]


def test_software_rdma_device_has_no_path(largest_root: Path) -> None:
    """An rxe/siw device has no PCI function: a clear AnalysisError, not a class."""
    topo = rdmatopo.discover(largest_root, view="all")
    model = topo.to_json()
    doc = __import__("json").loads(model)
    doc["rdma_devices"].append(dict(doc["rdma_devices"][0], name="rxe0", pci=None))
    soft = rdmatopo.Topology.from_json(__import__("json").dumps(doc))
    with pytest.raises(rdmatopo.AnalysisError, match="rxe0 has no PCI function"):
        soft.path("rxe0", "GPU0")
