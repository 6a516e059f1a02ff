"""`tbx conformance`: replay every traced task's golden calls in a fresh
sandbox over MCP and compare each reply, the initial state hash and the
final canonical state with the reference's trace."""

from __future__ import annotations

import asyncio
import gzip
import json
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from bench.dataset import Benchmark, Task
from bench.replay.sandboxed import ReplayOutcome, replay_task
from judge import State, state_hash
from sandbox import DockerProvider, SandboxProvider, new_id, resolve_images, sweep
from servers.registry import domain_names, server_to_domain


class Trace(BaseModel):
    task_id: str
    server: str
    initial_state_hash: str
    calls: list[dict[str, Any]]
    golden_state_hash: str


class Mismatch(BaseModel):
    task_id: str
    kind: str  # "call", "initial_state", "final_state", "error"
    detail: str


class DomainReport(BaseModel):
    matched: int = 0
    total: int = 0
    mismatches: list[Mismatch] = Field(default_factory=list)
    seconds: float = 0.0


def load_traces(traces_dir: Path) -> dict[str, Trace]:
    traces: dict[str, Trace] = {}
    for path in sorted(traces_dir.glob("*.jsonl")):
        for line in path.read_text().splitlines():
            if line.strip():
                tr = Trace.model_validate_json(line)
                traces[tr.task_id] = tr
    return traces


def golden_canonical(traces_dir: Path, task_id: str) -> State | None:
    path = traces_dir / "canonical_states" / (task_id.replace(":", "__") + ".json.gz")
    if not path.exists():
        return None
    loaded: State = json.loads(gzip.decompress(path.read_bytes()))
    return loaded


def table_differences(ours: State, golden: State) -> list[str]:
    """Per-table differences, rows matched by position in canonical order."""
    out = []
    for table in sorted(set(ours) | set(golden)):
        a, b = ours.get(table), golden.get(table)
        if a == b:
            continue
        if a is None or b is None:
            out.append(f"{table}: {'missing' if a is None else 'unexpected'} table")
            continue
        detail = f"{table}: {len(a)} rows (golden {len(b)})"
        for ra, rb in zip(a, b, strict=False):
            if ra != rb:
                fields = sorted(k for k in set(ra) | set(rb) if ra.get(k) != rb.get(k))
                diffs = ", ".join(f"{k}={ra.get(k)!r} (golden {rb.get(k)!r})" for k in fields[:6])
                detail += f"; first differing row {rb.get('id', '')!s}: {diffs}"
                break
        out.append(detail)
    return out


def compare(outcome: ReplayOutcome, trace: Trace, golden: State | None) -> list[Mismatch]:
    problems: list[Mismatch] = []
    tid = trace.task_id
    if state_hash(outcome.initial_state) != trace.initial_state_hash:
        problems.append(Mismatch(task_id=tid, kind="initial_state", detail="initial state hash differs"))
    for i, (rec, want) in enumerate(zip(outcome.calls, trace.calls, strict=False)):
        if rec.result != want["result"]:
            problems.append(
                Mismatch(
                    task_id=tid,
                    kind="call",
                    detail=f"call {i} {rec.tool}: expected {want['result'][:400]!r}, got {rec.result[:400]!r}",
                )
            )
            break
    if len(outcome.calls) != len(trace.calls):
        problems.append(
            Mismatch(
                task_id=tid,
                kind="call",
                detail=f"{len(outcome.calls)} calls replayed, trace has {len(trace.calls)}",
            )
        )
    if state_hash(outcome.final_state) != trace.golden_state_hash:
        diffs = table_differences(outcome.final_state, golden) if golden is not None else []
        problems.append(
            Mismatch(task_id=tid, kind="final_state", detail="; ".join(diffs) or "final state hash differs")
        )
    return problems


async def _conform_one(
    bench: Benchmark,
    task: Task,
    trace: Trace,
    traces_dir: Path,
    provider: SandboxProvider,
    kwargs: dict[str, Any],
) -> list[Mismatch]:
    calls = [(c["tool"], c["parameters"]) for c in trace.calls]
    try:
        outcome = await replay_task(bench, task, calls, provider=provider, **kwargs)
    except Exception as exc:  # a sandbox or transport failure is a mismatch, reported, not a crash
        return [Mismatch(task_id=task.id, kind="error", detail=f"{exc.__class__.__name__}: {exc}")]
    return compare(outcome, trace, await asyncio.to_thread(golden_canonical, traces_dir, task.id))


async def run_conformance(
    bench: Benchmark,
    traces_dir: Path,
    domains: list[str] | None = None,
    task_ids: set[str] | None = None,
    concurrency: int = 2,
    runtime: str | None = None,
    progress: Any = None,
) -> dict[str, DomainReport]:
    traces = load_traces(traces_dir)
    wanted_domains = set(domains or domain_names())
    selected: list[tuple[Task, Trace]] = []
    for task in bench.tasks:
        tr = traces.get(task.id)
        if tr is None or server_to_domain().get(tr.server) not in wanted_domains:
            continue
        if task_ids and task.id not in task_ids and task.uid not in task_ids:
            continue
        selected.append((task, tr))
    reports = {d: DomainReport() for d in domain_names() if d in wanted_domains}
    run_id = new_id("conf")
    images = await asyncio.to_thread(resolve_images, False)
    started = time.monotonic()

    async def one(task: Task, tr: Trace, provider: SandboxProvider, sem: asyncio.Semaphore) -> None:
        async with sem:
            t = time.monotonic()
            problems = await _conform_one(bench, task, tr, traces_dir, provider, replay_kwargs)
            rep = reports[task.domain]
            rep.total += 1
            rep.seconds += time.monotonic() - t
            if problems:
                rep.mismatches.extend(problems)
            else:
                rep.matched += 1
            if progress:
                progress(task, problems)

    replay_kwargs: dict[str, Any] = {"runtime": runtime, "run_id": run_id, "images": images}
    try:
        # A warm pool per domain, one domain at a time: container sets boot while
        # earlier tasks replay, and the pool stops booting once its tasks are served.
        for domain in reports:
            todo = [(t, tr) for t, tr in selected if t.domain == domain]
            if not todo:
                continue
            size = max(1, min(concurrency, len(todo)))
            provider = DockerProvider(warm=size)
            provider.plan({domain: len(todo)})
            try:
                sem = asyncio.Semaphore(size)
                await asyncio.gather(*(one(t, tr, provider, sem) for t, tr in todo))
            finally:
                await provider.close()
    finally:
        await asyncio.to_thread(sweep, run_id)
    for rep in reports.values():
        rep.seconds = round(rep.seconds, 2)
    reports_total = time.monotonic() - started
    if progress:
        progress(None, reports_total)
    return reports
