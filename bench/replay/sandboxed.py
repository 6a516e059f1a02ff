"""Replay tool calls in a fresh sandbox of their own, over MCP, and capture the
canonical state right after seeding and after the last call.

Used by `tbx conformance` (golden calls vs. the reference's traces), by the
golden end states of `tbx run`, `tbx env serve` and the Session API
(bench.run.golden), through the one sandbox path (`sandbox.open_sandbox`): a
provider's checkout, whichever provider the caller runs.
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
from judge import State, dump_dsn
from sandbox import (
    LOSS_GRACE,
    DockerProvider,
    Limits,
    SandboxGoneError,
    SandboxLease,
    SandboxProvider,
    SandboxRequest,
    lost_after,
    open_sandbox,
)

__all__ = ["ReplayOutcome", "replay_in_sandbox", "replay_task"]


class ReplayOutcome(BaseModel):
    task_id: str
    initial_state: State
    final_state: State
    calls: list[CallRecord]
    timings: dict[str, float] = Field(default_factory=dict)


async def replay_in_sandbox(
    provider: SandboxProvider,
    request: SandboxRequest,
    calls: Sequence[tuple[str, dict[str, Any]]],
    *,
    label: str,
) -> ReplayOutcome:
    """Check a sandbox for `request` out of `provider`, play `calls` against its one
    domain's server, and return both canonical states (`label` names the replay)."""
    domain = request.domains[0]
    timings: dict[str, float] = {}
    async with open_sandbox(provider, request, label=label, timings=timings) as lease:
        t = time.monotonic()
        admin_dsn = lease.admin_dsn(domain)
        initial = await asyncio.to_thread(dump_dsn, admin_dsn, domain)
        timings["initial_dump"] = time.monotonic() - t
        t = time.monotonic()
        try:
            records = await replay_calls(lease.servers[domain], calls, dict(lease.server_headers))
        except Exception as exc:
            await _raise_if_lost(lease, label, exc)
            raise
        timings["replay"] = time.monotonic() - t
        if any(r.is_error or r.error_envelope for r in records):
            # A server answers a call whose database died with an error reply: the set's
            # loss then, not the calls' (a golden replay is played again elsewhere).
            await _raise_if_lost(lease, label)
        t = time.monotonic()
        final = await asyncio.to_thread(dump_dsn, admin_dsn, domain)
        timings["final_dump"] = time.monotonic() - t
        timings.update({f"sandbox_{k}": v for k, v in lease.timings.items()})
    return ReplayOutcome(
        task_id=label, initial_state=initial, final_state=final, calls=records, timings=timings
    )


async def _raise_if_lost(lease: SandboxLease, label: str, exc: Exception | None = None) -> None:
    """SandboxGoneError naming a container of `lease` found dead, asked until the daemon
    has had LOSS_GRACE seconds to record an exit (a call breaks as its server or database
    dies, before the daemon has recorded it)."""
    lost = await lost_after(lease, exc, grace=LOSS_GRACE)
    if lost is not None:
        raise SandboxGoneError(f"{label}: sandbox gone: {lost.text}", fault=lost.fault) from exc


async def replay_task(
    bench: Benchmark,
    task: Task,
    calls: Sequence[tuple[str, dict[str, Any]]] | None = None,
    *,
    provider: SandboxProvider | None = None,
    runtime: str | None = None,
    run_id: str | None = None,
    images: dict[str, str] | None = None,
) -> ReplayOutcome:
    """Play `calls` (default: `task`'s golden calls) in a fresh sandbox seeded for
    `task`. `provider`: where the sandbox comes from (default a cold Docker set of its
    own). Policy search is not started: replays never call it and it does not touch
    the database."""
    if calls is None:
        calls = bench.golden_calls(task)
    kwargs: dict[str, Any] = {"limits": Limits(runtime=runtime), "images": images}
    if run_id:
        kwargs["run_id"] = run_id
    request = await asyncio.to_thread(sandbox_request, bench, task, typesense=False, **kwargs)
    outcome = await replay_in_sandbox(
        provider if provider is not None else DockerProvider(), request, calls, label=f"replay of {task.id}"
    )
    outcome.task_id = task.id
    return outcome
