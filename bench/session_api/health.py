"""`/health`'s question to the Docker daemon, answered fast whatever the server is doing
(#38 finding 7: `/health` took 4.0 s behind a large body; the OpenEnv env's readiness
allows it 3 s).

The ping runs on a thread of its own, never behind the boots, dumps and parses that fill
the shared pool while creates are in flight; concurrent `/health` requests share one
ping, and a ping that succeeded less than `FRESH` s ago answers for the daemon, so a
flood of them asks it at most once a second.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from sandbox import ping_daemon

HEALTH_TIMEOUT = 2.5  # s: the OpenEnv env's /ready gives /health 3 s
FRESH = 1.0  # s a successful ping answers for the daemon


class DaemonProbe:
    def __init__(self, ping: Callable[[], None] = ping_daemon, timeout: float = HEALTH_TIMEOUT):
        self._ping = ping
        self.timeout = timeout
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tbx-health")
        self._running: asyncio.Future[None] | None = None
        self._ok_at = -FRESH  # monotonic time of the last successful ping

    async def problem(self) -> str | None:
        """None when the daemon answered a new connection within the timeout, at most
        FRESH s ago; else why not."""
        if time.monotonic() - self._ok_at < FRESH:
            return None
        if self._running is None or self._running.done():
            self._running = asyncio.get_running_loop().run_in_executor(self._executor, self._ping)
            self._running.add_done_callback(_retrieve)  # a ping every waiter gave up on is no error
        try:
            # shielded: a request giving up leaves the ping to the requests sharing it
            await asyncio.wait_for(asyncio.shield(self._running), self.timeout)
        except Exception as exc:  # any failure means not healthy
            return f"Docker daemon unavailable: {exc!r}"
        self._ok_at = time.monotonic()
        return None

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)


def _retrieve(fut: asyncio.Future[None]) -> None:
    if not fut.cancelled():
        fut.exception()
