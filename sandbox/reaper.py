"""Teardown off the attempt's critical path, bounded in how many run at once.

Removing a container set takes dockerd 0.3-0.9 s (SIGKILL, unmounts, cgroup
and network cleanup) and none of it decides the attempt's result: the judge
reads the terminal state before the set is closed. A `Reaper` takes closed
sandboxes and removes them on a small pool of threads, so the attempt ends as
soon as its state is dumped. At most `workers` removals run at once (a burst of
finished attempts must not starve the boots of the next ones) and at most
`max_pending` sets wait; beyond that `release()` waits, which bounds the memory
held by sets on their way out.

    reaper = Reaper()
    await reaper.release(sb)   # returns at once (or when a slot frees up)
    await reaper.drain()       # before the run ends: every set removed

TBX_TEARDOWN_INLINE=1 removes each set before `release()` returns (the former
behaviour, for benchmarks comparing the two).
"""

from __future__ import annotations

import asyncio
import logging
import os
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Protocol

log = logging.getLogger(__name__)


class Removable(Protocol):
    """What the reaper removes (a `sandbox.sandbox.Sandbox`): named, closed in a thread."""

    @property
    def attempt_id(self) -> str: ...

    def close(self) -> None: ...

    def remove_leftovers(self) -> None: ...


class Reaper:
    def __init__(self, workers: int = 2, max_pending: int = 8, inline: bool | None = None):
        self.inline = os.environ.get("TBX_TEARDOWN_INLINE") == "1" if inline is None else inline
        self.workers = max(1, workers)
        self.max_pending = max(self.workers, max_pending)
        self._pool = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="tbx-teardown")
        self._pending: set[Future[None]] = set()
        self._slots = asyncio.Semaphore(self.max_pending)
        self.failures = 0
        # Sets whose removal failed (the daemon away, say): `retry_failed()` tries them again.
        self._failed: list[Removable] = []

    @property
    def pending(self) -> int:
        return len(self._pending)

    async def release(self, sandbox: Removable) -> None:
        """Hand a sandbox over for removal (idempotent close, never raises for Docker errors)."""
        if self.inline:
            await asyncio.shield(asyncio.to_thread(self._close, sandbox))
            return
        await self._slots.acquire()
        fut = self._pool.submit(self._close, sandbox)
        self._pending.add(fut)
        loop = asyncio.get_running_loop()

        def done(f: Future[None]) -> None:
            self._pending.discard(f)
            loop.call_soon_threadsafe(self._slots.release)

        fut.add_done_callback(done)

    def _close(self, sandbox: Removable) -> None:
        try:
            sandbox.close()
        except Exception as exc:
            # What close() could not remove still carries the run's labels: the sweeper
            # (tbx gc --run, the next run's start) removes it. Counted, never fatal. One
            # line (the traceback with -v): a daemon restart fails every removal at once.
            self.failures += 1
            self._failed.append(sandbox)
            log.warning(
                "teardown of %s failed (%s: %s); left to the sweeper",
                sandbox.attempt_id,
                exc.__class__.__name__,
                exc,
            )
            log.debug("teardown of %s", sandbox.attempt_id, exc_info=True)

    async def retry_failed(self) -> int:
        """Remove again the sets whose removal failed (after the daemon came back); how many were retried."""
        failed, self._failed = self._failed, []
        for sandbox in failed:
            try:
                await asyncio.to_thread(sandbox.remove_leftovers)
            except Exception:
                self._failed.append(sandbox)
                log.warning("teardown of %s failed again", sandbox.attempt_id, exc_info=True)
        return len(failed)

    async def drain(self) -> None:
        """Wait until every handed-over sandbox is removed."""
        while self._pending:
            await asyncio.wrap_future(next(iter(self._pending)))

    def close(self) -> None:
        """Blocking: finish every pending removal (also on Ctrl-C: nothing is abandoned)."""
        self._pool.shutdown(wait=True)
