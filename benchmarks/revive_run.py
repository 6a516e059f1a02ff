"""Every attempt of a run brought back in full (`tbx up --from`'s revive, issue 37) and its
end state checked against the recorded terminal state: how many match, the first
difference of any that does not, and what a revival costs.

Usage::

    python benchmarks/revive_run.py RUN_DIR [--concurrency 2] [--dataset DIR]

`make bench` leaves results/demo-chaos (k=5 on the demo pack): every attempt there, its
mistakes, error replies and refused calls included, should come back to its hash. Attempts
that ended in a system error have no end state and are counted apart. Prints one line per
mismatch and a summary table; exits 1 when any attempt does not match.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

from bench.run.results import load_run
from bench.run.revive import RevivalPlan, plan_revival, revived
from sandbox import DockerProvider, ProxyServer


async def _one(
    plan: RevivalPlan, provider: DockerProvider, proxy: ProxyServer
) -> tuple[bool, int, float, str]:
    """(matched, calls replayed, seconds to ready, first difference)."""
    t = time.monotonic()
    async with revived(plan, provider, proxy) as r:
        took = time.monotonic() - t
        assert r.check is not None, plan.attempt_id
        diff = r.check.first_difference
        return r.check.matched, len(r.replayed), took, diff.describe() if diff else ""


async def _all(plans: list[RevivalPlan], concurrency: int) -> list[tuple[bool, int, float, str]]:
    provider = DockerProvider(teardown_inline=True)
    gate = asyncio.Semaphore(concurrency)
    with ProxyServer() as proxy:

        async def one(plan: RevivalPlan) -> tuple[bool, int, float, str]:
            async with gate:
                return await _one(plan, provider, proxy)

        return await asyncio.gather(*(one(p) for p in plans))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run", type=Path)
    ap.add_argument("--concurrency", type=int, default=2)
    ap.add_argument("--dataset", type=Path, help="the run's dataset, when its manifest's path moved")
    args = ap.parse_args()
    rows = load_run(args.run).rows
    graded = [r for r in rows if not r.system_error]
    plans = [
        plan_revival(args.run, str((r.model_extra or {})["attempt_id"]), dataset=args.dataset) for r in graded
    ]
    t = time.monotonic()
    results = asyncio.run(_all(plans, args.concurrency))
    wall = time.monotonic() - t
    matched = sum(ok for ok, *_ in results)
    for plan, (ok, _, _, diff) in zip(plans, results, strict=True):
        if not ok:
            print(f"MISMATCH {plan.attempt_id}: {diff}")
    calls = [n for _, n, _, _ in results]
    ready = [s for _, _, s, _ in results]
    print(
        "| run | attempts | system errors (no end state) | matched | calls replayed | ready, median | wall |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    print(
        f"| {args.run} | {len(rows)} | {len(rows) - len(graded)} | **{matched}/{len(graded)}** | "
        f"{sum(calls)} | {statistics.median(ready):.2f} s | {wall:.0f} s (concurrency {args.concurrency}) |"
    )
    return 0 if matched == len(graded) else 1


if __name__ == "__main__":
    sys.exit(main())
