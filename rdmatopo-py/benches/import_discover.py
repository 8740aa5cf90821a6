#!/usr/bin/env python3
"""Time `import rdmatopo` plus discovery of a fixture, beside what a Python user does
without rdmatopo: parse `nvidia-smi topo -m` text, or read sysfs by hand.

    python3 -m venv /tmp/rdmatopo-bench
    /tmp/rdmatopo-bench/bin/pip install ./rdmatopo-py      # release build (PEP 517)
    /tmp/rdmatopo-bench/bin/python rdmatopo-py/benches/import_discover.py [--root DIR]

The default root is the fixture with the most files. Times are medians over --runs;
"fresh process" rows start a new interpreter per run (interpreter start-up excluded).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

REPO = Path(__file__).resolve().parents[2]


def largest_fixture() -> Path:
    # The fixtures' directory form (each is stored as fixtures/<name>/root.tar.gz).
    subprocess.run([sys.executable, str(REPO / "fixtures" / "tools" / "unpack.py")], check=True, stdout=subprocess.DEVNULL)
    roots = [p / "root" for p in (REPO / "fixtures").iterdir() if (p / "root").is_dir()]
    return max(roots, key=lambda r: sum(len(files) + len(dirs) for _, dirs, files in os.walk(r)))


def median_ms(fn: Callable[[], object], runs: int) -> tuple[float, float]:
    """(median, min) of `fn`'s wall time in milliseconds, after one warm-up call."""
    fn()  # warm the page cache and any lazy state
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples), min(samples)


def fresh_process_ms(code: str, runs: int) -> tuple[float, float]:
    """(median, min) of `code`'s own timing (it prints milliseconds) in new interpreters."""
    samples = []
    for _ in range(runs):
        out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
        samples.append(float(out.stdout))
    return statistics.median(samples), min(samples)


# --- alternative 1: parse `nvidia-smi topo -m` text ------------------------------------

def parse_nvidia_smi_topo(text: str) -> dict[str, Any]:
    """What launch scripts do with `nvidia-smi topo -m`: the matrix, the CPU and NUMA
    affinity columns, and the NIC legend."""
    lines = text.splitlines()
    header = next(line for line in lines if line.startswith("\t"))
    columns = header.strip("\t").split("\t")
    devices = [c for c in columns if c.startswith(("GPU", "NIC"))]
    matrix: dict[str, dict[str, str]] = {}
    affinity: dict[str, tuple[str, str]] = {}
    for line in lines[lines.index(header) + 1:]:
        if not line.startswith(("GPU", "NIC")):
            break
        cells = line.split("\t")
        matrix[cells[0]] = {d: c.strip() for d, c in zip(devices, cells[1:])}
        if cells[0].startswith("GPU"):
            affinity[cells[0]] = (cells[len(devices) + 1], cells[len(devices) + 2])
    legend = {}
    for line in lines:
        name, sep, rdma = line.strip().partition(": ")
        if sep and name.startswith("NIC") and name[3:].isdigit():
            legend[name] = rdma
    nearest = {
        gpu: min((n for n in devices if n.startswith("NIC")), key=lambda n: RANK[row[n]], default=None)
        for gpu, row in matrix.items() if gpu.startswith("GPU")
    }
    return {"matrix": matrix, "affinity": affinity, "legend": legend, "nearest": nearest}


RANK = {"X": 0, "PIX": 2, "PXB": 3, "PHB": 4, "NODE": 5, "SYS": 6}
RANK.update({f"NV{n}": 1 for n in range(64)})


# --- alternative 2: read sysfs by hand ---------------------------------------------------

def read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def sysfs_by_hand(root: str) -> dict[str, Any]:
    """A typical hand-written reader: NVIDIA GPUs, RDMA devices with ports and the GID
    table, NUMA nodes, and each GPU's nearest HCA by common sysfs path prefix."""
    pci_dir = f"{root}/sys/bus/pci/devices"
    gpus = []
    for bdf in sorted(os.listdir(pci_dir)):
        dev = f"{pci_dir}/{bdf}"
        cls = read(f"{dev}/class") or ""
        if read(f"{dev}/vendor") == "0x10de" and cls[:6] in ("0x0300", "0x0302"):
            gpus.append({"pci": bdf, "path": os.path.realpath(dev),
                         "numa": read(f"{dev}/numa_node"), "cpus": read(f"{dev}/local_cpulist")})
    ib_dir = f"{root}/sys/class/infiniband"
    nics = []
    for name in sorted(os.listdir(ib_dir)) if os.path.isdir(ib_dir) else []:
        dev = f"{ib_dir}/{name}"
        ports = []
        for port in sorted(os.listdir(f"{dev}/ports")):
            p = f"{dev}/ports/{port}"
            gids = []
            for i in sorted(os.listdir(f"{p}/gids"), key=int):
                gid = read(f"{p}/gids/{i}")
                if gid and gid != "0000:0000:0000:0000:0000:0000:0000:0000":
                    gids.append((i, gid, read(f"{p}/gid_attrs/types/{i}"), read(f"{p}/gid_attrs/ndevs/{i}")))
            ports.append({"port": port, "state": read(f"{p}/state"), "rate": read(f"{p}/rate"),
                          "link_layer": read(f"{p}/link_layer"), "gids": gids})
        path = os.path.realpath(f"{dev}/device")
        nics.append({"name": name, "pci": os.path.basename(path), "path": path, "ports": ports})
    node_dir = f"{root}/sys/devices/system/node"
    numa = {n: read(f"{node_dir}/{n}/cpulist") for n in sorted(os.listdir(node_dir)) if n.startswith("node")}
    nearest = {
        g["pci"]: max(nics, key=lambda n: len(os.path.commonpath([g["path"], n["path"]])))["name"]
        for g in gpus if nics
    }
    return {"gpus": gpus, "nics": nics, "numa": numa, "nearest": nearest}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", type=Path, default=None)
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    root = (args.root or largest_fixture()).resolve()

    import rdmatopo

    topo = rdmatopo.discover(root)
    files = sum(len(f) + len(d) for _, d, f in os.walk(root))
    topo_text = topo.matrix().to_table()  # the captured `nvidia-smi topo -m` text
    hand = sysfs_by_hand(str(root))

    rows = [
        ("rdmatopo: import (fresh process)",
         fresh_process_ms("import time; t = time.perf_counter(); import rdmatopo; "
                          "print((time.perf_counter() - t) * 1000)", args.runs)),
        ("rdmatopo: import + discover() (fresh process)",
         fresh_process_ms("import time; t = time.perf_counter(); import rdmatopo; "
                          f"rdmatopo.discover({str(root)!r}); "
                          "print((time.perf_counter() - t) * 1000)", args.runs)),
        ("rdmatopo: discover() (warm process)", median_ms(lambda: rdmatopo.discover(root), args.runs)),
        ("rdmatopo: discover() + plan(0, n) + matrix()",
         median_ms(lambda: (lambda t: (t.plan(0, max(1, len(t.gpus))) if t.gpus else None, t.matrix()))(
             rdmatopo.discover(root)), args.runs)),
        ("parse captured `nvidia-smi topo -m` text (parse only)",
         median_ms(lambda: parse_nvidia_smi_topo(topo_text), args.runs)),
        ("start a subprocess (`/bin/true`): floor for running nvidia-smi",
         median_ms(lambda: subprocess.run(["/bin/true"], check=True), args.runs)),
        ("read sysfs by hand in Python (GPUs, HCAs, ports, GIDs, NUMA)",
         median_ms(lambda: sysfs_by_hand(str(root)), args.runs)),
    ]
    print(f"root: {root.relative_to(REPO) if root.is_relative_to(REPO) else root} "
          f"({files} files and directories; {len(topo.gpus)} GPUs, {len(topo.nics)} RDMA devices; "
          f"by hand: {len(hand['gpus'])} GPUs, {len(hand['nics'])} RDMA devices)")
    print(f"python {sys.version.split()[0]}, rdmatopo {rdmatopo.__version__}, median of {args.runs} runs\n")
    print(f"| {'what':<62} | {'median ms':>9} | {'min ms':>8} |")
    print(f"|{'-' * 64}|{'-' * 11}|{'-' * 10}|")
    for what, (median, least) in rows:
        print(f"| {what:<62} | {median:>9.2f} | {least:>8.2f} |")


if __name__ == "__main__":
    main()
