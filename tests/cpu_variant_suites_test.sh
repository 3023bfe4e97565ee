#!/usr/bin/env bash
# Every suite that CMakeLists.txt names for the CPU-only variant exists in its test
# binaries, under the name gtest's filter sees (a parameterized one with its prefix, as
# Models/GoldenTest): a renamed suite would otherwise drop out of that variant silently.
# Usage: cpu_variant_suites_test.sh UNIT_BIN INTEGRATION_BIN SUITE...
set -euo pipefail
unit=$1 integration=$2
shift 2
listed=$({ "$unit" --gtest_list_tests; "$integration" --gtest_list_tests; } | grep -v '^ ' | sed 's/\..*$//')
missing=0
for suite in "$@"; do
  if ! grep -qx "$suite" <<<"$listed"; then
    echo "suite $suite is named for the CPU-only variant but no test binary has it" >&2
    missing=1
  fi
done
[ "$missing" = 0 ] && echo "$# suites, each present"
exit "$missing"
