#!/usr/bin/env bash
# Register gVisor (Debian's `runsc`) as an extra Docker runtime named `runsc`,
# for `tbx ... --runtime runsc`. runsc needs --network=host here: it then uses
# the container's own network namespace, so the private attempt network and
# its no-egress rule still apply.
set -euo pipefail
command -v runsc >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq runsc >/dev/null; }
CONF=/etc/docker/daemon.json
python3 - "$CONF" "$(command -v runsc)" <<'PY'
import json, os, sys
path, runsc = sys.argv[1], sys.argv[2]
conf = json.load(open(path)) if os.path.exists(path) else {}
conf.setdefault("runtimes", {})["runsc"] = {"path": runsc, "runtimeArgs": ["--network=host"]}
json.dump(conf, open(path, "w"), indent=2)
PY
# dockerd re-reads its runtimes on SIGHUP: running containers are not restarted.
pkill -HUP -x dockerd
for _ in $(seq 1 20); do docker info 2>/dev/null | grep -q runsc && break; sleep 0.5; done
docker info 2>/dev/null | grep -q runsc || { echo "runsc did not register with dockerd" >&2; exit 1; }
echo "runsc registered: use --runtime runsc"
