"""`tbx run` admission: measure one live set per domain of the run (cached per
image tags), then admit concurrency + warm pools from what fits in the
machine's available memory (sandbox.admission does the arithmetic)."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Sequence

from pydantic import BaseModel

from bench.dataset import Benchmark, Task
from bench.prepare import sandbox_request
from bench.replay.mcp_calls import replay_calls
from sandbox import (
    Admission,
    AdmissionError,
    DockerProvider,
    Limits,
    SetUsage,
    admit,
    cached_usage,
    default_warm,
    measure_set,
    new_id,
    open_sandbox,
    store_usage,
)


class RunAdmission(BaseModel):
    concurrency: int
    warm: int  # per domain pool
    domains: list[str]
    usage: dict[str, SetUsage]
    admission: Admission


def _measuring_task(tasks: Sequence[Task], bench: Benchmark, domain: str) -> Task:
    """The domain's task with the most golden calls among the selected ones: its
    replay exercises the server harder than a typical attempt's first minutes."""
    of_domain = [t for t in tasks if t.domain == domain]
    return max(of_domain, key=lambda t: len(bench.effective_init(t).golden_tool_interactions))


async def measure_domain(
    bench: Benchmark,
    task: Task,
    images: dict[str, str],
    *,
    typesense: bool = True,
    runtime: str | None = None,
    run_id: str | None = None,
) -> SetUsage:
    """Boot one sandbox for `task`, seed it, play its golden calls, read every container's cgroup."""
    request = await asyncio.to_thread(
        functools.partial(
            sandbox_request,
            bench,
            task,
            typesense=typesense,
            images=images,
            limits=Limits(runtime=runtime),
            run_id=run_id or new_id("run-admission"),
        )
    )
    async with open_sandbox(DockerProvider(), request, label=f"measuring a {task.domain} set") as lease:
        await replay_calls(lease.servers[task.domain], bench.golden_calls(task), dict(lease.server_headers))
        return await asyncio.to_thread(measure_set, task.domain, dict(lease.containers), images)


async def set_usage(
    bench: Benchmark,
    tasks: Sequence[Task],
    images: dict[str, str],
    *,
    typesense: bool = True,
    runtime: str | None = None,
) -> dict[str, SetUsage]:
    out: dict[str, SetUsage] = {}
    for domain in sorted({t.domain for t in tasks}):
        usage = cached_usage(domain, images, typesense)
        if usage is None:
            task = _measuring_task(tasks, bench, domain)
            usage = await measure_domain(bench, task, images, typesense=typesense, runtime=runtime)
            store_usage(usage, typesense)
        out[domain] = usage
    return out


def admit_run(
    usage: dict[str, SetUsage], concurrency: int, warm: int | None, available_bytes: int | None = None
) -> RunAdmission:
    """Each domain of the run keeps its own warm pool of `warm` sets, so the run holds up to
    concurrency + warm x domains sets; each is charged the largest measured set of the run.
    `warm=None` takes the largest pool that fits (at most the concurrency)."""
    if not usage:
        raise AdmissionError("no measured container set: the run selects no task")
    per_set = max(u.need_bytes for u in usage.values())
    pools = len(usage)
    if warm is None:
        warm = default_warm(concurrency, per_set, pools, available_bytes)
    result = admit(concurrency, warm * pools, per_set, available_bytes)
    return RunAdmission(
        concurrency=concurrency, warm=warm, domains=sorted(usage), usage=usage, admission=result
    )
