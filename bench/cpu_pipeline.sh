#!/usr/bin/env bash
# The whole CPU pipeline, build against build, in one sitting: every default stage on
# gen-photos' 120 photos and the 3 sample videos (opencv-doc), 2 workers, GPU_BACKEND=cpu,
# one run a build, back to back, each under /usr/bin/time -v (the largest process's peak RSS);
# then ../shared/gpu-e2e/decide.py between the first build's results and each other's.
#   bench/cpu_pipeline.sh WORKDIR NAME=BINARY[@MODELS] [NAME=BINARY[@MODELS]...]
#   e.g. bench/cpu_pipeline.sh /tmp/pipe f34=/tmp/f34/build/framemill@/tmp/m34 new=build/framemill
# MODELS: the build's own model directory (FRAMEMILL_MODELS; its own `models fetch` made it), for
# a build whose graph form differs (an fmg of version 1); the environment's otherwise.
# ISA=AVX2 runs every build as an AVX2 machine would, on an AVX-512 one: oneDNN capped
# (ONEDNN_MAX_CPU_ISA) and OpenCV's own dispatch too (OPENCV_CPU_DISABLE: cv::dnn, resizes).
# Prints, per build: wall seconds, peak RSS, and the median ms a photo of categorize, faces,
# pose and segment (`status --json` ms_per_item); then decide.py's checks.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
work="$1"; shift
mkdir -p "$work"
if [ ! -d "$work/set/photos" ]; then
  src=/usr/share/doc/opencv-doc/examples/data
  mkdir -p "$work/src" "$work/set/videos"
  cp -n "$src"/*.jpg "$src"/*.png "$work/src/"
  /usr/bin/python3 "$here/../shared/gpu-e2e/gen-photos.py" "$work/src" "$work/set/photos" 120
  for f in vtest.avi Megamind.avi Megamind_bugy.avi; do cp -n "$src/$f" "$work/set/videos/"; done
fi
if [ "${ISA:-}" = "AVX2" ]; then
  export ONEDNN_MAX_CPU_ISA=AVX2
  export OPENCV_CPU_DISABLE=AVX512F,AVX512BW,AVX512CD,AVX512DQ,AVX512VL
fi
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) cores; ISA cap: ${ISA:-none}"
first=""
for b in "$@"; do
  name=${b%%=*} bin=${b#*=} models="${FRAMEMILL_MODELS:-}"
  case "$bin" in *@*) models=${bin#*@}; bin=${bin%@*};; esac
  rm -rf "$work/$name.db"* "$work/$name-out"
  export FRAMEMILL_DB="$work/$name.db" FRAMEMILL_OUT="$work/$name-out" GPU_BACKEND=cpu LOG_LEVEL=warn
  if [ -n "$models" ]; then export FRAMEMILL_MODELS="$models"; fi
  "$bin" enqueue "$work/set" >/dev/null
  start=$(date +%s.%N)
  /usr/bin/time -v "$bin" run --workers 2 >/dev/null 2>"$work/$name.time" || true
  wall=$(echo "$(date +%s.%N) - $start" | bc)
  "$bin" export --format jsonl -o "$work/$name.jsonl" >/dev/null
  "$bin" status --json >"$work/$name.status.json"
  rss=$(grep 'Maximum resident' "$work/$name.time" | awk '{print $NF}')
  /usr/bin/python3 - "$name" "$wall" "$rss" "$work/$name.status.json" <<'PY'
import json, sys
name, wall, rss, status = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), json.load(open(sys.argv[4]))
med = lambda s: status["stages"].get(s, {}).get("ms_per_item", {}).get("image")
parts = " / ".join("—" if med(s) is None else f"{med(s):.0f}" for s in ("categorize", "faces", "pose", "segment"))
failed = sum(v.get("failed", 0) for v in status["stages"].values())
print(f"{name}: wall {wall:.1f} s, peak RSS {rss / 1024:.0f} MB, categorize / faces / pose / segment {parts} ms a photo, "
      f"{failed} failed")
PY
  [ -z "$first" ] && first=$name
done
for b in "$@"; do
  name=${b%%=*}
  [ "$name" = "$first" ] && continue
  echo "== decide.py $first against $name"
  /usr/bin/python3 "$here/../shared/gpu-e2e/decide.py" "$work/$first.jsonl" "$work/$name.jsonl"
done
