"""Throughput of `tbx run`: the oracle agent over one domain's release tasks
(each attempt in its own sandbox behind the tool proxy, judged against the
golden end state), at several concurrencies, cold sandboxes vs the warm pool,
measured side by side in one process.

    python benchmarks/runner_throughput.py [--domain retail] [--concurrency 1 2 4]
        [--modes cold warm] [--limit N] [--json]

Golden end states are computed once before the timed runs (a shared cache), so
every configuration times the same thing: attempts. Printed per configuration:
attempts per minute over the attempts phase, pass/error counts, the median of
each phase per attempt and each phase's share of the summed attempt time, and
the load average around the run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.dataset import default_root, load_benchmark
from bench.run.coordinator import Coordinator, RunOptions
from bench.run.results import read_rows
from sandbox import leftovers

PHASES = ("sandbox_start", "initial_dump", "agent", "final_dump", "teardown", "judge")


def _busy_cpu_seconds() -> float:
    """Machine-wide CPU time spent outside idle/iowait (all processes, kernel included)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def _daemon_cpu_seconds() -> dict[str, float]:
    """CPU used so far by the Docker daemons (they outlive the containers they start)."""
    out: dict[str, float] = {}
    tck = os.sysconf("SC_CLK_TCK")
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            name = (proc / "comm").read_text().strip()
            if name not in ("dockerd", "containerd"):
                continue
            stat = (proc / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out[name] = out.get(name, 0.0) + (int(stat[11]) + int(stat[12])) / tck
    return out


def run_once(
    bench: Any, tasks: list[Any], out: Path, cache: Path, concurrency: int, warm: int
) -> dict[str, Any]:
    opts = RunOptions(
        out=out,
        agent="oracle",
        repeat=1,
        concurrency=concurrency,
        warm=warm,
        golden_cache=cache,
        skip_rubrics=True,
    )
    runner = Coordinator(bench, opts)
    load_before = os.getloadavg()[0]
    cpu0, busy0, daemons0 = time.process_time(), _busy_cpu_seconds(), _daemon_cpu_seconds()
    asyncio.run(runner.run(tasks))
    attempts_wall = time.monotonic() - runner.started  # reset when the attempts phase begins
    cpu = time.process_time() - cpu0
    busy = _busy_cpu_seconds() - busy0
    daemons = _daemon_cpu_seconds()
    daemon_cpu = sum(daemons.values()) - sum(daemons0.values())
    rows = read_rows(out / "results.jsonl")
    timed = [r for r in rows if not r.system_error]
    medians = {p: statistics.median(r.timings.get(p, 0.0) for r in timed) if timed else 0.0 for p in PHASES}
    sums = {p: sum(r.timings.get(p, 0.0) for r in timed) for p in PHASES}
    total = sum(sums.values()) or 1.0
    containers, networks = leftovers(runner.run_id)
    left = len(containers) + len(networks)
    return {
        "concurrency": concurrency,
        "mode": "warm" if warm else "cold",
        "attempts": len(rows),
        "passed": sum(r.passed for r in rows),
        "system_errors": sum(r.system_error for r in rows),
        "attempts_wall_s": round(attempts_wall, 1),
        "attempts_per_min": round(len(rows) / attempts_wall * 60, 2),
        "orchestrator_cpu_s": round(cpu, 1),
        # Per attempt, whole run (includes the untimed start-up of the run itself).
        "cpu_per_attempt_s": {
            "machine": round(busy / len(rows), 2),
            "tbx_process": round(cpu / len(rows), 2),
            "dockerd_containerd": round(daemon_cpu / len(rows), 2),
            "containers_and_kernel": round((busy - cpu - daemon_cpu) / len(rows), 2),
        },
        "median_s": {p: round(v, 3) for p, v in medians.items()},
        "share": {p: round(sums[p] / total, 3) for p in PHASES},
        "load_before": round(load_before, 2),
        "load_after": round(os.getloadavg()[0], 2),
        "leftovers": left,
    }


async def _goldens(runner: Coordinator, tasks: list[Any]) -> None:
    failures = await runner.compute_goldens(tasks, asyncio.Semaphore(2))
    if failures:
        task_id, exc = failures[0]
        raise SystemExit(f"golden replay of {task_id} failed ({len(failures)} in all): {exc}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", type=Path, default=None)
    ap.add_argument("--domain", default="retail")
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--modes", nargs="+", choices=["cold", "warm"], default=["cold", "warm"])
    ap.add_argument("--limit", type=int, default=0, help="only the first N tasks (0: all)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    bench = load_benchmark(args.dataset or default_root(), strict=False)
    tasks = [t for t in bench.tasks if t.domain == args.domain]
    if args.limit:
        tasks = tasks[: args.limit]
    if not tasks:
        print(f"no tasks for domain {args.domain}", file=sys.stderr)
        return 2
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="tbx-runner-bench-") as tmp:
        root = Path(tmp)
        cache = root / "golden"
        t0 = time.monotonic()
        # Goldens once, untimed: the repeat-1 warm-up run fills the shared cache.
        warmup = Coordinator(bench, RunOptions(out=root / "warmup", golden_cache=cache, skip_rubrics=True))
        asyncio.run(_goldens(warmup, tasks))
        print(
            f"golden states of {len(tasks)} tasks: {time.monotonic() - t0:.0f} s (not counted)",
            file=sys.stderr,
        )
        for conc in args.concurrency:
            for mode in args.modes:
                out = root / f"c{conc}-{mode}"
                r = run_once(bench, tasks, out, cache, conc, conc if mode == "warm" else 0)
                results.append(r)
                print(
                    f"concurrency {conc} {mode}: {r['attempts']} attempts in {r['attempts_wall_s']} s = "
                    f"{r['attempts_per_min']}/min, {r['passed']} passed, {r['system_errors']} errors, "
                    f"load {r['load_before']}->{r['load_after']}",
                    file=sys.stderr,
                )
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    base = next(
        (r["attempts_per_min"] for r in results if r["concurrency"] == 1 and r["mode"] == "cold"), None
    )
    print(f"\n{args.domain}: {len(tasks)} tasks, oracle, repeat 1, {os.cpu_count()} cores\n")
    print(
        "| concurrency | sandboxes | attempts/min | vs c1 cold | passed | errors | wall (s) | "
        + " | ".join(f"{p} p50 (share)" for p in PHASES)
        + " | leftovers |"
    )
    print("|" + "---|" * (8 + len(PHASES)))
    for r in results:
        ratio = f"{r['attempts_per_min'] / base:.2f}x" if base else "-"
        phases = " | ".join(f"{r['median_s'][p]:.2f} s ({r['share'][p]:.0%})" for p in PHASES)
        print(
            f"| {r['concurrency']} | {r['mode']} | {r['attempts_per_min']:.1f} | {ratio} | {r['passed']}/"
            f"{r['attempts']} | {r['system_errors']} | {r['attempts_wall_s']:.0f} | {phases} | {r['leftovers']} |"
        )
    print("\nCPU seconds per attempt (machine-wide busy time over the run, split by who used it):\n")
    print(
        "| concurrency | sandboxes | machine | tbx process | dockerd + containerd | containers, shims, fuse, kernel |"
    )
    print("|---|---|---|---|---|---|")
    for r in results:
        c = r["cpu_per_attempt_s"]
        print(
            f"| {r['concurrency']} | {r['mode']} | {c['machine']:.2f} | {c['tbx_process']:.2f} | "
            f"{c['dockerd_containerd']:.2f} | {c['containers_and_kernel']:.2f} |"
        )
    return 0 if all(r["leftovers"] == 0 and r["system_errors"] == 0 for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
