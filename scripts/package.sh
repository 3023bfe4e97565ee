#!/usr/bin/env bash
# Builds the Debian package, dist/framemill_<version>_amd64.deb (run as root on Debian 12):
# the binary, the model converter `models fetch` runs, default.yaml, the man page, LICENSE
# and NOTICE, as `cmake --install` lays them out. CPU-only (FRAMEMILL_CUDA=OFF): a CUDA
# build links libcudart, which no Debian package provides for dpkg-shlibdeps to name
# (README.md, "Packages"). The binary runs every stage on the CPU, as framemill does on a
# machine without a GPU. scripts/test-package.sh installs and runs it in a clean root.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
build=build-pkg
# FRAMEMILL_CUDA=ON (untested) builds the CUDA variant where CUDA's runtime is a dpkg package
# (NVIDIA's apt repository: cuda-cudart-13-0), which dpkg-shlibdeps then puts in Depends.
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFRAMEMILL_CUDA="${FRAMEMILL_CUDA:-OFF}" \
      -DFRAMEMILL_BUILD_TESTS=OFF -DFRAMEMILL_BUILD_BENCH=OFF >/dev/null
ninja -C "$build"
mkdir -p dist
(cd "$build" && cpack -G DEB -B "$PWD/../dist" >/dev/null)
rm -rf dist/_CPack_Packages
deb=$(ls -t dist/framemill_*_amd64.deb | head -1)
echo "package: $deb ($(du -h "$deb" | cut -f1))"
dpkg-deb -f "$deb" Package Version Depends
