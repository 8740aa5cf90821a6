#!/usr/bin/env bash
# Run every fuzz target (or those named) for a fixed budget on the stable toolchain.
#
#   fuzz/run.sh                 # each target 60 s (the documented budget)
#   BUDGET=10 fuzz/run.sh       # CI smoke
#   fuzz/run.sh discover gid    # only these
#
# Exits non-zero on the first crash; libFuzzer leaves the input in
# fuzz/artifacts/<target>/ and prints the command that reproduces it.
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
log=$(mktemp)
trap 'rm -f "$log"' EXIT
for t in "${targets[@]}"; do
  mkdir -p "corpus/$t" "artifacts/$t"
  # -timeout: one input may take at most 10 s (a hang is a bug);
  # -rss_limit_mb: memory must stay bounded; -max_len: 4 KiB, the size of a config space.
  if ! "$bin/$t" "corpus/$t" -artifact_prefix="artifacts/$t/" \
    -max_total_time="$budget" -timeout=10 -rss_limit_mb=1024 -max_len=4096 \
    -print_final_stats=1 >"$log" 2>&1; then
    grep -v '^ *[0-9]*: \|^ *at ' "$log" | tail -n 40
    echo "fuzz target $t FAILED; reproduce: cargo fuzz run --sanitizer none $t fuzz/artifacts/$t/<file>" >&2
    exit 1
  fi
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  rss=$(sed -n 's/^stat::peak_rss_mb: *//p' "$log")
  printf '%-12s %3ss  %9s runs  peak %s MB  ok\n' "$t" "$budget" "$runs" "$rss"
done
