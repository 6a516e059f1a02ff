"""Remove what tbx left behind: orphans (the default), one run's, or everything.

An orphan is an item whose owning process (its `tbx.pid` label) has exited,
or one older than the TTL. `sweep()` never touches a live process's sandbox
unless it is asked for everything (`everything=True`, `tbx gc --all`) or for
one run by name (`sweep(run=...)`, the owner cleaning up after itself); what it leaves alone it reports, so `tbx gc` can say why.

Runs at start-up of every run (orphans only), at exit, and as `tbx gc`.
Containers go first, then the networks they were attached to.
"""

from __future__ import annotations

import logging
import os
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import docker.errors

from sandbox import labels
from sandbox.docker_api import docker_client, remove_container, remove_network

log = logging.getLogger(__name__)


@dataclass
class SweepResult:
    containers: list[str] = field(default_factory=list)
    networks: list[str] = field(default_factory=list)
    # what was left alone because its owner lives: owner pid -> number of containers / networks
    kept_containers: Counter[int] = field(default_factory=Counter)
    kept_networks: Counter[int] = field(default_factory=Counter)
    # what the daemon refused to remove (name: its reason), left for the next sweep
    failed: list[str] = field(default_factory=list)
    # stale endpoints force-disconnected so their networks could go ("network: endpoint")
    disconnected: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        text = f"removed {len(self.containers)} containers, {len(self.networks)} networks"
        if self.disconnected:
            text += f" (force-disconnected {len(self.disconnected)} stale endpoints first)"
        if self.failed:
            text += f"; could not remove {len(self.failed)} ({'; '.join(self.failed)[:500]})"
        pids = sorted(set(self.kept_containers) | set(self.kept_networks))
        if pids:
            n_c, n_n = sum(self.kept_containers.values()), sum(self.kept_networks.values())
            text += (
                f"; kept {n_c} containers and {n_n} networks of {len(pids)} live tbx "
                f"process{'es' if len(pids) != 1 else ''} (pids {', '.join(map(str, pids))}; "
                "`tbx gc --all` removes them too)"
            )
        return text


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _owner(item_labels: dict[str, str]) -> int | None:
    pid = item_labels.get(labels.OWNER_PID, "")
    return int(pid) if pid.isdigit() else None


def _owner_alive(item_labels: dict[str, str]) -> bool:
    pid = _owner(item_labels)
    return pid is not None and _pid_alive(pid)


def _age(item_labels: dict[str, str]) -> float:
    try:
        created = float(item_labels.get(labels.CREATED, "0") or 0)
    except ValueError:
        created = 0.0
    return time.time() - created


def _selected(item_labels: dict[str, str], run: str | None, ttl: float | None) -> bool:
    """ttl None: every item (of the run); else only orphans: owner gone or at least ttl seconds old."""
    if run is not None and item_labels.get(labels.RUN) != run:
        return False
    return ttl is None or _age(item_labels) >= ttl or not _owner_alive(item_labels)


def sweep(
    run: str | None = None,
    older_than: float | None = None,
    orphans: bool = False,
    *,
    everything: bool = False,
) -> SweepResult:
    """Remove tbx containers and networks.

    Default (no arguments): orphans only, i.e. items whose owning process has
    exited or that are older than `ORPHAN_TTL`. older_than: that TTL instead.
    run alone: all of this run's items, owner alive or not (the owner cleaning
    up after itself); with orphans or older_than: only that run's orphans.
    everything: every tbx item, live owners included (`tbx gc --all`).
    """
    explicit = everything or (run is not None and older_than is None and not orphans)
    ttl = None if explicit else (labels.ORPHAN_TTL if older_than is None else older_than)
    client = docker_client()
    result = SweepResult()
    for c in client.containers.list(all=True, filters={"label": labels.RUN}, ignore_removed=True):
        if not _selected(c.labels, run, ttl):
            if run is None or c.labels.get(labels.RUN) == run:
                result.kept_containers[_owner(c.labels) or 0] += 1
            continue
        if remove_container(c):
            result.containers.append(c.name)
    for n in client.networks.list(filters={"label": labels.RUN}):
        net_labels = n.attrs.get("Labels") or {}
        if not _selected(net_labels, run, ttl):
            if run is None or net_labels.get(labels.RUN) == run:
                result.kept_networks[_owner(net_labels) or 0] += 1
            continue
        try:
            n.reload()
            for cid in n.attrs.get("Containers") or {}:
                try:
                    if remove_container(client.containers.get(cid)):
                        result.containers.append(cid[:12])
                except docker.errors.NotFound:
                    pass
            try:
                removed = remove_network(n)
            except docker.errors.APIError as exc:
                if "active endpoints" not in str(exc.explanation or exc):
                    raise
                # An endpoint the daemon lost track of when a container was killed (no
                # container left to remove): only a forced disconnect lets the network go.
                # None listed (the daemon's endpoint count drifted): nothing the API can
                # clear; reported below and left, a daemon restart clears it.
                disconnected = force_disconnect(n)
                if not disconnected:
                    raise
                result.disconnected += [f"{n.name}: {e}" for e in disconnected]
                removed = remove_network(n)
            if removed:
                result.networks.append(n.name)
        except docker.errors.NotFound:
            pass
        except docker.errors.APIError as exc:
            # A sweep is best effort and must not stop the command that runs it; the
            # labels keep what it could not remove for the next one.
            log.warning("sweep: could not remove network %s: %s", n.name, exc.explanation or exc)
            result.failed.append(f"network {n.name}: {exc.explanation or exc}")
    return result


def force_disconnect(network: Any) -> list[str]:
    """Force-disconnect every endpoint still on `network` (by the name the network
    records for it, which works when its container no longer exists); returns the
    endpoints disconnected."""
    client = docker_client()
    network.reload()
    done = []
    for cid, endpoint in (network.attrs.get("Containers") or {}).items():
        target = (endpoint or {}).get("Name") or cid
        try:
            client.api.disconnect_container_from_network(target, network.id, force=True)
            done.append(target)
        except docker.errors.NotFound:
            continue
        except docker.errors.APIError as exc:
            log.warning(
                "sweep: could not disconnect %s from %s: %s", target, network.name, exc.explanation or exc
            )
    return done


def leftovers(run: str | None = None) -> tuple[list[str], list[str]]:
    """Names of tbx containers and networks that still exist (for tests and reports)."""
    client = docker_client()
    filters = {"label": f"{labels.RUN}={run}" if run else labels.RUN}
    return (
        [c.name for c in client.containers.list(all=True, filters=filters, ignore_removed=True)],
        [n.name for n in client.networks.list(filters=filters)],
    )


def remove_stopped(run: str) -> list[str]:
    """Remove `run`'s containers that are no longer running (exited, dead): what a
    restarted daemon leaves of the sets it stopped (restart policy "no" keeps them
    exited). Running and still-starting containers are left to their attempts."""
    client = docker_client()
    removed = []
    filters = {"label": f"{labels.RUN}={run}", "status": ["exited", "dead"]}
    for c in client.containers.list(all=True, filters=filters, ignore_removed=True):
        if remove_container(c):
            removed.append(c.name)
    return removed
