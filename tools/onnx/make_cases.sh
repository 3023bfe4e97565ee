#!/usr/bin/env bash
# ONNX's own node conformance cases (model.onnx + test_data_set_0/{input,output}_K.pb per
# case) from Debian's python3-onnx 1.12, into DIR (default .cache/onnx-cases):
# OnnxConformanceTest runs them through the engine. onnx 1.12's generator uses numpy's aliases
# that numpy 1.24 removed (np.float, np.int, np.bool, np.object, np.str, np.complex): they are
# put back for its run only. Cached: a DIR that holds the cases already is left as it is.
set -euo pipefail
dir="${1:-$(cd "$(dirname "$0")/../.." && pwd)/.cache/onnx-cases}"
if [ -f "$dir/.complete" ]; then
  echo "onnx cases: $(ls "$dir/node" | wc -l) node cases in $dir (cached)"
  exit 0
fi
rm -rf "$dir.tmp"
/usr/bin/python3 - "$dir.tmp" <<'PY'
import runpy, sys, warnings
import numpy as np
warnings.simplefilter("ignore")
for name, t in [("float", float), ("int", int), ("bool", bool), ("object", object), ("str", str), ("complex", complex)]:
    if not hasattr(np, name):
        setattr(np, name, t)
out = sys.argv[1]
sys.argv = ["cmd_tools", "generate-data", "-o", out]
runpy.run_module("onnx.backend.test.cmd_tools", run_name="__main__")
PY
touch "$dir.tmp/.complete"
rm -rf "$dir"
mv "$dir.tmp" "$dir"
echo "onnx cases: $(ls "$dir/node" | wc -l) node cases in $dir"
