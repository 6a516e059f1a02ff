"""A warm pool: container sets booted ahead of demand, each handed out once.

Booting (network, containers, services answering) is most of an attempt's
start-up and involves nothing task-specific, so the pool does it in the
background; `acquire(prepare)` then only seeds PostgreSQL and indexes
documents (through the caller's `sandbox.preparer.Preparer`).
A pooled sandbox is never reused: after its attempt it is torn down like any
other, so isolation is exactly that of a cold start.

    async with SandboxPool(["retail"], size=2) as pool:
        async with await pool.acquire(preparer) as sb:
            ...
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from sandbox.labels import new_id
from sandbox.preparer import Preparer
from sandbox.sandbox import AsyncSandbox, Sandbox, SandboxRequest, resolve_images
from sandbox.services import Limits

log = logging.getLogger(__name__)


class SandboxPool:
    def __init__(
        self,
        domains: list[str],
        size: int = 2,
        *,
        typesense: bool = True,
        limits: Limits | None = None,
        run_id: str | None = None,
        images: dict[str, str] | None = None,
        start_timeout: float = 60.0,
        budget: int | None = None,
        fail_fast: bool = True,
    ):
        self.domains = list(domains)
        self.size = max(1, size)
        self.typesense = typesense
        self.limits = limits or Limits()
        self.run_id = run_id or new_id("run")
        self.images = images
        self.start_timeout = start_timeout
        # How many sandboxes will ever be acquired (None: unbounded). Booting
        # stops there, so the tail of a run leaves no spare sandboxes to tear down.
        self.budget = budget
        self._spawned = 0
        # fail_fast: one failed boot fails every later acquire (conformance: a
        # broken image should stop the run). Otherwise only the acquire that
        # receives the failure raises, and booting goes on (a long benchmark run
        # should lose one attempt to a transient Docker error, not a domain).
        self.fail_fast = fail_fast
        self._ready: asyncio.Queue[Sandbox | BaseException] = asyncio.Queue()
        self._booting: set[asyncio.Task[None]] = set()
        self._closed = False
        self._booted = 0  # booted sandboxes in _ready (failures excluded)
        self._waiters = 0  # acquire() calls waiting for an item
        self.last_error: BaseException | None = None  # the latest boot failure, None after a good boot

    async def __aenter__(self) -> SandboxPool:
        if self.images is None:
            self.images = await asyncio.to_thread(resolve_images, self.typesense)
        for _ in range(self.size if self.budget is None else min(self.size, self.budget)):
            self._spawn()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def _spawn(self, *, beyond_budget: bool = False) -> None:
        if self._closed or (not beyond_budget and self.budget is not None and self._spawned >= self.budget):
            return
        self._spawned += 1
        task = asyncio.create_task(self._boot_one())
        self._booting.add(task)
        task.add_done_callback(self._booting.discard)

    async def _boot_one(self) -> None:
        request = SandboxRequest(
            domains=self.domains,
            typesense=self.typesense,
            run_id=self.run_id,
            limits=self.limits,
            images=self.images,
            start_timeout=self.start_timeout,
        )
        sb = Sandbox(request)
        try:
            await asyncio.to_thread(sb.boot)
        except BaseException as exc:
            # A failing clean-up must not swallow the boot error: an acquirer waits for it.
            with contextlib.suppress(Exception):
                await asyncio.shield(asyncio.to_thread(sb.close))
            # The error surfaces to whoever acquires next, instead of vanishing in a task.
            self.last_error = exc
            await self._ready.put(exc)
            return
        if self._closed:
            await asyncio.to_thread(sb.close)
            return
        self.last_error = None
        self._booted += 1
        await self._ready.put(sb)

    async def acquire(self, prepare: Preparer | None = None) -> AsyncSandbox:
        """A booted sandbox, prepared for this attempt by `prepare` (None: empty
        schemas, no documents). A replacement starts booting at once."""
        if self._waiters >= self.spare:
            # Nothing booted or booting is left for this caller: a retried attempt asks for
            # one more sandbox than the budget planned, or a failed boot was not replaced.
            self._spawn(beyond_budget=True)
        self._waiters += 1
        try:
            item = await self._ready.get()
        finally:
            self._waiters -= 1
        if isinstance(item, BaseException):
            if self.fail_fast:
                # Put it back so every waiter sees the failure, and stop booting more.
                self._closed = True
                self._ready.put_nowait(item)
            else:
                self._spawn()
            raise item
        self._spawn()
        self._booted -= 1
        sb = item
        sb.request = sb.request.model_copy(update={"prepare": prepare})
        try:
            sb.handle = await asyncio.to_thread(sb.prepare)
        except BaseException:
            await asyncio.shield(asyncio.to_thread(sb.close))
            raise
        return AsyncSandbox.adopt(sb)

    @property
    def spare(self) -> int:
        """Sandboxes booting or booted that no attempt holds yet."""
        return len(self._booting) + self._ready.qsize()

    @property
    def booted(self) -> int:
        """Booted sandboxes waiting for an attempt (what a readiness check needs)."""
        return self._booted

    async def flush(self) -> int:
        """Discard what waits in the pool and boot replacements: after the daemon was
        restarted, sandboxes booted before are stopped and boots during it failed.
        Returns how many were discarded."""
        stale: list[Sandbox | BaseException] = []
        while not self._ready.empty():
            stale.append(self._ready.get_nowait())
        for item in stale:
            if isinstance(item, Sandbox):
                self._booted -= 1
                with contextlib.suppress(Exception):  # what stays is labelled: the run's sweep takes it
                    await asyncio.to_thread(item.close)
        self.last_error = None
        for _ in stale:
            self._spawn(beyond_budget=True)
        return len(stale)

    async def close(self) -> None:
        self._closed = True
        for task in list(self._booting):
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(*self._booting, return_exceptions=True)
        while not self._ready.empty():
            item = self._ready.get_nowait()
            if isinstance(item, Sandbox):
                self._booted -= 1
                await asyncio.to_thread(item.close)
