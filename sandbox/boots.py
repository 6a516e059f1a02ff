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

And while one boot runs, the next waits as long as the machine's cores are
saturated (`CpuBusy`, from /proc/stat): the CPU it would take is then taken
from the attempts in flight (their tool calls, their state dumps), and boots
started on a full machine do not finish sooner. One boot always may run, so
boots never stop while other work keeps the cores busy. TBX_BOOT_CPU_GATE=0
turns this off (a boot then starts whenever a thread is free).
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Literal, TypeVar

LIMIT_ENV = "TBX_BOOTS_IN_FLIGHT"
CPU_GATE_ENV = "TBX_BOOT_CPU_GATE"
SATURATED = 0.9  # busy share of all cores over the last window that counts as full
WINDOW = 0.25  # seconds: the shortest span the busy share is measured over
RECHECK = 0.05  # seconds between looks while a boot waits for the CPU
T = TypeVar("T")


class CpuBusy:
    """The machine's busy share of all cores (not idle, not iowait) over the last
    `WINDOW`-or-longer span, from /proc/stat; thread-safe, cheap to ask often."""

    def __init__(self, stat: str = "/proc/stat"):
        self._stat = stat
        self._lock = threading.Lock()
        self._last = self._read()
        self._share = 0.0

    def _read(self) -> tuple[float, int, int]:
        with open(self._stat) as f:
            fields = [int(x) for x in f.readline().split()[1:]]
        total = sum(fields[:8])
        return time.monotonic(), total - fields[3] - fields[4], total

    def share(self) -> float:
        with self._lock:
            now = time.monotonic()
            if now - self._last[0] >= WINDOW:
                t, busy, total = self._read()
                if total > self._last[2]:
                    self._share = (busy - self._last[1]) / (total - self._last[2])
                self._last = (t, busy, total)
            return self._share


def cpu_meter() -> CpuBusy | None:
    """The meter the gate uses, or None: turned off, or no /proc/stat on this host."""
    if os.environ.get(CPU_GATE_ENV, "").strip() == "0":
        return None
    try:
        return CpuBusy()
    except (OSError, ValueError, IndexError):
        return None


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
    def __init__(
        self, limit: int | None = None, cpu_share: Callable[[], float] | Literal["auto"] | None = "auto"
    ):
        """cpu_share: the machine's busy share of its cores now ("auto": `cpu_meter()`'s;
        None: boots never wait for the CPU)."""
        self.limit = limit if limit is not None else default_limit()
        if cpu_share == "auto":
            meter = cpu_meter()
            cpu_share = meter.share if meter is not None else None
        self.cpu_share = cpu_share
        if self.limit < 1:
            raise ValueError(f"boots in flight: expected a positive integer, got {self.limit}")
        self._executor = ThreadPoolExecutor(max_workers=self.limit, thread_name_prefix="tbx-boot")
        self._lock = threading.Lock()
        self.running = 0  # boots on a thread now (the rest are queued)
        self.peak = 0  # the most that ever ran at once (what tests and benchmarks read)
        self.held_for_cpu = 0  # boots that waited for the CPU before starting

    async def run(self, fn: Callable[[], T]) -> T:
        """`fn()` on one of the gate's threads, after those ahead of it. A queued call
        whose cancellation has been delivered (asyncio: at the loop's next turn) never
        starts; a running one finishes in its thread (its owner closes what it made)."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self._counted, fn)

    def _wait_for_cpu(self) -> None:
        if self.cpu_share is None:
            return
        held = False
        while self.running > 0 and self.cpu_share() >= SATURATED:
            if not held:
                held = True
                with self._lock:
                    self.held_for_cpu += 1
            time.sleep(RECHECK)

    def _counted(self, fn: Callable[[], T]) -> T:
        self._wait_for_cpu()
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
