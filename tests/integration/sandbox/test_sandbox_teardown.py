"""Nothing leaks: normal exit, an exception, Ctrl-C (before and after ready), an
asyncio cancellation during start, and SIGKILL followed by the sweeper."""

from __future__ import annotations

import asyncio
import signal
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from bench.prepare import seeded_request
from sandbox import AsyncSandbox, Sandbox, SandboxRequest, leftovers, sweep

pytestmark = pytest.mark.docker

# Started in a subprocess: one retail sandbox (real seed), "ready" once it is up, then sleep.
HOLDER = """
import json, sys, time
from bench.prepare import seeded_request
from sandbox.sandbox import Sandbox
from servers.engine.seeding import initial_rows
from servers.registry import load_domain

run, seed = sys.argv[1], sys.argv[2]
rows = initial_rows(load_domain("retail").tables, json.load(open(seed)), None)
req = seeded_request({"retail": rows}, domains=["retail"], typesense=False, run_id=run)
print("starting", flush=True)
with Sandbox(req) as sb:
    print("ready", sb.handle.attempt_id, flush=True)
    time.sleep(600)
"""


def _request(rows: dict[str, list[dict[str, Any]]], run_id: str) -> SandboxRequest:
    return seeded_request({"retail": rows}, domains=["retail"], typesense=False, run_id=run_id)


def _wait_for_containers(run_id: str, n: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while len(leftovers(run_id)[0]) < n:
        assert time.monotonic() < deadline, f"no {n} containers of {run_id} within {timeout}s"
        time.sleep(0.05)


def test_normal_exit_removes_everything(base_images: Any, retail_rows: Any, run_id: str) -> None:
    with Sandbox(_request(retail_rows, run_id)) as sb:
        containers, networks = leftovers(run_id)
        assert sb.handle is not None
        assert len(containers) == 2 and networks == [sb.handle.network]
    assert leftovers(run_id) == ([], [])
    sb.close()  # idempotent


def test_exception_inside_with_removes_everything(base_images: Any, retail_rows: Any, run_id: str) -> None:
    with pytest.raises(ZeroDivisionError), Sandbox(_request(retail_rows, run_id)):
        assert len(leftovers(run_id)[0]) == 2
        _ = 1 / 0
    assert leftovers(run_id) == ([], [])


def test_sigkill_leaves_orphans_the_sweeper_removes(
    base_images: Any, retail_seed_file: Path, run_id: str, spawn: Any
) -> None:
    proc = spawn([sys.executable, "-c", HOLDER, run_id, str(retail_seed_file)])
    proc.wait_line(lambda line: line.startswith("ready"), timeout=60)
    before = leftovers(run_id)
    assert len(before[0]) == 2 and len(before[1]) == 1
    # While the owner lives, an orphan sweep leaves its sandbox alone.
    assert sweep(run=run_id, orphans=True).containers == []
    assert leftovers(run_id) == before

    proc.send(signal.SIGKILL)
    assert proc.finish(10) == -signal.SIGKILL
    assert leftovers(run_id) == before  # SIGKILL runs no teardown: the labels are all that is left
    result = sweep(run=run_id, orphans=True)
    assert sorted(result.containers) == sorted(before[0]) and result.networks == before[1]
    assert leftovers(run_id) == ([], [])


def test_ctrl_c_inside_with_removes_everything(
    base_images: Any, retail_seed_file: Path, run_id: str, spawn: Any
) -> None:
    proc = spawn([sys.executable, "-c", HOLDER, run_id, str(retail_seed_file)])
    proc.wait_line(lambda line: line.startswith("ready"), timeout=60)
    assert len(leftovers(run_id)[0]) == 2
    proc.send(signal.SIGINT)
    assert proc.finish(30) != 0
    assert "KeyboardInterrupt" in proc.err
    assert leftovers(run_id) == ([], [])


def test_ctrl_c_during_start_removes_everything(
    base_images: Any, retail_seed_file: Path, run_id: str, spawn: Any
) -> None:
    proc = spawn([sys.executable, "-c", HOLDER, run_id, str(retail_seed_file)])
    proc.wait_line(lambda line: line.startswith("starting"), timeout=60)
    _wait_for_containers(run_id, 1, timeout=30)
    proc.send(signal.SIGINT)
    assert proc.finish(45) != 0
    assert not any(line.startswith("ready") for line in proc.stdout), "interrupt came too late to test start"
    assert "KeyboardInterrupt" in proc.err
    assert leftovers(run_id) == ([], [])


@pytest.mark.parametrize("when", ["at_once", "network_created"])
def test_cancelled_async_start_leaves_nothing(
    base_images: Any, retail_rows: Any, run_id: str, when: str
) -> None:
    """Task cancellation (`asyncio.wait_for`, Ctrl-C under asyncio.run) while the start
    thread is still working: the thread cannot be stopped from outside, so nothing it
    creates afterwards may survive the cancellation."""
    box = AsyncSandbox(_request(retail_rows, run_id))

    async def main() -> None:
        task = asyncio.ensure_future(box.__aenter__())
        if when == "at_once":
            await asyncio.sleep(0)
        else:
            deadline = time.monotonic() + 30
            while not leftovers(run_id)[1]:  # containers are being created now
                assert time.monotonic() < deadline and not task.done()
                await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert leftovers(run_id) == ([], [])

    asyncio.run(main())  # returns once every worker thread has finished
    assert leftovers(run_id) == ([], [])


def test_background_teardown_returns_at_once_and_drain_removes_everything(
    base_images: Any, retail_rows: Any, run_id: str
) -> None:
    """With a reaper (what `tbx run` uses) the attempt leaves its block without waiting
    for Docker; the set is gone once the reaper drains (the run's end)."""
    from sandbox.reaper import Reaper

    async def main() -> float:
        reaper = Reaper(workers=1, inline=False)
        boxes = [AsyncSandbox(_request(retail_rows, run_id)) for _ in range(2)]
        for box in boxes:
            box.reaper = reaper
            await box.__aenter__()
        assert len(leftovers(run_id)[0]) == 4
        t = time.monotonic()
        for box in boxes:
            await box.__aexit__(None, None, None)
        handed_over = time.monotonic() - t
        await reaper.drain()
        assert reaper.failures == 0
        reaper.close()
        return handed_over

    handed_over = asyncio.run(main())
    assert leftovers(run_id) == ([], [])
    assert handed_over < 0.2  # two closes inline take dockerd 0.5-2 s
