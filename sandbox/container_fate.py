"""What became of an attempt's container, in words an operator can act on.

One place says why a container of a sandbox is no longer usable: its role and
name, whether it exited (with which code), was killed (137: SIGKILL), hit its
memory limit (sandbox.oom: the kernel's, the cgroup's and the daemon's records,
with the limit), is paused, or
no longer exists. The proxy's watch (sandbox.proxy.watch), a sandbox's start
(sandbox.sandbox) and the attempt unit (bench.run.attempt) all describe a
lost container with it, so a system error's reason always names the container.

`fate_of` / `lost_fate` give the same as a `Fate`: the words plus what a caller
decides on, whether the container hit its own memory limit (an OOM kill by its
own cgroup's limit, not the host's), whether something outside the set ended it
(a kill, a stop, the host's OOM killer, a removal: a new set may well run where
this one could not) and when it ended. Whether that limit was
the attempt's doing is the proxy's to say (sandbox.proxy.loss): it knows which
calls were in flight.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

import docker
import docker.errors
import requests.exceptions

from sandbox.docker_api import docker_client
from sandbox.faults import Fate
from sandbox.oom import OomCause, oom_cause
from sandbox.start_deadline import container_running

__all__ = ["Fate", "describe", "ended_fate", "fate_of", "lost_container", "lost_fate"]


# Exit codes of a container ended by a signal (128 + SIGKILL, 128 + SIGTERM).
_SIGNALLED = (137, 143)


def _mib(limit: Any) -> str:
    try:
        n = int(limit)
    except (TypeError, ValueError):
        return "no limit"
    return f"{n / 2**20:.0f} MiB" if n else "no limit"


def _ended_at(state: Mapping[str, Any]) -> float | None:
    text = str(state.get("FinishedAt") or "")
    if not text or text.startswith("0001-"):
        return None
    try:  # the daemon writes nanoseconds; Python reads microseconds
        head, _, rest = text.rstrip("Z").partition(".")
        return datetime.fromisoformat(f"{head}.{(rest + '000000')[:6]}+00:00").timestamp()
    except ValueError:
        return None


def describe(role: str, attrs: Mapping[str, Any], oom: bool | OomCause | None = None) -> str | None:
    """Why the container `attrs` (a `docker inspect` document) is unusable, or None
    while it runs. Names the role, the container's name and its short id. `oom`:
    whether (True, or which killer: sandbox.oom.OomCause) it was OOM-killed, else the
    document's flag says."""
    state = attrs.get("State") or {}
    name = str(attrs.get("Name") or "").lstrip("/") or "?"
    who = f"its {role} container {name} ({str(attrs.get('Id', ''))[:12]})"
    status = state.get("Status", "unknown")
    if status == "running" and not state.get("Paused"):
        return None
    code = state.get("ExitCode")
    limit = _mib((attrs.get("HostConfig") or {}).get("Memory"))
    if oom == "host":
        return (
            f"{who} was OOM-killed: the host ran out of memory (not its own limit of {limit}) "
            f"(exit code {code})"
        )
    if state.get("OOMKilled") if oom is None else oom:
        return f"{who} was OOM-killed: it hit its memory limit of {limit} (exit code {code})"
    if status in ("exited", "dead"):
        how = " (killed: SIGKILL)" if code == 137 else " (SIGTERM)" if code == 143 else ""
        return f"{who} exited with code {code}{how}"
    return f"{who} is {status}"


def fate_of(role: str, attrs: Mapping[str, Any], client: Any = None) -> Fate | None:
    """The fate of the container `attrs` (a `docker inspect` document); None while it runs."""
    state = attrs.get("State") or {}
    running = state.get("Status") == "running"
    oom = None if running else oom_cause(attrs, client or docker_client())
    text = describe(role, attrs, oom if oom is not None else (None if running else False))
    if text is None:
        return None
    outside = oom == "host" or (oom is None and state.get("ExitCode") in _SIGNALLED)
    return Fate(role, text, own_memory_limit=oom == "limit", ended_at=_ended_at(state), outside=outside)


def lost_fate(containers: Mapping[str, str], client: Any = None) -> Fate | None:
    """The first of `containers` (role -> id) that is gone or not running, as a `Fate`;
    None when all run. A daemon that cannot be asked says so (the state is unknown)."""
    client = client or docker_client()
    for role, cid in containers.items():
        try:
            attrs = client.api.inspect_container(cid)
        except docker.errors.NotFound:
            return Fate(role, f"its {role} container {cid[:12]} no longer exists", outside=True)
        except (docker.errors.APIError, requests.exceptions.RequestException) as exc:
            return Fate(
                role,
                f"state of its {role} container {cid[:12]} unknown: cannot ask the Docker daemon ({exc})",
                unknown=True,
            )
        fate = fate_of(role, attrs, client)
        if fate is not None:
            return fate
    return None


def ended_fate(containers: Mapping[str, str], client: Any = None) -> Fate | None:
    """`lost_fate`, asking the daemon only when a container's cgroup says it ended (its
    cgroup empty, or gone while another container's of the set is there): while every
    one shows processes, or where this host shows none of their cgroups, None without a
    Docker call (a check that costs a checkout nothing; the proxy's registration asks
    again)."""
    running = [container_running(cid, False) for cid in containers.values()]
    if all(r is True for r in running) or all(r is None for r in running):
        return None
    return lost_fate(containers, client)


def lost_container(containers: Mapping[str, str], client: Any = None) -> str | None:
    """`lost_fate` in words: the first of `containers` that is gone or not running, described."""
    fate = lost_fate(containers, client)
    return fate.text if fate is not None else None
