#!/usr/bin/env bash
# The throwaway PostgreSQL the unit tests use (tests/pg_support.py):
# unix socket only (no TCP), trust auth, fsync off.
#
#   scripts/test-postgres.sh start    # idempotent: no-op when the server already answers
#   scripts/test-postgres.sh stop     # stops the server this script started (its data dir)
#   scripts/test-postgres.sh status   # exit 0 when the server answers, 3 when it does not
#
# Settings (environment):
#   TBX_TEST_PG_PORT    port                 (default 55432)
#   TBX_TEST_PG_SOCKET  unix socket dir      (default /tmp)
#   TBX_TEST_PG_DIR     where data dirs live (default ${TMPDIR:-/tmp}/tbx-test-pg); the
#                       cluster of a port is $TBX_TEST_PG_DIR/<port>/data, its log beside it.
# The tests connect with TBX_TEST_PG_DSN (default 'host=/tmp port=55432 user=postgres').
#
# Run as root, the server runs as the `postgres` OS user, and Debian's postgresql
# package is installed with apt-get when no /usr/lib/postgresql/*/bin/initdb exists.
set -euo pipefail

PORT="${TBX_TEST_PG_PORT:-55432}"
SOCKET="${TBX_TEST_PG_SOCKET:-/tmp}"
BASE="${TBX_TEST_PG_DIR:-${TMPDIR:-/tmp}/tbx-test-pg}"
DIR="$BASE/$PORT"
DATA="$DIR/data"
LOG="$DIR/postgres.log"

say() { printf 'test-postgres: %s\n' "$*"; }
die() { printf 'test-postgres: %s\n' "$*" >&2; exit 1; }

# The newest installed server binaries (15 on Debian bookworm), if any.
find_bin() {
  local initdb
  initdb=$(ls -d /usr/lib/postgresql/*/bin/initdb 2>/dev/null | sort -V | tail -n 1 || true)
  [ -n "$initdb" ] && dirname "$initdb"
}

install_postgres() {
  [ "$(id -u)" -eq 0 ] || die "PostgreSQL server binaries are missing; install Debian's 'postgresql' package (needs root)"
  say "installing Debian's postgresql package"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
}

# Run a command as the server's OS user: `postgres` when we are root, else ourselves.
as_owner() {
  if [ "$(id -u)" -eq 0 ]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

ready() {
  local isready
  isready="$1/pg_isready"
  "$isready" -q -h "$SOCKET" -p "$PORT" -t 2
}

cmd_start() {
  local bin
  bin=$(find_bin) || true
  if [ -z "$bin" ]; then
    install_postgres
    bin=$(find_bin) || die "no /usr/lib/postgresql/*/bin/initdb after installing postgresql"
  fi
  if ready "$bin"; then
    say "already running on $SOCKET:$PORT"
    return 0
  fi
  mkdir -p "$DIR"
  if [ "$(id -u)" -eq 0 ]; then
    chmod 755 "$BASE" "$DIR"
    chown postgres: "$DIR"
    as_owner test -w "$DIR" || die "the postgres user cannot write $DIR (set TBX_TEST_PG_DIR to a directory it can reach)"
  fi
  if [ ! -f "$DATA/PG_VERSION" ]; then
    say "initdb $DATA"
    rm -rf "$DATA"
    as_owner "$bin/initdb" -D "$DATA" -U postgres -A trust -E UTF8 --locale=C.UTF-8 >"$DIR/initdb.log" 2>&1 \
      || die "initdb failed, see $DIR/initdb.log"
  fi
  say "starting PostgreSQL ($(basename "$(dirname "$bin")")) on $SOCKET:$PORT, data $DATA"
  as_owner "$bin/pg_ctl" -D "$DATA" -l "$LOG" -w -t 60 \
    -o "-p $PORT -k $SOCKET -c listen_addresses='' -c fsync=off -c synchronous_commit=off -c full_page_writes=off" \
    start >/dev/null || die "the server did not start, see $LOG"
  ready "$bin" || die "started, but pg_isready -h $SOCKET -p $PORT fails; see $LOG"
  say "ready: TBX_TEST_PG_DSN='host=$SOCKET port=$PORT user=postgres'"
}

cmd_stop() {
  local bin
  bin=$(find_bin) || true
  if [ -z "$bin" ] || [ ! -f "$DATA/postmaster.pid" ]; then
    say "not running from $DATA (nothing to stop)"
    return 0
  fi
  if as_owner "$bin/pg_ctl" -D "$DATA" status >/dev/null 2>&1; then
    as_owner "$bin/pg_ctl" -D "$DATA" -m fast -w stop >/dev/null
    say "stopped the server of $DATA"
  else
    say "not running from $DATA (nothing to stop)"
  fi
}

cmd_status() {
  local bin
  bin=$(find_bin) || true
  if [ -n "$bin" ] && ready "$bin"; then
    say "running on $SOCKET:$PORT"
    return 0
  fi
  say "not running on $SOCKET:$PORT"
  return 3
}

case "${1:-}" in
  start) cmd_start ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  *) die "usage: $0 {start|stop|status}" ;;
esac
