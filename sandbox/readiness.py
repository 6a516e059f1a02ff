"""Waiting for a started container to answer its readiness probe
(`ServiceSpec.ready`): polled quickly at first and more slowly the longer it
takes, with a start timeout that counts time without CPU progress
(`sandbox.start_deadline`), and a check every half second that the container
has not died meanwhile (read from its cgroup where the host shows it, else
asked of the daemon; the error says how it ended, with its last log lines)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

import docker.errors
from testcontainers.core.container import DockerContainer

from sandbox.container_fate import Fate, fate_of
from sandbox.errors import ContainerLostError, ContainerStartError
from sandbox.start_deadline import HARD_CAP, StartDeadline, container_running

POLL_INTERVAL = 0.01
MAX_POLL_INTERVAL = 0.05
ALIVE_CHECK_EVERY = 0.5  # seconds between "did the container die?" checks while polling
T = TypeVar("T")


def poll_interval(waited: float) -> float:
    """10 ms early on, then 1/40 of the time waited so far, at most 50 ms: a quick start is
    seen within a few ms, and a start that takes 100 s on a saturated machine costs this
    process 20 probes a second instead of 100 (each probe is CPU taken from that start)."""
    return min(MAX_POLL_INTERVAL, max(POLL_INTERVAL, waited / 40))


def tail_logs(container: DockerContainer, lines: int = 20) -> str:
    try:
        out = container.get_wrapped_container().logs(tail=lines).decode(errors="replace")
    except docker.errors.APIError:
        return "(no logs)"
    return out.strip() or "(no output)"


def check_alive(role: str, container: DockerContainer) -> None:
    """Raise ContainerLostError naming how the container ended, if it has."""
    wrapped = container.get_wrapped_container()
    try:
        wrapped.reload()
    except docker.errors.NotFound:  # removed while it started (`docker rm -f`)
        gone = Fate(role, f"its {role} container {wrapped.id[:12]} no longer exists", outside=True)
        raise ContainerLostError(f"sandbox start failed: {gone.text}", gone) from None
    if wrapped.status in ("exited", "dead"):
        fate = fate_of(role, wrapped.attrs)
        if fate is not None:
            raise ContainerLostError(
                f"sandbox start failed: {fate.text}; last log lines:\n{tail_logs(container)}", fate
            )


def wait_ready(
    role: str,
    container: DockerContainer,
    probe: Callable[[], T],
    *,
    deadline: float,
    start_timeout: float,
    raise_if_aborted: Callable[[], None],
) -> T:
    """The probe's first result that does not raise. `deadline` is the set's
    start (monotonic) plus `start_timeout`; `raise_if_aborted` ends the wait
    when the sandbox is closed meanwhile."""
    last: Exception | None = None
    next_check = time.monotonic() + ALIVE_CHECK_EVERY
    # The timeout counts time without progress (sandbox.start_deadline): a container still
    # using CPU is starting slowly on a busy machine, not hung.
    cid = container.get_wrapped_container().id
    wait = StartDeadline(deadline - start_timeout, start_timeout, cid)
    started = time.monotonic()
    seen = False  # its cgroup was read once: a cgroup gone later means the container ended
    while not wait.expired():
        raise_if_aborted()
        try:
            return probe()
        except Exception as exc:  # the service is not up yet
            last = exc
        if time.monotonic() >= next_check:
            # The cgroup says whether it still runs at no cost; the daemon is asked (an
            # inspect: dockerd CPU, taken from the boots it waits for) only when the
            # cgroup cannot tell or says it ended, to learn how.
            running = container_running(cid, seen)
            seen = seen or running is not None
            if running is not True:
                check_alive(role, container)
            wait.look()
            next_check = time.monotonic() + ALIVE_CHECK_EVERY
        time.sleep(poll_interval(time.monotonic() - started))
    check_alive(role, container)
    waited = time.monotonic() - (deadline - start_timeout)
    raise ContainerStartError(
        f"{role} not ready after {waited:.0f}s (start timeout {start_timeout:.0f}s without "
        f"CPU progress, at most {HARD_CAP:.0f}x that) ({last}); last log lines:\n"
        f"{tail_logs(container)}"
    )
