"""Files a process opened under a root, from `strace -f -ff -e trace=open,openat,openat2`
output (one file per thread: PREFIX.<tid>). Shared by the benchmark scripts."""

import glob
import re

# The top directories of a root (rdmatopo opens them relative to the root's fd).
TOP = ("sys", "proc", "dev", "rdmatopo")
_OPEN = re.compile(
    r'open(?:at2?)?\((?:(AT_FDCWD|\d+), )?"([^"]*)", \{?(?:flags=)?([A-Z_|]+)[^)]*\)\s+=\s+(-?\d+)'
)


def opened(prefix: str, root: str) -> tuple[int, int]:
    """Files (not directories) opened under `root`: (succeeded, attempted)."""
    ok = tried = 0
    for part in glob.glob(prefix + ".*"):
        with open(part) as f:
            for line in f:
                m = _OPEN.search(line)
                if not m:
                    continue
                dirfd, path, flags, ret = m.groups()
                if "O_DIRECTORY" in flags or "O_PATH" in flags:
                    continue
                inside = path.startswith(root + "/") or (
                    dirfd not in (None, "AT_FDCWD") and path.split("/")[0] in TOP
                )
                if inside:
                    tried += 1
                    ok += int(ret) >= 0
    return ok, tried
