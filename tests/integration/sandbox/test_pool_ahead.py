"""The warm pool against real Docker: sandboxes prepared ahead for planned
checkouts are handed over with exactly the rows a sandbox prepared at checkout
gets, each to one attempt only; an unplanned checkout boots its own; and boots
beyond the bound of boots in flight queue instead of timing out."""

from __future__ import annotations

import asyncio
import time

import pytest
from pg_support import DEMO_PACK

from bench.dataset import load_benchmark
from bench.prepare import TaskPreparation, task_preparation
from judge import dump_dsn, state_hash
from sandbox import AsyncSandbox, SandboxPool, SandboxRequest, leftovers, new_id, sweep
from sandbox.boots import BootGate

pytestmark = pytest.mark.docker


def _preparations() -> list[TaskPreparation]:
    bench = load_benchmark(DEMO_PACK)
    tasks = [t for t in bench.tasks if t.domain == "retail"][:3]
    return [task_preparation(bench, t, typesense=False) for t in tasks]


async def _state(sb: AsyncSandbox) -> str:
    return state_hash(await asyncio.to_thread(dump_dsn, sb.handle.pg.admin_dsn("retail"), "retail"))


def test_planned_checkouts_are_a_hand_over_of_a_sandbox_prepared_for_them(
    base_images: dict[str, str],
) -> None:
    a, b, unplanned = _preparations()
    assert len({p.fingerprint() for p in (a, b, unplanned)}) == 3
    run_id = new_id("run-it-ahead")

    async def go() -> None:
        # What a sandbox prepared at checkout holds (the reference for each preparer).
        expected = {}
        for p in (a, b):
            req = SandboxRequest(domains=["retail"], prepare=p, typesense=False, run_id=run_id)
            async with AsyncSandbox(req) as cold:
                expected[p.fingerprint()] = await _state(cold)
        pool = SandboxPool(["retail"], size=2, typesense=False, run_id=run_id)
        pool.plan([lambda: a, lambda: b, lambda: a])
        async with pool:
            while pool.booted < 2:
                await asyncio.sleep(0.1)
            held = []
            for p in (b, a):  # out of plan order: each still gets the one prepared for it
                t = time.perf_counter()
                sb = await pool.acquire(p)
                waited = time.perf_counter() - t
                assert waited < 0.5, f"a prepared sandbox took {waited:.3f}s to hand over"
                assert sb.sandbox.request.prepare is p
                assert await _state(sb) == expected[p.fingerprint()]
                held.append(sb)
            # The plan's third entry (a again) gets its own sandbox, never one already held.
            again = await pool.acquire(a)
            assert await _state(again) == expected[a.fingerprint()]
            held.append(again)
            # Nobody planned this one: it is booted and prepared for it.
            own = await pool.acquire(unplanned)
            assert own.sandbox.request.prepare is unplanned
            held.append(own)
            ids = [frozenset(sb.handle.containers.values()) for sb in held]
            assert len(set(ids)) == len(ids)  # one sandbox per checkout
            for sb in held:
                await sb.__aexit__(None, None, None)
        assert leftovers(run_id) == ([], [])

    try:
        asyncio.run(go())
    finally:
        sweep(run_id)


def test_boots_beyond_the_bound_queue_instead_of_timing_out(base_images: dict[str, str]) -> None:
    """One boot at a time, and the gate held by other work for longer than the start
    timeout: the pool's boots queued behind it must still succeed (their timeout
    starts when they run), one at a time."""
    run_id = new_id("run-it-gate")
    gate = BootGate(limit=1)
    timeout = 30.0
    n = 2

    async def go() -> float:
        t = time.monotonic()
        blocker = asyncio.ensure_future(gate.run(lambda: time.sleep(timeout + 2)))
        while gate.running < 1:
            await asyncio.sleep(0.01)
        async with SandboxPool(
            ["retail"], size=n, typesense=False, run_id=run_id, start_timeout=timeout, boots=gate, budget=n
        ) as pool:
            got = [await pool.acquire() for _ in range(n)]
            elapsed = time.monotonic() - t
            for sb in got:
                await sb.__aexit__(None, None, None)
        await blocker
        return elapsed

    try:
        elapsed = asyncio.run(go())
    finally:
        gate.close()
        sweep(run_id)
    assert gate.peak == 1
    assert elapsed > timeout  # the boots waited longer than their timeout, and did not fail
    assert leftovers(run_id) == ([], [])
