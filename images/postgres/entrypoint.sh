#!/bin/sh
# Run-time: copy the template onto the tmpfs data dir, start postgres, and keep the
# tool role inside limits it cannot lift itself (it may SET or ALTER ROLE its own
# statement_timeout): a watchdog session of the superuser, over the container-local
# socket, cancels its statements past TBX_PG_STATEMENT_SECONDS and ends its
# transactions idle past TBX_PG_IDLE_SECONDS.
set -eu
D=/var/lib/postgresql/data
W=/var/lib/pgwal
mkdir -p "$D"
cp -a /opt/tbx/pgdata/. "$D/"
chmod 0700 "$D"
# WAL on its own tmpfs: a query filling the data tmpfs then fails with a plain
# "No space left on device" error instead of the server PANICking for lack of WAL space.
cp -a "$D/pg_wal/." "$W/"
rm -rf "$D/pg_wal"
ln -s "$W" "$D/pg_wal"

STATEMENT=${TBX_PG_STATEMENT_SECONDS:-30}
IDLE=${TBX_PG_IDLE_SECONDS:-120}
# A check every sixth of the tighter limit, 1 to 5 s: each is a pg_stat_activity scan,
# and at one a second the watchdog was all of an idle set's PostgreSQL CPU (~3 ms/s).
TIGHTER=$(( STATEMENT < IDLE ? STATEMENT : IDLE ))
EVERY=$(( TIGHTER / 6 ))
[ "$EVERY" -lt 1 ] && EVERY=1
[ "$EVERY" -gt 5 ] && EVERY=5
watchdog() {
  while :; do
    # One session and psql's \watch: no process per check.
    psql -h /tmp -U postgres -d postgres -qAtX -o /dev/null -v ON_ERROR_STOP=1 2>/dev/null <<SQL || true
SELECT pg_cancel_backend(pid) FROM pg_stat_activity
 WHERE usename = 'tbx_tool' AND state = 'active'
   AND clock_timestamp() - query_start > interval '$STATEMENT seconds'
UNION ALL
SELECT pg_terminate_backend(pid) FROM pg_stat_activity
 WHERE usename = 'tbx_tool' AND state LIKE 'idle in transaction%'
   AND clock_timestamp() - state_change > interval '$IDLE seconds' \watch $EVERY
SQL
    sleep 0.2
  done
}

postgres -D "$D" "$@" &
PG=$!
trap 'kill -TERM $PG' TERM INT
watchdog &
wait $PG || true
wait $PG
