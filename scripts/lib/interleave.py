"""Time whole processes side by side: each round runs every command once, so a
shared machine's drift (another tenant, a frequency change) falls on all commands alike
rather than on whichever ran during it. Ratios between commands are what the benchmarks
judge, so they are taken within rounds. The order is shuffled each round (seeded, so a
run repeats): a process started right after a heavy one runs slower (a `topo` right
after lstopo took 14% longer than the same `topo` two places later), and in a fixed
order one command would always pay that.

    python3 interleave.py OUT.json RUNS WARMUP NAME CMDLINE [NAME CMDLINE ...]

CMDLINE is split as a shell would (shlex) and started without a shell (posix_spawn), its
output to /dev/null; the environment is this one's. OUT.json has hyperfine's shape:
{"results": [{"command": NAME, "times": [seconds, ...]}]}. A command that fails is an
error, named with its exit status."""

import json
import os
import random
import shlex
import shutil
import sys
import time


def main(out: str, runs: str, warmup: str, *pairs: str) -> None:
    if len(pairs) % 2:
        sys.exit("interleave.py: each NAME needs a CMDLINE")
    names = pairs[0::2]
    argvs = [shlex.split(c) for c in pairs[1::2]]
    for argv in argvs:
        path = shutil.which(argv[0])
        if path is None:
            sys.exit(f"interleave.py: {argv[0]}: not found")
        argv[0:1] = [path, argv[0]]
    null = os.open(os.devnull, os.O_WRONLY)
    actions = [(os.POSIX_SPAWN_DUP2, null, 1), (os.POSIX_SPAWN_DUP2, null, 2)]
    times: list[list[float]] = [[] for _ in names]
    rng = random.Random(0)
    commands = list(zip(names, argvs, times))
    for round_ in range(int(warmup) + int(runs)):
        rng.shuffle(commands)
        for name, (path, *argv), kept in commands:
            start = time.perf_counter()
            pid = os.posix_spawn(path, argv, os.environ, file_actions=actions)
            _, status = os.waitpid(pid, 0)
            took = time.perf_counter() - start
            code = os.waitstatus_to_exitcode(status)
            # doctor exits 1 or 2 for findings: only a signal is a failure.
            if code < 0:
                sys.exit(f"interleave.py: {name}: killed by signal {-code}")
            if round_ >= int(warmup):
                kept.append(took)
    with open(out, "w") as f:
        json.dump({"results": [{"command": n, "times": t} for n, t in zip(names, times)]}, f)


if __name__ == "__main__":
    main(*sys.argv[1:])
