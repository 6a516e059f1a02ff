"""Time `tbx conformance` for one domain: end to end and per task, split into
sandbox start (boot + seed), initial dump, replay over MCP, final dump and
teardown; cold sandboxes versus the warm pool, at concurrency 1 and 4.

    python benchmarks/conformance_timing.py [--domain retail] [--tasks 8] [--concurrency 1 4]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from typing import Any

from bench.dataset import default_root, load_benchmark
from bench.replay.conformance import compare, golden_canonical, load_traces
from bench.replay.sandboxed import ReplayOutcome, replay_task
from sandbox import DockerProvider, SandboxProvider, leftovers, new_id, resolve_images, sweep

PHASES = ("sandbox_start", "initial_dump", "replay", "final_dump", "teardown")


async def measure(
    bench: Any, pairs: list[Any], concurrency: int, pooled: bool, traces_dir: Any
) -> dict[str, Any]:
    run_id = new_id("bench-conf")
    images = await asyncio.to_thread(resolve_images, False)
    sem = asyncio.Semaphore(concurrency)
    outcomes: list[ReplayOutcome] = []
    mismatched = 0

    async def one(task: Any, trace: Any, provider: SandboxProvider) -> None:
        nonlocal mismatched
        async with sem:
            calls = [(c["tool"], c["parameters"]) for c in trace.calls]
            out = await replay_task(bench, task, calls, run_id=run_id, images=images, provider=provider)
            outcomes.append(out)
            if compare(out, trace, golden_canonical(traces_dir, task.id)):
                mismatched += 1

    t0 = time.monotonic()
    try:
        # Through the one sandbox path, as `tbx conformance`: a warm pool planned for the
        # tasks, or cold sets.
        provider = DockerProvider(warm=concurrency if pooled else 0)
        provider.plan({pairs[0][0].domain: len(pairs)})
        try:
            await asyncio.gather(*(one(t, tr, provider) for t, tr in pairs))
        finally:
            await provider.close()
    finally:
        await asyncio.to_thread(sweep, run_id)
    wall = time.monotonic() - t0
    phases = {p: statistics.median(o.timings.get(p, 0.0) for o in outcomes) for p in PHASES}
    return {"wall": wall, "per_task": wall / len(pairs), "phases": phases, "mismatched": mismatched}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--domain", default="retail")
    ap.add_argument("--tasks", type=int, default=8)
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 4])
    args = ap.parse_args()
    root = default_root()
    bench = load_benchmark(root, strict=False)
    traces = load_traces(root / "traces")
    pairs = [(t, traces[t.id]) for t in bench.tasks if t.domain == args.domain and t.id in traces][
        : args.tasks
    ]
    print(f"{args.domain}: {len(pairs)} traced tasks per configuration")
    print(
        f"{'mode':6} {'conc':>4} {'wall s':>7} {'s/task':>7} "
        + " ".join(f"{p:>13}" for p in PHASES)
        + "  mismatches"
    )
    for conc in args.concurrency:
        for pooled in (False, True):
            r = asyncio.run(measure(bench, pairs, conc, pooled, root / "traces"))
            phases = " ".join(f"{r['phases'][p]:13.3f}" for p in PHASES)
            mode = "pool" if pooled else "cold"
            print(
                f"{mode:6} {conc:4d} {r['wall']:7.1f} {r['per_task']:7.2f} {phases}  {r['mismatched']}",
                flush=True,
            )
    containers, networks = leftovers()
    print(f"leftovers after the run: {len(containers)} containers, {len(networks)} networks")


if __name__ == "__main__":
    main()
