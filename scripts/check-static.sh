#!/usr/bin/env bash
# The static build answers as the glibc build does: every command below, on every
# bundled fixture, gives the same standard output, standard error and exit status from
# both programs.
#
#   scripts/check-static.sh STATIC_BIN GLIBC_BIN
set -euo pipefail
cd "$(dirname "$0")/.."
static=$1 glibc=$2
commands=(
  "topo" "topo --all" "inventory" "inventory --format json" "doctor" "doctor --format json"
  "nccl-env" "nccl-env --format json" "gids" "gids --all" "netdevs" "qos" "nccl-topo" "k8s nfd" "k8s pod --gpus 1"
  "k8s sriov-device-plugin" "k8s rdma-shared-dev-plugin"
)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

# check_root ROOT N: every command on ROOT from both programs (scratch files N.*); what
# differs, then a last line "runs R differ D".
check_root() {
  local root=$1 n=$2 runs=0 differ=0 cmd s g
  local run=("${commands[@]}")
  [ -f "$root" ] && run=("topo" "doctor")
  for cmd in "${run[@]}"; do
    # shellcheck disable=SC2086 # each command is words
    s=$("$static" $cmd --root "$root" 2>"$scratch/$n.s.err"; echo "exit $?")
    # shellcheck disable=SC2086
    g=$("$glibc" $cmd --root "$root" 2>"$scratch/$n.g.err"; echo "exit $?")
    runs=$((runs + 1))
    if [ "$s" != "$g" ] || ! cmp -s "$scratch/$n.s.err" "$scratch/$n.g.err"; then
      differ=$((differ + 1))
      echo "differs: rdmatopo $cmd --root $root"
      diff <(echo "$g"; cat "$scratch/$n.g.err") <(echo "$s"; cat "$scratch/$n.s.err") | head -20 || true
    fi
  done
  echo "runs $runs differ $differ"
}

# Every command on the directory form of each fixture; two on its archive (read through
# gzip and tar, the same for every command). One root per CPU at a time; the reports in
# the fixtures' order.
roots=(fixtures/*/root fixtures/*/root.tar.gz)
cpus=$(nproc)
for n in "${!roots[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$cpus" ]; do wait -n || true; done
  check_root "${roots[$n]}" "$n" >"$scratch/$n.out" &
done
wait
runs=0 differ=0
for n in "${!roots[@]}"; do
  sed '$d' "$scratch/$n.out"
  last=$(tail -n 1 "$scratch/$n.out")
  if [[ $last =~ ^runs\ ([0-9]+)\ differ\ ([0-9]+)$ ]]; then
    runs=$((runs + BASH_REMATCH[1])) differ=$((differ + BASH_REMATCH[2]))
  else
    echo "the check of ${roots[$n]} did not finish: $last"
    differ=$((differ + 1))
  fi
done
echo "static build: $runs runs on $(ls -d fixtures/*/root | wc -l) fixtures (directory and archive), $differ differ"
[ "$differ" -eq 0 ]
