#!/usr/bin/env python3
"""Print what each local rank of a node gets: GPU, NUMA node, HCA ports, GID index, CPUs,
and the node's NCCL variables with their reasons.

    python examples/python/rank_table.py                         # this machine
    python examples/python/rank_table.py --root fixtures/h100-dgx/root --ranks 8
"""

from __future__ import annotations

import argparse
import sys

import rdmatopo


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", help="captured tree to read (default: $RDMATOPO_ROOT, else /)")
    parser.add_argument("--ranks", type=int,
                        help="local ranks on the node (default: LOCAL_WORLD_SIZE, else one per GPU)")
    args = parser.parse_args()

    try:
        topo = rdmatopo.discover(args.root)
    except (rdmatopo.RdmaTopoError, OSError) as e:
        print(f"rank_table: {e}", file=sys.stderr)
        return 3
    if not topo.gpus:
        print(f"no NVIDIA GPU under {topo.root}: nothing to plan")
        return 0
    ranks = args.ranks if args.ranks is not None else len(topo.gpus)
    try:
        plans = [topo.plan(rank, ranks) for rank in range(ranks)]
    except rdmatopo.RdmaTopoError as e:
        print(f"rank_table: {e}", file=sys.stderr)
        return 3

    rows = [("rank", "GPU", "name", "NUMA", "HCAs", "GID", "CPUs")]
    for p in plans:
        rows.append((
            str(p.local_rank),
            p.gpu.pci,
            p.gpu.name or "-",
            "-" if p.numa_node is None else str(p.numa_node),
            ",".join(p.hcas) or "-",
            "-" if p.gid_index is None else str(p.gid_index),
            rdmatopo.format_cpulist(p.cpus) or "-",
        ))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    print(f"{topo.root}: {len(topo.gpus)} GPUs, {len(topo.nics)} RDMA devices, "
          f"{len(topo.numa_nodes)} NUMA nodes, {ranks} local ranks\n")
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())

    node = plans[0]
    print("\nNCCL variables (every rank):")
    for name, value in node.env.items():
        print(f"  {name}={value}")
        print(f"      {node.env_reasons.get(name, '')}")
    if node.excluded:
        print("\nLeft out of NCCL_IB_HCA:")
        for device, reason in node.excluded.items():
            print(f"  {device}: {reason}")
    if node.notes:
        print("\nNotes:")
        for note in node.notes:
            print(f"  {note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
