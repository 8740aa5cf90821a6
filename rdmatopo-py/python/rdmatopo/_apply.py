"""`rdmatopo.apply()`: put this rank's plan into effect in the running process."""

from __future__ import annotations

import os

# No `typing` import: it would double the import time of the package, and with
# postponed annotations the `X | None` spelling works on Python 3.9 too.
from rdmatopo._rdmatopo import ArgumentError, RankPlan, discover


def apply(
    local_rank: int | None = None,
    *,
    override: bool = False,
    bind_cpus: bool = True,
    root: str | os.PathLike[str] | None = None,
) -> RankPlan:
    """Discover this machine, plan this local rank, and apply the plan to the process.

    Call it first in a training script, before CUDA or NCCL initialise::

        import rdmatopo
        plan = rdmatopo.apply()      # LOCAL_RANK / LOCAL_WORLD_SIZE come from torchrun

    It sets the plan's NCCL variables in ``os.environ`` (a variable the user already set
    keeps its value unless ``override=True``) and, when ``bind_cpus`` is true, binds the
    process to the rank's CPUs with ``os.sched_setaffinity`` (threads started later
    inherit the binding; threads that already run keep theirs). The returned plan's
    ``applied`` says what changed. On any error nothing is changed: the environment and
    the affinity are as before and the exception propagates (``RdmaTopoError``
    subclasses, or ``OSError`` when the kernel refuses the CPU set).

    With ``root`` (or ``RDMATOPO_ROOT``) naming a captured tree, the plan is that of the
    capture, judged with the environment captured in it (its ``LOCAL_RANK``,
    ``CUDA_VISIBLE_DEVICES`` and ``NCCL_*``), as ``rdmatopo exec --root`` makes it: its
    NCCL variables are set here, but its CPUs are another machine's and are not bound
    (``applied.cpus`` is ``None``), as the command says "not applied: --root is a
    captured tree".
    """
    topology = discover(root)
    plan = topology.plan(local_rank)
    captured = topology.root != "/"

    env_set: dict[str, str] = {}
    env_kept: dict[str, str] = {}
    for name, value in plan.env.items():
        current = os.environ.get(name)
        if current is not None and not override:
            env_kept[name] = current
        elif current != value:
            env_set[name] = value
    for name, value in env_set.items():
        if not name or "=" in name or "\0" in name or "\0" in value:
            raise ArgumentError(f"cannot put {name!r}={value!r} into the environment")

    cpus = frozenset(plan.cpus)
    previous_cpus = os.sched_getaffinity(0)
    previous_env = {name: os.environ.get(name) for name in env_set}
    bound: frozenset[int] | None = None
    try:
        if bind_cpus and cpus and not captured:
            # The kernel keeps the CPUs of the set that this process may use, and
            # refuses (EINVAL) a set that holds none of them.
            os.sched_setaffinity(0, cpus)
            bound = frozenset(os.sched_getaffinity(0))
        for name, value in env_set.items():
            os.environ[name] = value
    except BaseException:
        if bound is not None:
            os.sched_setaffinity(0, previous_cpus)
        for name, old in previous_env.items():
            if old is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = old
        raise
    return plan._with_applied(env_set, env_kept, sorted(bound) if bound is not None else None)
