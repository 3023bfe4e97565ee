#!/usr/bin/env bash
# One round on a lent GPU machine (DEVELOPERS.md, "GPU"), before and after a change, in one
# call: the device tests, gpu_bench, and the whole binary end to end against the same
# machine's 16 cores and against the binary of BASE (a commit), all on one bundle.
#
#   scripts/gpu-round.sh pack BASE OUT_DIR   # here: builds, packs OUT_DIR/part.00, part.01, ...
#   bash /tmp/fm/e2e/gpu-round.sh run        # there, after unpacking the parts (below)
#
# pack builds build-gpu/ (CUDA for sm_90 only: the lent machines are H100/H200, and one
# architecture keeps the binaries small enough to travel) with framemill, the device tests
# and gpu_bench; builds BASE's framemill the same way in a worktree (/tmp/framemill-base);
# packs them with ../shared/gpu-e2e/make-bundle.sh (the models in MODELS, sample-data/) and
# splits the archive into parts of PART_MB (default 55: a device call carries 64 MiB with
# the checkout). Carry one part per call into a git-ignored folder, move it to /tmp, and in
# the last call:
#   cat /tmp/part.* | python3 -c "import lzma, sys, tarfile; tarfile.open(fileobj=lzma.open(sys.stdin.buffer), mode='r|').extractall('/tmp/fm')"
#   OUT=$OUT bash /tmp/fm/e2e/gpu-round.sh run
# run: (1) framemill_gpu_tests, every CUDA path and model against its CPU twin; (2)
# ../shared/gpu-e2e/run.sh on GEN_PHOTOS (600) photos and the 3 videos, STAGES (every stage
# but dedup): cpu16 (the reference), gpu16 (the defaults), fp32 (GPU_PRECISION=fp32), oom4
# (all but 2.5 GB of the device held by another process); (3) BASE's binary on the same
# data, base16; decide.py of each against cpu16; (4) gpu_bench engine (every bundled model,
# fp32 and fp16) and hole_fill. Logs and res.tar.gz land in $OUT. 5.3 minutes on an H200.
# Settings: RUNS and GEN_PHOTOS (run.sh's), OOM=0 (no memory-pressure run), BASE_RUN=0 (no
# base16), BENCH (gpu_bench's workloads), BENCH_MODELS (a subset of the bundle's models).
set -uo pipefail

pack() {
  local base=$1 out=$2 root
  set -e
  root=$(cd "$(dirname "$0")/.." && pwd)
  cd "$root"
  local flags=(-G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFRAMEMILL_CUDA=ON -DCMAKE_CUDA_STANDARD=17
               -DCMAKE_CUDA_ARCHITECTURES=90 -DFRAMEMILL_BUILD_BENCH=ON)
  cmake -S . -B build-gpu "${flags[@]}" >/dev/null
  ninja -C build-gpu framemill framemill_gpu_tests gpu_bench
  local wt=/tmp/framemill-base
  if [ ! -d "$wt" ]; then git worktree add --detach "$wt" "$base"; else git -C "$wt" checkout --detach "$base"; fi
  cmake -S "$wt" -B "$wt/build-gpu" "${flags[@]}" >/dev/null
  ninja -C "$wt/build-gpu" framemill
  MODELS=${MODELS:-blazeface faceres facemesh centernet yolov8s nsfw movenet-multipose selfie silero-vad mobilefacenet movenet-lightning blazepose-full} \
    PART_MB=${PART_MB:-55} ../shared/gpu-e2e/make-bundle.sh build-gpu/framemill "${MODELS_DIR:-.cache/models}" sample-data "$out"
  local e=$out/e2e
  # Models the e2e run does not use travel for the device tests and gpu_bench alone, which
  # read the engine's graph: their ONNX copy stays here.
  for m in mobilefacenet movenet-lightning blazepose-full; do rm -f "$e/models/$m/model.onnx"; done
  cp "$wt/build-gpu/framemill" "$e/bin/framemill-base" && strip --strip-debug "$e/bin/framemill-base"
  for exe in framemill_gpu_tests gpu_bench; do cp "build-gpu/$exe" "$e/bin/" && strip --strip-debug "$e/bin/$exe"; done
  if LD_LIBRARY_PATH="$e/lib" ldd "$e"/bin/* | grep "not found"; then echo "pack: a library is missing" >&2; exit 1; fi
  g++ -std=c++20 -O2 bench/gpu_bench_data.cc $(pkg-config --cflags-only-I opencv4 | sed 's/-I/-isystem /g') \
    -lopencv_imgcodecs -lopencv_imgproc -lopencv_core -o build-gpu/gpu_bench_data
  build-gpu/gpu_bench_data --out="$e/photos.raw" --max_mb=4
  cp scripts/gpu-round.sh "$e/"
  (cd "$out" && rm -f part.* e2e.tar.xz && tar cf - e2e | xz -6 -T0 >e2e.tar.xz &&
   split -b "$(( ${PART_MB:-55} * 1000000 ))" -d e2e.tar.xz part.)
  ls -l "$out"/part.*
}

run() {
  local e out
  e=$(cd "$(dirname "$0")" && pwd)
  out=${OUT:-/tmp/out}
  mkdir -p "$out"
  export LD_LIBRARY_PATH=$e/lib FRAMEMILL_MODELS=$e/models
  step() { echo "== $(date -u +%T) $*"; }
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$out/nvidia-smi.txt"
  step "device tests"
  timeout "${TESTS_S:-120}" "$e/bin/framemill_gpu_tests" --gtest_color=no >"$out/gpu_tests.txt" 2>&1
  echo "framemill_gpu_tests exit $?" | tee -a "$out/gpu_tests.txt"
  grep -E "^\[  (PASSED|FAILED|SKIPPED) |^\[  FAILED  \]|tests ran" "$out/gpu_tests.txt" | tail -15
  step "end to end: this binary"
  export STAGES=${STAGES:-lighting,motion,categorize,faces,face_clusters,pose,segment,inpaint,audio_sync}
  GEN_PHOTOS=${GEN_PHOTOS:-600} RUNS=${RUNS:-"cpu16:16:ALL_GPU=false gpu16:16 fp32:16:GPU_PRECISION=fp32"} \
    OUT=$out bash "$e/run.sh" >"$out/e2e.txt" 2>&1
  grep "^== " "$out/e2e.txt"
  cp /tmp/res/gpu.txt "$out/gpu-command.txt" 2>/dev/null
  if [ "${BASE_RUN:-1}" = 1 ] && [ -x "$e/bin/framemill-base" ]; then
  step "end to end: the base binary on the same data"
  local b=/tmp/fm/e2e-base
  rm -rf "$b" && mkdir -p "$b/bin"
  for f in lib models run.sh decide.py compare_results.py gen-photos.py gpu-hog.py; do ln -s "$e/$f" "$b/$f"; done
  ln -s "$e/bin/framemill-base" "$b/bin/framemill"
  if [ -d /tmp/gen ]; then ln -s /tmp/gen "$b/data"; else ln -s "$e/data" "$b/data"; fi
  GEN_PHOTOS=0 OOM=0 RUNS="base16:16" OUT=$out bash "$b/run.sh" >"$out/e2e-base.txt" 2>&1
  grep "^== " "$out/e2e-base.txt"
  fi
  for n in $(ls /tmp/res/*.jsonl | xargs -n1 basename | sed 's/\.jsonl$//' | grep -v '^cpu16$'); do
    [ -f "/tmp/res/$n.jsonl" ] || continue
    python3 "$e/decide.py" /tmp/res/cpu16.jsonl "/tmp/res/$n.jsonl" >"$out/decide-$n.txt" 2>&1
    echo "-- decide $n against cpu16"; cat "$out/decide-$n.txt"
  done
  for f in /tmp/res/*.status.txt; do echo "-- $f"; sed -n '/time per item/,$p' "$f" | head -30; done
  for f in /tmp/res/*.dmon.txt; do
    awk -v f="$(basename "$f")" 'NR>2 && $1!~/#/ {s+=$2; n++; if ($2>0) b++} END {if (n) printf "%s: mean SM %.1f%%, busy %d of %d s\n", f, s/n, b, n}' "$f"
  done
  tar czf "$out/res.tar.gz" -C /tmp res 2>/dev/null
  step "gpu_bench"
  local models=$e/models
  if [ -n "${BENCH_MODELS:-}" ]; then  # a subset: links to the bundle's models
    models=/tmp/bench-models && rm -rf "$models" && mkdir -p "$models"
    for m in $BENCH_MODELS; do ln -s "$e/models/$m" "$models/$m"; done
  fi
  timeout "${BENCH_S:-90}" "$e/bin/gpu_bench" --data="$e/photos.raw" --models="$models" \
    --benchmarks="${BENCH:-engine,hole_fill}" --engine_batches=1,16,64 --min_time="${MIN_TIME:-0.15}" >"$out/gpu_bench.txt" 2>&1
  sed -n '/^Summary/,$p' "$out/gpu_bench.txt"
  step "done"
}

case "${1:-}" in
  pack) shift; pack "$@" ;;
  run) run ;;
  *) echo "usage: $0 pack BASE OUT_DIR | run" >&2; exit 2 ;;
esac
