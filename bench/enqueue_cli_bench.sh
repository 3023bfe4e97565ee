#!/usr/bin/env bash
# `framemill enqueue URLS.txt` into PostgreSQL, as a user runs it: N URLs (default 100,000)
# with 2 stages (fetch and lighting; STAGES=fetch: one), into a fresh database of a server of its own
# (scripts/pg-temp-server.sh), ROUNDS times; items/s of each round. A second binary
# (BASE_BIN) runs alternately with the first, for a paired before/after.
#   bench/enqueue_cli_bench.sh [N]      FRAMEMILL_BIN=build/framemill BASE_BIN=... ROUNDS=3
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-100000}
BIN=${FRAMEMILL_BIN:-build/framemill}
source scripts/pg-temp-server.sh  # bindir, dir, port, as
python3 -c "
import sys
with open('$dir/urls.txt', 'w') as f:
    for i in range($N): f.write(f'https://images.example.org/set-{i // 1000:04d}/photo-{i:07d}.jpg\n')"
echo "== $N URLs, stages ${STAGES:-lighting} (and fetch), PostgreSQL $(basename "$(dirname "$bindir")") on 127.0.0.1, $(nproc) cores"
one() {  # name binary round
  local db="r$3_$1"
  "${as[@]}" "$bindir/createdb" -h "$dir" -p "$port" -U framemill -E SQL_ASCII -T template0 "$db"
  local s e
  s=$(date +%s.%N)
  FRAMEMILL_DB="postgresql://framemill@127.0.0.1:$port/$db" LOG_LEVEL=warn \
    "$2" enqueue --stages "${STAGES:-lighting}" "$dir/urls.txt" >"$dir/$db.out" 2>&1
  e=$(date +%s.%N)
  awk -v n="$N" -v a="$s" -v b="$e" -v name="$1" -v r="$3" \
    'BEGIN { printf "%-6s round %d: %6.2f s, %8.0f items/s\n", name, r, b - a, n / (b - a) }'
}
for r in $(seq "${ROUNDS:-3}"); do
  [ -n "${BASE_BIN:-}" ] && one base "$BASE_BIN" "$r"
  one this "$BIN" "$r"
done
