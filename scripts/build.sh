#!/usr/bin/env bash
# Configures and builds framemill into build/: everything (binary, tests, benchmarks), or
# only the targets named (scripts/demo.sh builds just the binary it runs).
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
ninja -C build "$@"
