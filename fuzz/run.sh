#!/usr/bin/env bash
# Run every fuzz target (or those named) for a fixed budget on the stable toolchain.
#
#   fuzz/run.sh                 # each target 60 s (the documented budget)
#   BUDGET=10 fuzz/run.sh       # CI smoke
#   fuzz/run.sh discover gid    # only these
#   JOBS=1 fuzz/run.sh          # one target at a time (default: one per CPU)
#
# Each libFuzzer process keeps one core busy, so targets run side by side, one per CPU.
# After the first crash no other target starts; the run exits non-zero, libFuzzer
# leaves the input in fuzz/artifacts/<target>/, and the command that reproduces it is
# printed.
set -euo pipefail
cd "$(dirname "$0")"

budget=${BUDGET:-60}
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  mapfile -t targets < <(cargo fuzz list)
fi

# Build once, then run the binaries: the tree may change while the targets run.
cargo fuzz build --sanitizer none
bin="target/$(rustc -vV | sed -n 's/^host: //p')/release"
jobs=${JOBS:-$(nproc)}
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
declare -A running=() # pid -> target
failed=

# report TARGET STATUS: its line, or its log's end and how to reproduce the crash.
report() {
  local t=$1 status=$2 log=$logs/$1 runs rss
  if [ "$status" != 0 ]; then
    grep -v '^ *[0-9]*: \|^ *at ' "$log" | tail -n 40
    echo "fuzz target $t FAILED; reproduce: cargo fuzz run --sanitizer none $t fuzz/artifacts/$t/<file>" >&2
    failed=1
    return
  fi
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  rss=$(sed -n 's/^stat::peak_rss_mb: *//p' "$log")
  printf '%-14s %3ss  %9s runs  peak %s MB  ok\n' "$t" "$budget" "$runs" "$rss"
}

# Waits for one running target and reports it.
finish_one() {
  local pid status=0
  wait -n -p pid || status=$?
  report "${running[$pid]}" "$status"
  unset "running[$pid]"
}

for t in "${targets[@]}"; do
  while [ ${#running[@]} -ge "$jobs" ]; do finish_one; done
  [ -z "$failed" ] || break
  mkdir -p "corpus/$t" "artifacts/$t"
  # -timeout: one input may take at most 10 s (a hang is a bug);
  # -rss_limit_mb: memory must stay bounded; -max_len: 4 KiB, the size of a config space.
  "$bin/$t" "corpus/$t" -artifact_prefix="artifacts/$t/" \
    -max_total_time="$budget" -timeout=10 -rss_limit_mb=1024 -max_len=4096 \
    -print_final_stats=1 >"$logs/$t" 2>&1 &
  running[$!]=$t
done
while [ ${#running[@]} -gt 0 ]; do finish_one; done
[ -z "$failed" ]
