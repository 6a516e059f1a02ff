#!/bin/sh
# Build-time: initdb once into the template directory and create the roles.
set -eu
T=/opt/tbx/pgdata
install -d -o postgres -g postgres -m 0700 "$T"
# 1 MB WAL segments keep the template (and the per-start copy) small. The data dir
# is copied onto a tmpfs that counts against the container's memory, so only the
# `postgres` database stays: template0/template1 (7 MB each) serve CREATE DATABASE,
# which an attempt never runs (and the tool role may not).
PW=$(mktemp) && echo tbx-bootstrap > "$PW" && chown postgres "$PW"
su postgres -s /bin/sh -c "initdb -D $T -U postgres --auth=scram-sha-256 --pwfile=$PW --wal-segsize=1 --no-sync -E UTF8 --locale=C.UTF-8 >/dev/null"
rm -f "$PW"
cp /opt/tbx/postgresql.conf /opt/tbx/pg_hba.conf "$T/"
su postgres -s /bin/sh -c "postgres --single -D $T postgres >/dev/null" <<'SQL'
CREATE ROLE tbx_tool NOLOGIN;
ALTER ROLE tbx_tool SET statement_timeout = '10s';
ALTER ROLE tbx_tool SET idle_in_transaction_session_timeout = '60s';
-- No temporary tables or pg_temp functions: the tool role works on its rows only.
REVOKE TEMPORARY ON DATABASE postgres FROM PUBLIC;
ALTER DATABASE template0 IS_TEMPLATE false;
DROP DATABASE template0;
ALTER DATABASE template1 IS_TEMPLATE false;
DROP DATABASE template1;
SQL
# initdb leaves several WAL segments behind; after the clean shutdown above one
# fresh segment is all a start needs (each segment is 1 MB of tmpfs per set).
su postgres -s /bin/sh -c "pg_resetwal -D $T >/dev/null"
chown -R postgres:postgres "$T"
# The WAL tmpfs's mount point (the root filesystem is read-only at run time).
install -d -o postgres -g postgres -m 0700 /var/lib/pgwal
