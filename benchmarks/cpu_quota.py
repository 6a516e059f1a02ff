"""Does the per-container CPU quota slow a normal attempt? Side by side, in one run.

For each CPU setting (`--cpus`, default: none, 1.0, 0.5 cores per container), one
retail sandbox (no Typesense) is started; the settings' starts are interleaved
and repeated (`--starts`), so a shared machine's load falls on all of them alike.
Then the first N traced retail tasks run as `oracle` attempts against each
sandbox in turn (reseeded before every attempt, the golden hash checked): the
attempt's duration and every tool call's latency. Ratios are to the unlimited
setting.

Usage::

    python benchmarks/cpu_quota.py [--tasks 10] [--rounds 3] [--starts 3] [--cpus none,1.0,0.5]

Sandboxes are labelled `tbx.run=bench-cpu-...` and swept at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agent_loop import reseed  # type: ignore[import-not-found]

from bench.dataset import default_root, load_benchmark
from bench.prepare import sandbox_request
from bench.rollout.agent_loop import run_attempt_agent
from judge import dump_dsn, state_hash
from sandbox import Limits, Sandbox, new_id, sweep


def med(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20)[18] if len(values) > 1 else med(values)


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--starts", type=int, default=3)
    ap.add_argument("--cpus", default="none,1.0,0.5")
    args = ap.parse_args()
    settings: list[float | None] = [None if c == "none" else float(c) for c in args.cpus.split(",")]
    bench = load_benchmark(default_root())
    traces_path = bench.root / "traces" / "sandbox_external_retail.jsonl"
    traces = {t["task_id"]: t for t in map(json.loads, traces_path.read_text().splitlines())}
    tasks = [t for t in bench.tasks if t.id in traces][: args.tasks]
    run = new_id("bench-cpu")
    ready: dict[Any, list[float]] = {c: [] for c in settings}
    attempt: dict[Any, list[float]] = {c: [] for c in settings}
    calls: dict[Any, list[float]] = {c: [] for c in settings}
    boxes: dict[Any, Sandbox] = {}

    def request(cpus: float | None) -> Any:
        req = sandbox_request(bench, tasks[0], typesense=False, run_id=run)
        return req.model_copy(update={"limits": dataclasses.replace(Limits(), cpus=cpus)})

    try:
        for i in range(args.starts):  # start-up, interleaved; the last sandbox of each setting is kept
            for cpus in settings:
                t = time.monotonic()
                sb = Sandbox(request(cpus))
                sb.start()
                ready[cpus].append((time.monotonic() - t) * 1000)
                if i < args.starts - 1:
                    sb.close()
                else:
                    boxes[cpus] = sb
        for _ in range(args.rounds):
            for task in tasks:
                for cpus in settings:  # the same task on each setting, back to back
                    handle = boxes[cpus].handle
                    assert handle is not None
                    await asyncio.to_thread(reseed, handle, bench, task)
                    t = time.perf_counter()
                    traj = await run_attempt_agent("oracle", task, bench, handle.servers["retail"], None)
                    attempt[cpus].append((time.perf_counter() - t) * 1000)
                    calls[cpus].extend(c.latency_ms for c in traj.tool_calls)
                    got = state_hash(
                        await asyncio.to_thread(dump_dsn, handle.pg.admin_dsn("retail"), "retail")
                    )
                    if got != traces[task.id]["golden_state_hash"]:
                        raise SystemExit(f"{task.id} (cpus={cpus}): oracle missed the golden hash")
    finally:
        for sb in boxes.values():
            sb.close()
        sweep(run=run)

    base = settings[0]
    print(
        f"{len(tasks)} retail tasks x {args.rounds} rounds, {args.starts} starts per setting (shared machine)"
    )
    print(
        f"{'cpus':>6} {'start ms':>10} {'attempt ms':>11} {'p95':>8} {'call ms':>8} {'p95':>7}  ratios to {base}"
    )
    for cpus in settings:
        row = [med(ready[cpus]), med(attempt[cpus]), p95(attempt[cpus]), med(calls[cpus]), p95(calls[cpus])]
        ratio = [
            med(ready[cpus]) / med(ready[base]),
            med(attempt[cpus]) / med(attempt[base]),
            med(calls[cpus]) / med(calls[base]),
        ]
        print(
            f"{cpus!s:>6} {row[0]:10.0f} {row[1]:11.1f} {row[2]:8.1f} {row[3]:8.2f} {row[4]:7.2f}  "
            f"start x{ratio[0]:.2f}  attempt x{ratio[1]:.2f}  call x{ratio[2]:.2f}  (n calls {len(calls[cpus])})"
        )


if __name__ == "__main__":
    asyncio.run(main())
