#!/usr/bin/env bash
# A second Docker daemon of our own, for the tests and benchmarks that restart
# a daemon (tests/integration/bench/run/test_daemon_restart.py, benchmarks/soak.py):
# the shared daemon is never restarted. Everything it owns lives under DIR.
#
#   scripts/second-dockerd.sh start [DIR]   # start (idempotent), load the tbx images
#   scripts/second-dockerd.sh stop  [DIR]   # SIGTERM it and wait until it is gone
#   scripts/second-dockerd.sh host  [DIR]   # print its DOCKER_HOST
#
# --bridge=tbxd2br0 (a bridge of its own) / --iptables=false: no iptables chains
# that would fight the main daemon's. Never --bridge=none: a dockerd started
# with it deletes the host's docker0, i.e. the main daemon's default bridge
# (every `docker build` RUN step and the default network then fail). tbx's attempt networks are `internal` (no
# default route) and tbx's own host rule (sandbox.host_firewall) drops what an
# attempt bridge opens towards the host, so egress stays impossible.
# Its own containerd is started under DIR/exec (dockerd's managed one), so a
# restart takes the containers with it, as a real daemon restart does.
set -euo pipefail
cmd=${1:-start}
dir=${2:-${TBX_D2_DIR:-/tmp/tbx-d2}}
sock="unix://$dir/docker.sock"
# The second daemon's default bridge: outside TBX_SUBNET_RANGE, and not named
# tbx-* (the FORWARD rules below are about attempt bridges).
bridge=${TBX_D2_BRIDGE:-tbxd2br0}
bridge_cidr=${TBX_D2_BRIDGE_CIDR:-10.255.252.1/24}
main_docker() { env -u DOCKER_HOST docker "$@"; }
d2() { DOCKER_HOST="$sock" docker "$@"; }

running() { [ -f "$dir/pid" ] && kill -0 "$(cat "$dir/pid")" 2>/dev/null; }

case "$cmd" in
  host) echo "$sock" ;;
  start)
    mkdir -p "$dir/root" "$dir/exec"
    # Without its own iptables chains this daemon gets neither Docker's per-network ACCEPT
    # rule nor the DOCKER-ISOLATION drops that make an `internal` network internal (its
    # containers still have a default route via the bridge). So, for every tbx-* bridge:
    # accept frames bridged within one bridge (an attempt's server -> its PostgreSQL), then
    # drop whatever else is forwarded from or to one (egress, another attempt's network).
    # The main daemon's internal tbx networks carry nothing else either, so for them this
    # only repeats what its own isolation chains do. ACCEPT goes in first, the drops right
    # after it, so no frame between an attempt's containers ever meets a drop first.
    if command -v iptables >/dev/null; then
      accept=(-i tbx-+ -o tbx-+ -m physdev --physdev-is-bridged -j ACCEPT)
      drop_in=(-i tbx-+ -j DROP)
      drop_out=(-o tbx-+ -j DROP)
      if ! iptables -C FORWARD "${drop_in[@]}" 2>/dev/null || ! iptables -C FORWARD "${drop_out[@]}" 2>/dev/null; then
        iptables -I FORWARD 1 "${accept[@]}"
        iptables -C FORWARD "${drop_out[@]}" 2>/dev/null || iptables -I FORWARD 2 "${drop_out[@]}"
        iptables -C FORWARD "${drop_in[@]}" 2>/dev/null || iptables -I FORWARD 2 "${drop_in[@]}"
      fi
    fi
    if ! ip link show "$bridge" >/dev/null 2>&1; then
      ip link add "$bridge" type bridge
      ip addr add "$bridge_cidr" dev "$bridge"
      ip link set "$bridge" up
    fi
    if ! running; then
      driver=${TBX_D2_STORAGE_DRIVER:-$(main_docker info --format '{{.Driver}}' 2>/dev/null || echo vfs)}
      # Its own (empty) config file: the host's /etc/docker/daemon.json would clash with the flags.
      [ -f "$dir/daemon.json" ] || echo '{"log-driver": "json-file", "log-opts": {"max-size": "10m"}}' >"$dir/daemon.json"
      nohup dockerd --config-file "$dir/daemon.json" --data-root "$dir/root" --exec-root "$dir/exec" --pidfile "$dir/pid" \
        -H "$sock" --bridge="$bridge" --iptables=false --ip-masq=false --storage-driver="$driver" \
        --shutdown-timeout 5 >>"$dir/dockerd.log" 2>&1 &
      started=$!
    fi
    for _ in $(seq 1 60); do
      d2 info >/dev/null 2>&1 && break
      running || kill -0 "${started:-0}" 2>/dev/null || break
      sleep 0.5
    done
    d2 info >/dev/null 2>&1 || { echo "second dockerd did not come up; see $dir/dockerd.log" >&2; exit 1; }
    # The images tbx resolves (tag by content hash + :latest), copied from the main daemon once.
    want=$(main_docker images --format '{{.Repository}}:{{.Tag}}' | grep -E '^tbx/(postgres|servers|typesense):' || true)
    missing=()
    for img in $want; do d2 image inspect "$img" >/dev/null 2>&1 || missing+=("$img"); done
    if [ ${#missing[@]} -gt 0 ]; then
      main_docker save "${missing[@]}" | d2 load >/dev/null
    fi
    echo "$sock"
    ;;
  stop)
    if running; then
      pid=$(cat "$dir/pid")
      kill -TERM "$pid"
      for _ in $(seq 1 120); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
      if kill -0 "$pid" 2>/dev/null; then echo "second dockerd $pid did not stop" >&2; exit 1; fi
    fi
    ;;
  *) echo "usage: $0 start|stop|host [DIR]" >&2; exit 2 ;;
esac
