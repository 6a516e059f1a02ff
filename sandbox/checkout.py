"""The one way to use a container set: check it out of a provider, use it, close it.

    async with open_sandbox(provider, request, label="golden replay of T") as lease:
        lease.servers["retail"], lease.admin_dsn("retail")

Every use goes through here: an attempt (`bench.run.lifecycle.open_attempt` opens
its sandbox with it), both golden replays, conformance, admission's measurement
and `tbx up`. So each gets the provider's boot gate, warm pool (where the provider
has one), reaper and teardown, and one translation of a failure: whatever failed
inside (a dump, a tool call, a connection), a container of the set found dead is
the cause reported, as `SandboxGoneError` naming it. After a failed database
connection the containers are asked again for up to LOSS_GRACE seconds, since the
daemon records a killed container's exit after its connections break (a killed
PostgreSQL breaks a dump's connection first: issue 38, finding 12).

A set whose container something outside ended before its user had it (killed while
it booted, waited in a warm pool or was handed over: `Fate.outside`) is given back
and another checked out, up to CHECKOUT_SETS sets, with a warning naming the lost
container: nothing of the user had begun, so the kill costs it the wait and nothing
else (issue 38, faults). A container that ended on its own (a crash, its own memory
limit) would end the next set the same way: that failure stands at once.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, MutableMapping
from contextlib import asynccontextmanager

import psycopg

from sandbox.container_fate import Fate, ended_fate, lost_fate
from sandbox.errors import ContainerLostError
from sandbox.labels import new_id
from sandbox.provider import SandboxLease, SandboxProvider
from sandbox.proxy.models import RegisterRequest, ResourceLimitHit, SandboxGoneError, ToolPolicy, Upstream
from sandbox.sandbox import SandboxRequest

__all__ = [
    "CHECKOUT_SETS",
    "LOSS_GRACE",
    "lost_after",
    "lost_container",
    "lost_fate_of",
    "open_sandbox",
    "register_request",
]

log = logging.getLogger(__name__)

LOSS_GRACE = 5.0
LOSS_POLL = 0.2
CHECKOUT_SETS = 3  # sets one checkout may take while those before were ended from outside


async def lost_fate_of(lease: SandboxLease) -> Fate | None:
    """A container of `lease` that died (sandbox.container_fate); None when all run."""
    containers = dict(lease.containers)
    return await asyncio.to_thread(lost_fate, containers) if containers else None


async def lost_container(lease: SandboxLease) -> str | None:
    """A container of `lease` that died, described; None when all run."""
    fate = await lost_fate_of(lease)
    return None if fate is None else fate.text


async def lost_after(
    lease: SandboxLease, exc: BaseException | None = None, *, grace: float | None = None
) -> Fate | None:
    """`lost_fate_of`, asked again for `grace` seconds (default: LOSS_GRACE after a failed
    connection to the set's database, else not again): the daemon records a killed
    container's exit after the connections it broke have failed."""
    if grace is None:
        grace = LOSS_GRACE if isinstance(exc, psycopg.OperationalError) else 0.0
    deadline = time.monotonic() + grace
    while True:
        lost = await lost_fate_of(lease)
        if lost is not None or time.monotonic() >= deadline:
            return lost
        await asyncio.sleep(LOSS_POLL)


async def _checkout_running(provider: SandboxProvider, request: SandboxRequest, label: str) -> SandboxLease:
    """`provider.checkout(request)`, again while the set it gives (or failed to start) lost
    a container to something outside (see the module doc)."""
    for n in range(1, CHECKOUT_SETS + 1):
        try:
            lease = await provider.checkout(request)
        except ContainerLostError as exc:
            if not exc.fate.outside or n == CHECKOUT_SETS:
                raise
            lost = exc.fate
        else:
            found = await asyncio.to_thread(ended_fate, dict(lease.containers))
            if found is None:
                return lease
            lost = found
            await provider.release(lease)
            if not lost.outside or n == CHECKOUT_SETS:
                raise SandboxGoneError(
                    f"{label}: sandbox gone before it was used: {lost.text}", fault=lost.fault
                )
        log.warning(
            "%s: a sandbox was lost before it was used (%s); checking out another (%d of %d)",
            label,
            lost.text,
            n + 1,
            CHECKOUT_SETS,
        )
        # A set of its own name: the lost one's removal (by its attempt label) must not take it.
        request = request.model_copy(update={"attempt_id": new_id(request.attempt_id)})
    raise AssertionError("unreachable")


def register_request(lease: SandboxLease, attempt_id: str, policy: ToolPolicy) -> RegisterRequest:
    """The tool proxy's registration of `lease`: every server with its secret, the
    containers and the network its watch follows. The policy goes as it is: an allow-list of
    None lists every tool, an empty one none (a Session API `available_tools: []`)."""
    headers = dict(lease.server_headers)
    return RegisterRequest(
        attempt_id=attempt_id,
        upstreams={
            d: Upstream(url=u, headers=headers, interface=lease.interface, tools=lease.tools.get(d))
            for d, u in lease.servers.items()
        },
        policy=policy,
        containers=dict(lease.containers),
        network=lease.network,
    )


@asynccontextmanager
async def open_sandbox(
    provider: SandboxProvider,
    request: SandboxRequest,
    *,
    label: str,
    timings: MutableMapping[str, float] | None = None,
) -> AsyncIterator[SandboxLease]:
    """A prepared sandbox for `request`, closed on the way out whatever happened.
    `label` names the user in a loss ("attempt X", "golden replay of T"); `timings`
    gets `sandbox_start` (the checkout) and, when the body ended normally, `teardown`."""
    timings = timings if timings is not None else {}
    t = time.monotonic()
    lease = await _checkout_running(provider, request, label)
    try:
        timings["sandbox_start"] = time.monotonic() - t
        try:
            yield lease
        except Exception as exc:
            # The agent's own limit and an already-named loss stand; anything else while a
            # container of the set is dead is that container's doing.
            if not isinstance(exc, SandboxGoneError | ResourceLimitHit):
                lost = await lost_after(lease, exc)
                if lost is not None:
                    raise SandboxGoneError(f"{label}: sandbox gone: {lost.text}", fault=lost.fault) from exc
            raise
        t = time.monotonic()
    finally:
        await provider.release(lease)
    timings["teardown"] = time.monotonic() - t
