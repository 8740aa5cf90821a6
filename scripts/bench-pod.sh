#!/usr/bin/env bash
# What rdmatopo costs inside a Kubernetes pod, as whole processes (timed side by side,
# round by round: scripts/lib/interleave.py) and as files
# opened (strace):
#
#   Part A (fixtures): on fixtures/pod-sriov, fixtures/pod-h100-2gpu-2vf (pods) and
#   fixtures/h100-dgx (a host), `rdmatopo topo`, `nccl-env`, `doctor`, `gids`, `netdevs`,
#   `qos`, `inventory` (the pod's own devices, the default) and with `--all` (every
#   visible device) `topo`, `gids`, `netdevs`, `qos` and `inventory`, next to hwloc's
#   `lstopo-no-graphics --whole-io` on the same tree (HWLOC_FSROOT), and the floor of
#   `doctor`: the files it opened, read by a C program that does nothing else
#   (scripts/incumbents/readfiles.c), on one thread and half each on two, only those
#   that `topo` does not open (`topo` plus their reading is the least `doctor` could
#   take), and the same program with no file to read (what starting any process costs
#   on this machine). One
#   timed run per root; a table per root: median, min, files opened, lstopo's median /
#   the command's, the command's / topo's.
#
#   Part B (flatness): a pod that owns 1 GPU and 1 VF on a synthetic SR-IOV host (16 GPUs,
#   8 PFs; fixtures/tools/synth.py --pod) whose PFs carry 1, 8 and 64 VFs each, i.e. 7, 63
#   and 511 VFs (and their RDMA devices) of other pods. What the pod owns stays the same,
#   so topo, nccl-env and doctor should cost the same at every size. One timed run over
#   all sizes and commands; a table of medians and files opened, and the growth from the
#   smallest to the largest host, beside the growth of a C program that only lists the
#   host's /sys/class/infiniband (scripts/incumbents/listdir.c), the one read that grows.
#   The synthetic hosts are written twice, in the same timed run: on disk (the work
#   directory, under TMPDIR) and in memory (/dev/shm, where it is a tmpfs). Sysfs lists
#   a directory from a tree in memory; a disk's filesystem may cost more per name (ext4
#   hashes each name it lists), so the listing's floor differs between the two.
#
# Files opened: successful open/openat/openat2 of files (not O_DIRECTORY or O_PATH) under
# the root, from `strace -f -ff` (the same count as scripts/bench-incumbents.sh).
#
#   scripts/bench-pod.sh                        # builds rdmatopo (static and glibc), 30 runs each
#   RUNS=10 BIN=target/static/rdmatopo GLIBC_BIN=target/release/rdmatopo scripts/bench-pod.sh
#                                               # no build, fewer runs
#
# BIN is the program timed: by default the static build (scripts/build-static.sh), the
# one to ship. GLIBC_BIN, where given (by default the glibc build made alongside), adds
# its `topo` to each table of part A, side by side.
#
# Needs: strace, lstopo-no-graphics (hwloc-nox), python3, cc; cargo (and make, for the C
# library of part C) unless BIN is given; valgrind (optional) adds instruction counts to
# part B. On Debian: apt-get install strace hwloc-nox python3 gcc make valgrind. Exits 3
# if one of the first three is missing. Prints a Markdown report.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
RUNS=${RUNS:-30}
BIN=${BIN:-}
GLIBC_BIN=${GLIBC_BIN:-}

for tool in strace lstopo-no-graphics python3; do
  command -v "$tool" >/dev/null || {
    echo "bench-pod: missing $tool (Debian: apt-get install strace hwloc-nox python3)" >&2
    exit 3
  }
done

work=$(realpath "$(mktemp -d)")
# Part B's hosts in memory, where /dev/shm is a tmpfs.
mem=
if [ "$(stat -f -c %T /dev/shm 2>/dev/null)" = tmpfs ]; then
  mem=$(mktemp -d -p /dev/shm)
fi
trap 'rm -rf "$work" ${mem:+"$mem"}' EXIT
mkdir "$work/strace"

# 1. The binary. Time an installed copy, as `cargo install` or a package leaves it: a
# binary the linker has just written sits in the page cache in the small pieces it was
# written in, and starts measurably slower than the same bytes written in one go.
if [ -z "$BIN" ]; then
  scripts/build-static.sh >/dev/null
  cargo build --release -q -p rdmatopo
  BIN=$repo/target/static/rdmatopo
  GLIBC_BIN=$repo/target/release/rdmatopo
fi
BUILT=$(realpath "$BIN")
cp "$BUILT" "$work/rdmatopo"
rt=$work/rdmatopo
if [ -n "$GLIBC_BIN" ]; then
  GLIBC_BUILT=$(realpath "$GLIBC_BIN")
  cp "$GLIBC_BUILT" "$work/rdmatopo-glibc"
fi

# The floor of an answer: a C program that only opens, reads and closes a list of files;
# and one that only lists directories.
cc -O2 -pthread -o "$work/readfiles" scripts/incumbents/readfiles.c
cc -O2 -o "$work/listdir" scripts/incumbents/listdir.c

# 2. The fixtures' directory form (lstopo needs one).
python3 fixtures/tools/unpack.py pod-sriov pod-h100-2gpu-2vf h100-dgx >/dev/null

echo "# rdmatopo in a pod"
echo
echo "Machine: $(nproc) CPUs, Linux $(uname -r), $(date -u '+%Y-%m-%d %H:%M:%S UTC');" \
  "$RUNS rounds after 3 warm-up rounds, each round every command of a table once, in an order shuffled each round" \
  "(scripts/lib/interleave.py); rdmatopo: a copy of \`${BUILT#"$repo"/}\` (as installed)${GLIBC_BIN:+; the glibc build: a copy of \`${GLIBC_BUILT#"$repo"/}\`}."

# count_opens KEY ROOT LABEL COMMAND...: run COMMAND once under strace (one file per
# thread, so no call is split across lines) and note which root and label KEY has.
count_opens() {
  local key=$1 root=$2 label=$3
  shift 3
  strace -f -ff -ttt -qq -o "$work/strace/$key" -e trace=open,openat,openat2 "$@" >/dev/null 2>&1 || true
  printf '%s\t%s\t%s\n' "$key" "$root" "$label" >>"$work/keys.tsv"
}

# opened_paths KEY ROOT: the files KEY's run opened under ROOT, one a line, in order
# (from count_opens's strace).
opened_paths() {
  python3 -c 'import sys; sys.path.insert(0, "scripts/lib"); import strace_opens
print("\n".join(strace_opens.opened_paths(*sys.argv[1:])))' "$work/strace/$1" "$2"
}

# bench JSON NAME CMDLINE...: the commands timed side by side, round by round
# (scripts/lib/interleave.py), into hyperfine's JSON shape.
bench() {
  local json=$1
  shift
  python3 scripts/lib/interleave.py "$json" "$RUNS" 3 "$@"
}

# report MODE ARGS...: the Markdown tables, from the timings' JSON and strace's files.
report() {
  python3 - "$work" "$@" <<'PY'
import glob, json, os, re, statistics, sys

work, mode, args = sys.argv[1], sys.argv[2], sys.argv[3:]
sys.path.insert(0, "scripts/lib")
import strace_opens  # noqa: E402
keys = {}
for line in open(os.path.join(work, "keys.tsv")):
    key, root, label = line.rstrip("\n").split("\t")
    keys[key] = (root, label)


def opened(key):
    """Files (not directories) opened under the key's root: (succeeded, attempted), as
    scripts/bench-incumbents.sh counts them, from strace's per-thread files (-ff)."""
    return strace_opens.opened(os.path.join(work, "strace", key), keys[key][0])


def results(path):
    """command name -> (median s, min s)"""
    return {r["command"]: (statistics.median(r["times"]), min(r["times"]))
            for r in json.load(open(path))["results"]}


def ms(x):
    return f"{x * 1000:.2f}"


if mode == "A":
    json_path, prefix = args
    res = results(json_path)
    ours = [k for k in res if k.startswith(prefix)]
    lstopo = res[prefix + "lstopo"][0]
    root = keys[ours[0]][0]
    print(f"\n## `{os.path.relpath(root)}`\n")
    topo = res[prefix + "topo"][0]
    print("| command | median ms | min ms | files opened | ratio lstopo/this | this/topo |")
    print("|---|---:|---:|---:|---:|---:|")
    for k in ours:
        med, low = res[k]
        print(f"| `{keys[k][1]}` | {ms(med)} | {ms(low)} | {opened(k)[0]} | {lstopo / med:.1f}x"
              f" | {med / topo:.2f}x |")
    beyond, start = res.get(prefix + "beyond"), res.get(prefix + "start")
    if beyond and start:
        least = topo + beyond[0] - start[0]
        print(f"\nThe least `doctor` could take here: `topo`'s median plus the time to read the"
              f" files it opens that `topo` does not (that row less the process start):"
              f" {ms(least)} ms, {least / topo:.2f}x `topo`.")
elif mode == "B":
    json_path, place, where, *sizes = args
    res = results(json_path)
    cmds = ("topo", "nccl-env", "doctor")
    rows = []
    for v in sizes:
        root = keys[f"{place}{v}.topo"][0]
        pci = os.path.join(root, "sys/bus/pci/devices")
        vfs = sum(os.path.exists(os.path.join(pci, f, "physfn")) for f in os.listdir(pci))
        rdma = len(os.listdir(os.path.join(root, "sys/class/infiniband")))
        cells = [(res[f"{place}{v}.{c}"][0], opened(f"{place}{v}.{c}")[0]) for c in cmds]
        rows.append((v, vfs - 1, rdma, len(os.listdir(pci)), cells))
    print(f"\n## Flatness: one pod (1 GPU, 1 VF) on hosts with more and more VFs of other pods, {where}\n")
    print("`fixtures/tools/synth.py --pod --vfs N --gids 4`: 16 GPUs, 8 PFs with N VFs each; "
          + "; ".join(f"N={v}: {n} PCI functions, {r} RDMA devices" for v, _, r, n, _ in rows) + ".\n")
    print("| foreign VFs | topo ms | topo files | nccl-env ms | nccl-env files | doctor ms | doctor files |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for v, foreign, _, _, cells in rows:
        print(f"| {foreign} | " + " | ".join(f"{ms(t)} | {f}" for t, f in cells) + " |")
    first, last = rows[0], rows[-1]

    def pct(a, b):
        return f"{100 * (b - a) / a:+.0f}%" if a else "n/a"

    print(f"\nGrowth from {first[1]} to {last[1]} foreign VFs (median time, files opened): "
          + "; ".join(f"{c} {pct(first[4][i][0], last[4][i][0])} ms, {pct(first[4][i][1], last[4][i][1])} files"
                      for i, c in enumerate(cmds)))
    lists = [res[f"{place}{v}.listing"][0] for v in sizes]
    topo_first, topo_last = first[4][0][0], last[4][0][0]
    print(f"\nThe listing alone (`scripts/incumbents/listdir.c`: a process that lists `sys/class/infiniband`"
          f" and exits): {' / '.join(ms(t) for t in lists)} ms, growing by {ms(lists[-1] - lists[0])} ms,"
          f" {100 * (lists[-1] - lists[0]) / topo_first:.0f}% of topo's median at {first[1]} foreign VFs;"
          f" topo grows by {ms(topo_last - topo_first)} ms.")
PY
}

# 3. Part A: the fixtures.
i=0
for fx in pod-sriov pod-h100-2gpu-2vf h100-dgx; do
  R=$(realpath "fixtures/$fx/root")
  args=()
  for c in "topo" "nccl-env" "doctor" "topo --all" "gids" "gids --all" "netdevs" "netdevs --all" \
    "qos" "qos --all" "inventory" "inventory --all"; do
    key="A$i.${c// /_}"
    args+=("$key" "$rt $c --root $R")
    # shellcheck disable=SC2086 # $c is a subcommand and its flags
    count_opens "$key" "$R" "rdmatopo $c" "$rt" $c --root "$R"
  done
  if [ -n "$GLIBC_BIN" ]; then
    args+=("A$i.glibc" "$work/rdmatopo-glibc topo --root $R")
    count_opens "A$i.glibc" "$R" "rdmatopo topo, the glibc build" "$work/rdmatopo-glibc" topo --root "$R"
  fi
  # The floor of doctor's answer: the files it opened (in that order), read by one C
  # process that does nothing else, on one thread.
  opened_paths "A$i.doctor" "$R" >"$work/A$i.doctor.files"
  args+=("A$i.floor" "$work/readfiles $R $work/A$i.doctor.files")
  count_opens "A$i.floor" "$R" "floor: doctor's files, read by readfiles.c" \
    "$work/readfiles" "$R" "$work/A$i.doctor.files"
  # The same files read half on a second thread: whether reading side by side pays here
  # (discovery's threads, discover/rdma.rs GID_SLOTS_PER_THREAD).
  args+=("A$i.floor2" "$work/readfiles $R $work/A$i.doctor.files 2")
  count_opens "A$i.floor2" "$R" "floor on two threads: the same files, half each" \
    "$work/readfiles" "$R" "$work/A$i.doctor.files" 2
  # The least doctor could take: topo's whole process, plus reading the files doctor
  # opens and topo does not, with nothing else (no parsing, no checks); the report
  # adds the row, less the process start, to topo's median.
  opened_paths "A$i.topo" "$R" >"$work/A$i.topo.files"
  grep -vxF -f "$work/A$i.topo.files" "$work/A$i.doctor.files" >"$work/A$i.beyond.files" || true
  args+=("A$i.beyond" "$work/readfiles $R $work/A$i.beyond.files")
  count_opens "A$i.beyond" "$R" "doctor's files that topo does not open, read by readfiles.c" \
    "$work/readfiles" "$R" "$work/A$i.beyond.files"
  # What any process costs here: the same program with nothing to read. lstopo's
  # median over this is the most any command's ratio to lstopo could be.
  args+=("A$i.start" "$work/readfiles $R /dev/null")
  count_opens "A$i.start" "$R" "process start: readfiles.c with no file to read" \
    "$work/readfiles" "$R" /dev/null
  # hwloc reads the tree through HWLOC_FSROOT; without -x86 its CPUID backend would add
  # this machine's caches to the topology. rdmatopo ignores both variables.
  args+=("A$i.lstopo" "lstopo-no-graphics --whole-io")
  count_opens "A$i.lstopo" "$R" "lstopo-no-graphics --whole-io" \
    env HWLOC_FSROOT="$R" HWLOC_COMPONENTS=-x86 lstopo-no-graphics --whole-io
  HWLOC_FSROOT=$R HWLOC_COMPONENTS=-x86 bench "$work/A$i.json" "${args[@]}"
  report A "$work/A$i.json" "A$i."
  i=$((i + 1))
done

# 4. Part B: flatness over the number of other pods' VFs, the hosts on disk (B) and in
# memory (M), in one timed run.
sizes=(1 8 64)
places=("B $work")
[ -n "$mem" ] && places+=("M $mem")
args=()
for place in "${places[@]}"; do
  read -r p dir <<<"$place"
  for v in "${sizes[@]}"; do
    # --gids: the PFs' GID tables (all slots read zero in the pod; small keeps generation fast)
    python3 fixtures/tools/synth.py "$dir/pod$v" --pod --vfs "$v" --gids 4 >/dev/null
    for c in topo nccl-env doctor; do
      key="$p$v.$c"
      args+=("$key" "$rt $c --root $dir/pod$v")
      count_opens "$key" "$dir/pod$v" "rdmatopo $c" "$rt" "$c" --root "$dir/pod$v"
    done
    # The one listing that grows with the host: every answer reads it (which devices
    # exist), and the kernel's part of it is a floor no answer goes below.
    args+=("$p$v.listing" "$work/listdir $dir/pod$v/sys/class/infiniband")
  done
done
bench "$work/B.json" "${args[@]}"
report B "$work/B.json" B "on disk ($(df --output=fstype "$work" | tail -1) under $(dirname "$work"))" "${sizes[@]}"
if [ -n "$mem" ]; then
  report B "$work/B.json" M "in memory (tmpfs, /dev/shm)" "${sizes[@]}"
else
  echo
  echo "(/dev/shm is no tmpfs here: no hosts in memory.)"
fi

# Instructions (callgrind, where valgrind is installed): the same runs counted instead of
# timed, so that a growth of a few percent is not lost in a shared machine's noise.
if command -v valgrind >/dev/null; then
  echo
  echo "Instructions executed (valgrind --tool=callgrind, whole process, millions):"
  echo
  echo "| foreign VFs | topo | nccl-env | doctor |"
  echo "|---:|---:|---:|---:|"
  for v in "${sizes[@]}"; do
    vfs=0
    for f in "$work/pod$v"/sys/bus/pci/devices/*; do
      [ -e "$f/physfn" ] && vfs=$((vfs + 1))
    done
    row="| $((vfs - 1))"
    for c in topo nccl-env doctor; do
      valgrind --tool=callgrind --callgrind-out-file="$work/cg.$v.$c" "$rt" "$c" --root "$work/pod$v" >/dev/null 2>&1 || true
      n=$(sed -n 's/^summary: //p; s/^totals: //p' "$work/cg.$v.$c" | head -1)
      row+=" | $(awk -v n="${n:-0}" 'BEGIN { printf "%.2f", n / 1e6 }')"
    done
    echo "$row |"
  done
fi

# 5. Part C: discovery in process, warm, as a launch script or an NCCL plugin calls it:
# Python `rdmatopo.discover()` (PYTHON: an interpreter with rdmatopo installed, a release
# build: `pip install ./rdmatopo-py`) and C `rdmatopo_topology_discover` (linked against
# target/release/librdmatopo.so, built here), each in the owned view (the
# default) and the whole one, medians of 200 calls after 20.
echo
echo "## Discovery in process (warm): Python and C, fixtures/pod-sriov/root"
echo
echo "| call | owned view (default) | whole machine |"
echo "|---|---:|---:|"
R=$repo/fixtures/pod-sriov/root
PYTHON=${PYTHON:-python3}
# From $work: in the checkout, the `rdmatopo/` crate folder imports as an empty namespace
# package where the bindings are not installed.
if (cd "$work" && "$PYTHON" -c 'import rdmatopo; rdmatopo.discover') 2>/dev/null; then
  (cd "$work" && "$PYTHON" - "$R") <<'PY'
import statistics, sys, time
import rdmatopo
root = sys.argv[1]
def median(view):
    for _ in range(20):
        rdmatopo.discover(root, view=view)
    times = []
    for _ in range(200):
        t = time.perf_counter()
        rdmatopo.discover(root, view=view)
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times)
print(f"| Python `rdmatopo.discover(root)` | {median('owned'):.2f} ms | {median('all'):.2f} ms |")
PY
else
  echo "| Python | not measured: \`$PYTHON\` has no \`rdmatopo.discover\` (pip install ./rdmatopo-py) | |"
fi
# The Makefile builds the library and links it under its soname, as the binary asks.
make -s -C rdmatopo-c lib >/dev/null
cat >"$work/discover.c" <<'C'
#include "rdmatopo.h"
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}
static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}
static double median(const char *root, int view) {
    static double t[200];
    for (int i = 0; i < 220; i++) {
        rdmatopo_topology *topo = NULL;
        double start = now_ms();
        if (rdmatopo_topology_discover_view(root, view, &topo) != RDMATOPO_STATUS_OK) {
            fprintf(stderr, "%s\n", rdmatopo_last_error_message());
            exit(1);
        }
        if (i >= 20) t[i - 20] = now_ms() - start;
        rdmatopo_topology_free(topo);
    }
    qsort(t, 200, sizeof t[0], cmp);
    return (t[99] + t[100]) / 2;
}
int main(int argc, char **argv) {
    (void)argc;
    printf("| C `rdmatopo_topology_discover` | %.2f ms | %.2f ms |\n",
           median(argv[1], RDMATOPO_VIEW_OWNED), median(argv[1], RDMATOPO_VIEW_ALL));
    return 0;
}
C
cc -O2 -I include "$work/discover.c" -L target/release -lrdmatopo -o "$work/discover"
LD_LIBRARY_PATH=target/release "$work/discover" "$R"
