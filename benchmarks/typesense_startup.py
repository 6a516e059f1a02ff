"""Typesense container start-up: baked snapshot vs. fresh data dir.

Starts the tbx Typesense image N times per variant with the sandbox's hardening
(read-only root fs, tmpfs data dir, cap-drop ALL, no-new-privileges, 512m
memory, 256 pids) and measures the time from ``container.start()`` to the first
``GET /health`` answering ``{"ok":true}``, polled on the container's bridge IP
(no published ports).

* ``snapshot``: the default entrypoint, which copies the build-time raft
  snapshot into the empty tmpfs data dir;
* ``fresh``: the same image with ``TBX_TYPESENSE_SEED=0`` (empty data dir).

Usage::

    python benchmarks/typesense_startup.py [-n 10] [--image TAG]

Containers carry the label ``tbx.run=bench-typesense`` (plus ``tbx.pid``) and
are removed as soon as they are measured, again at the end, and, at the start,
leftovers of runs whose process is gone.
"""

from __future__ import annotations

import argparse
import http.client
import math
import os
import sys
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime

import docker
from docker.models.containers import Container

LABEL = "tbx.run"
LABEL_VALUE = "bench-typesense"
DEFAULT_IMAGE = os.environ.get("TBX_TYPESENSE_IMAGE", "tbx-dev/typesense:test")


@dataclass
class Sample:
    start_call: float  # duration of the container.start() API call
    healthy: float  # container.start() issued -> /health ok
    after_start: float  # container.start() returned -> /health ok
    process: float  # State.StartedAt (entrypoint exec'd) -> /health ok


@dataclass
class Variant:
    name: str
    seed: bool
    samples: list[Sample] = field(default_factory=list)


def percentile(values: list[float], p: float) -> float:
    """Nearest-rank percentile (no interpolation; honest for small N)."""
    ordered = sorted(values)
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return ordered[rank - 1]


def health_ok(ip: str, timeout: float = 0.5) -> bool:
    conn = http.client.HTTPConnection(ip, 8108, timeout=timeout)
    try:
        conn.request("GET", "/health")
        resp = conn.getresponse()
        body = resp.read()
        return resp.status == 200 and b'"ok":true' in body.replace(b" ", b"")
    except OSError:
        return False
    finally:
        conn.close()


def parse_docker_time(value: str) -> float:
    """Docker's RFC 3339 timestamps carry nanoseconds; datetime takes microseconds."""
    head, _, frac = value.rstrip("Z").partition(".")
    base = datetime.strptime(head, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=UTC).timestamp()
    return base + (float("0." + frac) if frac else 0.0)


def bridge_ip(container: Container) -> str:
    container.reload()
    for net in container.attrs["NetworkSettings"]["Networks"].values():
        if net.get("IPAddress"):
            return str(net["IPAddress"])
    raise RuntimeError(f"container {container.short_id} has no bridge IP")


def run_once(client: docker.DockerClient, image: str, seed: bool, timeout: float, network: str) -> Sample:
    container = client.containers.create(
        image,
        detach=True,
        # tbx.created / tbx.pid as in sandbox/labels.py: without them a concurrent
        # `sweep(older_than=..., orphans=True)` would take our containers for stale.
        labels={
            LABEL: LABEL_VALUE,
            "tbx.created": str(int(time.time())),
            "tbx.pid": str(os.getpid()),
            "tbx.role": "typesense",
        },
        environment={"TYPESENSE_API_KEY": "bench", "TBX_TYPESENSE_SEED": "1" if seed else "0"},
        read_only=True,
        tmpfs={"/data": "rw,size=64m,uid=10002,gid=10002"},
        cap_drop=["ALL"],
        security_opt=["no-new-privileges"],
        mem_limit="512m",
        pids_limit=256,
        network=network,
    )
    try:
        t0 = time.perf_counter()
        container.start()
        t1 = time.perf_counter()
        ip = bridge_ip(container)
        while not health_ok(ip):
            if time.perf_counter() - t0 > timeout:
                logs = container.logs(tail=20).decode(errors="replace")
                raise RuntimeError(f"not healthy after {timeout}s; logs:\n{logs}")
            time.sleep(0.002)
        t2 = time.perf_counter()
        wall = time.time()
        started_at = parse_docker_time(container.attrs["State"]["StartedAt"])
        return Sample(start_call=t1 - t0, healthy=t2 - t0, after_start=t2 - t1, process=wall - started_at)
    finally:
        container.remove(force=True)


def _pid_alive(pid: str) -> bool:
    if not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep(client: docker.DockerClient, leftovers_only: bool = False) -> None:
    """Remove this benchmark's containers: ours, or (leftovers_only) those of dead runs."""
    for c in client.containers.list(all=True, filters={"label": f"{LABEL}={LABEL_VALUE}"}):
        owner = c.labels.get("tbx.pid", "")
        if (not _pid_alive(owner)) if leftovers_only else owner == str(os.getpid()):
            c.remove(force=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("-n", type=int, default=10, help="starts per variant (default 10)")
    ap.add_argument("--image", default=DEFAULT_IMAGE, help=f"image tag (default {DEFAULT_IMAGE})")
    ap.add_argument("--timeout", type=float, default=30.0, help="seconds to wait for health per start")
    ap.add_argument("--network", default="bridge", help="docker network to attach to (default bridge)")
    args = ap.parse_args(argv)

    client = docker.from_env()
    client.images.get(args.image)  # fail early with ImageNotFound
    sweep(client, leftovers_only=True)
    variants = [Variant("snapshot", seed=True), Variant("fresh", seed=False)]
    try:
        for i in range(args.n):  # interleave so both variants see the same machine load
            for v in variants:
                v.samples.append(run_once(client, args.image, v.seed, args.timeout, args.network))
            print(f"\r{i + 1}/{args.n}", end="", file=sys.stderr, flush=True)
        print(file=sys.stderr)
    finally:
        sweep(client)

    print(f"image {args.image}, n={args.n}, milliseconds")
    print("  start->ok: container.start() issued -> /health ok (the number that matters)")
    print("  start(): the container.start() API call alone (docker/runc, not Typesense)")
    print("  proc->ok: State.StartedAt (entrypoint exec'd) -> /health ok")
    print(
        f"{'variant':<10}{'start->ok p50':>15}{'p95':>9}{'min':>9}{'max':>9}"
        f"{'start() p50':>13}{'proc->ok p50':>14}{'p95':>9}"
    )
    for v in variants:
        h = [s.healthy * 1000 for s in v.samples]
        st = [s.start_call * 1000 for s in v.samples]
        pr = [s.process * 1000 for s in v.samples]
        print(
            f"{v.name:<10}{percentile(h, 50):>15.1f}{percentile(h, 95):>9.1f}"
            f"{min(h):>9.1f}{max(h):>9.1f}{percentile(st, 50):>13.1f}"
            f"{percentile(pr, 50):>14.1f}{percentile(pr, 95):>9.1f}"
        )
    snap, fresh = ([s.healthy for s in v.samples] for v in variants)
    print(
        f"ratio fresh/snapshot (start->ok): p50 {percentile(fresh, 50) / percentile(snap, 50):.1f}x, "
        f"p95 {percentile(fresh, 95) / percentile(snap, 95):.1f}x"
    )
    snap_p, fresh_p = ([s.process for s in v.samples] for v in variants)
    print(f"ratio fresh/snapshot (proc->ok): p50 {percentile(fresh_p, 50) / percentile(snap_p, 50):.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
