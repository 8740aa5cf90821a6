"""discover(), the device objects and the JSON: identical to the CLI on every fixture."""

from __future__ import annotations

import json
import os
import pickle
import threading
import time
from pathlib import Path

import pytest

import rdmatopo
from conftest import FIXTURES, run_cli


@pytest.mark.parametrize("view", ["all", "owned"])
def test_json_is_the_cli_inventory_json(fixture_root: Path, cli: Path, view: str) -> None:
    """`discover(view="all")` is `inventory --all`, the default view is `inventory`'s."""
    topo = rdmatopo.discover(str(fixture_root), view=view)
    flags = ["--all"] if view == "all" else []
    expected = run_cli(cli, "inventory", *flags, "--root", str(fixture_root), "--format", "json")
    assert topo.to_json() + "\n" == expected


@pytest.mark.parametrize("view", ["--all", "--owned"])
def test_matrix_is_the_cli_topo(fixture_root: Path, cli: Path, view: str) -> None:
    """`matrix()` is `rdmatopo topo --all`, `matrix(owned=True)` is `--owned`; the CLI
    adds a "view" key and a header line inside containers, which are not the matrix."""
    topo = rdmatopo.discover(str(fixture_root), view="all")
    matrix = topo.matrix(owned=view == "--owned")
    root = str(fixture_root)
    cli_json = json.loads(run_cli(cli, "topo", view, "--root", root, "--format", "json"))
    cli_json.pop("view", None)
    assert json.loads(matrix.to_json()) == cli_json
    table = run_cli(cli, "topo", view, "--root", root)
    if matrix.devices:  # else the CLI prints one line instead of a table
        assert table.endswith(matrix.to_table())


def test_gpu_numa_node_falls_back_to_the_host_bridge() -> None:
    """A GPU whose function reports no node (`numa_node` -1) takes its host bridge's,
    else the node its local CPUs cover, as C's `rdmatopo_gpu_info.numa_node` does (both
    ask the facade, which asks `Topology::numa_node_of`)."""
    topo = rdmatopo.discover(FIXTURES / "h100-dgx" / "root")
    model = json.loads(topo.to_json())
    gpu = model["gpus"][0]
    function = next(f for f in model["pci"] if f["address"] == gpu["pci"])
    bridge = next(h for h in model["host_bridges"] if h["name"] == function["host_bridge"])
    gpu["numa_node"] = None
    function["numa_node"] = None
    bridge["numa_node"] = 1
    edited = rdmatopo.Topology.from_json(json.dumps(model))
    assert edited.gpus[0].numa_node == 1
    assert "numa_node=1" in repr(edited.gpus[0])
    # No node on the bridge either: the nodes its local CPUs cover (GPU 0's are node 0's).
    bridge["numa_node"] = None
    by_cpus = rdmatopo.Topology.from_json(json.dumps(model))
    assert by_cpus.gpus[0].numa_node == 0
    function["local_cpus"] = None
    unknown = rdmatopo.Topology.from_json(json.dumps(model))
    assert unknown.gpus[0].numa_node is None


def test_objects_carry_the_model_fields(fixture_root: Path) -> None:
    topo = rdmatopo.discover(fixture_root, view="all")
    model = json.loads(topo.to_json())
    assert [g.pci for g in topo.gpus] == [g["pci"] for g in model["gpus"]]
    assert [g.index for g in topo.gpus] == [g["index"] for g in model["gpus"]]
    assert [g.uuid for g in topo.gpus] == [g["uuid"] for g in model["gpus"]]
    assert [n.name for n in topo.nics] == [d["name"] for d in model["rdma_devices"]]
    assert [n.pci for n in topo.nics] == [d["pci"] for d in model["rdma_devices"]]
    assert [n.fw_ver for n in topo.nics] == [d["fw_ver"] for d in model["rdma_devices"]]
    for nic, dev in zip(topo.nics, model["rdma_devices"]):
        assert [p.number for p in nic.ports] == [p["number"] for p in dev["ports"]]
        assert [p.state for p in nic.ports] == [p["state"] for p in dev["ports"]]
        assert [p.netdev for p in nic.ports] == [p["netdev"] for p in dev["ports"]]
        for port, jport in zip(nic.ports, dev["ports"]):
            assert [(g.index, g.gid, g.gid_type, g.netdev) for g in port.gids] == [
                (g["index"], g["gid"], g["gid_type"], g["netdev"]) for g in jport["gids"]
            ]
    for node, jnode in zip(topo.numa_nodes, model["numa_nodes"]):
        assert node.id == jnode["id"]
        assert node.cpus == frozenset(cpulist(jnode["cpus"]))
        assert list(node.distances) == jnode["distances"]
        assert node.memory_kib == jnode.get("memory_kib")
    assert [(d.severity, d.code, d.message) for d in topo.diagnostics] == [
        (d["severity"], d["code"], d["message"]) for d in model["diagnostics"]
    ]


def cpulist(text: str) -> set[int]:
    cpus: set[int] = set()
    for part in filter(None, text.split(",")):
        lo, _, hi = part.partition("-")
        cpus.update(range(int(lo), int(hi or lo) + 1))
    return cpus


def test_objects_are_immutable(largest_root: Path) -> None:
    topo = rdmatopo.discover(largest_root, view="all")
    gpu, nic = topo.gpus[0], topo.nics[0]
    with pytest.raises(AttributeError):
        gpu.index = 3  # type: ignore[misc]
    with pytest.raises(AttributeError):
        nic.ports[0].state = "DOWN"  # type: ignore[misc]
    with pytest.raises(AttributeError):
        topo.extra = 1  # type: ignore[attr-defined]
    assert isinstance(topo.gpus, tuple) and isinstance(nic.ports, tuple)
    assert isinstance(topo.numa_nodes[0].cpus, frozenset)
    assert topo.gpus[0] == rdmatopo.discover(largest_root).gpus[0]


def test_from_json_round_trip_and_pickle(fixture_root: Path) -> None:
    topo = rdmatopo.discover(fixture_root)
    text = topo.to_json()
    assert rdmatopo.Topology.from_json(text).to_json() == text
    assert pickle.loads(pickle.dumps(topo)).to_json() == text


def test_model_equality_survives_json(fixture_root: Path) -> None:
    topo = rdmatopo.discover(fixture_root)
    assert rdmatopo.Topology.from_json(topo.to_json()) == topo


def test_root_defaults_to_rdmatopo_root(largest_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RDMATOPO_ROOT", str(largest_root))
    assert rdmatopo.discover() == rdmatopo.discover(largest_root)
    assert rdmatopo.discover().root == str(largest_root)


def test_path_accepts_every_way_of_naming_a_device(largest_root: Path) -> None:
    topo = rdmatopo.discover(largest_root, view="all")
    matrix = topo.matrix()
    gpu0 = topo.gpus[0]
    nic = next(n for n in topo.nics if n.pci is not None)
    assert nic.pci is not None
    nic_name = next(d.name for d in matrix.devices if d.rdma == nic.name)
    expected = matrix[("GPU0", nic_name)]
    nvml_form = "{:08X}:{}".format(int(gpu0.pci.split(":")[0], 16), gpu0.pci.split(":", 1)[1].upper())
    for a in ("GPU0", "gpu0", 0, gpu0, gpu0.pci, nvml_form):
        for b in (nic_name, nic.name, nic, nic.pci):
            assert topo.path(a, b) == expected, (a, b)
    netdev = next((p.netdev for p in nic.ports if p.netdev), None)
    if netdev is not None:
        assert topo.path(gpu0, netdev) == expected
    assert topo.path(gpu0, gpu0) == "X"


def test_path_agrees_with_the_matrix_everywhere(fixture_root: Path) -> None:
    topo = rdmatopo.discover(fixture_root)
    matrix = topo.matrix()
    cells = matrix.to_dict()
    names = [d.name for d in matrix.devices]
    assert list(cells) == names
    for a in names:
        assert list(cells[a]) == names
        for b in names:
            assert topo.path(a, b) == cells[a][b] == matrix[(a, b)]


def test_nearest_nics_are_the_best_class_of_the_gpus_row(fixture_root: Path) -> None:
    """`nearest_nics(gpu)` is every NIC of the best class in the GPU's matrix row."""
    topo = rdmatopo.discover(fixture_root, view="all")
    matrix = topo.matrix()
    cells = matrix.to_dict()
    nic_names = {d.rdma: d.name for d in matrix.devices if d.kind == "nic"}
    gpu_names = [d.name for d in matrix.devices if d.kind == "gpu"]
    if not nic_names:
        for g in gpu_names:
            with pytest.raises(rdmatopo.UnknownDeviceError):
                topo.nearest_nics(g)
        return
    order = ["X", "NV", "PIX", "PXB", "PHB", "NODE", "SYS"]

    def rank(c: str) -> int:
        return order.index("NV" if c.startswith("NV") else c)

    for g in gpu_names:
        nics, cls = topo.nearest_nics(g)
        row = {nic_names[n.name]: cells[g][nic_names[n.name]] for n in topo.all_nics
               if n.name in nic_names}
        best = min(rank(c) for c in row.values())
        assert rank(cls) == best
        assert {nic_names[n.name] for n in nics} == {m for m, c in row.items() if rank(c) == best}


def test_path_between_any_pci_functions(largest_root: Path) -> None:
    """Functions outside the matrix (a bridge, an NVSwitch) still get a PCIe class."""
    topo = rdmatopo.discover(largest_root)
    model = json.loads(topo.to_json())
    bridge = next(f["address"] for f in model["pci"] if f["role"] == "root-port")
    assert topo.path(bridge, bridge) == "X"
    assert topo.path(bridge, topo.gpus[0]) in {"PIX", "PXB", "PHB", "NODE", "SYS"}


def test_discover_releases_the_gil(largest_root: Path) -> None:
    """Another Python thread keeps running while discovery reads sysfs. Were the GIL
    held, the ticker could tick only around the call (while the arguments are
    converted), never in the middle half of it."""
    ticks: list[float] = []
    stop = threading.Event()

    def ticker() -> None:
        while not stop.is_set():
            ticks.append(time.perf_counter())
            time.sleep(0)

    thread = threading.Thread(target=ticker)
    thread.start()
    most = 0
    try:
        for _ in range(20):
            start = time.perf_counter()
            rdmatopo.discover(largest_root)
            end = time.perf_counter()
            quarter = (end - start) / 4
            middle = sum(1 for t in list(ticks) if start + quarter < t < end - quarter)
            most = max(most, middle)
            if most >= 10:
                break
    finally:
        stop.set()
        thread.join()
    assert most >= 10, f"the other thread ticked {most} times in the middle of discover()"


def test_repr_is_readable(largest_root: Path) -> None:
    topo = rdmatopo.discover(largest_root)
    assert repr(topo).startswith("<Topology root=")
    assert repr(topo.gpus[0]).startswith("Gpu(index=0, pci='")
    assert "name='" in repr(topo.nics[0])
    assert os.fspath(largest_root) in repr(topo)


def test_the_default_view_is_the_cli_s(fixture_root: Path, cli: Path) -> None:
    """`discover()` takes the CLI's default view: inside a container whose devices are
    certain, its own devices in full and the others in part; `matrix()` is then
    `rdmatopo topo`'s and the plan the whole read's."""
    root = str(fixture_root)
    owned, whole = rdmatopo.discover(root), rdmatopo.discover(root, view="all")
    assert whole.view == "all"
    cli_json = json.loads(run_cli(cli, "topo", "--root", root, "--format", "json"))
    cli_json.pop("view", None)
    if owned.view == "all":
        assert owned.to_json() == whole.to_json()
        return
    assert json.loads(owned.matrix().to_json()) == cli_json
    # Held and only named, the owned view's devices are the whole read's.
    assert whole.other_nics == ()
    held = {n.name for n in owned.all_nics}
    assert held.isdisjoint(owned.other_nics)
    assert held | set(owned.other_nics) == {n.name for n in whole.nics}
    # Its own, as `rdmatopo topo` shows them: no partial read among them.
    assert {n.name for n in owned.nics} == {n.name for n in owned.all_nics if not n.partial}
    assert len(owned.gpus) == sum(1 for g in owned.all_gpus if g.view_index is not None)
    for name in owned.other_nics[:3]:
        with pytest.raises(rdmatopo.OutsideViewError, match=name):
            owned.path("GPU0", name)
    try:
        expected = whole.plan(0).to_json()
    except rdmatopo.AnalysisError:
        expected = None
    if expected is not None:
        assert owned.plan(0).to_json() == expected
    assert owned.doctor().to_json() == whole.doctor().to_json()
    # The PFs of its VFs are held in part: their GIDs are outside the view.
    partial_nics = [n for n in owned.all_nics if n.partial]
    for nic in partial_nics[:3]:
        with pytest.raises(rdmatopo.OutsideViewError, match=nic.name):
            nic.ports
        with pytest.raises(rdmatopo.OutsideViewError):
            owned.path("GPU0", nic)
        # What a partial read does answer is true: its name always, its function and uverbs
        # node where they were traced (another container's device costs its name only).
        same = next(n for n in whole.nics if n.name == nic.name)
        assert nic.pci in (None, same.pci) and nic.uverbs in (None, same.uverbs)


def test_view_must_be_owned_or_all() -> None:
    with pytest.raises(rdmatopo.ArgumentError, match="owned"):
        rdmatopo.discover(str(FIXTURES / "pod-sriov" / "root"), view="mine")


def test_gpus_carry_the_name_every_answer_gives_them(cli: Path) -> None:
    # The pod was given the host's GPU 5: it is the pod's GPU0 (its nvidia-smi's), as
    # `rdmatopo topo` and `doctor` call it; another pod's GPU keeps the host's index.
    root = FIXTURES / "pod-h100-1gpu-1vf" / "root"
    for view in ("owned", "all"):
        topo = rdmatopo.discover(root, view=view)
        own = next(g for g in topo.all_gpus if g.pci == "0000:c3:00.0")
        assert (own.index, own.view_index, own.view_name) == (5, 0, "GPU0")
        if view == "owned":
            assert [g.pci for g in topo.gpus] == [own.pci]
        other = topo.all_gpus[0]
        assert (other.index, other.view_index, other.view_name) == (0, None, "host GPU0")
    assert "GPU0 (host GPU5, 0000:c3:00.0)" in run_cli(cli, "doctor", "--root", str(root))
    # On a host the view's names are the host's.
    host = rdmatopo.discover(FIXTURES / "h100-dgx" / "root")
    assert [(g.view_index, g.view_name) for g in host.gpus] == [(g.index, f"GPU{g.index}") for g in host.gpus]
