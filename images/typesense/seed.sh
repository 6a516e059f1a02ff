#!/bin/bash
# Build-time only (a RUN step of the Dockerfile): start Typesense once through
# the entrypoint (so the peering address/ports are exactly the run-time ones) on
# an empty data dir, wait until it is healthy, ask it for a raft snapshot written
# to OUT, stop it. OUT then holds state/meta + state/snapshot (a few dozen KB)
# which the entrypoint copies into each container's empty data dir.
# Uses bash's /dev/tcp: the image has no curl and the build downloads nothing.
set -euo pipefail
OUT="${1:?usage: seed.sh OUTPUT_DIR}"
KEY=seed
work=$(mktemp -d)
rm -rf "$OUT"

TBX_TYPESENSE_DATA_DIR="$work/data" TBX_TYPESENSE_SEED=0 TYPESENSE_API_KEY=$KEY \
  /usr/local/bin/tbx-typesense-entrypoint >"$work/log" 2>&1 &
pid=$!

http() { # METHOD PATH -> response (headers + body) on stdout
  exec 3<>/dev/tcp/127.0.0.1/8108 || return 1
  printf '%s %s HTTP/1.0\r\nHost: localhost\r\nX-TYPESENSE-API-KEY: %s\r\nContent-Length: 0\r\n\r\n' \
    "$1" "$2" "$KEY" >&3
  timeout 10 cat <&3 || true
  exec 3<&-
}

fail() { echo "seed: $*" >&2; cat "$work/log" >&2; kill -KILL "$pid" 2>/dev/null || true; exit 1; }

ok=
for _ in $(seq 1 300); do
  kill -0 "$pid" 2>/dev/null || fail "typesense-server exited"
  if http GET /health 2>/dev/null | grep -q '"ok":true'; then ok=1; break; fi
  sleep 0.1
done
[ -n "$ok" ] || fail "not healthy after 30 s"

resp=$(http POST "/operations/snapshot?snapshot_path=$OUT")
grep -q '"success":true' <<<"$resp" || fail "snapshot failed: $resp"
[ -f "$OUT/state/meta/raft_meta" ] && compgen -G "$OUT/state/snapshot/snapshot_*/__raft_snapshot_meta" >/dev/null \
  || fail "snapshot incomplete: $(find "$OUT")"

kill -INT "$pid"
wait "$pid" || true
grep -q "Starting Typesense 0.24.1" "$work/log" || fail "unexpected server version"
chmod -R a+rX "$OUT"
rm -rf "$work"
echo "seed: $(find "$OUT" -type f | wc -l) files, $(du -sk "$OUT" | cut -f1) KB in $OUT"
