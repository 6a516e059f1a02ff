"""Where sandboxes come from: one lifecycle interface, whatever runs the containers.

In the spirit of inspect_ai's `SandboxEnvironment` (task_init / sample_init /
sample_cleanup / task_cleanup / cli_cleanup):

    provider = DockerProvider(warm=2)
    await provider.start(run_id)              # once per run: images resolved, stale leftovers swept
    provider.plan({"retail": 40}, upcoming)   # optional: how many checkouts each domain will see,
                                              # and (upcoming) their preparers in order
    lease = await provider.checkout(req)      # boot (or take a booted one from the pool) + prepare
    try:
        lease.servers["retail"]               # MCP endpoint of the attempt's server
        lease.admin_dsn("retail")             # host-side connection for the judge's state dumps
    finally:
        await provider.release(lease)         # this attempt's containers go, its slot is free
    await provider.close()                    # end of run: warm spares go
    await provider.sweep(run_id)              # anything a crash left behind

`boot` (nothing task-specific: a pool runs it ahead of demand) and `prepare`
(the request's `prepare`: seed rows, policy documents) are the two phases of `checkout`. The attempt
lifecycle (`bench.run.lifecycle`) talks only to this interface; the local Docker
provider below is the first implementation. A lease offers its connection
and its containers as plain fields (servers, their headers, the interface they
are reached through, containers, network); the tool proxy's registration is
built from them by its caller. Placement elsewhere (Ray) is not a provider: it
sits behind `bench.run.executor.AttemptExecutor`, each node with a provider of
its own.
"""

from __future__ import annotations

import abc
import asyncio
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple, Protocol

from sandbox import runtime_volumes
from sandbox.boots import BootGate
from sandbox.cpu_weight import raise_to_running
from sandbox.errors import CheckoutTimeout
from sandbox.labels import ORPHAN_TTL
from sandbox.pool import SandboxPool
from sandbox.preparer import Preparer
from sandbox.reaper import Reaper
from sandbox.sandbox import AsyncSandbox, AttemptHandle, Sandbox, SandboxRequest, resolve_images
from sandbox.services import Limits
from sandbox.sweeper import remove_stopped, sweep
from sandbox.timeouts import SANDBOX_TIMEOUTS, SandboxTimeouts


class Upcoming(NamedTuple):
    """One checkout to come: its domains and its preparer (built when needed, off the event loop)."""

    domains: list[str]
    preparer: Callable[[], Preparer]


class PoolShape(NamedTuple):
    """Everything a warm pool's boots take from a request that changes what runs: two
    requests of one shape can share spares."""

    domains: tuple[str, ...]
    checkout_servers: tuple[str, ...]  # each server's key: its image, command and world state
    typesense: bool
    limits: Limits
    images: tuple[tuple[str, str], ...]


def pool_shape(request: SandboxRequest, default_images: Mapping[str, str]) -> PoolShape:
    images = request.images or default_images
    return PoolShape(
        tuple(request.domains),
        tuple(s.key() for s in request.checkout_servers),
        request.typesense,
        request.limits,
        tuple(sorted(images.items())),
    )


class SandboxLease(Protocol):
    """One prepared container set, checked out of a provider by exactly one user (an
    attempt, a golden replay, `tbx up`) until `release`: a lease, not a session (in tbx a
    session is the Session API's; docs/architecture.md, "Names")."""

    @property
    def servers(self) -> Mapping[str, str]:
        """domain -> MCP URL reachable from the process that holds the lease."""
        ...

    @property
    def timings(self) -> Mapping[str, float]: ...

    def admin_dsn(self, domain: str) -> str:
        """A superuser connection string for `domain`'s schema (state dumps; never given to the agent)."""
        ...

    @property
    def server_headers(self) -> Mapping[str, str]:
        """Headers every request to `servers` must carry (the servers' upstream secret)."""
        ...

    @property
    def interface(self) -> str | None:
        """The host network device the servers are reached through (None: the default route)."""
        ...

    @property
    def containers(self) -> Mapping[str, str]:
        """role -> container id of the sandbox (empty when nothing runs in containers)."""
        ...

    @property
    def network(self) -> str | None:
        """The sandbox's private network (None: none of its own)."""
        ...

    @property
    def tools(self) -> Mapping[str, list[dict[str, Any]]]:
        """domain -> its server's tools/list taken at prepare (MCP JSON); a domain
        missing: not taken (the proxy's registration lists it)."""
        ...

    @property
    def handle(self) -> AttemptHandle | None:
        """Every endpoint of the set (PostgreSQL, Typesense, servers), as `tbx up` prints
        them; None where the provider has no such set."""
        ...

    async def prepared_states(self, fingerprint: str) -> Mapping[str, Any] | None:
        """The initial states (domain -> the preparer's snapshot) read right after
        seeding, if a preparer of `fingerprint` read them and nothing has written since;
        None: the caller dumps them now. One use (the attempt's writes follow)."""
        ...

    async def close(self) -> None:
        """Remove the attempt's containers (idempotent)."""
        ...


class SandboxProvider(abc.ABC):
    """The lifecycle of a run's sandboxes; see the module doc."""

    images: dict[str, str]

    def __init__(self) -> None:
        self.images = {}
        self.alive = 0  # checkouts begun and not closed yet (waiting for a sandbox, or holding one)
        self.held = 0  # of those, the ones holding their sandbox
        self._held: set[int] = set()  # ids of the leases handed out and not released

    async def start(self, run_id: str) -> None:  # noqa: B027 - optional hook
        """Once per run, before the first checkout."""

    def plan(  # noqa: B027 - optional hook
        self,
        attempts_per_domain: Mapping[str, int],
        upcoming: Sequence[Upcoming] | None = None,
        *,
        again: bool = False,
    ) -> None:
        """How many checkouts each domain will see (a pool stops booting there) and,
        when known, what each will be prepared with, in checkout order (a pool then
        prepares its spares ahead for them, and the checkout is a hand-over).
        `again`: a checkout's replacement is prepared for the same preparer first
        (`SandboxPool.plan`)."""

    @property
    def warm(self) -> int:
        """Sandboxes booted (or booting) ahead that no attempt holds yet."""
        return 0

    async def image_digests(self) -> dict[str, str]:
        """Image name -> immutable digest, for the run's bundle hash."""
        return dict(self.images)

    @abc.abstractmethod
    async def boot(self, request: SandboxRequest) -> Any:
        """Phase 1: containers started and answering, nothing task-specific yet."""

    @abc.abstractmethod
    async def prepare(self, booted: Any, request: SandboxRequest) -> SandboxLease:
        """Phase 2: the request's seed rows and policy documents in place."""

    async def checkout(self, request: SandboxRequest) -> SandboxLease:
        """A prepared sandbox for one attempt (boot + prepare, or from a warm pool); give
        it back with `release` (`sandbox.open_sandbox` does both)."""
        self.alive += 1
        try:
            lease = await self.prepare(await self.boot(request), request)
        except BaseException:
            self.alive -= 1
            raise
        return self._holding(lease)

    def _holding(self, lease: SandboxLease) -> SandboxLease:
        self.held += 1
        self._held.add(id(lease))
        return lease

    async def release(self, lease: SandboxLease) -> None:
        """Close a checked-out lease (its containers go) and give its slot back; once
        per checkout, whatever closed the lease before."""
        try:
            await lease.close()
        finally:
            if id(lease) in self._held:
                self._held.discard(id(lease))
                self.alive -= 1
                self.held -= 1

    async def ping(self) -> None:  # noqa: B027 - optional hook
        """Raise when the machinery that runs the containers does not answer."""

    async def recovered(self) -> None:  # noqa: B027 - optional hook
        """That machinery answers again after an outage: drop what did not survive it."""

    async def close(self) -> None:  # noqa: B027 - optional hook
        """End of run: release what the provider holds (warm pools)."""

    async def sweep(self, run_id: str | None = None) -> None:  # noqa: B027 - optional hook
        """Remove leftovers of `run_id` (None: every orphan of a dead process)."""


def ping_daemon() -> None:
    """Raise unless the daemon accepts a new connection now. Not the shared client: a
    stopping dockerd has already removed its socket, yet still answers on connections
    opened before (the shared client's pool), while every new one fails."""
    import docker

    client = docker.from_env(timeout=10)
    try:
        client.ping()
    finally:
        client.close()


def image_digests(images: dict[str, str]) -> dict[str, str]:
    """Image name -> the local image's immutable id (blocking: a Docker call per image)."""
    from sandbox.docker_api import docker_client

    return {name: docker_client().images.get(tag).id for name, tag in images.items()}


class DockerProvider(SandboxProvider):
    """Container sets on the local Docker daemon (`sandbox.sandbox`), cold or
    from a warm pool per domain (`sandbox.pool`, `warm` > 0)."""

    def __init__(
        self,
        *,
        warm: int = 0,
        sizes: Mapping[str, int] | None = None,
        stale_after: float = ORPHAN_TTL,
        timeouts: SandboxTimeouts = SANDBOX_TIMEOUTS,
        refill_delay: float = 0.0,
        teardown_inline: bool = False,
    ):
        super().__init__()
        self.warm_size = warm
        # Closing a lease removes its set before it returns (else in the background: Reaper).
        self.teardown_inline = teardown_inline
        self.refill_delay = refill_delay  # each pool's (SandboxPool.refill_delay)
        # Spares per pool (key: its domains joined by ","), where they differ from `warm`.
        self.sizes: dict[str, int] = dict(sizes or {})
        self.stale_after = stale_after
        # Every boot's start timeout, cold or pooled (`boot`), and how long a warm
        # checkout may wait for its sandbox (`checkout`; None: as long as it takes).
        self.timeouts = timeouts
        self.run_id: str | None = None
        self.pools: dict[PoolShape, SandboxPool] = {}
        self.budgets: dict[str, int] = {}
        self.upcoming: dict[str, list[Callable[[], Preparer]]] = {}
        self.again = False  # plan(again=...)
        # One bound on boots in flight for every pool and cold start (sandbox.boots).
        self.boots: BootGate | None = None
        # Teardown off the attempt's critical path, a bounded number at once (sandbox.reaper).
        self.reaper: Reaper | None = None

    async def start(self, run_id: str) -> None:
        self.run_id = run_id
        # Orphans included: containers of a killed run (on this output or not) go now.
        await asyncio.to_thread(sweep, None, self.stale_after, True)
        self.images = await asyncio.to_thread(resolve_images, True)
        await asyncio.to_thread(runtime_volumes.prepare, list(self.images.values()))
        self.reaper = Reaper(inline=True if self.teardown_inline else None)
        self.boots = BootGate()

    def plan(
        self,
        attempts_per_domain: Mapping[str, int],
        upcoming: Sequence[Upcoming] | None = None,
        *,
        again: bool = False,
    ) -> None:
        self.budgets = dict(attempts_per_domain)
        self.again = again
        self.upcoming = {}
        for item in upcoming or ():
            self.upcoming.setdefault(",".join(item.domains), []).append(item.preparer)

    @property
    def warm(self) -> int:
        return sum(p.spare for p in self.pools.values())

    async def image_digests(self) -> dict[str, str]:
        return await asyncio.to_thread(image_digests, self.images)

    async def boot(self, request: SandboxRequest) -> Sandbox:
        sb = Sandbox(request.model_copy(update={"start_timeout": self.timeouts.boot}))
        try:
            if self.boots is not None:
                await self.boots.run(sb.boot)
            else:
                await asyncio.to_thread(sb.boot)
        except BaseException:
            await asyncio.shield(asyncio.to_thread(sb.close))
            raise
        return sb

    async def prepare(self, booted: Sandbox, request: SandboxRequest) -> SandboxLease:
        booted.request = request
        try:
            booted.handle = await asyncio.to_thread(booted.prepare)
        except BaseException:
            await asyncio.shield(asyncio.to_thread(booted.close))
            raise
        sandbox = AsyncSandbox.adopt(booted)
        sandbox.reaper = self.reaper
        return sandbox

    async def checkout(self, request: SandboxRequest) -> SandboxLease:
        lease = await (self._from_pool(request) if self.warm_size else super().checkout(request))
        try:
            # booted and prepared at a low CPU weight; an attempt's set runs at the normal one
            await asyncio.to_thread(raise_to_running, lease.containers.values())
        except BaseException:
            await asyncio.shield(self.release(lease))
            raise
        return lease

    async def _from_pool(self, request: SandboxRequest) -> SandboxLease:
        self.alive += 1
        try:
            pool = await self.warm_up(request)
            try:
                waiting = self.timeouts.checkout
                sandbox = await asyncio.wait_for(pool.acquire(request.prepare), waiting)
            except TimeoutError:
                # at capacity, not a failed attempt: a server refuses the request, a run retries
                assert waiting is not None
                raise CheckoutTimeout(
                    f"no {request.pool_key} sandbox within {waiting:g} s "
                    "(every spare is taken and the boots are queued or slow: is Docker overloaded?)",
                    waiting,
                ) from None
        except BaseException:
            self.alive -= 1
            raise
        sandbox.reaper = self.reaper
        return self._holding(sandbox)

    async def warm_up(self, request: SandboxRequest) -> SandboxPool:
        """The warm pool of `request`'s shape, started (booting its spares) if it was not.
        A pool boots every spare alike, so requests that differ in anything a boot takes
        (Typesense, limits, images) get pools of their own; the plan's budget, size and
        upcoming preparers are per domains. The spares carry the provider's run (the
        first request's when it was not started), which the end-of-run sweep removes."""
        key = request.pool_key
        shape = pool_shape(request, self.images)
        pool = self.pools.get(shape)
        if pool is None:
            pool = SandboxPool(
                request.domains,
                size=self.sizes.get(key, self.warm_size),
                checkout_servers=request.checkout_servers,
                typesense=request.typesense,
                limits=request.limits,
                run_id=self.run_id or request.run_id,
                images=request.images or self.images or None,
                budget=self.budgets.get(key),
                fail_fast=False,
                boots=self.boots,
                refill_delay=self.refill_delay,
                start_timeout=self.timeouts.boot,
            )
            self.pools[shape] = pool
            if key in self.upcoming:
                pool.plan(self.upcoming[key], again=self.again)
            await pool.__aenter__()
        return pool

    async def ping(self) -> None:
        await asyncio.to_thread(ping_daemon)

    async def recovered(self) -> None:
        """After a daemon restart: warm sandboxes are stopped (restart policy "no"), removals
        that failed meanwhile are owed, and the stopped sets of attempts in flight go by label."""
        for pool in list(self.pools.values()):
            await pool.flush()
        if self.reaper is not None:
            await self.reaper.retry_failed()
        if self.run_id is not None:
            await asyncio.to_thread(remove_stopped, self.run_id)

    async def close(self) -> None:
        pools, self.pools = list(self.pools.values()), {}
        for pool in pools:
            await pool.close()
        if self.boots is not None:
            self.boots.close()
            self.boots = None
        if self.reaper is not None:  # every set handed over is removed before the run ends
            reaper, self.reaper = self.reaper, None
            try:
                await reaper.drain()
            finally:
                await asyncio.to_thread(reaper.close)

    async def sweep(self, run_id: str | None = None) -> None:
        if run_id is None:
            await asyncio.to_thread(sweep, None, self.stale_after, True)
        else:
            await asyncio.to_thread(sweep, run_id)
