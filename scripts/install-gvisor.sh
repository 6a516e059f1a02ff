#!/usr/bin/env bash
# Register gVisor (Debian's `runsc`) as an extra Docker runtime named `runsc`,
# for `tbx ... --runtime runsc`. runsc needs --network=host here: it then uses
# the container's own network namespace, so the private attempt network and
# its no-egress rule still apply.
#
# Exit status: 0 when `runsc` is a runtime of the answering daemon, 1 otherwise
# (with what was found, so a CI log says why).
set -euo pipefail

runtimes() {
  # Captured, not piped into `grep -q`: with pipefail, grep exiting early
  # turns docker's SIGPIPE into a failed check.
  docker info --format '{{json .Runtimes}}' 2>/dev/null || true
}
registered() { [[ "$(runtimes)" == *'"runsc"'* ]]; }

if registered; then echo "runsc already registered"; exit 0; fi

if ! command -v runsc >/dev/null; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq runsc >/dev/null
fi
CONF=/etc/docker/daemon.json
mkdir -p "$(dirname "$CONF")"
python3 - "$CONF" "$(command -v runsc)" <<'PY'
import json, os, sys
path, runsc = sys.argv[1], sys.argv[2]
conf = json.load(open(path)) if os.path.exists(path) and os.path.getsize(path) else {}
conf.setdefault("runtimes", {})["runsc"] = {"path": runsc, "runtimeArgs": ["--network=host"]}
json.dump(conf, open(path, "w"), indent=2)
PY
# dockerd re-reads its runtimes on SIGHUP: running containers are not restarted.
pkill -HUP -x dockerd || true
for _ in $(seq 1 60); do registered && break; sleep 0.5; done
if registered; then echo "runsc registered: use --runtime runsc"; exit 0; fi

{
  echo "runsc did not register with dockerd"
  echo "  runtimes reported: $(runtimes)"
  echo "  dockerd processes: $(pgrep -a -x dockerd || echo none)"
  echo "  $CONF: $(tr -d '\n' <"$CONF")"
  echo "  DOCKER_HOST=${DOCKER_HOST:-unset}"
} >&2
exit 1
