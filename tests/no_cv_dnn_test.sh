#!/usr/bin/env bash
# framemill runs no model through OpenCV's DNN module (issue 62: the engine runs every model):
# each binary given links no libopencv_dnn itself and calls no cv::dnn symbol.
# Debian's libopencv_video (DIS optical flow, motion's) itself needs libopencv_dnn, so `ldd`
# still lists it as a dependency of that library; this checks what framemill asks for.
#   tests/no_cv_dnn_test.sh BINARY...
set -euo pipefail
status=0
[ "$#" -gt 0 ] || { echo "usage: $0 BINARY..."; exit 2; }
for bin in "$@"; do
  if ! readelf -d "$bin" >/dev/null 2>&1; then echo "FAIL: $bin is not a binary readelf reads"; status=1; continue; fi
  if readelf -d "$bin" | grep NEEDED | grep -q 'libopencv_dnn'; then
    echo "FAIL: $bin links libopencv_dnn:"; readelf -d "$bin" | grep 'libopencv_dnn'; status=1
  fi
  calls=$(nm -C --undefined-only "$bin" | grep -c 'cv::dnn::' || true)
  if [ "$calls" -ne 0 ]; then
    echo "FAIL: $bin calls $calls cv::dnn symbol(s):"; nm -C --undefined-only "$bin" | grep 'cv::dnn::' | head; status=1
  fi
  [ "$status" -ne 0 ] || echo "ok: $bin needs no libopencv_dnn and calls no cv::dnn"
done
exit "$status"
