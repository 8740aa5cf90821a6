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
runs=0 differ=0
# Every command on the directory form of each fixture; two on its archive (read through
# gzip and tar, the same for every command).
for root in fixtures/*/root fixtures/*/root.tar.gz; do
  run=("${commands[@]}")
  [ -f "$root" ] && run=("topo" "doctor")
  for cmd in "${run[@]}"; do
    # shellcheck disable=SC2086 # each command is words
    s=$("$static" $cmd --root "$root" 2>"$scratch/s.err"; echo "exit $?")
    # shellcheck disable=SC2086
    g=$("$glibc" $cmd --root "$root" 2>"$scratch/g.err"; echo "exit $?")
    runs=$((runs + 1))
    if [ "$s" != "$g" ] || ! cmp -s "$scratch/s.err" "$scratch/g.err"; then
      differ=$((differ + 1))
      echo "differs: rdmatopo $cmd --root $root"
      diff <(echo "$g"; cat "$scratch/g.err") <(echo "$s"; cat "$scratch/s.err") | head -20
    fi
  done
done
echo "static build: $runs runs on $(ls -d fixtures/*/root | wc -l) fixtures (directory and archive), $differ differ"
[ "$differ" -eq 0 ]
