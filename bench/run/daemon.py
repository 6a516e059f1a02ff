"""Pause a run while the container daemon is away, for a bounded time.

A restarted Docker daemon takes every running container with it: the
attempts in flight end in system errors, and any try started before it
answers again fails in milliseconds. So after a system error the coordinator
asks the gate whether the daemon still answers; if not, the gate starts one
shared wait (tenacity, polling `ping` until `wait` seconds have passed) and
every attempt holds its next try until the daemon is back. A try that failed
because the daemon was away is retried without counting against
`--max-retries` (it says nothing about the task either). When the daemon
stays away the wait ends in `DaemonGone`: the run starts nothing more and
stops with a resumable output.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from tenacity import AsyncRetrying, RetryError, stop_after_delay

from bench.defaults import DAEMON_WAIT
from bench.run.errors import RunError
from sandbox import exponential_backoff

log = logging.getLogger(__name__)

__all__ = ["DaemonGate", "DaemonGone"]


class DaemonGone(RunError):
    """The container daemon did not answer within the wait."""

    def __init__(self, waited: float, last: str):
        self.waited, self.last = waited, last
        super().__init__(
            f"tbx run: the Docker daemon has not answered for {waited:.0f}s ({last}); stopped. "
            "Nothing is lost: start the daemon again and re-run the same command to resume "
            "(attempts without a row are run then; --daemon-wait sets how long a run waits)"
        )


class DaemonGate:
    """`await gate.ready()` before a try; `await gate.answers()` after a system error."""

    def __init__(
        self,
        ping: Callable[[], Awaitable[None]],
        wait: float = DAEMON_WAIT,
        *,
        notice: Callable[[str], None] | None = None,
        on_back: Callable[[], Awaitable[None]] | None = None,
        poll_max: float = 2.0,
    ):
        self.ping = ping
        self.wait = wait
        self.notice = notice or log.warning
        self.on_back = on_back
        self.poll_max = poll_max
        self._waiting: asyncio.Task[None] | None = None
        self.outages = 0  # how many times the daemon went away during the run
        self.gone: DaemonGone | None = None

    async def answers(self) -> bool:
        """Does the daemon answer now? If not, the shared wait starts (once per outage)."""
        if self.gone is not None:
            return False
        if self._waiting is not None and not self._waiting.done():
            return False
        try:
            await self.ping()
        except Exception as exc:
            self._start_wait(exc)
            return False
        return True

    async def ready(self) -> None:
        """Return once the daemon answers (at once when no outage is known); raises DaemonGone."""
        if self.gone is not None:
            raise self.gone
        if self._waiting is not None:
            await asyncio.shield(self._waiting)
            if self.gone is not None:
                raise self.gone

    def _start_wait(self, exc: Exception) -> None:
        self.outages += 1
        self.notice(
            f"tbx run: the Docker daemon does not answer ({exc.__class__.__name__}: {exc}); "
            f"holding new tries for up to {self.wait:.0f}s"
        )
        self._waiting = asyncio.create_task(self._wait_for_daemon(exc))

    async def _wait_for_daemon(self, first: Exception) -> None:
        started = time.monotonic()
        try:
            async for attempt in AsyncRetrying(
                stop=stop_after_delay(self.wait),
                wait=exponential_backoff(0.25, self.poll_max),
                reraise=False,
            ):
                with attempt:
                    await self.ping()
        except RetryError as err:
            last = err.last_attempt.exception() or first
            self.gone = DaemonGone(time.monotonic() - started, f"{last.__class__.__name__}: {last}")
            return
        self.notice(f"tbx run: the Docker daemon answers again after {time.monotonic() - started:.0f}s")
        if self.on_back is not None:
            try:
                await self.on_back()
            except (
                Exception
            ) as exc:  # a failed clean-up must not stop the run; the sweep at the end repeats it
                log.warning("clean-up after the daemon came back failed: %s", exc, exc_info=True)
