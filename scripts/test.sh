#!/usr/bin/env bash
# Builds framemill and runs every test (unit and end-to-end) with ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
cd build
ctest --output-on-failure -j2 --timeout 900
