"""What running a task's test function adds per attempt, against the native judge.

For N attempts over the demo pack's tasks (each graded by the v1.0 code of a checkout
test of its scenario with the same checks: `validate_database(x)` and, for rubric
tasks, `validate_rubrics_yesno(x, judge)`), at concurrency C:

* native: `bench.run.grading.judged` on the attempt's states (the verdict tbx gives
  without running the function; rubric answers given);
* function: the TestContext built (`bench.evaluator.context`, Bench effects included)
  and the code run in a warm evaluator pool of C containers, its judge questions
  relayed to a host-side stand-in answering "Yes" at once (the relay's cost, not a
  model's).

The attempt's states are the task's initial rows as initial, result and golden state
(the payload a test sees has the real size; the verdict does not matter here).
For comparison, `--fresh` attempts run with a container of their own each (what
`run_test_function` does without a pool). CPU-s per attempt counts tbx's process, the evaluator containers' cgroups (cpuacct)
and the Docker daemon, containerd and the containers' shims (they carry the
containers' stdin/stdout); wall is each attempt's own latency (median, p90).

Usage::

    python benchmarks/test_function_cost.py [--attempts 160] [--concurrency 16]
        [--checkout ../shared/benchmarks/thinkingbox-data]

The evaluator containers are labelled `tbx.run=bench-fncost-...` and removed at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.dataset import Benchmark, Task, load_benchmark
from bench.evaluator.context import native_effects, test_context
from bench.prepare import initial_state
from bench.run.grading import judged
from judge import GoldenState, RubricAnswer, canonical_state, state_hash
from sandbox import labels as lbl
from sandbox import require_image, sweep
from sandbox.evaluator import EvaluatorPool, run_test_function
from servers.registry import load_domain

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "bench" / "packs" / "demo"
CHECKOUT = REPO.parent / "shared" / "benchmarks" / "thinkingbox-data"
TICKS = os.sysconf("SC_CLK_TCK")


def proc_cpu(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICKS


def daemon_pids(container_ids: list[str]) -> list[int]:
    out = subprocess.run(["pgrep", "-x", "dockerd|containerd"], capture_output=True, text=True).stdout.split()
    shims = subprocess.run(["pgrep", "-f", "containerd-shim"], capture_output=True, text=True).stdout.split()
    for pid in shims:
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if any(c[:12] in cmd for c in container_ids):
            out.append(pid)
    return [int(p) for p in out]


def cgroup_cpu(container_ids: list[str]) -> float:
    total = 0.0
    for cid in container_ids:
        for base in (Path("/sys/fs/cgroup/cpuacct/docker") / cid / "cpuacct.usage",):
            with contextlib.suppress(OSError):
                total += int(base.read_text()) / 1e9
    return total


def containers(run: str) -> list[str]:
    out = subprocess.run(
        ["docker", "ps", "-q", "--no-trunc", "--filter", f"label={lbl.RUN}={run}"],
        capture_output=True,
        text=True,
    ).stdout.split()
    return out


def cases(demo: Benchmark, checkout: Benchmark) -> list[tuple[Task, str, GoldenState]]:
    out = []
    for task in demo.tasks:
        same = [t for t in checkout.tasks if t.scenario == task.scenario and t.checks == task.checks]
        if not same:
            continue
        state = canonical_state(load_domain(task.domain).tables, initial_state(demo, task))
        h = state_hash(state)
        golden = GoldenState(
            task_id=task.id,
            key="bench",
            initial_state=state,
            final_state=state,
            initial_hash=h,
            golden_hash=h,
        )
        out.append((task, same[0].test_code or "", golden))
    return out


def native_one(bench: Benchmark, task: Task, golden: GoldenState) -> float:
    t = time.perf_counter()
    rubrics = list(bench.effective_init(task).rubrics_yesno) if task.has_rubrics else []
    answers = [RubricAnswer(question=q, answer="yes") for q in rubrics] or None
    judged(
        bench,
        task,
        golden,
        golden.final_state,
        [],
        initial=golden.initial_state,
        rubrics=rubrics,
        answers=answers,
    )
    return time.perf_counter() - t


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--attempts", type=int, default=160)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--fresh", type=int, default=32, help="attempts run with a container each, to compare")
    ap.add_argument("--checkout", default=os.environ.get("TBX_CHECKOUT") or str(CHECKOUT))
    args = ap.parse_args()
    demo = load_benchmark(DEMO)
    checkout = load_benchmark(
        Path(args.checkout), release="releases/thinkingbox_bench_v1/testlist_thinkingbox_bench_v1.yaml"
    )
    work = cases(demo, checkout)
    plan = [work[i % len(work)] for i in range(args.attempts)]
    print(
        f"load: {os.getloadavg()[0]:.1f} (1 min), {os.cpu_count()} CPUs; {len(work)} demo tasks, {len(plan)} attempts"
    )

    # native
    cpu0, t0 = time.process_time(), time.perf_counter()
    native_walls = [native_one(demo, task, golden) for task, _, golden in plan]
    native_cpu = (time.process_time() - cpu0) / len(plan)
    print(f"native judge: {len(plan)} attempts in {time.perf_counter() - t0:.2f} s")

    # function path, a warm pool
    run = lbl.new_id("bench-fncost")
    labels = lbl.labels_for(run, lbl.new_id("pool"), "evaluator", os.getpid())
    pool = EvaluatorPool(require_image("evaluator"), labels, size=args.concurrency)
    questions = 0

    async def ask(system: str, user: str) -> str:
        nonlocal questions
        questions += 1
        return "Yes"

    gate = asyncio.Semaphore(args.concurrency)  # C attempts at once, as `tbx run --concurrency C`

    async def one(task: Task, code: str, golden: GoldenState) -> float:
        async with gate:
            return await timed(task, code, golden)

    async def timed(task: Task, code: str, golden: GoldenState) -> float:
        t = time.perf_counter()
        ctx = test_context(
            effects=native_effects(demo, task, golden, golden.initial_state, golden.final_state),
            trajectory=None,
            final_message="Done. <DONE>",
        )
        result = await run_test_function(code, ctx, ask=ask, labels=labels, pool=pool)
        assert not result.is_system_error, result.tb
        return time.perf_counter() - t

    try:
        t0 = time.perf_counter()
        await asyncio.gather(*(one(*plan[i % len(plan)]) for i in range(args.concurrency)))  # warm the pool
        warm_s = time.perf_counter() - t0
        ids = containers(run)
        pids = daemon_pids(ids)
        me0, cg0 = time.process_time(), cgroup_cpu(ids)
        d0 = sum(proc_cpu(p) for p in pids)
        questions = 0
        t0 = time.perf_counter()
        walls = await asyncio.gather(*(one(*c) for c in plan))
        elapsed = time.perf_counter() - t0
        tbx_cpu = time.process_time() - me0
        ids_after = containers(run)
        container_cpu = cgroup_cpu(ids_after) - cg0 if ids_after == ids else float("nan")
        daemon_cpu = sum(proc_cpu(p) for p in pids) - d0
        # the alternative: a container of its own per test (docker run --once)
        fresh_plan = plan[: args.fresh]
        pids_all = daemon_pids([])
        d1, me1 = sum(proc_cpu(p) for p in pids_all), time.process_time()
        ch1 = resource.getrusage(resource.RUSAGE_CHILDREN)

        async def fresh(task: Task, code: str, golden: GoldenState) -> float:
            async with gate:
                t = time.perf_counter()
                ctx = test_context(
                    effects=native_effects(demo, task, golden, golden.initial_state, golden.final_state),
                    trajectory=None,
                    final_message="Done. <DONE>",
                )
                result = await run_test_function(code, ctx, ask=ask, labels=labels)
                assert not result.is_system_error, result.tb
                return time.perf_counter() - t

        fresh_walls = await asyncio.gather(*(fresh(*c) for c in fresh_plan))
        ch2 = resource.getrusage(resource.RUSAGE_CHILDREN)
        fresh_cpu = (
            time.process_time()
            - me1
            + (ch2.ru_utime + ch2.ru_stime - ch1.ru_utime - ch1.ru_stime)
            + sum(proc_cpu(p) for p in pids_all)
            - d1
        ) / len(fresh_plan)
    finally:
        await pool.close()
        await asyncio.to_thread(sweep, run=run)
    n = len(plan)
    total = (tbx_cpu + container_cpu + daemon_cpu) / n
    q = statistics.quantiles(walls, n=10)
    print(f"pool: {pool.started} containers started and warmed in {warm_s:.1f} s (not counted below)")
    print(
        f"function path: {n} attempts in {elapsed:.2f} s at concurrency {args.concurrency}; {questions} judge questions relayed"
    )
    print()
    print(
        "| per attempt | native judge | function path | of which: tbx | evaluator containers | dockerd/containerd/shims |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    print(
        f"| CPU-s (mean) | {native_cpu:.4f} | {total:.4f} | {tbx_cpu / n:.4f} | {container_cpu / n:.4f} | {daemon_cpu / n:.4f} |"
    )
    print(
        f"| wall s (median) | {statistics.median(native_walls):.4f} | {statistics.median(walls):.3f} | | | |"
    )
    print(f"| wall s (p90) | {statistics.quantiles(native_walls, n=10)[-1]:.4f} | {q[-1]:.3f} | | | |")
    print()
    print(
        f"a container per test instead ({len(fresh_plan)} attempts, concurrency {args.concurrency}): "
        f"{fresh_cpu:.3f} CPU-s per attempt (tbx, the docker CLI, dockerd and containerd; not the "
        f"containers' own nor their shims'), wall median {statistics.median(fresh_walls):.2f} s, "
        f"p90 {statistics.quantiles(fresh_walls, n=10)[-1]:.2f} s"
    )
    print(
        f"goal: <= 0.3 CPU-s and <= 0.5 s wall per attempt at the median: "
        f"{'met' if total <= 0.3 and statistics.median(walls) <= 0.5 else 'NOT met'}"
    )


if __name__ == "__main__":
    asyncio.run(main())
