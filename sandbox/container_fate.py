"""What became of an attempt's container, in words an operator can act on.

One place says why a container of a sandbox is no longer usable: its role and
name, whether it exited (with which code), was killed (137: SIGKILL), hit its
memory limit (sandbox.oom: the kernel's, the cgroup's and the daemon's records,
with the limit), is paused, or
no longer exists. The proxy's watch (sandbox.proxy.watch), a sandbox's start
(sandbox.sandbox) and the attempt unit (bench.run.attempt) all describe a
lost container with it, so a system error's reason always names the container.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import docker
import docker.errors
import requests.exceptions

from sandbox.docker_client import docker_client
from sandbox.oom import oom_killed

__all__ = ["describe", "lost_container"]


def _mib(limit: Any) -> str:
    try:
        n = int(limit)
    except (TypeError, ValueError):
        return "no limit"
    return f"{n / 2**20:.0f} MiB" if n else "no limit"


def describe(role: str, attrs: Mapping[str, Any], oom: bool | None = None) -> str | None:
    """Why the container `attrs` (a `docker inspect` document) is unusable, or None
    while it runs. Names the role, the container's name and its short id. `oom`:
    whether it was OOM-killed (sandbox.oom), else the document's flag says."""
    state = attrs.get("State") or {}
    name = str(attrs.get("Name") or "").lstrip("/") or "?"
    who = f"its {role} container {name} ({str(attrs.get('Id', ''))[:12]})"
    status = state.get("Status", "unknown")
    if status == "running" and not state.get("Paused"):
        return None
    code = state.get("ExitCode")
    if state.get("OOMKilled") if oom is None else oom:
        limit = _mib((attrs.get("HostConfig") or {}).get("Memory"))
        return f"{who} was OOM-killed: it hit its memory limit of {limit} (exit code {code})"
    if status in ("exited", "dead"):
        how = " (killed: SIGKILL)" if code == 137 else " (SIGTERM)" if code == 143 else ""
        return f"{who} exited with code {code}{how}"
    return f"{who} is {status}"


def lost_container(containers: Mapping[str, str], client: Any = None) -> str | None:
    """The first of `containers` (role -> id) that is gone or not running, described;
    None when all run. A daemon that cannot be asked says so (the state is unknown)."""
    client = client or docker_client()
    for role, cid in containers.items():
        try:
            attrs = client.api.inspect_container(cid)
        except docker.errors.NotFound:
            return f"its {role} container {cid[:12]} no longer exists"
        except (docker.errors.APIError, requests.exceptions.RequestException) as exc:
            return f"state of its {role} container {cid[:12]} unknown: cannot ask the Docker daemon ({exc})"
        running = (attrs.get("State") or {}).get("Status") == "running"
        cause = describe(role, attrs, None if running else oom_killed(attrs, client))
        if cause is not None:
            return cause
    return None
