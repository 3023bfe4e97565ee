#!/usr/bin/env bash
# The engine on the CPU (oneDNN kernels) against ONNX Runtime on the same graphs, paired in
# one sitting: per model, ms per image at batch 1 (the forward alone) with 2 threads and 1.
#   bench/engine_vs_ort.sh MODELS_DIR [MODEL...]    (default: every installed model)
# Optional: DNN_BENCH=path/to/an/older/models_bench adds its cv::dnn column (`--benchmarks=dnn`,
# preprocessing included, as that workload times it), e.g. one built at f34cd8b.
# Output: one line a model and run, then a table (bench/README.md, "One engine on the CPU").
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
models="$1"; shift
reps="${REPS:-7}"
list="$*"
if [ -z "$list" ]; then list=$(ls "$models" | grep -v '^packages$' || true); fi
bench="${MODELS_BENCH:-$here/build/models_bench}"
out="$(mktemp -d)"
for m in $list; do
  [ -f "$models/$m/model.fmg.json" ] || continue
  for t in 2 1; do
    "$bench" --benchmarks=engine --models="$models" --only="$m" --reps="$reps" --batch=1 --threads="$t" |
      grep '^engine ' | sed "s/^/t$t /" >>"$out/engine"
    if [ -f "$models/$m/model.onnx" ]; then
      echo "$m t$t $("$here/../shared/peers/ort_bench.sh" "$models" "$t" "$reps" "$m" 2>&1 | tail -1)" >>"$out/ort"
    fi
  done
  if [ -n "${DNN_BENCH:-}" ]; then
    "$DNN_BENCH" --benchmarks=dnn --models="$models" --only="$m" --reps="$reps" | grep '^dnn ' >>"$out/dnn" || true
  fi
done
cat "$out"/* 2>/dev/null
/usr/bin/python3 - "$out" <<'EOF'
import re, sys, os
d = sys.argv[1]
def read(name):
    p = os.path.join(d, name)
    return open(p).read().splitlines() if os.path.exists(p) else []
eng, ort, dnn = {}, {}, {}
for l in read("engine"):
    m = re.match(r"t(\d) engine\s+(\S+)\s+(fp32|bf16) \d+ threads batch 1:\s+([\d.]+)", l)
    if m: eng[(m[2], m[3], int(m[1]))] = float(m[4])
for l in read("ort"):
    m = re.match(r"(\S+) t(\d) .*?([\d.]+) ms", l)
    if m: ort[(m[1], int(m[2]))] = float(m[3])
for l in read("dnn"):
    m = re.match(r"dnn\s+(\S+)\s+batch 1:\s+([\d.]+)", l)
    if m: dnn[m[1]] = float(m[2])
names = sorted({k[0] for k in eng})
print("| model | cv::dnn (2 thr) | ORT 2 thr | engine fp32 2 thr | ÷ ORT | ORT 1 thr | engine fp32 1 thr | ÷ ORT | engine bf16 2 thr | engine ÷ cv::dnn |")
print("|---|---|---|---|---|---|---|---|---|---|")
f = lambda v: "—" if v is None else (f"{v:,.1f}" if v < 100 else f"{v:,.0f}")
r = lambda a, b: "—" if a is None or b is None or b == 0 else f"{a / b:.2f}x"
for n in names:
    e2, e1, b2 = eng.get((n, "fp32", 2)), eng.get((n, "fp32", 1)), eng.get((n, "bf16", 2))
    o2, o1, dv = ort.get((n, 2)), ort.get((n, 1)), dnn.get(n)
    print(f"| {n} | {f(dv)} | {f(o2)} | {f(e2)} | {r(e2, o2)} | {f(o1)} | {f(e1)} | {r(e1, o1)} | {f(b2)} | {r(e2, dv)} |")
EOF
