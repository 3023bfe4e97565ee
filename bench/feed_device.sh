#!/usr/bin/env bash
# Feeding the device (issue 38): where a device worker's time goes, and the whole run on the
# CPU, against an earlier build. Plain workloads, each printing its setup, one after another:
#
#   split  the simulated device (GPU_BACKEND=sim), one worker, the neural stages (categorize,
#          faces, pose, segment) over the first SPLIT_PHOTOS photos: per stage the mean ms
#          per photo of decode / host / device / wait (results' time split), and the host side
#          (decode + host) summed over the stages. "before" is FRAMEMILL_BEFORE_BIN with
#          every stage decoding its own picture on the worker's thread (picture cache 0, no
#          decode threads): the behaviour of cc5d81d with the time split recorded (build it
#          from this tree with models/decode.cc and models/dnn_model.cc as cc5d81d had them);
#          "after" is this build's defaults.
#   cpu    the CPU alone (GPU_BACKEND=cpu), --workers 2, every default stage, ROUNDS rounds of
#          FRAMEMILL_BASE_BIN (cc5d81d) and this build alternately, each on a fresh store:
#          wall time, each stage's job time, inpainting's ms per photo; then the decisions of
#          the last round compared (../shared/gpu-e2e/decide.py, or DECIDE) and the raw
#          values (bench/compare_results.py).
#
#   bench/feed_device.sh PHOTO_DIR [WORKLOADS]    # default: split,cpu
#   PHOTO_DIR: e.g. 120 photos from ../shared/gpu-e2e/gen-photos.py over Debian's samples:
#     /usr/bin/python3 ../shared/gpu-e2e/gen-photos.py sample-data/photos /tmp/p120 120
#   FRAMEMILL_BASE_BIN: cc5d81d's binary (git worktree add /tmp/cc5d81d cc5d81d, then
#     scripts/build.sh framemill there); FRAMEMILL_BEFORE_BIN as described under split.
set -euo pipefail
cd "$(dirname "$0")/.."
photos=$(realpath "$1")
workloads=${2:-split,cpu}
fm=${FRAMEMILL_BIN:-$PWD/build/framemill}
base=${FRAMEMILL_BASE_BIN:-}
before=${FRAMEMILL_BEFORE_BIN:-}
rounds=${ROUNDS:-3}
split_photos=${SPLIT_PHOTOS:-20}
decide=${DECIDE:-$PWD/../shared/gpu-e2e/decide.py}
work=$(mktemp -d /tmp/framemill-feed-XXXXXX)
trap 'rm -rf "$work"' EXIT
export FRAMEMILL_MODELS=${FRAMEMILL_MODELS:-$HOME/.cache/framemill/models} LOG_LEVEL=warn

echo "framemill feed_device"
echo "Date:       $(date)"
echo "CPU:        $(nproc) x $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo "Photos:     $photos: $(find "$photos" -type f | wc -l) files, $(du -sh "$photos" | cut -f1)"
echo "Binaries:   this $fm; base ${base:-none}; before ${before:-none}"
echo "Workloads:  $workloads (rounds $rounds, split photos $split_photos)"
echo "------------------------------------------------------------------"

# run NAME BIN DATA WORKERS STAGES [VAR=value...]: a fresh store, enqueue, run; prints wall.
run() {
  local name=$1 bin=$2 data=$3 workers=$4 stages=$5
  shift 5
  local d=$work/$name
  rm -rf "$d" && mkdir -p "$d"
  "$bin" enqueue --db "$d/fm.db" --stages "$stages" "$data" > /dev/null
  local t0 t1
  t0=$(date +%s.%N)
  env "$@" "$bin" run --db "$d/fm.db" --workers "$workers" --stages "$stages" --out "$d/out" > "$d/run.log" 2>&1 || true
  t1=$(date +%s.%N)
  "$bin" export --db "$d/fm.db" --format jsonl -o "$d/out.jsonl" > /dev/null 2>&1 || true
  awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.1f", b-a}'
}

# Per stage: jobs, mean ms, and (when recorded) the mean split; the host side of the neural
# stages summed.
split_table() {
  /usr/bin/python3 - "$1" <<'EOF'
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
cols = {r[1] for r in c.execute("PRAGMA table_info(results)")}
has = "decode_ms" in cols
q = ("SELECT j.stage, count(*), avg(r.run_ms)" + (", avg(r.decode_ms), avg(r.host_ms), avg(r.device_ms), avg(r.wait_ms)" if has else "") +
     " FROM results r JOIN jobs j ON j.id = r.job_id JOIN items i ON i.id = j.item_id WHERE i.kind = 1 GROUP BY 1 ORDER BY 1")
side = 0.0
for row in c.execute(q):
    if has:
        st, n, run, dec, host, dev, wait = row
        print(f"    {st:11s} {n:4d} photos  {run:7.1f} ms:  decode {dec:6.1f}  host {host:6.1f}  device {dev:7.1f}  wait {wait:6.1f}")
        if st in ("categorize", "faces", "pose", "segment"): side += dec + host
    else:
        print(f"    {row[0]:11s} {row[1]:4d} photos  {row[2]:7.1f} ms")
if has: print(f"    host side of a device worker per photo (decode + host, four neural stages): {side:.1f} ms")
EOF
}

if [[ ",$workloads," == *,split,* ]]; then
  sub=$work/split-photos
  mkdir -p "$sub"
  find "$photos" -type f | sort | head -n "$split_photos" | xargs -I{} cp {} "$sub/"
  neural=categorize,faces,pose,segment
  echo "split: GPU_BACKEND=sim, 1 worker, $neural, $split_photos photos"
  if [ -n "$before" ]; then
    w=$(run split_before "$before" "$sub" 1 "$neural" GPU_BACKEND=sim FRAMEMILL_PICTURE_CACHE_MB=0 FRAMEMILL_DECODE_THREADS=0)
    echo "  before (each stage decodes on the worker's thread): $w s"
    split_table "$work/split_before/fm.db"
  fi
  w=$(run split_after "$fm" "$sub" 1 "$neural" GPU_BACKEND=sim)
  echo "  after (one decode per photo, decoded ahead on run.decode_threads): $w s"
  split_table "$work/split_after/fm.db"
fi

if [[ ",$workloads," == *,cpu,* ]]; then
  echo "cpu: GPU_BACKEND=cpu, --workers 2, every default stage, $rounds round(s), base and this build alternately"
  for r in $(seq "$rounds"); do
    for who in base this; do
      bin=$fm
      if [ "$who" = base ]; then
        [ -n "$base" ] || continue
        bin=$base
      fi
      w=$(run "cpu_${who}_$r" "$bin" "$photos" 2 all GPU_BACKEND=cpu)
      per=$(sqlite3 "$work/cpu_${who}_$r/fm.db" "SELECT group_concat(s, '  ') FROM (SELECT j.stage || ' ' || printf('%.1f', sum(r.run_ms) / 1000.0) || ' s' AS s FROM results r JOIN jobs j ON j.id = r.job_id GROUP BY j.stage ORDER BY j.stage)")
      inp=$(sqlite3 "$work/cpu_${who}_$r/fm.db" "SELECT printf('%.0f', avg(r.run_ms)) FROM results r JOIN jobs j ON j.id = r.job_id WHERE j.stage = 'inpaint'")
      echo "  round $r $who: $w s wall; inpaint $inp ms/photo; job time: $per"
    done
  done
  if [ -n "$base" ]; then
    echo "  decisions, this build against base (round $rounds):"
    /usr/bin/python3 "$decide" "$work/cpu_base_$rounds/out.jsonl" "$work/cpu_this_$rounds/out.jsonl" | sed 's/^/    /'
    echo "  raw values (compare_results.py; inpaint's method and fill are meant to differ):"
    /usr/bin/python3 bench/compare_results.py "$work/cpu_base_$rounds/out.jsonl" "$work/cpu_this_$rounds/out.jsonl" | grep -v "MISMATCH inpaint .method" | tail -14 | sed "s/^/    /" || true
  fi
fi
