"""tbx's own cgroup parent for attempt containers, with a CPU weight of its own
(opt-in: `TBX_CGROUP_SHARES=N`).

Why: with Docker's cgroupfs driver every container sits under one group
(`/docker`), and the kernel weighs that group like a single host process. While
sets boot, dockerd, containerd, runc and a fuse-overlayfs per container (all
host processes) are busy, and all containers together, the PostgreSQL and the
server answering a running attempt's tool call among them, got one host
process's share of the cores; so did they against any other work on the machine.
Under `/tbx` with N shares, the containers as a group weigh as much as N/1024
host processes; inside it the boot and running weights of `sandbox.cpu_weight`
still order boots after attempts.

Off by default, as measured (docs/performance.md, "tbx's cgroup parent"): on a
machine tbx has to itself, tbx's own process (agent loops, the proxy relaying
every tool call, the coordinator) is then the host process that loses, and
throughput fell ~10 % at 8192; with other work competing for the cores, tool
calls waited a third as long and throughput rose. So it is for a machine tbx
shares.

Used only where tbx can set it up: a local daemon with the cgroupfs driver and
a cgroup tree this process may write (root, not a read-only /sys/fs/cgroup).
Elsewhere (the systemd driver, a remote or rootless daemon) containers keep
Docker's default parent.
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path

from sandbox.cgroups import ROOT, TBX_PARENT
from sandbox.cpu_weight import shares_to_weight
from sandbox.docker_api import docker_client
from sandbox.errors import SandboxError

__all__ = ["PARENT_SHARES", "SHARES_ENV", "attempt_parent", "parent_shares"]

log = logging.getLogger(__name__)

SHARES_ENV = "TBX_CGROUP_SHARES"
PARENT_SHARES = 0  # off unless asked for (module doc)


def parent_shares() -> int:
    """The parent's cpu.shares (0: no parent of tbx's own, Docker's default)."""
    raw = os.environ.get(SHARES_ENV, "").strip()
    if not raw:
        return PARENT_SHARES
    try:
        value = int(raw)
    except ValueError:
        raise SandboxError(
            f"{SHARES_ENV} must be an integer (0 turns tbx's cgroup parent off), not {raw!r}"
        ) from None
    if value != 0 and not 2 <= value <= 262144:
        raise SandboxError(
            f"{SHARES_ENV} must be 0 or between 2 and 262144 (cgroup v1 cpu.shares), not {value}"
        )
    return value


def _local_daemon() -> bool:
    host = os.environ.get("DOCKER_HOST", "")
    return not host or host.startswith("unix://")


def _write(directory: Path, name: str, value: int) -> bool:
    try:
        directory.mkdir(exist_ok=True)
        (directory / name).write_text(str(value))
    except OSError as exc:
        log.info("no cgroup parent of tbx's own (%s: %s); Docker's default parent is used", directory, exc)
        return False
    return True


def _set_up(shares: int, root: Path) -> bool:
    if (root / "cgroup.controllers").exists():  # v2: the cpu controller must reach children
        try:
            enabled = (root / "cgroup.subtree_control").read_text().split()
        except OSError:
            return False
        return "cpu" in enabled and _write(root / TBX_PARENT, "cpu.weight", shares_to_weight(shares))
    for mount in ("cpu", "cpu,cpuacct"):
        if (root / mount).is_dir():
            return _write(root / mount / TBX_PARENT, "cpu.shares", shares)
    return False


_decided: dict[Path, str | None] = {}
_lock = threading.Lock()


def attempt_parent(root: Path = ROOT) -> str | None:
    """The cgroup parent to create attempt containers under, set up once per process;
    None: Docker's default (see the module doc for when)."""
    with _lock:
        if root in _decided:
            return _decided[root]
        shares = parent_shares()
        if shares == 0 or not _local_daemon():
            _decided[root] = None
            return None
        try:
            driver = docker_client().info().get("CgroupDriver")
        except Exception as exc:  # not decided: the daemon's errors surface where containers are made
            log.info("no cgroup parent of tbx's own this time (docker info: %s)", exc)
            return None
        parent = "/" + TBX_PARENT if driver == "cgroupfs" and _set_up(shares, root) else None
        _decided[root] = parent
        return parent
