"""Remove what tbx left behind: all of it, one run's, or what is older than a TTL.

Runs at start-up of every run (stale items only), at exit, and as `tbx gc`.
Containers go first, then the networks they were attached to.
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass, field

import docker.errors

from sandbox import labels
from sandbox.docker_client import docker_client, remove_container, remove_network


@dataclass
class SweepResult:
    containers: list[str] = field(default_factory=list)
    networks: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        return f"removed {len(self.containers)} containers, {len(self.networks)} networks"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _selected(item_labels: dict[str, str], run: str | None, older_than: float | None, orphans: bool) -> bool:
    if run is not None and item_labels.get(labels.RUN) != run:
        return False
    if older_than is not None:
        created = float(item_labels.get(labels.CREATED, "0") or 0)
        young = time.time() - created < older_than
        # Young items still count when the process that owned them is gone.
        if young and not (orphans and not _owner_alive(item_labels)):
            return False
    elif orphans and _owner_alive(item_labels):
        return False
    return True


def _owner_alive(item_labels: dict[str, str]) -> bool:
    pid = item_labels.get(labels.OWNER_PID)
    return bool(pid and pid.isdigit() and _pid_alive(int(pid)))


def sweep(run: str | None = None, older_than: float | None = None, orphans: bool = False) -> SweepResult:
    """Remove tbx containers and networks.

    run: only this run's items. older_than: only items created at least that many
    seconds ago. orphans: (also) items whose owning process has exited.
    """
    client = docker_client()
    result = SweepResult()
    for c in client.containers.list(all=True, filters={"label": labels.RUN}, ignore_removed=True):
        if _selected(c.labels, run, older_than, orphans) and remove_container(c):
            result.containers.append(c.name)
    for n in client.networks.list(filters={"label": labels.RUN}):
        if _selected(n.attrs.get("Labels") or {}, run, older_than, orphans):
            try:
                n.reload()
                for cid in n.attrs.get("Containers") or {}:
                    with contextlib.suppress(docker.errors.NotFound):
                        if remove_container(client.containers.get(cid)):
                            result.containers.append(cid[:12])
                if remove_network(n):
                    result.networks.append(n.name)
            except docker.errors.NotFound:
                pass
    return result


def leftovers(run: str | None = None) -> tuple[list[str], list[str]]:
    """Names of tbx containers and networks that still exist (for tests and reports)."""
    client = docker_client()
    filters = {"label": f"{labels.RUN}={run}" if run else labels.RUN}
    return (
        [c.name for c in client.containers.list(all=True, filters=filters, ignore_removed=True)],
        [n.name for n in client.networks.list(filters=filters)],
    )
