#!/usr/bin/env bash
# The NSFW threshold's table: categorize over every ordinary picture Debian ships (opencv-doc's
# samples, python3-skimage's data, visp-images-data: all negatives), then how many reach each
# threshold of `nsfw.unsafe` (porn + hentai), and the highest scores. The report blurs at
# ReportOptions::nsfw_blur (outputs/report.h), chosen from this table. Recall needs labelled
# NSFW pictures, which Debian does not ship: it is not measured.
#   bench/nsfw_threshold.sh [BIN]    (BIN: build/framemill)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-build/framemill}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export FRAMEMILL_DB=$work/fm.db FRAMEMILL_OUT=$work/out LOG_LEVEL=warn
dirs=(/usr/share/doc/opencv-doc/examples/data /usr/lib/python3/dist-packages/skimage/data /usr/share/visp-images-data)
echo "workload: categorize over ${dirs[*]}, $(nproc) workers, $("$bin" --version)"
"$bin" enqueue --stages categorize "${dirs[@]}" | sed -n '1,3p'
"$bin" run --workers "$(nproc)" >/dev/null 2>&1 || true   # exit 3: a few files Debian ships broken
"$bin" export --stage categorize > "$work/categorize.jsonl"
/usr/bin/python3 - "$work/categorize.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
scores = sorted(((r["result"]["nsfw"]["unsafe"], r["item"]) for r in rows if "nsfw" in r["result"]), reverse=True)
print(f"{len(scores)} pictures and videos (a video: its worst sampled frame)\n")
print("| threshold | unsafe (false positives) | share |")
print("|---|---|---|")
for t in (0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95):
    n = sum(1 for s, _ in scores if s >= t)
    print(f"| {t:.2f} | {n} | {100 * n / len(scores):.2f}% |")
print("\nhighest:")
for s, item in scores[:6]:
    print(f"  {s:.3f}  {item}")
PY
