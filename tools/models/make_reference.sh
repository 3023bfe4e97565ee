#!/usr/bin/env bash
# Golden reference outputs for tests/models (tests only; see docs/MODELS.md).
#
#   tools/models/make_reference.sh MODELS_DIR OUT_DIR
#
# MODELS_DIR: a FRAMEMILL_MODELS directory (packages/*.tgz plus <model>/manifest.json per
# installed model). OUT_DIR gets inputs/<model>/ (make_inputs.py) and reference/<model>/
# (reference.mjs). Idempotent: models whose inputs and references are up to date are skipped.
# Needs /usr/bin/python3 with cv2 + numpy, node >= 18, npm (the registry once, for npm ci).
set -euo pipefail

if [[ $# -ne 2 ]]; then
  echo "usage: $0 MODELS_DIR OUT_DIR" >&2
  exit 2
fi
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
models_dir="$(cd "$1" && pwd)"
mkdir -p "$2"
out_dir="$(cd "$2" && pwd)"
SECONDS=0

if [[ ! -d "$here/node_modules/@tensorflow/tfjs-core" || ! -d "$here/node_modules/@tensorflow/tfjs-layers" \
      || ! -d "$here/node_modules/@tensorflow/tfjs-backend-wasm" || ! -d "$here/node_modules/onnxruntime-node" ]]; then
  # --ignore-scripts: onnxruntime-node's install script fetches from a host CI may not reach;
  # the CPU binaries it needs ship inside the npm package.
  (cd "$here" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
fi

/usr/bin/python3 "$here/make_inputs.py" --models "$models_dir" \
  --images "$here/golden_images.json" --out "$out_dir/inputs"

# Each process runs on one core. Two with about equal work use both CI cores: isnet (ONNX
# Runtime, ~21 s of CPU on the 2-core VM) against the TF.js models together (~17 s).
groups=("isnet silero-vad nsfw-inception yolov8n yolov8s" "centernet mobilefacenet selfie blazeface-tiled movenet-multipose blazepose-full faceres movenet-lightning blazeface facemesh nsfw")
if [[ "$(nproc)" -lt 2 ]]; then
  groups=("${groups[*]}")
fi
mkdir -p "$out_dir/reference"
pids=()
for g in "${!groups[@]}"; do
  # shellcheck disable=SC2086
  node "$here/reference.mjs" "$models_dir" "$out_dir" ${groups[$g]} \
    >"$out_dir/reference/log.$g.txt" &
  pids+=($!)
done
rc=0
for p in "${pids[@]}"; do
  wait "$p" || rc=$?
done
# stdout of reference.mjs also carries TF.js's banner; keep only its own lines.
cat "$out_dir"/reference/log.*.txt | grep '^reference:' || true
if [[ $rc -ne 0 ]]; then
  echo "make_reference: reference.mjs failed (exit $rc)" >&2
  exit "$rc"
fi
echo "make_reference: done in ${SECONDS} s -> $out_dir"
