"""The bound on boots in flight (`sandbox.boots.BootGate`): never more than its
limit run at once, the rest wait and then all run; a queued call that is
cancelled never starts; the limit comes from TBX_BOOTS_IN_FLIGHT with a clear
error for a bad value."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import pytest

from sandbox.boots import CPU_GATE_ENV, LIMIT_ENV, SATURATED, BootGate, CpuBusy, cpu_meter, default_limit


def test_no_more_than_the_limit_run_at_once_and_every_call_runs() -> None:
    gate = BootGate(limit=2, cpu_share=None)
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
    gate = BootGate(limit=1, cpu_share=None)
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


def test_a_boot_waits_while_the_cores_are_saturated_but_one_always_runs() -> None:
    share = {"now": 1.0}  # saturated until the test says otherwise
    gate = BootGate(limit=4, cpu_share=lambda: share["now"])
    order: list[str] = []
    release = threading.Event()

    def first() -> None:
        order.append("first")
        release.wait(5)

    async def go() -> None:
        a = asyncio.ensure_future(gate.run(first))  # nothing runs: it starts, saturated or not
        while not order:
            await asyncio.sleep(0.01)
        b = asyncio.ensure_future(gate.run(lambda: order.append("second")))
        await asyncio.sleep(0.3)
        assert order == ["first"] and gate.held_for_cpu == 1  # held: a thread is free, the CPU is not
        share["now"] = SATURATED - 0.2
        await asyncio.wait_for(b, 2)
        assert order == ["first", "second"]
        share["now"] = 1.0
        c = asyncio.ensure_future(gate.run(lambda: order.append("third")))
        await asyncio.sleep(0.2)
        assert "third" not in order
        release.set()  # the running boot ends: the held one may go, however busy the machine
        await asyncio.wait_for(asyncio.gather(a, c), 2)
        assert order[-1] == "third"

    try:
        asyncio.run(go())
    finally:
        gate.close()


def test_the_cpu_meter_reads_proc_stat_and_can_be_turned_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stat = tmp_path / "stat"
    # user nice system idle iowait irq softirq steal
    stat.write_text("cpu  100 0 100 800 0 0 0 0 0 0\n")
    meter = CpuBusy(str(stat))
    stat.write_text("cpu  250 0 200 850 0 0 0 0 0 0\n")  # 250 busy of 300 since
    time.sleep(0.3)
    assert meter.share() == pytest.approx(250 / 300)
    monkeypatch.setenv(CPU_GATE_ENV, "0")
    assert cpu_meter() is None and BootGate(limit=1).cpu_share is None
    monkeypatch.delenv(CPU_GATE_ENV)
    assert BootGate(limit=1).cpu_share is not None  # this host has /proc/stat
