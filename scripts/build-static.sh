#!/usr/bin/env bash
# The static build of the command: `rdmatopo` linked with musl into one self-contained
# program (no shared library, no dynamic loader), and the `rdmatopo-nvml` helper it runs
# to read NVML, linked with glibc like the NVIDIA driver's library it loads. Both go to
# target/static/ (or $OUT); copy them side by side.
#
# Why: a glibc program pays the dynamic loader and glibc's start-up (it asks the CPU for
# its cache sizes with `cpuid`, each one a trap to the hypervisor on a VM) before any of
# its own work; in a pod that is most of what `rdmatopo topo` costs (BENCHMARKS.md).
#
#   scripts/build-static.sh            # target/static/rdmatopo, target/static/rdmatopo-nvml
#   PROFILE=dev scripts/build-static.sh
#                                      # the same files, unoptimised (scripts/test-all)
set -euo pipefail
cd "$(dirname "$0")/.."
arch=$(uname -m)
target="$arch-unknown-linux-musl"
out=${OUT:-target/static}
profile=${PROFILE:-release}
# Where cargo writes: CARGO_TARGET_DIR, else target/; the `dev` profile to debug/.
built=${CARGO_TARGET_DIR:-target}
dir=$profile
[ "$profile" = dev ] && dir=debug

if ! rustc --print target-libdir --target "$target" >/dev/null 2>&1 \
  || [ ! -d "$(rustc --print target-libdir --target "$target")" ]; then
  rustup target add "$target"
fi
# ring (rustls's crypto, for the API server client) compiles C and assembly for the
# target: cc-rs takes $arch-linux-musl-gcc, else musl-gcc (Debian's musl-tools).
cc_var="CC_${arch}_unknown_linux_musl"
if [ -z "${!cc_var:-}" ] && ! command -v "$arch-linux-musl-gcc" >/dev/null \
  && ! command -v musl-gcc >/dev/null; then
  echo "build-static.sh: no C compiler for $target: install musl-tools (musl-gcc)" >&2
  exit 1
fi
cargo build --profile "$profile" --locked -p rdmatopo --bin rdmatopo \
  --target "$target"
# The helper needs only NVML; with the features the C and Python bindings build the
# library with, the three share one build of it.
cargo build --profile "$profile" --locked -p rdmatopo --bin rdmatopo-nvml --no-default-features \
  --features nvml,pci-names
mkdir -p "$out"
cp "$built/$target/$dir/rdmatopo" "$built/$dir/rdmatopo-nvml" "$out/"
echo "$out/rdmatopo (static, $target) and $out/rdmatopo-nvml (glibc)"
