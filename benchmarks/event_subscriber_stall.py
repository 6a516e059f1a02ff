"""What one Docker event subscriber that stopped reading costs every other client.

    .venv/bin/python benchmarks/event_subscriber_stall.py [--before 200] [--during 1200]

Times a pause + unpause of one idle container (two events, each call repeated
until the daemon takes it), in three phases:
no extra subscriber; one that subscribed to `/events` and never reads (its
socket's receive buffer shrunk, so it fills early); after it closed. dockerd
gives every subscriber a bounded buffer and, once it is full, holds each event
up to 100 ms for it: the second half of the middle phase shows what every
event of the machine then costs. Why the proxy watch's reader only reads
(sandbox/proxy/watch.py, docs/sandbox.md). The container is labelled and
removed at the end.
"""

from __future__ import annotations

import argparse
import os
import socket
import time
from collections.abc import Callable

import docker
import docker.errors

from sandbox import labels as lbl
from sandbox import require_image


def until_done(call: Callable[[str], object], cid: str) -> None:
    """One call, repeated while the daemon answers 409: its state change is applied
    from containerd's event, on the goroutine that publishes the daemon's events, so
    a held publisher leaves the container "already paused" after `unpause` returned."""
    while True:
        try:
            call(cid)
            return
        except docker.errors.APIError as exc:
            if exc.status_code != 409:
                raise
            time.sleep(0.005)


def pause_unpause(client: docker.DockerClient, cid: str, n: int) -> list[float]:
    took = []
    for _ in range(n):
        start = time.monotonic()
        until_done(client.api.pause, cid)
        until_done(client.api.unpause, cid)
        took.append(time.monotonic() - start)
    return took


def show(name: str, took: list[float]) -> None:
    ordered = sorted(took)

    def q(p: float) -> float:
        return ordered[int(p * (len(ordered) - 1))] * 1000

    print(
        f"{name:38s} n={len(took):5d}  p50 {q(0.5):6.1f} ms  p95 {q(0.95):6.1f} ms  "
        f"max {ordered[-1] * 1000:5.0f} ms  total {sum(took):6.1f} s",
        flush=True,
    )


def stalled_subscriber(path: str = "/var/run/docker.sock") -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(path)
    sock.sendall(b"GET /events HTTP/1.1\r\nHost: docker\r\n\r\n")
    return sock


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", type=int, default=200, help="pause+unpause rounds without it, and after")
    ap.add_argument("--during", type=int, default=1200, help="rounds with the stalled subscriber")
    args = ap.parse_args()
    client = docker.from_env()
    container = client.containers.run(
        require_image("servers"),
        entrypoint=["sleep", "3600"],
        detach=True,
        network_mode="none",
        labels=lbl.labels_for("bench-event-stall", lbl.new_id("att-stall"), "stall", os.getpid()),
    )
    try:
        show("no stalled subscriber", pause_unpause(client, container.id, args.before))
        sock = stalled_subscriber()
        time.sleep(0.5)
        during = pause_unpause(client, container.id, args.during)
        half = len(during) // 2
        show("stalled subscriber, first half", during[:half])
        show("stalled subscriber, second half", during[half:])
        sock.close()
        time.sleep(0.5)
        show("after it closed", pause_unpause(client, container.id, args.before))
    finally:
        container.remove(force=True)
        client.close()


if __name__ == "__main__":
    main()
