#!/usr/bin/env bash
# rdmatopo against the tools people use today, as whole processes on the same tree:
#   rdmatopo topo     vs  lstopo-no-graphics --whole-io  (hwloc, HWLOC_FSROOT=ROOT)
#   rdmatopo gids     vs  show_gids's loop               (scripts/incumbents/show_gids.sh)
#   rdmatopo netdevs  vs  ibdev2netdev's loop            (scripts/incumbents/ibdev2netdev.sh)
# Medians and ratios (hyperfine), files opened and syscalls (strace) next to the fewest
# files each answer needs, and peak RSS (/usr/bin/time). Prints a Markdown report.
#
#   scripts/bench-incumbents.sh [ROOT]        # default: fixtures/h100-dgx/root, 30 runs
#   RUNS=100 BIN=target/release/rdmatopo scripts/bench-incumbents.sh fixtures/a100-hgx-4numa/root
#
# Needs: hyperfine, strace, /usr/bin/time (GNU time), lstopo-no-graphics (hwloc-nox),
# python3. On Debian: apt-get install hyperfine strace time hwloc-nox.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD

python3 fixtures/tools/unpack.py >/dev/null   # the fixtures' directory form (lstopo needs one)
ROOT=$(realpath "${1:-fixtures/h100-dgx/root}")
RUNS=${RUNS:-30}
BIN=${BIN:-}
if [ -z "$BIN" ]; then
  cargo build --release -q -p rdmatopo
  BIN=$repo/target/release/rdmatopo
fi
BIN=$(realpath "$BIN")
for tool in hyperfine strace python3 lstopo-no-graphics; do
  command -v "$tool" >/dev/null || { echo "missing: $tool (apt-get install hyperfine strace hwloc-nox)" >&2; exit 3; }
done
[ -x /usr/bin/time ] || { echo "missing: /usr/bin/time (apt-get install time)" >&2; exit 3; }

work=$(mktemp -d)
trap '[ -n "${KEEP:-}" ] || rm -rf "$work"' EXIT
# Time an installed copy, as `cargo install` or a package leaves it: a binary the linker
# has just written sits in the page cache in the small pieces it was written in, and
# starts measurably slower (more page faults) than the same bytes written in one go.
BUILT=$BIN
cp "$BUILT" "$work/rdmatopo"
BIN=$work/rdmatopo
# hwloc reads the tree through HWLOC_FSROOT; without -x86 its CPUID backend would add
# this machine's caches to the captured topology. rdmatopo ignores both variables.
export HWLOC_FSROOT=$ROOT HWLOC_COMPONENTS=-x86 ROOT

# name | rdmatopo command | incumbent command
cases=(
  "topo|$BIN topo --root $ROOT|lstopo-no-graphics --whole-io"
  "gids|$BIN gids --root $ROOT|bash $repo/scripts/incumbents/show_gids.sh"
  "netdevs|$BIN netdevs --root $ROOT|bash $repo/scripts/incumbents/ibdev2netdev.sh"
)

for c in "${cases[@]}"; do
  IFS='|' read -r name ours theirs <<<"$c"
  hyperfine -N --warmup 3 --runs "$RUNS" --export-json "$work/$name.json" \
    --command-name "rdmatopo $name" "$ours" --command-name "$theirs" "$theirs" >/dev/null 2>&1
  for who in ours theirs; do
    cmd=${!who}
    # shellcheck disable=SC2086
    # -ff: one file per thread, so a call is never split across lines.
    strace -f -ff -qq -o "$work/$name.$who.openat" -e trace=open,openat,openat2 $cmd >/dev/null 2>&1 || true
    # shellcheck disable=SC2086
    strace -f -qq -c -o "$work/$name.$who.count" $cmd >/dev/null 2>&1 || true
    # shellcheck disable=SC2086
    /usr/bin/time -f %M -o "$work/$name.$who.rss" $cmd >/dev/null 2>&1 || true
  done
done
"$BIN" topo --root "$ROOT" --format json >"$work/matrix.json"
# The floor: a C program that only opens, reads and closes the files `topo` needs.
cc -O2 -pthread -o "$work/readfiles" scripts/incumbents/readfiles.c

python3 - "$work" "$ROOT" "$BUILT" "$RUNS" <<'PY'
import glob, json, os, re, statistics, subprocess, sys
work, root, binary, runs = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
sys.path.insert(0, "scripts/lib")
import strace_opens  # noqa: E402

def opened(path):
    """Files (not directories) opened under the root: (succeeded, attempted).
    `path` is the prefix of strace's per-thread files (`-ff`)."""
    return strace_opens.opened(path, root)

def syscalls(path):
    for line in open(path):
        if line.strip().endswith("total"):
            return int(line.split()[3])  # % time, seconds, usecs/call, calls
    return 0

def r(*p):
    return os.path.join(root, *p)

def minimum(name):
    """The fewest files the answer needs, and how that count is made."""
    ib = r("sys/class/infiniband")
    devs = sorted(os.listdir(ib)) if os.path.isdir(ib) else []
    if name == "topo":
        t = json.load(open(os.path.join(work, "matrix.json")))
        gpus = {d["pci"] for d in t["devices"] if d["kind"] == "gpu"}
        nics = {d["pci"] for d in t["devices"] if d["kind"] == "nic"}
        bus = r("sys/bus/pci/devices")
        fns = os.listdir(bus)
        # A function with functions below it in the tree is a bridge: its class is known
        # without reading it. Every other function's class tells whether it is a GPU.
        parents = {c for f in fns for c in os.path.realpath(os.path.join(bus, f)).split("/")[:-1]}
        leaves = [f for f in fns if f not in parents]
        display = {f for f in fns if open(os.path.join(bus, f, "class")).read().startswith("0x03")}
        nodes = len([n for n in os.listdir(r("sys/devices/system/node")) if re.fullmatch(r"node\d+", n)])
        # A function's `uevent` states class, vendor and device in one file: the class of
        # a NIC's function comes with its ids; a display function needs its class first.
        # A GPU's CPUs are a column of the matrix; a NIC's, and its host bridge's node,
        # stand in only where it knows no node of its own.
        node_ids = {n[4:] for n in os.listdir(r("sys/devices/system/node")) if re.fullmatch(r"node\d+", n)}
        def knows_node(f):
            text = open(os.path.join(bus, f, "numa_node")).read().strip()
            return text in node_ids or (not node_ids and text.lstrip("-").isdigit() and int(text) >= 0)
        lost = sorted(f for f in gpus | nics if not knows_node(f))
        cpus = sorted(gpus | set(lost))
        hb_of = lambda f: next(c for c in os.path.realpath(os.path.join(bus, f)).split("/") if re.fullmatch(r"pci[0-9a-f]+:[0-9a-f]+", c))
        lost_bridges = sorted({hb_of(f) for f in lost})
        n = (len(leaves) + len(display - nics) + len(gpus | nics) + len(cpus) + len(lost_bridges)
             + nodes + 1 + 4)
        # The same files by name, for the floor: one process that only reads them.
        names = [f"sys/bus/pci/devices/{f}/{'uevent' if f in nics else 'class'}" for f in leaves]
        names += [f"sys/bus/pci/devices/{f}/uevent" for f in sorted(display - nics)]
        names += [f"sys/bus/pci/devices/{f}/numa_node" for f in sorted(gpus | nics)]
        names += [f"sys/bus/pci/devices/{f}/local_cpulist" for f in cpus]
        names += [f"sys/devices/{h}/{sorted(c for c in os.listdir(r('sys/devices', h)) if ':' in c)[0]}/numa_node"
                  for h in lost_bridges]
        names += [f"sys/devices/system/node/node{i}/cpulist" for i in range(nodes)]
        names += ["rdmatopo/nvml.json"] + [f"proc/self/{f}" for f in ("status", "cgroup", "environ", "mountinfo")]
        with open(os.path.join(work, "topo.files"), "w") as out:
            out.write("\n".join(names) + "\n")
        return n, (f"class of {len(leaves)} functions without functions below them (not of "
                   f"{len(fns) - len(leaves)} bridges; a NIC's from its uevent, with its ids); "
                   f"uevent (vendor, device) of {len(display - nics)} display functions; "
                   f"numa_node of {len(gpus)} GPUs and {len(nics)} NICs; local_cpulist of the GPUs "
                   f"and of {len(set(lost) - gpus)} NICs without a node; numa_node of "
                   f"{len(lost_bridges)} host bridges (of GPUs and NICs without a node); "
                   f"{nodes} node cpulists; nvml.json; status, cgroup, "
                   f"environ, mountinfo (host or container)")
    if name == "gids":
        slots = attrs = 0
        for d in devs:
            for p in os.listdir(os.path.join(ib, d, "ports")):
                port = os.path.join(ib, d, "ports", p)
                gids = os.listdir(os.path.join(port, "gids")) if os.path.isdir(os.path.join(port, "gids")) else []
                slots += len(gids)
                for g in gids:
                    text = open(os.path.join(port, "gids", g)).read().strip()
                    if set(text) <= set("0:"):
                        continue
                    attrs += sum(os.path.exists(os.path.join(port, "gid_attrs", k, g)) for k in ("types", "ndevs"))
        return slots + attrs, f"{slots} GID slots, {attrs} type/ndev files of the valid ones"
    if name == "netdevs":
        pairs = 0
        for d in devs:
            net = os.path.join(ib, d, "device", "net")
            if os.path.isdir(net):
                pairs += len(os.listdir(net))
        return 2 * pairs, f"dev_port and operstate of the {pairs} netdevs on RDMA functions"

def ms(x):
    return f"{x * 1000:.2f} ms"

print(f"Root: `{os.path.relpath(root)}`; {runs} runs each after 3 warm-ups (hyperfine -N); rdmatopo: a copy of `{os.path.relpath(binary)}` (as installed).\n")
print("| command | median | min | files opened (tried) | syscalls | peak RSS |")
print("|---|---:|---:|---:|---:|---:|")
summary = []
for name in ("topo", "gids", "netdevs"):
    res = json.load(open(os.path.join(work, f"{name}.json")))["results"]
    med = [statistics.median(x["times"]) for x in res]
    for i, who in enumerate(("ours", "theirs")):
        ok, tried = opened(os.path.join(work, f"{name}.{who}.openat"))
        rss = open(os.path.join(work, f"{name}.{who}.rss")).read().split()[-1]
        print(f"| `{res[i]['command'].replace(os.getcwd() + '/', '')}` | {ms(med[i])} | {ms(min(res[i]['times']))} | {ok} ({tried}) | "
              f"{syscalls(os.path.join(work, f'{name}.{who}.count'))} | {int(rss) / 1024:.1f} MB |")
    need, how = minimum(name)
    ours_files = opened(os.path.join(work, f"{name}.ours.openat"))[0]
    summary.append((name, med[1] / med[0], ours_files, need, how))
print("\n| command | speed-up (median) | files rdmatopo opened / fewest needed |")
print("|---|---:|---|")
for name, speedup, files, need, how in summary:
    print(f"| {name} | {speedup:.1f}x | {files} / {need} = {files / need:.2f}x ({how}) |")

# Time the floor of `topo`: its fewest files read by a process that does nothing else.
files = os.path.join(work, "topo.files")
out = os.path.join(work, "floor.json")
subprocess.run(["hyperfine", "-N", "--warmup", "3", "--runs", runs, "--export-json", out,
                f"{work}/readfiles {root} {files}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
floor = statistics.median(json.load(open(out))["results"][0]["times"])
lstopo = statistics.median(json.load(open(os.path.join(work, "topo.json")))["results"][1]["times"])
count = sum(1 for _ in open(files))
print(f"\nFloor of `topo`: opening, reading and closing only its {count} files "
      f"(`scripts/incumbents/readfiles.c`, one process) takes {ms(floor)} (median), "
      f"so no reader of those files can be more than {lstopo / floor:.1f}x faster than lstopo here.")
PY
