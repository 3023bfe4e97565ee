#!/usr/bin/env bash
# The whole device check of issue 31, as one command on a lent GPU machine (DEVELOPERS.md,
# "GPU"): unpack the bundle that scripts/bundle-gpu.sh packed, then
#   1. the device tests (every CUDA path against its CPU twin)      -> gpu_tests.txt
#   2. gpu_bench: backends, tuner against a sweep, the engine's models in fp32 and fp16,
#      dense flow, the patch search                                 -> gpu_bench.txt
#   3. a real out-of-memory: scripts/gpu-hog.py holds all but HOG_LEAVE_MIB of the
#      device, then the ladder runs with a limit above what is free -> ladder.txt
#   4. the same machine's CPU side: cv2.dnn, DIS, video decode    -> cpu_side.txt
# Each step has its own time limit, so one that hangs does not take the others with it.
# STEPS picks steps (default "tests bench ladder cpu").
#
#   scripts/gpu-device-run.sh [ARCHIVE]     # default .gpu-bundle.tar.xz; logs to $OUT or $LOG_DIR
set -uo pipefail
archive=${1:-.gpu-bundle.tar.xz}
out=${OUT:-${LOG_DIR:-/tmp/framemill-gpu-logs}}
dir=${BUNDLE_UNPACK:-/tmp/framemill-gpu-bundle}
mkdir -p "$out"
rm -rf "$dir" && mkdir -p "$dir"
python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$archive" "$dir" || exit 1
step() { echo "== $(date -u +%T) $*"; }
steps=" ${STEPS:-tests bench ladder cpu} "

if [[ $steps == *" tests "* ]]; then
step "device tests"
LOG_DIR=$out RUN_BENCH=0 timeout "${TESTS_S:-150}" "$dir/run.sh" 2>&1 | tail -3
fi
if [[ $steps == *" bench "* ]]; then
step "gpu_bench"
LOG_DIR=$out RUN_TESTS=0 timeout "${BENCH_S:-200}" "$dir/run.sh" --min_time="${MIN_TIME:-0.5}" \
  --engine_batches=1,4,16,64,256 \
  --benchmarks=luma_stats,preprocess_fp32,preprocess_fp16,tuner_vs_sweep,engine,flow,patch_match 2>&1 | tail -30
fi

if [[ $steps == *" ladder "* ]]; then
step "real out-of-memory (hog leaves ${HOG_LEAVE_MIB:-1536} MiB)"
rm -f /tmp/framemill-hog.ready
python3 "$dir/gpu-hog.py" "${HOG_LEAVE_MIB:-1536}" /tmp/framemill-hog.ready >"$out/ladder.txt" 2>&1 &
hog=$!
for _ in $(seq 120); do [ -f /tmp/framemill-hog.ready ] && break; kill -0 "$hog" 2>/dev/null || break; sleep 0.5; done
nvidia-smi --query-gpu=memory.used,memory.total --format=csv >>"$out/ladder.txt" 2>&1
LOG_DIR=$out RUN_TESTS=0 BENCH_LOG=ladder_bench.txt timeout "${LADDER_S:-60}" "$dir/run.sh" \
  --benchmarks=ladder_real_oom 2>&1 | tail -3
kill "$hog" 2>/dev/null; wait "$hog" 2>/dev/null
cat "$out/ladder_bench.txt" >>"$out/ladder.txt" && rm -f "$out/ladder_bench.txt"
fi

if [[ $steps == *" cpu "* ]]; then
step "CPU side"
timeout "${CPU_S:-100}" python3 "$dir/device_cpu_side.py" --models "$dir/models" --videos "$dir/videos" \
  --min_time "${MIN_TIME:-0.5}" >"$out/cpu_side.txt" 2>&1
tail -40 "$out/cpu_side.txt"
fi
# 5 (STEPS=share, not in the default set). N workers on one device, each its own process,
# CUDA context and model copy, as `framemill run` starts them today (issue 30): blazeface's
# engine at batch 16 in N gpu_bench processes at once; each one's images/s and the device
# memory each process holds.                                                  -> share.txt
if [[ $steps == *" share "* ]]; then
step "N processes sharing the device"
mkdir -p /tmp/framemill-share-models && ln -sfn "$dir/models/blazeface" /tmp/framemill-share-models/blazeface
for n in ${SHARE_N:-1 2 4 8 16}; do
  pids=()
  for i in $(seq "$n"); do
    LD_LIBRARY_PATH="$dir/lib:$dir/lib/fallback" timeout 60 "$dir/bin/gpu_bench" --benchmarks=engine \
      --models=/tmp/framemill-share-models --engine_batches=16 --min_time="${SHARE_S:-4}" \
      >"/tmp/framemill-share-$n-$i.txt" 2>&1 &
    pids+=($!)
  done
  sleep 3
  nvidia-smi --query-compute-apps=pid,used_gpu_memory --format=csv,noheader >"/tmp/framemill-share-$n-mem.txt" 2>&1
  nvidia-smi --query-gpu=memory.used,utilization.gpu --format=csv,noheader >>"/tmp/framemill-share-$n-mem.txt" 2>&1
  wait "${pids[@]}"
  { echo "== $n process(es)"; grep -h "cuda fp.. batch  16 :" /tmp/framemill-share-"$n"-[0-9]*.txt
    echo "-- device memory per process (pid, MiB), then used and utilization 3 s in:"
    cat "/tmp/framemill-share-$n-mem.txt"; } >>"$out/share.txt"
done
tail -60 "$out/share.txt"
fi
step "done; logs in $out"
