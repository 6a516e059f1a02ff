#!/bin/sh
# tbx Typesense entrypoint: put a data dir in place, then exec typesense-server.
#
# The image carries a pre-initialised data dir (/opt/typesense/seed: a raft
# snapshot made at build time by seed.sh with the SAME peering address/ports as
# below). Copied onto an empty data dir it lets the single-node cluster come up
# healthy in tens of milliseconds instead of ~3 s (a fresh raft node is only
# marked ready by the next catch-up check, one status loop later).
#
# Environment:
#   TYPESENSE_API_KEY        admin API key (default: tbx)
#   TBX_TYPESENSE_DATA_DIR   data dir (default /data: mount a tmpfs there)
#   TBX_TYPESENSE_SEED       1 (default): copy the snapshot into an empty data
#                            dir; 0: start on an empty data dir (slow; benchmarks)
#   TBX_TYPESENSE_PREALLOC   0 (default): RocksDB's logs are not preallocated
#                            (nofalloc.c: on a tmpfs that is RAM); 1: they are
#   TBX_TYPESENSE_THREADS    request thread pool size (default 4; Typesense's own
#                            default is 8 x host cores, which can exceed a pids limit)
# Extra arguments are passed on to typesense-server.
set -eu

data="${TBX_TYPESENSE_DATA_DIR:-/data}"
seed=/opt/typesense/seed

# Builtins first: every fork+exec shows up in the start-up time.
writable() { { [ -d "$1" ] || mkdir -p "$1" 2>/dev/null; } && [ -w "$1" ]; }

if ! writable "$data"; then
  if [ -z "${TBX_TYPESENSE_DATA_DIR:-}" ] && writable /tmp/typesense-data; then
    # Convenience for a plain `docker run` without a tmpfs (writable root fs).
    echo "tbx-typesense: /data is not writable, using /tmp/typesense-data" >&2
    data=/tmp/typesense-data
  else
    echo "tbx-typesense: data dir $data is not writable by uid $(id -u); mount a tmpfs there" >&2
    echo "  (e.g. --tmpfs $data:rw,size=64m, or set TBX_TYPESENSE_DATA_DIR)" >&2
    exit 64
  fi
fi
# An empty data dir gets the snapshot; an existing one (restart) is kept.
if [ ! -d "$data/state" ] && [ "${TBX_TYPESENSE_SEED:-1}" = 1 ] && [ -d "$seed/state" ]; then
  cp -R "$seed/." "$data/"
fi

if [ "${TBX_TYPESENSE_PREALLOC:-0}" != 1 ]; then
  export LD_PRELOAD=/usr/local/lib/tbx-nofalloc.so
fi

# The raft node id is peering-address:peering-port:api-port; it must equal the
# one the seed snapshot was made with (seed.sh runs this very script).
exec /usr/local/bin/typesense-server \
  --data-dir "$data" \
  --api-key "${TYPESENSE_API_KEY:-tbx}" \
  --api-address 0.0.0.0 \
  --api-port 8108 \
  --peering-address 127.0.0.1 \
  --peering-port 8107 \
  --thread-pool-size "${TBX_TYPESENSE_THREADS:-4}" \
  --num-collections-parallel-load 1 \
  --snapshot-interval-seconds 86400 \
  "$@"
