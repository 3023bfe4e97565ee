#!/usr/bin/env bash
# Builds framemill and runs every test (unit and end-to-end) with ctest. Where nvcc is
# present the default build includes CUDA; the CPU-only build (-DFRAMEMILL_CUDA=OFF)
# is then built and tested as well, so both variants pass the whole suite.
# Device tests skip, with the reason, where no NVIDIA GPU is visible.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
(cd build && ctest --output-on-failure -j2 --timeout 900)
if grep -q "FRAMEMILL_WITH_CUDA:INTERNAL=ON\|CUDA backend ON" build/CMakeCache.txt 2>/dev/null || \
   [ -x /usr/local/cuda/bin/nvcc ] || command -v nvcc >/dev/null; then
  echo "== CPU-only build (FRAMEMILL_CUDA=OFF) =="
  cmake -S . -B build-cpu -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFRAMEMILL_CUDA=OFF \
        -DFRAMEMILL_BUILD_BENCH=OFF >/dev/null
  ninja -C build-cpu
  (cd build-cpu && ctest --output-on-failure -j2 --timeout 900)
fi
