"""A bound on container-set boots in flight: the rest wait their turn.

A boot is ~2 CPU-seconds of three containers starting (the server's Python
start, PostgreSQL, Typesense) plus dockerd's work. On a 2-core machine, 30
boots at once do not finish sooner than 4 at a time; they all finish late, and
each one's start timeout (counted from when it began) turns into a system
error. So boots run on a fixed number of threads of their own: a boot waiting
for a thread has not started, its timeout has not begun, and the short
blocking calls of the attempts in flight (state dumps, proxy registrations on
asyncio's default executor) never queue behind a boot.

    gate = BootGate()                      # TBX_BOOTS_IN_FLIGHT, else 2 per core
    sb = await gate.run(sandbox.boot)      # queued, then run on one of the gate's threads
    gate.close()
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

LIMIT_ENV = "TBX_BOOTS_IN_FLIGHT"
T = TypeVar("T")


def default_limit() -> int:
    env = os.environ.get(LIMIT_ENV, "").strip()
    if env:
        try:
            value = int(env)
        except ValueError:
            raise ValueError(f"{LIMIT_ENV}={env!r}: expected a positive integer") from None
        if value < 1:
            raise ValueError(f"{LIMIT_ENV}={env!r}: expected a positive integer")
        return value
    return 2 * (os.cpu_count() or 2)


class BootGate:
    def __init__(self, limit: int | None = None):
        self.limit = limit if limit is not None else default_limit()
        if self.limit < 1:
            raise ValueError(f"boots in flight: expected a positive integer, got {self.limit}")
        self._executor = ThreadPoolExecutor(max_workers=self.limit, thread_name_prefix="tbx-boot")
        self._lock = threading.Lock()
        self.running = 0  # boots on a thread now (the rest are queued)
        self.peak = 0  # the most that ever ran at once (what tests and benchmarks read)

    async def run(self, fn: Callable[[], T]) -> T:
        """`fn()` on one of the gate's threads, after those ahead of it. A queued call
        whose cancellation has been delivered (asyncio: at the loop's next turn) never
        starts; a running one finishes in its thread (its owner closes what it made)."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self._counted, fn)

    def _counted(self, fn: Callable[[], T]) -> T:
        with self._lock:
            self.running += 1
            self.peak = max(self.peak, self.running)
        try:
            return fn()
        finally:
            with self._lock:
                self.running -= 1

    def close(self) -> None:
        """Queued boots are dropped; running ones finish (their owners close them)."""
        self._executor.shutdown(wait=False, cancel_futures=True)
