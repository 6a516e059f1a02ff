"""What running attempts through Ray costs: `tbx run` local vs `tbx run --ray` on
this machine, same attempts, same concurrency, side by side in one process.

    python benchmarks/ray_overhead.py [--tasks 6] [--repeat 2] [--concurrency 2] [--no-loss]

A local Ray cluster (`ray.cluster_utils.Cluster`: a head with no attempt slots and
two workers with concurrency/2 `tbx_attempt` slots each, all on this machine's
Docker daemon) runs the same oracle attempts as the local executor. Golden end
states are computed first into a shared cache, so both series time attempts
only. Printed: attempts/min (local, Ray, ratio), Ray's scheduling latency per
attempt (submit -> the node's actor starts it), the driver's own CPU per attempt
(this process: for the local series it also does the sandbox work, for Ray it
only plans, grades and writes), the attempts per node, and with the node-loss
series: a worker killed mid-run, the time until its attempts are reported lost
and until their retries run on the other worker.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("TESTCONTAINERS_RYUK_DISABLED", "true")

from bench.dataset import Benchmark, Task, load_benchmark
from bench.run.coordinator import Coordinator, RunOptions
from bench.run.executor import LocalExecutor
from bench.run.results import read_rows
from bench.run.retries import RetryPolicy
from sandbox import DockerProvider, docker_client
from sandbox.labels import NODE, RUN

REPO = Path(__file__).resolve().parents[1]
PACK = REPO / "bench" / "packs" / "demo"
NODE_ARGS: dict[str, Any] = {"num_cpus": 1, "object_store_memory": 80 * 2**20}


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _containers(**labels: str) -> list[Any]:
    return docker_client().containers.list(
        all=True, filters={"label": [f"{k}={v}" for k, v in labels.items()]}
    )


async def _series(
    name: str, bench: Benchmark, tasks: list[Task], args: argparse.Namespace, out: Path, executor: Any
) -> dict[str, Any]:
    opts = RunOptions(
        out=out,
        agent="oracle",
        repeat=args.repeat,
        concurrency=args.concurrency,
        skip_rubrics=True,
        golden_cache=out.parent / "golden",
        retries=RetryPolicy(max_retries=3, wait_first=0.0),
    )
    out.mkdir(parents=True)
    coord = Coordinator(bench, opts, executor=executor)
    cpu = _cpu()
    await coord.run(tasks)
    wall = time.monotonic() - coord.started  # the attempts phase (goldens come before it)
    cpu = _cpu() - cpu
    rows = read_rows(out / "results.jsonl")
    n = len(rows)
    print(
        f"{name}: {n} attempts in {wall:.1f} s, driver CPU {cpu:.2f} s, load {os.getloadavg()}",
        file=sys.stderr,
        flush=True,
    )
    return {
        "name": name,
        "attempts": n,
        "passed": sum(r.passed for r in rows),
        "errors": sum(r.system_error for r in rows),
        "wall": wall,
        "per_min": n / wall * 60,
        "driver_cpu_per_attempt": cpu / max(1, n),
        "load": os.getloadavg(),
        "rows": rows,
        "run_id": json.loads((out / "manifest.json").read_text())["run_id"],
    }


async def _loss_series(
    cluster: Any, bench: Benchmark, tasks: list[Task], args: argparse.Namespace, out: Path, address: str
) -> dict[str, Any]:
    """A worker killed once its first sandbox is up: time to `node lost`, and until
    a retry's sandbox starts on the surviving worker."""
    from bench.run.ray_executor import RayExecutor

    executor = RayExecutor(address)
    run = asyncio.ensure_future(_series("ray, node lost", bench, tasks, args, out, executor))
    import ray

    # Not the raylet this process is attached to: removing that one would disconnect the driver.
    mine = ray._private.worker.global_worker.node._raylet_socket_name
    victim = None
    while victim is None and not run.done():
        for node in [n for n in cluster.worker_nodes if n._raylet_socket_name != mine]:
            if await asyncio.to_thread(_containers, **{NODE: node.node_id}):
                victim = node
                break
        await asyncio.sleep(0.3)
    assert victim is not None, "no attempt reached a worker"
    survivor = next(n for n in cluster.worker_nodes if n is not victim)
    print(f"killing worker {victim.node_id[:8]}; survivor {survivor.node_id[:8]}", file=sys.stderr)
    before = {c.id for c in await asyncio.to_thread(_containers, **{NODE: survivor.node_id})}
    lost_at = time.monotonic()
    await asyncio.to_thread(cluster.remove_node, victim, False)
    errors = out / "errors.jsonl"
    reported = running = None
    while not run.done() and (reported is None or running is None):
        if reported is None and errors.exists() and "node lost" in errors.read_text():
            reported = time.monotonic() - lost_at
            before = {c.id for c in await asyncio.to_thread(_containers, **{NODE: survivor.node_id})}
        elif reported is not None:
            now = {c.id for c in await asyncio.to_thread(_containers, **{NODE: survivor.node_id})}
            if now - before:
                running = time.monotonic() - lost_at
        await asyncio.sleep(0.2)
    result = await run
    print({k: v for k, v in result.items() if k != "rows"}, file=sys.stderr, flush=True)
    result["lost_reported_s"] = reported
    result["retry_running_s"] = running
    result["lost"] = sum(1 for line in errors.read_text().splitlines() if "node lost" in line)
    cluster.add_node(**NODE_ARGS, resources={"tbx_attempt": args.concurrency // 2 or 1})
    return result


def _table(results: list[dict[str, Any]], local: dict[str, Any]) -> None:
    print(
        "| series | attempts | passed | errors | wall (s) | attempts/min | vs local | driver CPU s/attempt | load avg |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for r in results:
        load = "/".join(f"{x:.1f}" for x in r["load"])
        print(
            f"| {r['name']} | {r['attempts']} | {r['passed']} | {r['errors']} | {r['wall']:.1f} | "
            f"{r['per_min']:.1f} | {r['per_min'] / local['per_min']:.2f}x | {r['driver_cpu_per_attempt']:.3f} | {load} |"
        )


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", type=int, default=6, help="retail tasks of the demo pack (first N)")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--concurrency", type=int, default=2)
    ap.add_argument("--no-loss", action="store_true", help="skip the node-loss series")
    args = ap.parse_args()

    import ray
    from ray.cluster_utils import Cluster

    from bench.run.ray_executor import RayExecutor

    bench = load_benchmark(PACK, strict=False)
    tasks = [t for t in bench.tasks if t.domain == "retail"][: args.tasks]
    tmp = Path(tempfile.mkdtemp(prefix="tbx-ray-bench-"))
    os.environ["PYTHONPATH"] = str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")
    t = time.monotonic()
    cluster = Cluster(
        initialize_head=True,
        head_node_args={**NODE_ARGS, "include_dashboard": False, "resources": {"tbx_attempt": 0}},
    )
    for _ in range(2):
        cluster.add_node(**NODE_ARGS, resources={"tbx_attempt": args.concurrency // 2 or 1})
    cluster.wait_for_nodes(timeout=120)
    print(f"cluster of 3 nodes up in {time.monotonic() - t:.1f} s", file=sys.stderr)
    try:
        # Goldens once, into the cache both series read.
        warmup = await _series(
            "warm-up (goldens)",
            bench,
            tasks,
            argparse.Namespace(**{**vars(args), "repeat": 1}),
            tmp / "warmup",
            LocalExecutor(DockerProvider(warm=0)),
        )
        local = await _series(
            "local", bench, tasks, args, tmp / "local", LocalExecutor(DockerProvider(warm=0))
        )
        executor = RayExecutor(cluster.address)
        remote = await _series("ray (2 workers)", bench, tasks, args, tmp / "ray", executor)
        latencies = sorted(executor.latencies)
        per_node = dict(executor.done_per_node)
        results = [local, remote]
        if not args.no_loss:
            results.append(await _loss_series(cluster, bench, tasks, args, tmp / "loss", cluster.address))
        del warmup
        print(
            f"\n{len(tasks)} retail tasks x {args.repeat} repeats, oracle, concurrency {args.concurrency}, warm 0\n"
        )
        _table(results, local)
        print(
            f"\nRay scheduling latency per attempt (submit -> node actor starts): "
            f"p50 {statistics.median(latencies):.3f} s, p90 {latencies[int(0.9 * (len(latencies) - 1))]:.3f} s, "
            f"max {latencies[-1]:.3f} s (first attempts include worker process start)"
        )
        print("attempts per node: " + ", ".join(f"{n[:8]} {c}" for n, c in sorted(per_node.items())))
        if not args.no_loss:
            loss = results[-1]
            print(
                f"node loss: {loss['lost']} attempts lost; reported lost after {loss['lost_reported_s']:.1f} s; "
                f"retry running on the other worker after {loss['retry_running_s'] or float('nan'):.1f} s"
            )
        left = sum(len(_containers(**{RUN: r["run_id"]})) for r in results)
        print(f"containers left: {left}")
    finally:
        if ray.is_initialized():
            ray.shutdown()
        cluster.shutdown()


if __name__ == "__main__":
    asyncio.run(main())
