#!/usr/bin/env python3
"""What a slow or stuck Docker daemon is doing, for CI's output and for an operator.

    scripts/dockerd-state.py [--pidfile /var/run/docker.pid] [--socket /var/run/docker.sock]

Prints, each step bounded in time so that a daemon that no longer answers still
gets a report:
- the machine: load, memory available, free space where Docker and tests write;
- how long `GET /_ping` and `GET /info` take, and the daemon's count of event
  subscribers (`NEventsListener`): a subscriber that stopped reading makes the
  daemon wait up to 100 ms per event for it, for every event of every client;
- the processes connected to the daemon's socket (`ss -xp`);
- a goroutine dump (dockerd writes one on SIGUSR1), summarised: goroutines
  grouped by state and their first frame in Docker's own code, largest first.
  Hundreds blocked in one place (events publishing, a container's lock) name
  what the daemon waits on.
Standard library only: it runs wherever CI does, before and without the venv.
"""

from __future__ import annotations

import argparse
import collections
import glob
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import time

TIMEOUT = 10.0
# Go's own packages: a goroutine is named by the first frame outside them (what waits)
STDLIB = (
    "runtime.",
    "internal/",
    "sync.",
    "net.",
    "net/",
    "syscall.",
    "os.",
    "io.",
    "bufio.",
    "time.",
    "reflect.",
    "context.",
    "created by",
)


class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float):
        super().__init__("localhost", timeout=timeout)
        self.path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.path)


def timed_get(sock: str, path: str) -> tuple[float, str]:
    start = time.monotonic()
    try:
        conn = UnixHTTPConnection(sock, TIMEOUT)
        conn.request("GET", path)
        body = conn.getresponse().read().decode(errors="replace")
        conn.close()
    except OSError as exc:
        return time.monotonic() - start, f"ERROR {exc!r}"
    return time.monotonic() - start, body


def api_report(sock: str) -> None:
    took, body = timed_get(sock, "/_ping")
    print(f"GET /_ping: {took:.2f} s: {body[:80]}")
    took, body = timed_get(sock, "/info")
    if body.startswith("ERROR"):
        print(f"GET /info: {took:.2f} s: {body[:200]}")
        return
    info = json.loads(body)
    print(
        f"GET /info: {took:.2f} s: event subscribers {info.get('NEventsListener')}, "
        f"containers {info.get('Containers')} ({info.get('ContainersRunning')} running), "
        f"goroutines {info.get('NGoroutines')}, fds {info.get('NFd')}"
    )


def socket_clients(sock: str) -> None:
    try:
        out = subprocess.run(["ss", "-xp"], capture_output=True, text=True, timeout=TIMEOUT).stdout
    except (OSError, subprocess.TimeoutExpired) as exc:
        print(f"ss -xp: {exc}")
        return
    # The daemon's side names the socket path; the peers are the other ends' inodes.
    server_inodes = set()
    lines = out.splitlines()
    for line in lines:
        if sock in line:
            parts = line.split()
            if len(parts) >= 8:
                server_inodes.add(parts[7])  # the peer inode of the accepted connection
    clients: collections.Counter[str] = collections.Counter()
    for line in lines:
        parts = line.split()
        if len(parts) >= 7 and parts[5] in server_inodes:
            users = re.findall(r'\("([^"]+)",pid=(\d+)', line)
            for name, pid in users:
                clients[f"{name}[{pid}] {cmdline(pid)}"] += 1
    print(f"connections to {sock}: {sum(clients.values())}")
    for who, n in clients.most_common(15):
        print(f"  {n:4d}  {who}")


def cmdline(pid: str) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")[:120]
    except OSError:
        return "?"


def goroutines(pidfile: str) -> None:
    try:
        with open(pidfile) as f:
            pid = int(f.read().strip())
    except (OSError, ValueError) as exc:
        print(f"goroutine dump: no daemon pid ({exc})")
        return

    def dumps() -> set[str]:
        dirs = ("/var/run/docker", "/run/docker", "/var/lib/docker", "/tmp")
        return {p for d in dirs for p in glob.glob(f"{d}/goroutine-stacks-*.log")}

    before = dumps()
    os.kill(pid, signal.SIGUSR1)
    deadline = time.monotonic() + TIMEOUT
    new: list[str] = []
    while time.monotonic() < deadline and not new:
        time.sleep(0.2)
        new = sorted(dumps() - before)
    if not new:
        print(f"goroutine dump: dockerd[{pid}] wrote none within {TIMEOUT:.0f} s")
        return
    time.sleep(0.5)  # let it finish writing
    with open(new[-1], errors="replace") as f:
        text = f.read()
    groups: collections.Counter[str] = collections.Counter()
    for block in text.split("\n\n"):
        head, *frames = block.strip().splitlines() or [""]
        m = re.match(r"goroutine \d+ \[([^,\]]+)", head)
        if not m:
            continue
        funcs = [fr for fr in frames if not fr.startswith("\t")]
        ours = next((fn for fn in funcs if not fn.startswith(STDLIB)), funcs[0] if funcs else "?")
        where = re.sub(r"\(0x[^)]*\)|\(\.\.\.\)", "", ours)
        groups[f"[{m.group(1)}] {where}"] += 1
    print(f"goroutines of dockerd[{pid}]: {sum(groups.values())} ({new[-1]})")
    for where, n in groups.most_common(15):
        print(f"  {n:5d}  {where[:160]}")


def machine() -> None:
    with open("/proc/loadavg") as f:
        load = " ".join(f.read().split()[:3])
    avail = "?"
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                avail = f"{int(line.split()[1]) / 2**20:.1f} GiB"
    free = []
    for path in ("/var/lib/docker", "/tmp", "/"):
        try:
            st = os.statvfs(path)
        except OSError:
            continue
        free.append(f"{path} {st.f_bavail * st.f_frsize / 2**30:.1f} GiB free")
    print(f"machine: load {load}, memory available {avail}, {', '.join(free)}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pidfile", default="/var/run/docker.pid")
    ap.add_argument("--socket", default="/var/run/docker.sock")
    args = ap.parse_args()
    machine()
    api_report(args.socket)
    socket_clients(args.socket)
    goroutines(args.pidfile)


if __name__ == "__main__":
    main()
