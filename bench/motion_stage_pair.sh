#!/bin/bash
# The motion stage alone, two builds alternated: wall seconds of each run, then each build's
# mean. Paired runs on one VM, as bench/README.md's motion figures are measured.
#
#   bench/motion_stage_pair.sh OLD_FRAMEMILL NEW_FRAMEMILL [RUNS] VIDEO...
#
# Each run enqueues the videos into a fresh store and runs `framemill run --stages motion
# --workers 1`, process start included.
set -eu
old=$1 new=$2
shift 2
runs=4
if [[ ${1:-} =~ ^[0-9]+$ ]]; then runs=$1; shift; fi
[ $# -gt 0 ] || { echo "usage: $0 OLD NEW [RUNS] VIDEO..." >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "motion stage, $runs runs per build alternated, videos: $*"
declare -A total=([old]=0 [new]=0)
for ((i = 1; i <= runs; i++)); do
  for name in old new; do
    bin=${!name}
    d=$work/$name$i
    mkdir -p "$d"
    "$bin" enqueue --db "$d/fm.db" --stages motion "$@" > /dev/null 2>&1
    s=$(date +%s.%N)
    FRAMEMILL_OUT=$d/out "$bin" run --db "$d/fm.db" --stages motion --workers 1 --out "$d/out" > /dev/null 2>&1
    e=$(date +%s.%N)
    t=$(echo "$e - $s" | bc)
    total[$name]=$(echo "${total[$name]} + $t" | bc)
    echo "$name run $i: $t s"
  done
done
for name in old new; do
  echo "$name mean: $(echo "scale=3; ${total[$name]} / $runs" | bc) s"
done
