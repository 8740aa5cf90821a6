"""Files a process opened under a root, from `strace -f -ff -e trace=open,openat,openat2`
output (one file per thread: PREFIX.<tid>). Shared by the benchmark scripts."""

import glob
import re

# The top directories of a root (rdmatopo opens them relative to the root's fd).
TOP = ("sys", "proc", "dev", "rdmatopo")
_OPEN = re.compile(
    r'open(?:at2?)?\((?:(AT_FDCWD|\d+), )?"([^"]*)", \{?(?:flags=)?([A-Z_|]+)[^)]*\)\s+=\s+(-?\d+)'
)


def _opens(prefix: str, timed: bool = False):
    """(dirfd, path, flags, returned) of every open, all threads; with `timed`, the line's
    timestamp first (strace's `-ttt`)."""
    for part in glob.glob(prefix + ".*"):
        with open(part) as f:
            for line in f:
                m = _OPEN.search(line)
                if m:
                    dirfd, path, flags, ret = m.groups()
                    found = (dirfd, path, flags, int(ret))
                    yield (float(line.split()[0]), *found) if timed else found


def opened(prefix: str, root: str) -> tuple[int, int]:
    """Files (not directories) opened under `root`: (succeeded, attempted). A name opened
    from a directory's descriptor counts where that directory was opened under the root
    (rdmatopo opens a run of GID slots from their directory)."""
    opens = list(_opens(prefix))
    dirs: set[str] = set()

    def inside(dirfd, path):
        if dirfd in (None, "AT_FDCWD"):
            return path.startswith(root + "/")
        return path.split("/")[0] in TOP or dirfd in dirs

    # Twice over: threads' files come in no particular order.
    for _ in range(2):
        for dirfd, path, flags, ret in opens:
            if ("O_DIRECTORY" in flags or "O_PATH" in flags) and ret >= 0 and inside(dirfd, path):
                dirs.add(str(ret))
    ok = tried = 0
    for dirfd, path, flags, ret in opens:
        if "O_DIRECTORY" in flags or "O_PATH" in flags:
            continue
        if inside(dirfd, path):
            tried += 1
            ok += ret >= 0
    return ok, tried


def opened_paths(prefix: str, root: str) -> list[str]:
    """The files (not directories) a process opened under `root`, in the order opened, as
    paths relative to it; a name opened from a directory's descriptor is joined to that
    directory's path. Needs strace's timestamps (`-ttt`): threads share descriptors, so
    their files are merged by time."""
    dirs: dict[str, str] = {}
    files = []
    for _, dirfd, path, flags, ret in sorted(_opens(prefix, timed=True), key=lambda t: t[0]):
        if ret < 0:
            continue
        if dirfd in (None, "AT_FDCWD"):
            if not path.startswith(root + "/"):
                continue
            rel = path[len(root) + 1 :]
        elif path.split("/")[0] in TOP:
            rel = path
        elif dirfd in dirs:
            rel = f"{dirs[dirfd]}/{path}"
        else:
            continue
        if "O_DIRECTORY" in flags or "O_PATH" in flags:
            dirs[str(ret)] = rel
        else:
            dirs.pop(str(ret), None)
            files.append(rel)
    return files
