#!/usr/bin/env bash
# store_bench on PostgreSQL and on SQLite in one run, so their figures compare (this machine
# is shared and noisy). Starts a PostgreSQL server of its own in a temporary directory, on a
# free loopback port, as the postgres user when run as root, with the settings below
# (printed by store_bench's header), and stops it at the end.
#   scripts/pg-bench.sh [store_bench flags...]   e.g. --num=20000 --big=1000000
# PG_SETTINGS adds server settings (e.g. PG_SETTINGS="-c synchronous_commit=off").
set -euo pipefail
cd "$(dirname "$0")/.."
BENCH=${BENCH:-build/store_bench}
source scripts/pg-temp-server.sh
echo "== PostgreSQL =="
"$BENCH" --pg="postgresql://framemill@127.0.0.1:$port" "$@"
echo "== SQLite =="
"$BENCH" "$@"
