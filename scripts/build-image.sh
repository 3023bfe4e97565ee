#!/usr/bin/env bash
# Builds the container image localhost/framemill:<version> from Containerfile with buildah
# (run as root):
#   scripts/build-image.sh [--base IMAGE]
# Without --base it makes a Debian 12 base from Debian's packages itself (mmdebstrap, then
# `podman import`), for a machine that reaches no registry; with a registry,
# `--base debian:12` (or `podman build --build-arg BASE=debian:12 .`) does the same.
# BUILDAH_ISOLATION passes buildah's --isolation (scripts/test-image.sh sets what its machine
# needs).
set -euo pipefail
cd "$(dirname "$0")/.."
version=$(sed -n 's/^project(framemill VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)
base=""
if [ "${1:-}" = --base ]; then base=$2; fi
if [ -z "$base" ]; then
  base=localhost/framemill-base:bookworm
  if ! podman image exists "$base"; then
    command -v mmdebstrap >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mmdebstrap >/dev/null
    root=$(mktemp -d)
    mmdebstrap --quiet --variant=apt --include=ca-certificates bookworm "$root"
    tar -C "$root" -c . | podman import - "$base" >/dev/null
    rm -rf "$root"
  fi
fi
image=localhost/framemill:$version
buildah bud --quiet ${BUILDAH_ISOLATION:+--isolation "$BUILDAH_ISOLATION"} --build-arg BASE="$base" \
  -t "$image" -f Containerfile .
podman image ls "$image"
