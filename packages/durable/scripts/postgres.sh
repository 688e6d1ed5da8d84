#!/usr/bin/env bash
# A throwaway PostgreSQL for the distributed tests (and CI): Debian's PostgreSQL, installed with
# apt-get when missing; a fresh data folder; a loopback port; trust auth for user "agentloop".
#
#   packages/durable/scripts/postgres.sh start   # prints the settings; also writes them to $DIR/env
#   . "$(packages/durable/scripts/postgres.sh env)"   # exports AGENTLOOP_PG_* in the current shell
#   packages/durable/scripts/postgres.sh stop    # stops it and removes the data folder
#
# Settings: AGENTLOOP_PG_PORT (default 54329), AGENTLOOP_PG_DIR (default /tmp/agentloop-pg-$PORT).
# initdb and postgres refuse to run as root: as root they run as the "postgres" OS user.
set -eu
PORT="${AGENTLOOP_PG_PORT:-54329}"
DIR="${AGENTLOOP_PG_DIR:-/tmp/agentloop-pg-$PORT}"

bindir() { ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1; }

as_owner() {
  if [ "$(id -u)" = 0 ]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

case "${1:-}" in
  start)
    BIN="$(bindir)"
    if [ -z "$BIN" ] || [ ! -x "$BIN/initdb" ]; then
      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
      BIN="$(bindir)"
    fi
    if [ -f "$DIR/data/postmaster.pid" ]; then as_owner "$BIN/pg_ctl" -D "$DIR/data" -m immediate -w stop >/dev/null 2>&1 || true; fi
    rm -rf "$DIR"
    mkdir -p "$DIR/data" "$DIR/sock"
    if [ "$(id -u)" = 0 ]; then chown -R postgres:postgres "$DIR"; fi
    as_owner "$BIN/initdb" -D "$DIR/data" -U agentloop --auth=trust -E UTF8 >"$DIR/initdb.log" 2>&1 ||
      { cat "$DIR/initdb.log" >&2; exit 1; }
    as_owner "$BIN/pg_ctl" -D "$DIR/data" -l "$DIR/postgres.log" \
      -o "-k $DIR/sock -h 127.0.0.1 -p $PORT -c fsync=off -c max_connections=300" -w -t 60 start >/dev/null
    "$BIN/psql" -q -h 127.0.0.1 -p "$PORT" -U agentloop -d postgres -c "create database agentloop" >/dev/null
    cat >"$DIR/env" <<ENV
export AGENTLOOP_PG_HOST=127.0.0.1
export AGENTLOOP_PG_PORT=$PORT
export AGENTLOOP_PG_USER=agentloop
export AGENTLOOP_PG_DATABASE=agentloop
ENV
    chmod 644 "$DIR/env"
    cat "$DIR/env"
    ;;
  env)
    echo "$DIR/env"
    ;;
  stop)
    BIN="$(bindir)"
    if [ -n "$BIN" ] && [ -f "$DIR/data/postmaster.pid" ]; then
      as_owner "$BIN/pg_ctl" -D "$DIR/data" -m fast -w -t 30 stop >/dev/null || true
    fi
    rm -rf "$DIR"
    ;;
  *)
    echo "usage: $0 start|env|stop" >&2
    exit 2
    ;;
esac
