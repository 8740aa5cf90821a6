#!/usr/bin/env bash
# The OCI image of the static build, made without a container daemon (umoci, as root
# or with --rootless), reproducibly: the same binaries and SOURCE_DATE_EPOCH give the
# same digest. Writes target/image/rdmatopo-<version>.oci.tar (or $OUT/...), an
# oci-archive that skopeo copies to a registry:
#
#   scripts/build-image.sh
#   skopeo copy oci-archive:target/image/rdmatopo-0.2.0.oci.tar \
#     docker://ghcr.io/OWNER/rdmatopo:0.2.0
#
# The image: /usr/local/bin/rdmatopo (static, musl) and beside it rdmatopo-nvml, the
# NVML helper, linked with glibc like the driver's libnvidia-ml.so it loads, so the
# glibc it needs (the build machine's, named by ldd) is in the image too. It runs as
# uid 65532 unless the pod says otherwise (deploy/ runs as uid 0 with every
# capability dropped: deploy/base/daemonset.yaml says why).
#
# Needs: umoci (Debian package `umoci`) and GNU tar. The binaries
# come from scripts/build-static.sh (run here when target/static has none; BIN_DIR
# names another directory).
set -euo pipefail
cd "$(dirname "$0")/.."

image=${IMAGE:-ghcr.io/rdmatopo/rdmatopo}
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)
bin=${BIN_DIR:-target/static}
out=${OUT:-target/image}
source_url=${SOURCE_URL:-https://github.com/rdmatopo/rdmatopo}
revision=$(git rev-parse HEAD 2>/dev/null || echo unknown)
# The commit's time unless given: every timestamp in the image is this one.
epoch=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}
created=$(date -u -d "@$epoch" +%Y-%m-%dT%H:%M:%SZ)
case $(uname -m) in
  x86_64) arch=amd64 ;;
  aarch64) arch=arm64 ;;
  *) echo "build-image.sh: no OCI architecture name for $(uname -m)" >&2; exit 1 ;;
esac

command -v umoci >/dev/null || { echo "build-image.sh: umoci is not installed (apt-get install umoci)" >&2; exit 1; }
if [ ! -x "$bin/rdmatopo" ] || [ ! -x "$bin/rdmatopo-nvml" ]; then
  [ -z "${BIN_DIR:-}" ] || { echo "build-image.sh: $bin has no rdmatopo and rdmatopo-nvml" >&2; exit 1; }
  scripts/build-static.sh
fi
if ldd "$bin/rdmatopo" 2>&1 | grep -q '=>'; then
  echo "build-image.sh: $bin/rdmatopo is not the static build" >&2
  exit 1
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# umoci keeps file owners as root only when it runs as root; otherwise --rootless.
rootless=()
[ "$(id -u)" = 0 ] || rootless=(--rootless)
layout="$work/oci"
umoci init --layout "$layout"
umoci new --image "$layout:$version"
# The empty image unpacked, filled, and repacked as one layer (umoci 0.4.7's `insert`
# leaves its layer's tar unterminated).
umoci unpack "${rootless[@]}" --image "$layout:$version" "$work/bundle"
root="$work/bundle/rootfs"
install -D -m 0755 "$bin/rdmatopo" "$root/usr/local/bin/rdmatopo"
install -D -m 0755 "$bin/rdmatopo-nvml" "$root/usr/local/bin/rdmatopo-nvml"
# The helper's shared libraries (the loader and glibc), at the paths it asks for.
for lib in $(ldd "$bin/rdmatopo-nvml" | grep -o '/[^ ]*'); do
  install -D -m 0755 "$(readlink -f "$lib")" "$root$lib"
done
install -D -m 0644 LICENSE-MIT "$root/usr/share/doc/rdmatopo/LICENSE-MIT"
install -D -m 0644 LICENSE-APACHE "$root/usr/share/doc/rdmatopo/LICENSE-APACHE"
if [ -f /usr/share/doc/libc6/copyright ]; then
  install -D -m 0644 /usr/share/doc/libc6/copyright "$root/usr/share/doc/libc6/copyright"
fi
# A writable /tmp is the pod's to give (readOnlyRootFilesystem); the directory exists.
install -d -m 1777 "$root/tmp"
chmod 0755 "$root"
find "$root" -exec touch -h -d "@$epoch" {} +
umoci repack --image "$layout:$version" --history.created "$created" \
  --history.created_by "scripts/build-image.sh" "$work/bundle"
umoci config --image "$layout:$version" --created "$created" --history.created "$created" \
  --history.created_by "scripts/build-image.sh" \
  --os linux --architecture "$arch" \
  --config.user 65532:65532 \
  --config.entrypoint /usr/local/bin/rdmatopo \
  --config.env PATH=/usr/local/bin \
  --config.workingdir / \
  --config.label "org.opencontainers.image.title=rdmatopo" \
  --config.label "org.opencontainers.image.source=$source_url" \
  --config.label "org.opencontainers.image.version=$version" \
  --config.label "org.opencontainers.image.revision=$revision" \
  --config.label "org.opencontainers.image.created=$created" \
  --config.label "org.opencontainers.image.licenses=(MIT OR Apache-2.0) AND LGPL-2.1-or-later" \
  --manifest.annotation "org.opencontainers.image.source=$source_url" \
  --manifest.annotation "org.opencontainers.image.version=$version" \
  --manifest.annotation "org.opencontainers.image.revision=$revision" \
  --manifest.annotation "org.opencontainers.image.created=$created" \
  --manifest.annotation "org.opencontainers.image.licenses=(MIT OR Apache-2.0) AND LGPL-2.1-or-later"
# `umoci config` leaves the earlier manifest and config behind; drop what no tag names.
umoci gc --layout "$layout"

mkdir -p "$out"
archive="$out/rdmatopo-$version.oci.tar"
tar --sort=name --mtime="@$epoch" --owner=0 --group=0 --numeric-owner \
  --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime \
  -cf "$archive.tmp" -C "$layout" .
mv "$archive.tmp" "$archive"
digest=$(sed -n 's/.*"digest":"\(sha256:[0-9a-f]*\)".*/\1/p' "$layout/index.json")
echo "$archive: $image:$version, manifest $digest"
