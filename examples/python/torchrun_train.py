#!/usr/bin/env python3
"""A torchrun launch script that lets rdmatopo set up each rank before NCCL starts.

    torchrun --nproc-per-node 8 examples/python/torchrun_train.py

The first two lines are the point: `rdmatopo.apply()` reads LOCAL_RANK and
LOCAL_WORLD_SIZE (set by torchrun), puts this rank's NCCL variables into os.environ
(leaving alone any the user set) and binds the process to the CPUs next to its GPU.
It must run before torch initialises CUDA or NCCL, which read those variables once.

Without torch installed, the script stops after the rdmatopo part, so it also runs on
a machine without GPUs against a captured tree:

    RDMATOPO_ROOT=fixtures/h100-dgx/root LOCAL_RANK=3 LOCAL_WORLD_SIZE=8 \\
        python examples/python/torchrun_train.py
"""

from __future__ import annotations

import os
import sys

import rdmatopo

# With RDMATOPO_ROOT naming a capture of another machine, its CPU numbers are not this
# machine's: show the plan, but do not bind this process to them.
replaying = "RDMATOPO_ROOT" in os.environ
try:
    plan = rdmatopo.apply(bind_cpus=not replaying)
except rdmatopo.RdmaTopoError as e:
    sys.exit(f"rdmatopo: cannot set up this rank: {e}")

applied = plan.applied
assert applied is not None
print(f"[rank {plan.local_rank}] GPU {plan.gpu.pci} ({plan.gpu.name or 'unknown'}), "
      f"NUMA node {plan.numa_node}, HCAs {','.join(plan.hcas) or '-'}, "
      f"GID index {plan.gid_index if plan.gid_index is not None else '-'}")
for name, value in applied.env_set.items():
    print(f"[rank {plan.local_rank}] set  {name}={value}")
for name, value in applied.env_kept.items():
    print(f"[rank {plan.local_rank}] kept {name}={value} (already set; the plan says "
          f"{plan.env[name]})")
if applied.cpus is not None:
    print(f"[rank {plan.local_rank}] bound to CPUs {rdmatopo.format_cpulist(applied.cpus)}")
else:
    print(f"[rank {plan.local_rank}] not binding CPUs (replaying {os.environ['RDMATOPO_ROOT']}); "
          f"on that machine: {rdmatopo.format_cpulist(plan.cpus)}")

try:
    import torch
    import torch.distributed as dist
except ImportError:
    print(f"[rank {plan.local_rank}] torch is not installed: stopping after the rdmatopo part")
    sys.exit(0)

# From here on, an ordinary DDP script. rdmatopo gave local rank r the r-th visible GPU
# in PCI bus order, which is CUDA's order for identical GPUs (or with
# CUDA_DEVICE_ORDER=PCI_BUS_ID), so rank r drives CUDA device r.
if torch.cuda.is_available():
    torch.cuda.set_device(plan.local_rank % torch.cuda.device_count())
    device, backend = torch.device("cuda"), "nccl"
else:
    device, backend = torch.device("cpu"), "gloo"
dist.init_process_group(backend=backend)
x = torch.ones(1, device=device)
dist.all_reduce(x)
print(f"[rank {plan.local_rank}] all_reduce over {dist.get_world_size()} ranks: {x.item():.0f}")
dist.destroy_process_group()
