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
bindir=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
dir=$(mktemp -d /tmp/fm-pgbench-XXXXXX)
as=()
if [ "$(id -u)" -eq 0 ]; then chown postgres "$dir"; as=(runuser -u postgres --); fi
cleanup() { "${as[@]}" "$bindir/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null 2>&1 || true; rm -rf "$dir"; }
trap cleanup EXIT
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"${as[@]}" "$bindir/initdb" -D "$dir/data" -U framemill --auth=trust -E SQL_ASCII --locale=C >/dev/null
# Durable defaults (fsync, synchronous_commit on); room for the 1M-job stores; autovacuum
# looks every 10 s (README: the settings for a framemill server).
"${as[@]}" "$bindir/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -o \
  "-p $port -k $dir -c listen_addresses=127.0.0.1 -c shared_buffers=512MB -c max_wal_size=4GB -c max_connections=100 -c autovacuum_naptime=10s ${PG_SETTINGS:-}" \
  start >/dev/null
echo "== PostgreSQL =="
"$BENCH" --pg="postgresql://framemill@127.0.0.1:$port" "$@"
echo "== SQLite =="
"$BENCH" "$@"
