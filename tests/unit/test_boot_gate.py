"""The bound on boots in flight (`sandbox.boots.BootGate`): never more than its
limit run at once, the rest wait and then all run; a queued call that is
cancelled never starts; the limit comes from TBX_BOOTS_IN_FLIGHT with a clear
error for a bad value."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from sandbox.boots import LIMIT_ENV, BootGate, default_limit


def test_no_more_than_the_limit_run_at_once_and_every_call_runs() -> None:
    gate = BootGate(limit=2)
    lock = threading.Lock()
    now = {"running": 0, "peak": 0}

    def work(i: int) -> int:
        with lock:
            now["running"] += 1
            now["peak"] = max(now["peak"], now["running"])
        time.sleep(0.05)
        with lock:
            now["running"] -= 1
        return i

    async def go() -> list[int]:
        return await asyncio.gather(*(gate.run(lambda i=i: work(i)) for i in range(7)))

    try:
        assert asyncio.run(go()) == list(range(7))
    finally:
        gate.close()
    assert now["peak"] == 2 and gate.peak == 2 and gate.running == 0


def test_a_cancelled_queued_call_never_starts() -> None:
    gate = BootGate(limit=1)
    started: list[str] = []
    release = threading.Event()

    def blocker() -> None:
        started.append("first")
        release.wait(5)

    async def go() -> None:
        first = asyncio.ensure_future(gate.run(blocker))
        while not started:
            await asyncio.sleep(0.01)
        queued = asyncio.ensure_future(gate.run(lambda: started.append("second")))
        await asyncio.sleep(0.05)
        queued.cancel()
        await asyncio.sleep(0.05)  # asyncio delivers a cancellation at the loop's next turn
        release.set()
        await first
        with pytest.raises(asyncio.CancelledError):
            await queued

    try:
        asyncio.run(go())
    finally:
        gate.close()
    assert started == ["first"]


def test_limit_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(LIMIT_ENV, "3")
    assert default_limit() == 3 and BootGate().limit == 3
    for bad in ("0", "-1", "many"):
        monkeypatch.setenv(LIMIT_ENV, bad)
        with pytest.raises(ValueError, match=LIMIT_ENV):
            default_limit()
    monkeypatch.delenv(LIMIT_ENV)
    assert default_limit() >= 2
