# Sourced (bash): starts a PostgreSQL server of its own in a temporary directory, on a free
# loopback port, as the postgres user when run as root, with durable defaults (fsync,
# synchronous_commit on), room for 1M-job stores and autovacuum every 10 s (README: the
# settings for a framemill server), plus PG_SETTINGS; stops it and removes the directory
# on exit. Sets: bindir, dir, port, as (the command prefix to run as postgres).
bindir=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
dir=$(mktemp -d /tmp/fm-pgtemp-XXXXXX)
as=()
if [ "$(id -u)" -eq 0 ]; then chown postgres "$dir"; as=(runuser -u postgres --); fi
pg_temp_cleanup() { "${as[@]}" "$bindir/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null 2>&1 || true; rm -rf "$dir"; }
trap pg_temp_cleanup EXIT
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"${as[@]}" "$bindir/initdb" -D "$dir/data" -U framemill --auth=trust -E SQL_ASCII --locale=C >/dev/null
"${as[@]}" "$bindir/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -o \
  "-p $port -k $dir -c listen_addresses=127.0.0.1 -c shared_buffers=512MB -c max_wal_size=4GB -c max_connections=100 -c autovacuum_naptime=10s ${PG_SETTINGS:-}" \
  start >/dev/null
