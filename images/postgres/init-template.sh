#!/bin/sh
# Build-time: initdb once into the template directory and create the roles.
set -eu
T=/opt/tbx/pgdata
install -d -o postgres -g postgres -m 0700 "$T"
# 1 MB WAL segments keep the template (and the per-start copy) small.
PW=$(mktemp) && echo tbx-bootstrap > "$PW" && chown postgres "$PW"
su postgres -s /bin/sh -c "initdb -D $T -U postgres --auth=scram-sha-256 --pwfile=$PW --wal-segsize=1 --no-sync -E UTF8 --locale=C.UTF-8 >/dev/null"
rm -f "$PW"
cp /opt/tbx/postgresql.conf /opt/tbx/pg_hba.conf "$T/"
su postgres -s /bin/sh -c "postgres --single -D $T postgres >/dev/null" <<'SQL'
CREATE ROLE tbx_tool NOLOGIN;
ALTER ROLE tbx_tool SET statement_timeout = '10s';
ALTER ROLE tbx_tool SET idle_in_transaction_session_timeout = '60s';
REVOKE ALL ON DATABASE template1 FROM PUBLIC;
-- No temporary tables or pg_temp functions: the tool role works on its rows only.
REVOKE TEMPORARY ON DATABASE postgres FROM PUBLIC;
SQL
chown -R postgres:postgres "$T"
# The WAL tmpfs's mount point (the root filesystem is read-only at run time).
install -d -o postgres -g postgres -m 0700 /var/lib/pgwal
