"""Replay tool calls for one task in its own fresh sandbox, over MCP, and
capture the canonical state right after seeding and after the last call.

Used by `tbx conformance` (golden calls vs. the reference's traces) and by the
golden end-state computation of the judge path.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, Field

from bench.dataset import Benchmark, Task
from bench.prepare import sandbox_request
from bench.replay.mcp_calls import CallRecord, replay_calls
from judge.canonical import State, dump_dsn
from sandbox.pool import SandboxPool
from sandbox.sandbox import AsyncSandbox
from sandbox.services import Limits


class ReplayOutcome(BaseModel):
    task_id: str
    initial_state: State
    final_state: State
    calls: list[CallRecord]
    timings: dict[str, float] = Field(default_factory=dict)


async def replay_task(
    bench: Benchmark,
    task: Task,
    calls: Sequence[tuple[str, dict[str, Any]]] | None = None,
    *,
    runtime: str | None = None,
    run_id: str | None = None,
    images: dict[str, str] | None = None,
    pool: SandboxPool | None = None,
) -> ReplayOutcome:
    """Start a fresh sandbox for `task`, play `calls` (default: its golden
    calls), and return both canonical states. Policy search is not started:
    replays never call it and it does not touch the database."""
    if calls is None:
        calls = [
            (c.tool, dict(c.parameters))
            for c in bench.effective_init(task).golden_tool_interactions
            if c.tool
        ]
    kwargs: dict[str, Any] = {"limits": Limits(runtime=runtime), "images": images}
    if run_id:
        kwargs["run_id"] = run_id
    t0 = time.monotonic()
    request = await asyncio.to_thread(sandbox_request, bench, task, typesense=False, **kwargs)
    sandbox = AsyncSandbox(request) if pool is None else await pool.acquire(request.prepare)
    async with sandbox as sb:
        t_ready = time.monotonic()
        admin_dsn = sb.handle.pg.admin_dsn(task.domain)
        initial = await asyncio.to_thread(dump_dsn, admin_dsn, task.domain)
        t_seeded = time.monotonic()
        records = await replay_calls(sb.handle.servers[task.domain], calls, sb.handle.server_headers)
        t_replayed = time.monotonic()
        final = await asyncio.to_thread(dump_dsn, admin_dsn, task.domain)
        t_dumped = time.monotonic()
    t_done = time.monotonic()
    return ReplayOutcome(
        task_id=task.id,
        initial_state=initial,
        final_state=final,
        calls=records,
        timings={
            "sandbox_start": t_ready - t0,
            "initial_dump": t_seeded - t_ready,
            "replay": t_replayed - t_seeded,
            "final_dump": t_dumped - t_replayed,
            "teardown": t_done - t_dumped,
            **{f"sandbox_{k}": v for k, v in sb.handle.timings.items()},
        },
    )
