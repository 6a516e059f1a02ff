"""The reaper: teardown returns at once, runs at most `workers` removals, bounds the backlog, drains."""

from __future__ import annotations

import asyncio
import threading
import time
from types import SimpleNamespace
from typing import Any

import pytest

from sandbox.reaper import Reaper


class FakeSandbox:
    """Stands in for a Sandbox: close() blocks until released, like dockerd removing containers."""

    running = 0
    peak = 0
    lock = threading.Lock()

    def __init__(self, gate: threading.Event, fail: bool = False):
        self.gate, self.fail, self.closed = gate, fail, False
        self.request = SimpleNamespace(attempt_id="att-x")

    def close(self) -> None:
        with FakeSandbox.lock:
            FakeSandbox.running += 1
            FakeSandbox.peak = max(FakeSandbox.peak, FakeSandbox.running)
        try:
            self.gate.wait(5)
            if self.fail:
                raise RuntimeError("docker said no")
            self.closed = True
        finally:
            with FakeSandbox.lock:
                FakeSandbox.running -= 1


@pytest.fixture(autouse=True)
def _reset() -> None:
    FakeSandbox.running = FakeSandbox.peak = 0


def test_release_returns_before_removal_and_drain_waits() -> None:
    async def go() -> None:
        gate = threading.Event()
        reaper = Reaper(workers=2, max_pending=8, inline=False)
        boxes = [FakeSandbox(gate) for _ in range(5)]
        t = time.monotonic()
        for b in boxes:
            await reaper.release(b)  # type: ignore[arg-type]
        assert time.monotonic() - t < 0.5
        assert not any(b.closed for b in boxes) and reaper.pending == 5
        await asyncio.sleep(0.1)
        assert FakeSandbox.running == 2  # bounded: a burst does not take every core from boots
        gate.set()
        await reaper.drain()
        assert all(b.closed for b in boxes) and reaper.pending == 0
        assert FakeSandbox.peak == 2
        reaper.close()

    asyncio.run(go())


def test_backlog_is_bounded() -> None:
    async def go() -> None:
        gate = threading.Event()
        reaper = Reaper(workers=1, max_pending=2, inline=False)
        await reaper.release(FakeSandbox(gate))  # type: ignore[arg-type]
        await reaper.release(FakeSandbox(gate))  # type: ignore[arg-type]
        third = asyncio.create_task(reaper.release(FakeSandbox(gate)))  # type: ignore[arg-type]
        await asyncio.sleep(0.2)
        assert not third.done()  # waits for a slot instead of piling up sets in memory
        gate.set()
        await asyncio.wait_for(third, 5)
        await reaper.drain()
        reaper.close()

    asyncio.run(go())


def test_failed_removal_is_counted_not_raised() -> None:
    async def go() -> Reaper:
        gate = threading.Event()
        gate.set()
        reaper = Reaper(inline=False)
        await reaper.release(FakeSandbox(gate, fail=True))  # type: ignore[arg-type]
        await reaper.drain()
        return reaper

    assert asyncio.run(go()).failures == 1


def test_inline_mode_removes_before_returning(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TBX_TEARDOWN_INLINE", "1")

    async def go() -> Any:
        gate = threading.Event()
        gate.set()
        reaper = Reaper()
        box = FakeSandbox(gate)
        await reaper.release(box)  # type: ignore[arg-type]
        return box, reaper

    box, reaper = asyncio.run(go())
    assert reaper.inline and box.closed
