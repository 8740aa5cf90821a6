#!/usr/bin/env bash
# How discovery and analysis time and peak memory grow with the number of PCI functions,
# RDMA devices and GIDs: synthetic machines (fixtures/tools/synth.py, written to a temp
# dir, never committed), each measured in its own process by benches/scale.rs.
# Prints a Markdown table per sweep.
#
#   scripts/bench-scale.sh            # 5 runs per point
#   RUNS=11 scripts/bench-scale.sh
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-5}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

bench=$(cargo bench -q -p rdmatopo --bench scale --no-run --message-format=json 2>/dev/null |
  python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "scale" and m.get("executable"):
        print(m["executable"])')

point() { # label, synth.py arguments...
  local label=$1
  shift
  python3 fixtures/tools/synth.py "$work/tree" "$@" >/dev/null
  printf '| %s | ' "$label"
  "$bench" "$work/tree" "$RUNS" | awk -F'\t' '{
    printf "%s | %s | %s | %s | %s | %.1f | %.2f | %.2f | %.1f | %.1f |\n",
      $1, $2, $3, $4, $5, $6, 1000 * $6 / $5, $7, $8 / 1024, $9 / 1024 }'
}

header() {
  echo
  echo "$1"
  echo
  echo "| synth.py | PCI functions | RDMA devices | GID slots | valid GIDs | files read | discovery ms | µs per file | analysis ms | peak RSS after discovery MB | peak RSS after analysis MB |"
  echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
}

header "PCI functions (VFs without RDMA devices; 8 PFs with 16-slot GID tables):"
for vfs in 0 16 32 64 128; do
  point "--vfs $vfs --no-vf-rdma --gids 16" --vfs "$vfs" --no-vf-rdma --gids 16
done

header "GIDs (no VFs; every slot of the 8 PF GID tables valid):"
for gids in 16 32 64 128 256; do
  point "--vfs 0 --gids $gids" --vfs 0 --gids "$gids"
done

header "RDMA devices (every VF bound with its own RDMA device and 255-slot GID table, as on an SR-IOV host):"
for vfs in 8 32 128; do
  point "--vfs $vfs --gids 256" --vfs "$vfs" --gids 256
done
