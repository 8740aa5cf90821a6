#!/usr/bin/env bash
# Check rdmatopo against nvidia-smi on a machine with an NVIDIA GPU: build rdmatopo
# (release), capture a snapshot, then compare `rdmatopo topo` with `nvidia-smi topo -m`
# cell by cell (GPUs matched by PCI bus id, NICs by RDMA device name), the CPU and NUMA
# affinity columns, the GPU UUIDs, and the snapshot's offline replay with the live run.
#
#   scripts/gpu-check.sh [OUTDIR]        (default: $OUT, else ./gpu-check-out)
#
# The rdmatopo binary: $RDMATOPO_BIN if set, else `cargo build --release` when cargo is
# there, else a prebuilt target/release/rdmatopo (build it elsewhere and copy it over on
# machines without a Rust toolchain). Needs bash, python3 (stdlib only), nvidia-smi.
# Writes at most 8 files into OUTDIR: log.txt, compare.txt, nvidia-smi-topo.txt,
# rdmatopo-topo.txt, rdmatopo-topo.json, inventory.json, snap.tar.gz.
# Exit: 0 all cells agree, 1 some differ, 3 could not run.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-${OUT:-gpu-check-out}}
mkdir -p "$out"
exec > >(tee "$out/log.txt") 2>&1

fail() { echo "gpu-check: $*"; exit 3; }
command -v nvidia-smi >/dev/null || fail "nvidia-smi not found: this is not a GPU machine"
command -v python3 >/dev/null || fail "python3 not found"

bin=${RDMATOPO_BIN:-}
if [[ -z $bin ]] && command -v cargo >/dev/null; then
  echo "== cargo build --release -p rdmatopo"
  if timeout 420 cargo build --release -p rdmatopo; then
    bin=target/release/rdmatopo
  else
    echo "cargo build failed; trying a prebuilt binary"
  fi
fi
if [[ -z $bin && -x target/release/rdmatopo ]]; then bin=target/release/rdmatopo; fi
[[ -n $bin && -x $bin ]] || fail "no rdmatopo binary (set RDMATOPO_BIN or build target/release/rdmatopo)"
echo "== rdmatopo: $bin ($("$bin" --version 2>&1))"

echo "== nvidia-smi"
timeout 60 nvidia-smi -L
timeout 60 nvidia-smi topo -m >"$out/nvidia-smi-topo.txt" || fail "nvidia-smi topo -m failed"
cat "$out/nvidia-smi-topo.txt"
timeout 60 nvidia-smi --query-gpu=index,pci.bus_id,uuid,name --format=csv,noheader \
  >"$out/gpus.csv" || fail "nvidia-smi --query-gpu failed"

echo "== rdmatopo topo (live root)"
timeout 60 "$bin" topo >"$out/rdmatopo-topo.txt"
cat "$out/rdmatopo-topo.txt"
timeout 60 "$bin" topo --format json >"$out/rdmatopo-topo.json" || fail "rdmatopo topo --format json failed"
timeout 60 "$bin" inventory --format json >"$out/inventory.json" || fail "rdmatopo inventory failed"

echo "== snapshot"
if timeout 120 "$bin" snapshot -o "$out/snap.tar.gz"; then
  echo "rdmatopo snapshot wrote $out/snap.tar.gz"
else
  # Until `rdmatopo snapshot` exists: the sysfs and procfs files rdmatopo reads, with the
  # NVML and verbs facts of the live run as rdmatopo/nvml.json and verbs.json.
  echo "rdmatopo snapshot unavailable; capturing with python3 tarfile"
  timeout 120 python3 - "$out/snap.tar.gz" "$out/inventory.json" <<'PY' || fail "capture failed"
import io, json, os, sys, tarfile, time
dest, inventory = sys.argv[1], json.load(open(sys.argv[2]))
SKIP = {"config", "rom", "vpd", "remove", "rescan", "reset", "new_id", "remove_id",
        "bind", "unbind", "uevent", "modalias"}
ROOTS = ["/sys/bus/pci/devices", "/sys/class/net", "/sys/class/infiniband",
         "/sys/class/infiniband_verbs", "/sys/devices/virtual/net",
         "/sys/devices/system/node", "/proc/driver/nvidia/gpus"]
FILES = ["/sys/devices/system/cpu/online", "/sys/devices/system/cpu/possible",
         "/sys/module/ib_core/parameters/netns_mode", "/sys/module/nvidia/version",
         "/sys/module/nvidia_peermem/version", "/sys/kernel/mm/memory_peers/nv_mem/version",
         "/proc/driver/nvidia/version", "/proc/cpuinfo", "/proc/net/fib_trie",
         "/proc/net/route", "/proc/self/status", "/proc/self/cgroup",
         "/proc/self/mountinfo", "/proc/self/limits"]
now, added = int(time.time()), set()
tar = tarfile.open(dest, "w:gz")
def add_dir(path):
    if path in added or path == "/": return
    add_dir(os.path.dirname(path)); added.add(path)
    ti = tarfile.TarInfo(path.lstrip("/")); ti.type = tarfile.DIRTYPE; ti.mode = 0o755; ti.mtime = now
    tar.addfile(ti)
def add_file(path):
    if path in added or os.path.basename(path) in SKIP or os.path.basename(path).startswith("resource"):
        return
    try:
        with open(path, "rb") as f: data = f.read(65536)
    except OSError:
        return  # write-only or EINVAL attributes: absent, as in the fixtures
    add_dir(os.path.dirname(path)); added.add(path)
    ti = tarfile.TarInfo(path.lstrip("/")); ti.size = len(data); ti.mode = 0o444; ti.mtime = now
    tar.addfile(ti, io.BytesIO(data))
def add_link(path):
    if path in added: return
    add_dir(os.path.dirname(path)); added.add(path)
    ti = tarfile.TarInfo(path.lstrip("/")); ti.type = tarfile.SYMTYPE
    ti.linkname = os.readlink(path); ti.mtime = now
    tar.addfile(ti)
def walk(path, depth):
    if depth > 12: return
    if os.path.islink(path):
        add_link(path)
        real = os.path.realpath(path)
        if real.startswith("/sys/devices/") and real not in added:
            walk_ancestors(real); walk(real, depth + 1)
    elif os.path.isdir(path):
        add_dir(path)
        try: names = sorted(os.listdir(path))
        except OSError: return
        for n in names:
            if n in ("subsystem", "firmware_node", "power", "msi_irqs", "driver_override"): continue
            walk(os.path.join(path, n), depth + 1)
    elif os.path.isfile(path):
        add_file(path)
def walk_ancestors(real):
    # The attributes of every bridge above a device (its class, numa_node, links).
    parts = real.split("/")
    for i in range(4, len(parts)):
        d = "/".join(parts[:i])
        try: names = os.listdir(d)
        except OSError: continue
        for n in names:
            p = os.path.join(d, n)
            if os.path.isfile(p) and not os.path.islink(p): add_file(p)
for r in ROOTS:
    if os.path.exists(r): walk(r, 0)
for f in FILES:
    if os.path.exists(f): add_file(f)
# Device nodes as empty regular files (only their names matter).
import glob
for dev in sorted(glob.glob("/dev/nvidia*") + glob.glob("/dev/infiniband/*")):
    if os.path.isdir(dev): continue
    add_dir(os.path.dirname(dev)); added.add(dev)
    ti = tarfile.TarInfo(dev.lstrip("/")); ti.mtime = now
    tar.addfile(ti, io.BytesIO(b""))
for key, name in (("nvml", "nvml.json"), ("verbs", "verbs.json")):
    if inventory.get(key):
        data = json.dumps(inventory[key], indent=2).encode()
        add_dir("/rdmatopo")
        ti = tarfile.TarInfo("rdmatopo/" + name); ti.size = len(data); ti.mtime = now
        tar.addfile(ti, io.BytesIO(data))
tar.close()
print(f"captured {len(added)} entries into {dest}")
PY
fi

echo "== replay the snapshot offline"
replay=$(mktemp -d)
tar xzf "$out/snap.tar.gz" -C "$replay" 2>/dev/null || true
replayed=""
for root in "$out/snap.tar.gz" "$replay" "$replay"/*/; do
  if timeout 60 "$bin" topo --root "$root" --format json >"$replay.json" 2>"$replay.err"; then
    replayed=$root; break
  fi
done
[[ -n $replayed ]] && echo "replayed from $replayed" || { echo "replay failed:"; cat "$replay.err"; }

echo "== compare"
python3 - "$out" "${replayed:+$replay.json}" >"$out/compare.txt" <<'PY'
import json, re, sys
out, replay_json = sys.argv[1], (sys.argv[2] if len(sys.argv) > 2 else "")
ansi = re.compile(r"\x1b\[[0-9;]*m")
smi = [ansi.sub("", l) for l in open(f"{out}/nvidia-smi-topo.txt").read().splitlines()]
mine = json.load(open(f"{out}/rdmatopo-topo.json"))
inv = json.load(open(f"{out}/inventory.json"))
problems, checked = [], 0

def bdf(text):  # 00000000:18:00.0 / 0000:18:00.0 -> (0, 0x18, 0, 0)
    rest, fn = text.strip().rsplit(".", 1)
    parts = rest.split(":")
    if len(parts) == 2: parts.insert(0, "0")
    return tuple(int(p, 16) for p in parts) + (int(fn, 16),)

# nvidia-smi's devices: GPUs by index -> bus id, NICs by legend -> RDMA name.
gpu_bus, gpu_uuid = {}, {}
for line in open(f"{out}/gpus.csv"):
    idx, bus, uuid, _name = [f.strip() for f in line.split(",", 3)]
    gpu_bus[f"GPU{idx}"], gpu_uuid[bdf(bus)] = bdf(bus), uuid
nic_name = dict(re.findall(r"^\s*(NIC\d+):\s*(\S+)", "\n".join(smi), re.M))
header_i = next(i for i, l in enumerate(smi) if "\tGPU0" in l or l.lstrip().startswith("GPU0\t"))
cols = [c.strip() for c in smi[header_i].split("\t")][1:]
ndev = next((i for i, c in enumerate(cols) if not re.fullmatch(r"(GPU|NIC)\d+", c)), len(cols))
names = cols[:ndev]
smi_cells, smi_extra = {}, {}
for l in smi[header_i + 1:]:
    if not l.strip(): break
    f = l.split("\t")
    row = f[0].strip()
    for c, v in zip(names, f[1:1 + ndev]):
        smi_cells[(row, c)] = v.strip()
    smi_extra[row] = [x.strip() for x in f[1 + ndev:]]

def ident_smi(n):
    return ("gpu", gpu_bus.get(n)) if n.startswith("GPU") else ("nic", nic_name.get(n))
def ident_mine(d):
    return ("gpu", bdf(d["pci"])) if d["kind"] == "gpu" else ("nic", d.get("rdma"))
mine_by_ident = {ident_mine(d): d["name"] for d in mine["devices"]}
smi_by_ident = {ident_smi(n): n for n in names}
for k in smi_by_ident.keys() - mine_by_ident.keys():
    problems.append(f"{smi_by_ident[k]} {k}: in nvidia-smi, not in rdmatopo")
for k in mine_by_ident.keys() - smi_by_ident.keys():
    problems.append(f"{mine_by_ident[k]} {k}: in rdmatopo, not in nvidia-smi")
common = [k for k in smi_by_ident if k in mine_by_ident]
for a in common:
    for b in common:
        sa, sb, ma, mb = smi_by_ident[a], smi_by_ident[b], mine_by_ident[a], mine_by_ident[b]
        want, got = smi_cells.get((sa, sb)), mine["matrix"].get(ma, {}).get(mb)
        checked += 1
        if want != got:
            problems.append(f"cell {sa}/{sb} (rdmatopo {ma}/{mb}): nvidia-smi {want}, rdmatopo {got}")

def cpus(text):
    s = set()
    for part in filter(None, text.replace(" ", "").split(",")):
        lo, _, hi = part.partition("-")
        if lo.isdigit(): s.update(range(int(lo), int(hi or lo) + 1))
    return s
for a in common:
    if a[0] != "gpu": continue
    sa, ma = smi_by_ident[a], mine_by_ident[a]
    extra = smi_extra.get(sa, [])
    if len(extra) >= 2:
        checked += 2
        if cpus(extra[0]) != cpus(mine["cpu_affinity"].get(ma, "")):
            problems.append(f"{sa} CPU affinity: nvidia-smi {extra[0]}, rdmatopo {mine['cpu_affinity'].get(ma)}")
        if extra[1] != mine["numa_affinity"].get(ma):
            problems.append(f"{sa} NUMA affinity: nvidia-smi {extra[1]}, rdmatopo {mine['numa_affinity'].get(ma)}")
for g in inv.get("gpus", []):
    want = gpu_uuid.get(bdf(g["pci"]))
    checked += 1
    if want != g.get("uuid"):
        problems.append(f"GPU {g['pci']} UUID: nvidia-smi {want}, rdmatopo {g.get('uuid')}")
for d in inv.get("diagnostics", []):
    if d["code"].startswith(("nvml-", "verbs-", "source-")):
        print(f"diagnostic {d['severity']} {d['code']}: {d['message']}")
if replay_json:
    replay = json.load(open(replay_json))
    checked += 1
    if replay["matrix"] != mine["matrix"]:
        problems.append("the snapshot replayed offline gives a different matrix from the live run")
else:
    problems.append("the snapshot could not be replayed offline")
print(f"devices: nvidia-smi {names}; rdmatopo {[d['name'] for d in mine['devices']]}")
print(f"{checked} checks, {len(problems)} differences")
for p in problems: print("DIFF", p)
sys.exit(1 if problems else 0)
PY
rc=$?
cat "$out/compare.txt"
rm -rf "$replay" "$replay.json" "$replay.err" "$out/gpus.csv"
exit $rc
