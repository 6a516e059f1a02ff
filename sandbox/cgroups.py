"""Where a container's cgroup is on this host: one table for every reader and
writer of a container's cgroup files (its CPU counter and liveness, its CPU
weight, its memory, its OOM counter).

Layouts: cgroup v1 (cpu and cpuacct mounted apart or together), v2, and the v2
half of a hybrid host; Docker's cgroupfs driver (`PARENT/ID`, default parent
`docker`) and its systemd driver (`SLICE/docker-ID.scope`, default slice
`system.slice`); under Docker's default parent or tbx's own
(`sandbox.cgroup_parent.PARENT`). Paths that do not exist are simply not there:
a reader tries them in order and takes the first it can read.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

__all__ = ["ROOT", "TBX_PARENT", "container_dirs"]

ROOT = Path("/sys/fs/cgroup")
# tbx's own parent for its containers (created and weighted by sandbox.cgroup_parent);
# listed here so every reader finds a container under it too.
TBX_PARENT = "tbx"

# The v1 mounts a controller may be found at (cpu and cpuacct are often co-mounted).
_V1_MOUNTS = {
    "cpu": ("cpu", "cpu,cpuacct"),
    "cpuacct": ("cpuacct", "cpu,cpuacct"),
    "memory": ("memory",),
}


def _groups(cid: str, parent: str) -> list[str]:
    """The container's group path under each parent it may have been created with."""
    parents = list(dict.fromkeys((parent.strip("/"), TBX_PARENT, "")))
    out: list[str] = []
    for p in parents:
        out.append(f"{p or 'docker'}/{cid}")  # cgroupfs driver
        if not p or p.endswith(".slice"):  # systemd driver
            out.append(f"{p or 'system.slice'}/docker-{cid}.scope")
    return out


def container_dirs(
    cid: str, controller: str, parent: str = "", root: Path | None = None
) -> list[tuple[Path, Literal[1, 2]]]:
    """Candidate directories of container `cid`'s cgroup for `controller`, each with its
    cgroup version (v1 and v2 name their files differently). `parent`: the container's
    `HostConfig.CgroupParent` when the caller knows it."""
    root = ROOT if root is None else root
    out: list[tuple[Path, Literal[1, 2]]] = []
    for group in _groups(cid, parent):
        for mount in _V1_MOUNTS.get(controller, (controller,)):
            out.append((root / mount / group, 1))
        out.append((root / group, 2))
        out.append((root / "unified" / group, 2))
    return out
