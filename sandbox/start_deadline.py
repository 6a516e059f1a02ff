"""A start timeout that measures *no progress*, not wall time.

On a machine whose cores are shared by far more runnable work than they can
serve (measured: load average 40 on 2 cores, other users' suites included),
a healthy server container can need more than a minute of wall time for its
~1.3 CPU-seconds of Python start. A wall-clock timeout then turns a slow
start into a system error. A hung start, though, uses no CPU. So while a
service is not answering yet, its deadline moves on as long as its container
keeps using CPU (its cgroup's CPU counter grew since the last look), up to a
hard cap; `timeout` seconds without any CPU used, or the cap, end the wait.
Where the cgroup cannot be read (another cgroup layout, a remote daemon) the
deadline is the plain wall-clock one.
"""

from __future__ import annotations

import time
from pathlib import Path

from sandbox.cgroups import container_dirs

HARD_CAP = 10.0  # the longest wait, in start timeouts, however busy the container is
MIN_PROGRESS = 0.005  # CPU-seconds between two looks that count as progress


def _cpu_files(container_id: str) -> list[tuple[Path, float]]:
    """Where the container's CPU counter may live, with its unit per second (sandbox.cgroups)."""
    return [
        (d / "cpuacct.usage", 1e9) if version == 1 else (d / "cpu.stat", 1e6)
        for d, version in container_dirs(container_id, "cpuacct")
    ]


def container_running(container_id: str, seen: bool) -> bool | None:
    """Whether the container still has processes, from its cgroup (no daemon call):
    True while it does, False once it has none or its cgroup is gone after having
    been `seen`, None when this host's cgroups cannot tell (ask the daemon)."""
    for path, _ in _cpu_files(container_id):
        try:
            return bool((path.parent / "cgroup.procs").read_text().strip())
        except FileNotFoundError:
            continue
        except OSError:
            return None
    return False if seen else None


def container_cpu(container_id: str) -> float | None:
    """CPU seconds the container has used (cgroup v1 or v2 with the systemd driver), None if unreadable."""
    for path, scale in _cpu_files(container_id):
        try:
            text = path.read_text()
        except OSError:
            continue
        if path.name == "cpu.stat":  # "usage_usec N" is the first line
            return int(text.split()[1]) / scale
        return int(text) / scale
    return None


class StartDeadline:
    """`expired()` once `timeout` s pass without the container using CPU, or at the cap."""

    def __init__(self, start: float, timeout: float, container_id: str | None = None):
        self.timeout = timeout
        self.deadline = start + timeout
        self.cap = start + HARD_CAP * timeout
        self.container_id = container_id
        self._cpu = container_cpu(container_id) if container_id else None

    def look(self, now: float | None = None) -> None:
        """Move the deadline on if the container used CPU since the last look."""
        if self.container_id is None or self._cpu is None:
            return
        cpu = container_cpu(self.container_id)
        if cpu is None:
            return
        now = time.monotonic() if now is None else now
        if cpu - self._cpu >= MIN_PROGRESS:
            self.deadline = min(self.cap, max(self.deadline, now + self.timeout))
        self._cpu = cpu

    def expired(self, now: float | None = None) -> bool:
        return (time.monotonic() if now is None else now) >= self.deadline
