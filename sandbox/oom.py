"""Was a container's end an OOM kill? Asked of every place that records one.

Docker's `State.OOMKilled` alone is not enough: the daemon sets it from
containerd's OOM event, which on cgroup v1 comes from an eventfd that
containerd reads on its own schedule; on a loaded machine the container's exit
is often handled (and its cgroup removed) first, and then the event comes late
or, once the cgroup is gone, never. So an exit by SIGKILL (137, the OOM
killer's signal) is checked against, in turn:

- the kernel's log (`/dev/kmsg`): the OOM killer writes an `oom-kill:` line naming
  the memory cgroup at the moment it kills, before the process is even gone
  (readable by root or with CAP_SYSLOG; skipped when not);
- the container's memory cgroup counters while it still exists: cgroup v1
  `memory.oom_control` and cgroup v2 `memory.events`, both `oom_kill N`;
- the daemon's event log: an `oom` event of the container since it was created;
- the daemon's flag again,

for up to `OOM_GRACE` seconds, since every record but the kernel's may trail the exit.

Which OOM killer (`oom_cause`): the container's own memory limit ("limit": the
kernel's line says `constraint=CONSTRAINT_MEMCG`, the cgroup v2 `oom` counter
or the v1 `failcnt` shows the limit was reached) or the host running out of
memory ("host": the kernel's line says another constraint, or the cgroup counts
a kill while its limit was never reached). The first is what the container's
own load did (an attempt's calls, bench.run.lifecycle decides); the second is
the machine's fault. The daemon's flag and event say only "OOM": they come from
the container's own memory cgroup, and are read as its limit when nothing else
can be had.
"""

from __future__ import annotations

import contextlib
import errno
import os
import time
from collections.abc import Iterator, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

import docker.errors
import requests.exceptions

from sandbox.cgroups import container_dirs
from sandbox.docker_api import docker_client

__all__ = [
    "OOM_GRACE",
    "OomCause",
    "cgroup_oom_cause",
    "cgroup_oom_kills",
    "kernel_logged_oom",
    "kernel_oom_cause",
    "oom_cause",
    "oom_killed",
]

OomCause = Literal["limit", "host"]  # the container's own memory limit, or the host's memory

OOM_GRACE = 1.5  # seconds an exit by SIGKILL waits for a trailing OOM record
POLL_EVERY = 0.1
CGROUP_ROOT = Path("/sys/fs/cgroup")
KMSG = Path("/dev/kmsg")
SIGKILL_EXIT = 137


def _cgroup_files(cid: str, parent: str, root: Path) -> Iterator[Path]:
    """The container's OOM counter files (sandbox.cgroups: either cgroup version, either
    driver, Docker's parent or tbx's; `parent`: the container's own, when known)."""
    for directory, version in container_dirs(cid, "memory", parent, root):
        yield directory / ("memory.oom_control" if version == 1 else "memory.events")


def cgroup_oom_kills(cid: str, parent: str = "", root: Path = CGROUP_ROOT) -> int | None:
    """How many processes the kernel OOM-killed in the container's memory cgroup;
    None when no cgroup of it is found (the container is gone, or another layout)."""
    for path in _cgroup_files(cid, parent, root):
        try:
            text = path.read_text()
        except OSError:
            continue
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill" and value.strip().isdigit():
                return int(value)
    return None


def _counter(path: Path, key: str) -> int | None:
    try:
        text = path.read_text()
    except OSError:
        return None
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name == key and value.strip().isdigit():
            return int(value)
    return None


def cgroup_oom_cause(cid: str, parent: str = "", root: Path = CGROUP_ROOT) -> OomCause | None:
    """Which OOM killer the container's memory cgroup counts a kill of, None when it counts
    none (or no cgroup of it is found). v2: `oom` counts the cgroup's limit being reached
    (hierarchical, and no cgroup below a container's has a limit of its own); v1 has no such
    counter: `memory.failcnt` counts the usage hitting the limit."""
    for directory, version in container_dirs(cid, "memory", parent, root):
        if version == 1:
            kills = _counter(directory / "memory.oom_control", "oom_kill")
            if not kills:
                continue
            failcnt = None
            with contextlib.suppress(OSError, ValueError):
                failcnt = int((directory / "memory.failcnt").read_text().strip())
            return "host" if failcnt == 0 else "limit"
        kills = _counter(directory / "memory.events", "oom_kill")
        if not kills:
            continue
        return "limit" if _counter(directory / "memory.events", "oom") else "host"
    return None


def _kmsg_records(path: Path = KMSG) -> Iterator[str]:
    """Every record in the kernel's ring buffer (empty when it cannot be read)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return
    try:
        while True:
            try:
                record = os.read(fd, 8192)
            except BlockingIOError:
                return  # read to the end
            except OSError as exc:
                if exc.errno == errno.EPIPE:  # overwritten while reading: go on with the next
                    continue
                return
            if not record:
                return
            yield record.decode("utf-8", "replace")
    finally:
        os.close(fd)


def kernel_oom_cause(cid: str, path: Path = KMSG) -> OomCause | None:
    """The kernel's log of an OOM kill in the container's memory cgroup: "limit" when the
    kill was the memory cgroup's (`constraint=CONSTRAINT_MEMCG`; its `oom_memcg` is the
    container's or one below it), "host" for any other constraint; None without such a line."""
    for record in _kmsg_records(path):
        if "oom-kill:" in record and cid in record:
            return "limit" if "constraint=CONSTRAINT_MEMCG" in record else "host"
    return None


def kernel_logged_oom(cid: str, path: Path = KMSG) -> bool:
    """The kernel's log has an OOM kill in the container's memory cgroup."""
    return kernel_oom_cause(cid, path) is not None


def _timestamp(text: str) -> float | None:
    try:
        return datetime.fromisoformat(text[:26].rstrip("Z") + "+00:00").timestamp()
    except ValueError:
        return None


def _daemon_recorded(client: Any, cid: str, since: float | None) -> bool | None:
    """The daemon's flag is set now, or its event log holds an `oom` event of the
    container; None when the container was removed meanwhile (nothing more will come)."""
    try:
        if (client.api.inspect_container(cid).get("State") or {}).get("OOMKilled"):
            return True
        events = client.api.events(
            since=f"{(since or time.time() - 3600) - 1:.9f}",
            until=f"{time.time():.9f}",
            filters={"container": cid, "event": "oom"},
            decode=True,
        )
        with contextlib.closing(events):
            return any(e.get("Action") == "oom" for e in events)
    except docker.errors.NotFound:
        return None
    except (docker.errors.APIError, requests.exceptions.RequestException):
        return False  # the daemon away: no record to be had now


def oom_killed(attrs: Mapping[str, Any], client: Any = None, *, grace: float = OOM_GRACE) -> bool:
    """Whether the container `attrs` (a `docker inspect` document) was OOM-killed."""
    return oom_cause(attrs, client, grace=grace) is not None


def oom_cause(attrs: Mapping[str, Any], client: Any = None, *, grace: float = OOM_GRACE) -> OomCause | None:
    """Whether, and by which OOM killer, the container `attrs` (a `docker inspect`
    document) was killed: its own memory limit ("limit"), the host's ("host"), or None."""
    state = attrs.get("State") or {}
    cid = str(attrs.get("Id") or "")
    flagged = bool(state.get("OOMKilled"))
    if (state.get("ExitCode") != SIGKILL_EXIT and not flagged) or not cid:
        return None  # the OOM killer's signal is SIGKILL; any other end is not its
    # written as it kills: there by now if it will ever be (once), and it names the constraint
    told = kernel_oom_cause(cid)
    if told is not None:
        return told
    client = client or docker_client()
    parent = str((attrs.get("HostConfig") or {}).get("CgroupParent") or "")
    since = _timestamp(str(attrs.get("Created") or ""))
    deadline = time.monotonic() + grace
    while True:
        counted = cgroup_oom_cause(cid, parent)
        if counted is not None:
            return counted
        if flagged:
            return "limit"
        recorded = _daemon_recorded(client, cid, since)
        if recorded:
            return "limit"
        if recorded is None or time.monotonic() >= deadline:
            return None
        time.sleep(POLL_EVERY)
