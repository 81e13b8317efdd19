#!/usr/bin/env bash
# A private PostgreSQL server for the tests and benchmarks, on loopback only,
# with TechEmpower's schema loaded (database hello_world, user
# benchmarkdbuser, tables World and Fortune: samples/tfb_server/schema.sql),
# and two databases for the tests that count a database's transactions, each
# used by that test alone: tessera_counts (empty) and tfb_counts (the schema).
#
#   scripts/postgres.sh start DIR   # initdb in DIR, start, load; prints the conninfo
#   scripts/postgres.sh stop DIR    # stops it and removes DIR
#
# The conninfo is also written to DIR/conninfo. Needs Debian's postgresql
# (scripts/setup.sh installs it). The server refuses to run as root, so as
# root it runs as the `postgres` user (runuser), in a DIR that user owns.
set -euo pipefail
cmd=${1:?usage: postgres.sh start|stop DIR}
dir=${2:?usage: postgres.sh start|stop DIR}
here=$(cd "$(dirname "$0")/.." && pwd)
bindir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
[ -x "$bindir/postgres" ] || { echo "postgres.sh: no PostgreSQL server (Debian postgresql)" >&2; exit 1; }
as_owner() {
  if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

case "$cmd" in
  start)
    # A run that was interrupted (no `stop`) leaves its server and data: stop
    # and remove them, as `stop` would have.
    if [ -d "$dir/data" ]; then
      as_owner "$bindir/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null 2>&1 || true
      rm -rf "$dir"
    fi
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    if [ "$(id -u)" -eq 0 ]; then
      chown postgres: "$dir"
      runuser -u postgres -- test -w "$dir" ||
        { echo "postgres.sh: the postgres user cannot reach $dir (a parent is not searchable)" >&2; exit 1; }
    fi
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    as_owner "$bindir/initdb" -D "$dir/data" -U postgres -A trust -E UTF8 --locale=C.UTF-8 >"$dir/initdb.log" 2>&1 ||
      { cat "$dir/initdb.log" >&2; exit 1; }
    # Loopback TCP only; the Unix socket lives in DIR (not /var/run).
    as_owner "$bindir/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 start \
      -o "-c listen_addresses=127.0.0.1 -p $port -k $dir -c max_connections=200 -c fsync=off \
          -c synchronous_commit=off -c full_page_writes=off -c shared_buffers=128MB" >/dev/null ||
      { cat "$dir/server.log" >&2; exit 1; }
    psql_() { as_owner psql -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$port" -U postgres "$@"; }
    psql_ -d postgres -c "CREATE USER benchmarkdbuser WITH PASSWORD 'benchmarkdbpass'" \
          -c "CREATE DATABASE hello_world OWNER benchmarkdbuser ENCODING 'UTF8'" \
          -c "CREATE DATABASE tessera_counts OWNER benchmarkdbuser" \
          -c "CREATE DATABASE tfb_counts OWNER benchmarkdbuser ENCODING 'UTF8'"
    psql_ -d hello_world -f - <"$here/samples/tfb_server/schema.sql"
    psql_ -d tfb_counts -f - <"$here/samples/tfb_server/schema.sql"
    info="host=127.0.0.1 port=$port dbname=hello_world user=benchmarkdbuser password=benchmarkdbpass sslmode=disable"
    echo "$info" >"$dir/conninfo"
    echo "$info"
    ;;
  stop)
    [ -d "$dir/data" ] && as_owner "$bindir/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null 2>&1 || true
    rm -rf "$dir"
    ;;
  *)
    echo "postgres.sh: unknown command '$cmd' (start or stop)" >&2
    exit 2
    ;;
esac
