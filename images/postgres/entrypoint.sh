#!/bin/sh
# Run-time: copy the template onto the tmpfs data dir and exec postgres.
set -eu
D=/var/lib/postgresql/data
mkdir -p "$D"
cp -a /opt/tbx/pgdata/. "$D/"
chmod 0700 "$D"
exec postgres -D "$D" "$@"
