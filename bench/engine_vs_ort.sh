#!/usr/bin/env bash
# The engine on the CPU (oneDNN kernels) against ONNX Runtime on the same graphs, paired in
# one sitting: per model, ms per image at batch 1 (the forward alone) with 2 threads and 1.
#   bench/engine_vs_ort.sh MODELS_DIR [MODEL...]    (default: every installed model)
# ROUNDS (default 3) rounds, each timing the engine then ORT back to back (REPS runs each,
# their median): the table gives each side's median over the rounds and the median of the
# rounds' ratios, so that the VM's speed drifting between two measurements moves both.
# ONEDNN_MAX_CPU_ISA=AVX2 caps the engine's ISA (oneDNN's), not ORT's: the AVX2 path beside
# ORT at the CPU's own.
# Optional: DNN_BENCH=path/to/an/older/models_bench adds its cv::dnn column (`--benchmarks=dnn`,
# preprocessing included, as that workload times it), e.g. one built at f34cd8b.
# Output: one line a model, round and thread count, then a table (bench/README.md).
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
models="$1"; shift
reps="${REPS:-7}"
rounds="${ROUNDS:-3}"
list="$*"
if [ -z "$list" ]; then list=$(ls "$models" | grep -v '^packages$' || true); fi
bench="${MODELS_BENCH:-$here/build/models_bench}"
out="$(mktemp -d)"
"$bench" --benchmarks=none --models="$models" --only=none 2>/dev/null | grep -E '^cpu:' || true
echo "cpu model:    $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'); engine ISA cap: ${ONEDNN_MAX_CPU_ISA:-none}"
for m in $list; do
  [ -f "$models/$m/model.fmg.json" ] || continue
  for r in $(seq 1 "$rounds"); do
    for t in 2 1; do
      "$bench" --benchmarks=engine --models="$models" --only="$m" --reps="$reps" --batch=1 --threads="$t" |
        grep '^engine ' | sed "s/^/r$r t$t /" >>"$out/engine"
      if [ -f "$models/$m/model.onnx" ]; then
        echo "$m r$r t$t $(ONEDNN_MAX_CPU_ISA= "$here/../shared/peers/ort_bench.sh" "$models" "$t" "$reps" "$m" 2>&1 | tail -1)" >>"$out/ort"
      fi
    done
  done
  if [ -n "${DNN_BENCH:-}" ]; then
    "$DNN_BENCH" --benchmarks=dnn --models="$models" --only="$m" --reps="$reps" | grep '^dnn ' >>"$out/dnn" || true
  fi
done
cat "$out"/* 2>/dev/null
/usr/bin/python3 - "$out" <<'PY'
import os, re, statistics, sys
d = sys.argv[1]
def read(name):
    p = os.path.join(d, name)
    return open(p).read().splitlines() if os.path.exists(p) else []
eng, ort, dnn = {}, {}, {}
for l in read("engine"):
    m = re.match(r"r(\d+) t(\d) engine\s+(\S+)\s+(fp32|bf16) \d+ threads batch 1:\s+([\d.]+)", l)
    if m: eng.setdefault((m[3], m[4], int(m[2])), {})[int(m[1])] = float(m[5])
for l in read("ort"):
    m = re.match(r"(\S+) r(\d+) t(\d) .*?([\d.]+) ms", l)
    if m: ort.setdefault((m[1], int(m[3])), {})[int(m[2])] = float(m[4])
for l in read("dnn"):
    m = re.match(r"dnn\s+(\S+)\s+batch 1:\s+([\d.]+)", l)
    if m: dnn[m[1]] = float(m[2])
med = lambda v: statistics.median(v.values()) if v else None
def ratio(e, o):
    if not e or not o: return None
    rs = [e[r] / o[r] for r in e if r in o and o[r] > 0]
    return statistics.median(rs) if rs else None
names = sorted({k[0] for k in eng})
print("| model | cv::dnn (2 thr) | ORT 2 thr | engine fp32 2 thr | ÷ ORT | ORT 1 thr | engine fp32 1 thr | ÷ ORT | engine bf16 2 thr | engine ÷ cv::dnn |")
print("|---|---|---|---|---|---|---|---|---|---|")
f = lambda v: "—" if v is None else (f"{v:,.1f}" if v < 100 else f"{v:,.0f}")
r = lambda v: "—" if v is None else f"{v:.2f}x"
for n in names:
    e2, e1, b2 = eng.get((n, "fp32", 2)), eng.get((n, "fp32", 1)), eng.get((n, "bf16", 2))
    o2, o1, dv = ort.get((n, 2)), ort.get((n, 1)), dnn.get(n)
    ed = med(e2) / dv if e2 and dv else None
    print(f"| {n} | {f(dv)} | {f(med(o2))} | {f(med(e2))} | {r(ratio(e2, o2))} | {f(med(o1))} | {f(med(e1))} | "
          f"{r(ratio(e1, o1))} | {f(med(b2))} | {r(ed)} |")
PY
