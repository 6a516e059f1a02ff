"""Judge time per attempt on the largest domain state.

Finds the task with the most canonical bytes (the larger of its initial state,
computed host-side, and its golden end state), gets its golden state (golden
cache, else one replay in a fresh sandbox), starts one attempt sandbox, plays
the golden calls minus the last write (so the verdict has differences to
label), then times N rounds of what the judge does per attempt:

* connect + dump: connect to the sandbox's PostgreSQL from the host and dump
  the canonical terminal state (one REPEATABLE READ snapshot);
* judge: hash, effects, labelled differences against golden, signature
  (`judge.verdict.decide`).

Usage::

    python benchmarks/judge_speed.py [-n 50] [--task ID] [--golden-cache DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import psycopg

from bench.dataset import Benchmark, Task, default_root, load_benchmark
from bench.prepare import initial_state, sandbox_request
from bench.replay.mcp_calls import replay_calls
from bench.run.golden import GoldenStore
from judge import ToolCallView, canonical_bytes, canonical_state, decide, dump_canonical, dump_dsn
from sandbox import AsyncSandbox, new_id, sweep
from servers.registry import load_domain


def largest_task(bench: Benchmark, traces: Path) -> tuple[Task, int]:
    best: tuple[Task, int] | None = None
    for task in bench.tasks:
        size = len(
            canonical_bytes(canonical_state(load_domain(task.domain).tables, initial_state(bench, task)))
        )
        gz = traces / "canonical_states" / (task.id.replace(":", "__") + ".json.gz")
        if gz.exists():
            size = max(size, len(gzip.decompress(gz.read_bytes())))
        if best is None or size > best[1]:
            best = (task, size)
    assert best is not None
    return best


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def run(args: argparse.Namespace) -> int:
    dataset = Path(args.dataset) if args.dataset else default_root()
    t = time.monotonic()
    bench = load_benchmark(dataset, strict=False)
    if args.task:
        task = bench.task(args.task)
        size = len(
            canonical_bytes(canonical_state(load_domain(task.domain).tables, initial_state(bench, task)))
        )
    else:
        task, size = largest_task(bench, dataset / "traces")
    print(f"task {task.id} ({task.domain}): {size} canonical bytes (found in {time.monotonic() - t:.1f}s)")
    tables = load_domain(task.domain).tables
    run_id = new_id("bench-judge")
    try:
        with tempfile.TemporaryDirectory() as tmp:
            store = GoldenStore(bench, args.golden_cache or tmp, run_id=run_id)
            t = time.monotonic()
            golden = await store.get(task)
            print(f"golden state: {'replayed' if store.replays else 'cached'} in {time.monotonic() - t:.2f}s")
        calls = bench.golden_calls(task)
        played = calls[:-1]
        request = sandbox_request(bench, task, typesense=False, run_id=run_id)
        async with AsyncSandbox(request) as sb:
            initial = await asyncio.to_thread(dump_dsn, sb.handle.pg.admin_dsn(task.domain), task.domain)
            records = await replay_calls(sb.handle.servers[task.domain], played, sb.handle.server_headers)
            trajectory = [
                ToolCallView.from_reply(r.tool, r.parameters, r.result, r.is_error, r.latency_ms)
                for r in records
            ]
            dsn = sb.handle.pg.admin_dsn(task.domain)
            connects: list[float] = []
            dumps: list[float] = []
            judges: list[float] = []
            totals: list[float] = []
            verdict = None
            for _ in range(args.n):
                t0 = time.perf_counter()
                with psycopg.connect(dsn, autocommit=True) as conn:  # what judge.canonical.dump_dsn does
                    t1 = time.perf_counter()
                    terminal = dump_canonical(conn, tables)
                t2 = time.perf_counter()
                verdict = decide(task.id, tables, golden, terminal, trajectory, initial=initial)
                t3 = time.perf_counter()
                connects.append((t1 - t0) * 1000)
                dumps.append((t2 - t1) * 1000)
                judges.append((t3 - t2) * 1000)
                totals.append((t3 - t0) * 1000)
        assert verdict is not None
        rows = sum(len(v) for v in terminal.values())
        print(
            f"attempt: {len(played)} of {len(calls)} golden calls played; {len(terminal)} tables, {rows} rows, "
            f"{len(canonical_bytes(terminal))} bytes; verdict {verdict.summary()[:100]}"
        )
        print(f"{'n=' + str(args.n):<8} {'p50 ms':>8} {'p95 ms':>8} {'mean ms':>8}")
        print(f"(load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)")
        for name, xs in (("connect", connects), ("dump", dumps), ("judge", judges), ("total", totals)):
            print(f"{name:<8} {pct(xs, 0.5):8.2f} {pct(xs, 0.95):8.2f} {statistics.fmean(xs):8.2f}")
    finally:
        sweep(run=run_id)
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", type=int, default=50)
    ap.add_argument("--task", help="task id (default: the task with the most canonical bytes)")
    ap.add_argument("--dataset")
    ap.add_argument("--golden-cache", help="golden cache dir (default: a temporary one)")
    return asyncio.run(run(ap.parse_args()))


if __name__ == "__main__":
    sys.exit(main())
