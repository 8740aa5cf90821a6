#!/usr/bin/env python3
"""Write the seed corpora (fuzz/corpus/<target>/seed-<hash>) from the committed fixtures.

Each parser target gets the distinct contents of the files it parses in real trees,
plus a few hand-written forms the fixtures lack (stride cpulists, old kernels' link
speeds, v1 cgroups). Run from anywhere; it replaces only files named seed-*.
"""

import gzip
import hashlib
import io
import json
import os
import pathlib
import re
import tarfile

REPO = pathlib.Path(__file__).resolve().parent.parent
FIXTURES = REPO / "fixtures"
CORPUS = REPO / "fuzz" / "corpus"
PER_TARGET = 24  # distinct seeds kept per target: small, so `-runs=0` replays fast

# target -> regex on the path inside a fixture root
FILES = {
    "cpulist": r"/(local_cpulist|cpulist|online|possible|present)$",
    "cpumask": r"/(local_cpus|cpumap)$",
    "link_speed": r"/(current|max)_link_speed$",
    "port_state": r"/ports/\d+/(state|phys_state|link_layer)$",
    "rate": r"/ports/\d+/rate$",
    "gid": r"/ports/\d+/(gids|gid_attrs/types)/\d+$",
    "rdma_max": r"/rdma\.(max|current)$",
    "proc_status": r"^proc/(self/(status|cgroup|limits)|net/(route|fib_trie))$",
    "pcicfg": r"/config$",
    "pci_uevent": r"^sys/devices/pci.*/[0-9a-f]{4,}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]/uevent$",
}

EXTRA = {
    "cpulist": ["0-7:2/4\n", "0,2,4-6\n", "\n", "0-8191\n", "1-0\n"],
    "cpumask": ["ff,ffffffff\n", "00000000,00000000,0000ff00\n", "0\n"],
    "pci_uevent": ["PCI_CLASS=60400\nPCI_ID=1000:C030\n", "PCI_CLASS=\nPCI_ID=:\n", "PCI_ID=15B3:101D\n"],
    "pci_addr": ["10000:e1:00.1", "3b:00.0", "00000000:3B:00.0", "0101:00:00.0"],
    "link_speed": ["8 GT/s\n", "Unknown\n", "2.5 GT/s PCIe\n", "64.0 GT/s PCIe\n"],
    "port_state": ["1: DOWN\n", "3: Disabled\n", "Unknown\n"],
    "rate": ["2.5 Gb/sec (1X)\n", "100 Gb/sec (2X HDR)\n", "800 Gb/sec (4X XDR)\n"],
    "gid": ["IB/RoCE v1\n", "RoCE v2\n", "fe80::1\n", "::ffff:10.0.0.1\n"],
    "rdma_max": [
        "mlx5_0 hca_handle=2 hca_object=2000 \n",
        "mlx5_0 hca_handle=max hca_object=max\nmlx5_1 hca_handle=1 hca_object=10\n",
        "",
    ],
    "proc_status": [
        "Name:\tpython\nCpus_allowed:\tffff,ffffffff\nCpus_allowed_list:\t0-47\n",
        "12:rdma:/kubepods/pod1\n11:cpuset:/kubepods/pod1\n0::/\n",
    ],
    "nccl_ib_hca": [
        "mlx5_0:1,mlx5_3:1", "=mlx5_0", "^=mlx5_1:1", "^mlx5_bond", "mlx5",
        "=mlx5_0:1:0:0", "", "^",
    ],
    # Start from the built-in machine with no edits; empty root; one edit.
    "discover": [b"\x01", b"\x00", b"\x01\x00\x00\x00\x00\x05\x00\x00\x00\x00\x02"],
    # The same on the machine with every file a whole read takes.
    "discover_full": [b"\x01", b"\x00", b"\x01\x00\x00\x00\x00\x05\x00\x00\x00\x00\x02"],
}


def archive_seeds():
    """Small snapshot archives (`archive` target): a root with a PCI function, its RDMA
    device behind a class link and a GID, as a tar and gzipped; an overlay; an entry
    that climbs out; an empty tar. Each under 4 KiB, the fuzzers' -max_len."""
    dev = "sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0"

    def tar(entries):
        out = io.BytesIO()
        with tarfile.open(fileobj=out, mode="w", format=tarfile.USTAR_FORMAT) as t:
            for name, kind, body in entries:
                info = tarfile.TarInfo(name)
                info.mtime = 0
                if kind == "dir":
                    info.type, info.mode = tarfile.DIRTYPE, 0o755
                    t.addfile(info)
                elif kind == "link":
                    info.type, info.linkname = tarfile.SYMTYPE, body
                    t.addfile(info)
                else:
                    info.size, info.mode = len(body), 0o444
                    t.addfile(info, io.BytesIO(body))
        # Without tarfile's padding to 10 KiB: the entries, then the two zero blocks.
        data = out.getvalue().rstrip(b"\0")
        return data + b"\0" * (-len(data) % 512 + 1024)

    root = [
        ("r/sys", "dir", None),
        (f"r/{dev}/vendor", "file", b"0x15b3\n"),
        (f"r/{dev}/infiniband/mlx5_0/ports/1/gids/0", "file", b"fe80:0000:0000:0000:0000:0000:0000:0001\n"),
        ("r/sys/class/infiniband/mlx5_0", "link", f"../../../{dev}/infiniband/mlx5_0"),
    ]
    overlay = [
        ("o/sys", "dir", None),
        ("o/rdmatopo/overlay.json", "file", b'{"schema":"rdmatopo.overlay/1","base":"base.tar.gz","removed":[]}'),
    ]
    seeds = [
        tar(root),
        tar(overlay),
        tar([("sys/../../etc/passwd", "file", b"root")]),
        b"\0" * 1024,
    ]
    seeds += [gzip.compress(t, mtime=0) for t in seeds]
    return [s for s in seeds if len(s) <= 4096]


def fixture_roots():
    return sorted(p / "root" for p in FIXTURES.iterdir() if (p / "root").is_dir())


def collect():
    seeds = {t: set() for t in list(FILES) + list(EXTRA) + ["pci_addr"]}
    for root in fixture_roots():
        bus = root / "sys/bus/pci/devices"
        if bus.is_dir():
            seeds["pci_addr"].update(n.encode() for n in os.listdir(bus))
        nvml = root / "rdmatopo/nvml.json"
        if nvml.is_file():
            for g in json.loads(nvml.read_text()).get("gpus", []):
                seeds["pci_addr"].add(g["bus_id"].encode())
        for dirpath, _dirs, files in os.walk(root):
            for name in files:
                path = pathlib.Path(dirpath) / name
                rel = "/" + str(path.relative_to(root))
                for target, pattern in FILES.items():
                    if re.search(pattern, rel) or re.search(pattern, rel[1:]):
                        data = path.read_bytes()
                        if data and len(data) <= 4096:
                            seeds[target].add(data)
    for target, extra in EXTRA.items():
        seeds[target].update(e if isinstance(e, bytes) else e.encode() for e in extra)
    seeds["archive"] = set(archive_seeds())
    return seeds


def main():
    for target, values in sorted(collect().items()):
        if not values:
            continue
        out = CORPUS / target
        out.mkdir(parents=True, exist_ok=True)
        for old in out.glob("seed-*"):
            old.unlink()
        # Deterministic choice: alternately the shortest and the longest, so both
        # minimal and full forms (64-byte and 4 KiB config spaces) are seeds.
        ordered = sorted(values, key=lambda d: (len(d), d))
        picked = []
        while ordered and len(picked) < PER_TARGET:
            picked.append(ordered.pop(0))
            if ordered and len(picked) < PER_TARGET:
                picked.append(ordered.pop())
        for data in picked:
            (out / f"seed-{hashlib.sha1(data).hexdigest()[:12]}").write_bytes(data)
        print(f"{target}: {min(len(values), PER_TARGET)} seeds")


if __name__ == "__main__":
    main()
