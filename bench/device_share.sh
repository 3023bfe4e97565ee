#!/usr/bin/env bash
# One simulated device shared by a run's workers (issue 30): the same media through every
# stage, with every operation that has a device implementation on the device, in four
# workloads, each with a fresh store, one after another in one call:
#   cpu          GPU_BACKEND=cpu, --workers 4: the reference results
#   sim_1        GPU_BACKEND=sim (8192 MiB), --workers 1
#   sim_2        GPU_BACKEND=sim (8192 MiB), --workers 2: a worker per core
#   sim_4        GPU_BACKEND=sim (8192 MiB), --workers 4: one device, four workers
#   sim_4_tenth  GPU_BACKEND=sim, 819 MiB (a tenth), --workers 4
# For each: wall time, jobs done per second, out-of-memory events, CPU fallbacks, the most
# memory planned at once on the device (status --json: last_run.devices) against its
# total, the batch sizes the tuner settled on, and every result compared with the CPU's
# (bench/compare_results.py: same jobs and structure, numbers within 1e-4 relative).
#
#   bench/device_share.sh [MEDIA_DIR] [WORKLOADS]    # default: sample-data (scripts/demo.sh's), all four
#   bench/device_share.sh sample-data cpu,sim_4
set -euo pipefail
cd "$(dirname "$0")/.."
media=$(realpath "${1:-sample-data}")
workloads=${2:-cpu,sim_1,sim_2,sim_4,sim_4_tenth}
fm=${FRAMEMILL_BIN:-$PWD/build/framemill}
work=$(mktemp -d /tmp/framemill-device-share-XXXXXX)
trap 'rm -rf "$work"' EXIT
export FRAMEMILL_MODELS=${FRAMEMILL_MODELS:-$HOME/.cache/framemill/models}
export FRAMEMILL_STAGES=all LOG_LEVEL=warn
# Motion's device flow is our Lucas-Kanade, whose CPU twin (what the simulated device runs)
# is a reference ~40x slower than the CPU's DIS: with 4 workers on 2 cores a 795-frame video
# ran past its job budget and its worker was killed as hung. Motion is not a neural stage;
# here it runs on the CPU, everything else on the device. MOTION_GPU=auto puts it back.
export MOTION_GPU=${MOTION_GPU:-false}
# The simulated device's models run on the engine's reference kernels, ~7x slower than the
# CPU's OpenCV DNN (bench/README.md, "Neural models"): with one thread per worker (4 on 2
# cores) vtest.avi's pose job passed the 135 s job budget and its worker was killed as hung.
# A device that slow is the simulation's, not a real card's: the budget is 10 minutes here.
export FRAMEMILL_JOB_BUDGET_MS=${FRAMEMILL_JOB_BUDGET_MS:-600000}

echo "framemill device_share"
echo "Date:       $(date)"
echo "CPU:        $(nproc) x $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo "Media:      $media: $(find "$media" -type f | wc -l) files"
echo "Stages:     all; every device operation on the device (auto) but MOTION_GPU=$MOTION_GPU; job budget $FRAMEMILL_JOB_BUDGET_MS ms"
echo "Workloads:  $workloads"
echo "------------------------------------------------------------------"

run() {  # name backend workers vram_mb
  local name=$1 db=$work/$1.db
  local -a env=(FRAMEMILL_DB="$db" FRAMEMILL_OUT="$work/$1-out" GPU_BACKEND="$2"
                FRAMEMILL_SIM_VRAM_MB="$4" FRAMEMILL_DEVICE_LEDGER_DIR="$work")
  env "${env[@]}" "$fm" enqueue "$media" > /dev/null
  local t0 t1 code=0
  t0=$(date +%s.%N)
  env "${env[@]}" "$fm" run --workers "$3" > "$work/$name.log" 2>&1 || code=$?
  t1=$(date +%s.%N)
  env "${env[@]}" "$fm" export --format jsonl -o "$work/$name.jsonl" > /dev/null 2>&1
  env "${env[@]}" "$fm" status --json > "$work/$name.status.json"
  /usr/bin/python3 - "$name" "$t0" "$t1" "$code" "$work/$name.status.json" "$db" <<'EOF'
import json, sqlite3, sys
name, t0, t1, code, status, db = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4], sys.argv[5], sys.argv[6]
s = json.load(open(status))
run = s["last_run"]
wall = t1 - t0
print(f"{name:12s}: {wall:7.1f} s  {run['jobs_done']} jobs done, {run['jobs_done'] / wall:.2f} jobs/s, "
      f"{run['jobs_failed']} failed, exit {code}, {run['oom_events']} out-of-memory event(s), "
      f"{run['cpu_fallbacks']} CPU fallback(s)")
for d in run.get("devices", []):
    print(f"{'':14s}{d['id']}: {d['workers']} worker(s), peak planned {d['peak_planned_mb']} of {d['total_mb']} MiB, "
          f"{d['oom_events']} OOM, {d['cpu_fallbacks']} CPU fallbacks")
tuned = sqlite3.connect(db).execute("SELECT op, size_bucket, batch, bytes_per_item FROM batch_tuning WHERE device != 'cpu' ORDER BY 1, 2").fetchall()
if tuned:
    print(f"{'':14s}settled batches: " + ", ".join(f"{op}[{b}]={n} ({bpi / 2**20:.1f} MiB/item)" for op, b, n, bpi in tuned))
EOF
  if [ "$name" != cpu ] && [ -f "$work/cpu.jsonl" ]; then
    /usr/bin/python3 bench/compare_results.py "$work/cpu.jsonl" "$work/$name.jsonl" | sed 's/^/              /' || true
  fi
}

IFS=, read -ra names <<< "$workloads"
for w in "${names[@]}"; do
  case $w in
    cpu) run cpu cpu 4 8192 ;;
    sim_1) run sim_1 sim 1 8192 ;;
    sim_2) run sim_2 sim 2 8192 ;;
    sim_4) run sim_4 sim 4 8192 ;;
    sim_4_tenth) run sim_4_tenth sim 4 819 ;;
    *) echo "unknown workload $w (cpu, sim_1, sim_2, sim_4, sim_4_tenth)" >&2; exit 2 ;;
  esac
done
