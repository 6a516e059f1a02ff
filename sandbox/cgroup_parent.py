"""tbx's own cgroup parent for attempt containers, with a CPU weight of its own.

Why: with Docker's cgroupfs driver every container sits under one group
(`/docker`), and the kernel weighs that group like a single host process. While
sets boot, dockerd, containerd, runc and a fuse-overlayfs per container (all
host processes) are busy, and all containers together, the PostgreSQL and the
server answering a running attempt's tool call among them, got one host
process's share of the cores. Under `/tbx` with `PARENT_SHARES`, the containers
as a group weigh as much as that many host processes; inside it the boot and
running weights of `sandbox.cpu_weight` still order boots after attempts.

Used only where tbx can set it up: a local daemon with the cgroupfs driver and
a cgroup tree this process may write (root, not a read-only /sys/fs/cgroup).
Elsewhere (the systemd driver, a remote or rootless daemon) containers keep
Docker's default parent. `TBX_CGROUP_SHARES=0` turns it off.
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path

from sandbox.cgroups import ROOT, TBX_PARENT
from sandbox.cpu_weight import shares_to_weight
from sandbox.docker_client import docker_client
from sandbox.errors import SandboxError

__all__ = ["PARENT_SHARES", "SHARES_ENV", "attempt_parent", "parent_shares"]

log = logging.getLogger(__name__)

SHARES_ENV = "TBX_CGROUP_SHARES"
PARENT_SHARES = 8192  # eight host processes' weight (docs/performance.md, "tool calls under boots")


def parent_shares() -> int:
    """The parent's cpu.shares (0: no parent of tbx's own)."""
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
