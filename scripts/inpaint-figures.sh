#!/usr/bin/env bash
# Before-and-after pictures of the inpainting methods (hole in red, Telea, the exemplar
# fill) on three opencv-doc photos, into docs/inpaint/ (git-ignored: they are made from
# third-party photos, so each checkout makes its own). Needs a build (scripts/build.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x build/inpaint_bench ] || scripts/build.sh
build/inpaint_bench --benchmarks=figures --out=docs/inpaint
