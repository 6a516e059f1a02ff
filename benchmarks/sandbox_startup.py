"""Sandbox start-up and teardown: how long one attempt waits for its containers.

Starts and tears down N sandboxes (PostgreSQL + Typesense + one retail MCP
server, seeded like a real attempt: the retail base rows plus the task's
data_patch and its policy documents), first one after another, then N more at
concurrency 4, and prints p50/p95 of

* ready: `Sandbox.start()` wall time (network, containers, every service answering, seeded, indexed);
* the phases inside it (`AttemptHandle.timings`): containers created+started,
  PostgreSQL accepting connections, MCP server /healthz, Typesense /health, seeding, indexing;
* teardown: `Sandbox.close()` wall time;
* CPU seconds: this process during `start()` (host_cpu; meaningful in the
  sequential series) and each container from its start to ready (cgroup
  counters), which do not depend on how busy the machine is;

and the ratio of p50 ready to a bare `docker run --rm debian:bookworm-slim true`
measured in the same run, plus what dominates inside the server container
(Python start + imports). A third series does what `tbx run --warm` does: a
warm pool boots sandboxes ahead, and N attempts one after another each wait
only for `acquire()` (a booted sandbox, then seed + index). Ends by checking that nothing with the run's label is
left (exit 1 otherwise).

Usage::

    python benchmarks/sandbox_startup.py [-n 10] [--concurrency 4] [--no-typesense]
        [--pool-size 2] [--hold 2.0] [--json]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

os.environ.setdefault("TESTCONTAINERS_RYUK_DISABLED", "true")

from bench.dataset import default_root, load_benchmark
from bench.prepare import sandbox_request
from sandbox import Sandbox, SandboxError, SandboxRequest, docker_client, leftovers, resolve_images, sweep
from sandbox import labels as lbl
from sandbox.images import BASE_TAG

PHASES = (
    "containers_started",
    "postgres_ready",
    "server-retail_ready",
    "typesense_ready",
    "booted",
    "postgres_seeded",
    "policies_indexed",
    "prepared",
)
# What the MCP server container does before it can answer /healthz, minus the socket.
SERVER_IMPORTS = (
    "import time; t = time.perf_counter(); "
    "import uvicorn; from servers.engine.app import DomainRuntime, build_app; "
    "from servers.registry import load_domain; load_domain('retail'); "
    "print(time.perf_counter() - t)"
)


def pct(values: list[float], q: float) -> float:
    """Nearest-rank percentile."""
    s = sorted(values)
    return s[max(0, math.ceil(q / 100 * len(s)) - 1)]


def one(template: SandboxRequest, run_id: str) -> dict[str, Any]:
    """One start + close; a failed start is recorded (with its error), not raised."""
    request = template.model_copy(update={"run_id": run_id, "attempt_id": lbl.new_id("att")})
    sb = Sandbox(request)
    t0, c0 = time.perf_counter(), time.process_time()
    try:
        handle = sb.start()
    except SandboxError as exc:  # start() has already removed what it created
        return {
            "error": f"{type(exc).__name__}: {str(exc).splitlines()[0]}",
            "after_s": time.perf_counter() - t0,
        }
    ready, host_cpu = time.perf_counter() - t0, time.process_time() - c0
    try:
        cpu = container_cpu_seconds(handle.containers)
    finally:
        t1 = time.perf_counter()
        sb.close()
        teardown = time.perf_counter() - t1
    return {**handle.timings, "ready": ready, "teardown": teardown, "host_cpu": host_cpu, **cpu}


def container_cpu_seconds(containers: dict[str, str]) -> dict[str, float]:
    """CPU each container used from its start to now (cgroup counter, one-shot stats)."""
    api = docker_client().api
    out = {}
    for role, cid in containers.items():
        for _ in range(3):  # the daemon now and then answers a one-shot stats call with an empty body
            try:
                stats = api.stats(cid, stream=False, one_shot=True)
            except ValueError:
                continue
            out[f"cpu_{role}"] = stats["cpu_stats"]["cpu_usage"]["total_usage"] / 1e9
            break
    return out


def series(
    template: SandboxRequest, run_id: str, n: int, concurrency: int
) -> tuple[list[dict[str, Any]], float]:
    t0 = time.perf_counter()
    if concurrency <= 1:
        samples = [one(template, run_id) for _ in range(n)]
    else:
        with ThreadPoolExecutor(max_workers=concurrency) as pool:
            samples = list(pool.map(lambda _: one(template, run_id), range(n)))
    return samples, time.perf_counter() - t0


def pooled_series(
    template: SandboxRequest, run_id: str, n: int, size: int, hold: float
) -> tuple[list[dict[str, Any]], float]:
    """What an attempt waits for with the warm pool (`tbx run --warm`): N acquires one
    after another, each sandbox held `hold` seconds (the attempt) and then closed;
    `ready` is acquire() (wait for a booted sandbox + seed + index)."""
    import asyncio

    from sandbox import SandboxPool

    async def go() -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        async with SandboxPool(
            template.domains,
            size,
            typesense=template.typesense,
            run_id=run_id,
            images=template.images,
            budget=n,
        ) as pool:
            await asyncio.sleep(hold)  # the run's first attempt starts while the pool boots
            for _ in range(n):
                t0 = time.perf_counter()
                try:
                    sb = await pool.acquire(template.prepare)
                except SandboxError as exc:
                    out.append({"error": f"{type(exc).__name__}: {exc}", "after_s": time.perf_counter() - t0})
                    continue
                ready = time.perf_counter() - t0
                await asyncio.sleep(hold)
                t1 = time.perf_counter()
                await sb.__aexit__(None, None, None)
                # The handle's own "ready" is its sandbox's boot; here ready is what the attempt waited.
                out.append({**sb.handle.timings, "ready": ready, "teardown": time.perf_counter() - t1})
        return out

    t0 = time.perf_counter()
    samples = asyncio.run(go())
    return samples, time.perf_counter() - t0


def docker_run_true(n: int) -> list[float]:
    out = []
    for _ in range(n):
        t = time.perf_counter()
        subprocess.run(["docker", "run", "--rm", BASE_TAG, "true"], check=True, capture_output=True)
        out.append(time.perf_counter() - t)
    return out


def server_import_seconds(image: str, n: int) -> list[float]:
    """Python start + the server's imports inside its image (hardened like the sandbox's)."""
    out = []
    for _ in range(n):
        proc = subprocess.run(
            [
                "docker",
                "run",
                "--rm",
                "--read-only",
                "--cap-drop",
                "ALL",
                "--network",
                "none",
                "--entrypoint",
                "python",
                image,
                "-c",
                SERVER_IMPORTS,
            ],
            check=True,
            capture_output=True,
            text=True,
        )
        out.append(float(proc.stdout.strip().splitlines()[-1]))
    return out


def summarize(all_samples: list[dict[str, Any]]) -> dict[str, Any]:
    samples = [s for s in all_samples if "error" not in s]
    failed = [s for s in all_samples if "error" in s]
    cpu = sorted({k for s in samples for k in s if k.startswith("cpu_")})
    phases = [k for k in PHASES if all(k in s for s in samples)]
    keys = [
        k
        for k in ("ready", *phases, "teardown", "host_cpu", *cpu)
        if samples and all(k in s for s in samples)
    ]
    return {
        **{
            k: {"p50": statistics.median(s[k] for s in samples), "p95": pct([s[k] for s in samples], 95)}
            for k in keys
        },
        "failed": failed,
    }


def machine_notes() -> dict[str, Any]:
    info = docker_client().info()
    load = os.getloadavg()
    others = len(docker_client().containers.list(filters={"label": lbl.RUN})) if info else 0
    return {
        "cpus": os.cpu_count(),
        "storage_driver": info.get("Driver"),
        "docker": info.get("ServerVersion"),
        "kernel": info.get("KernelVersion"),
        "loadavg_at_start": [round(x, 2) for x in load],
        "other_tbx_containers_at_start": others,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("-n", type=int, default=10, help="sandboxes per series (default 10)")
    p.add_argument("--concurrency", type=int, default=4)
    p.add_argument("--no-typesense", action="store_true", help="PostgreSQL + server only")
    p.add_argument("--dataset", type=Path, default=None)
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    p.add_argument(
        "--series",
        nargs="+",
        choices=["sequential", "concurrent", "pooled"],
        default=["sequential", "concurrent", "pooled"],
    )
    p.add_argument("--pool-size", type=int, default=2, help="warm pool size for the pooled series")
    p.add_argument(
        "--hold", type=float, default=2.0, help="seconds each pooled sandbox is held (the attempt)"
    )
    args = p.parse_args(argv)

    notes = machine_notes()
    typesense = not args.no_typesense
    t = time.perf_counter()
    images = resolve_images(typesense=typesense)
    resolve_s = time.perf_counter() - t
    bench = load_benchmark(args.dataset or default_root())
    task = next(t for t in bench.tasks if t.domain == "retail" and bench.effective_init(t).sources)
    template = sandbox_request(bench, task, typesense=typesense, images=images)
    run_id = lbl.new_id("bench-sandbox")

    one(template, run_id)  # warm-up (page cache, image layers), not counted
    bare = docker_run_true(5)
    imports = server_import_seconds(images["servers"], 3)
    seq, seq_wall = series(template, run_id, args.n, 1) if "sequential" in args.series else ([], 0.0)
    conc, conc_wall = (
        series(template, run_id, args.n, args.concurrency) if "concurrent" in args.series else ([], 0.0)
    )
    pooled, pooled_wall = (
        pooled_series(template, run_id, args.n, args.pool_size, args.hold)
        if "pooled" in args.series
        else ([], 0.0)
    )
    left = leftovers(run_id)
    if left != ([], []):
        sweep(run=run_id)

    bare_p50 = statistics.median(bare)
    result = {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "n": args.n,
        "concurrency": args.concurrency,
        "typesense": typesense,
        "task": task.id,
        "images": images,
        "machine": notes,
        "resolve_images_s": resolve_s,
        "docker_run_true_s": {"p50": bare_p50, "min": min(bare)},
        "server_python_imports_s": {"p50": statistics.median(imports), "min": min(imports)},
        "sequential": {**summarize(seq), "wall_s": seq_wall},
        "concurrent": {**summarize(conc), "wall_s": conc_wall},
        "pooled": {**summarize(pooled), "wall_s": pooled_wall},
        "pool": {"size": args.pool_size, "hold_s": args.hold},
        "ready_p50_over_docker_run_true": {
            name: statistics.median(s["ready"] for s in samples if "ready" in s) / bare_p50
            for name, samples in (("sequential", seq), ("concurrent", conc), ("pooled", pooled))
            if any("ready" in s for s in samples)
        },
        "leaked": {"containers": left[0], "networks": left[1]},
        "loadavg_at_end": [round(x, 2) for x in os.getloadavg()],
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print_report(result)
    failed = sum(len(result[k]["failed"]) for k in ("sequential", "concurrent", "pooled"))
    return 0 if left == ([], []) and not failed else 1


def print_report(r: dict[str, Any]) -> None:
    m = r["machine"]
    print(
        f"sandbox start-up: n={r['n']} per series, typesense={r['typesense']}, task {r['task']}\n"
        f"machine: {m['cpus']} cpus, {m['storage_driver']}, docker {m['docker']}, "
        f"load {m['loadavg_at_start']} -> {r['loadavg_at_end']}, "
        f"{m['other_tbx_containers_at_start']} other tbx containers at start\n"
        f"bare `docker run --rm {BASE_TAG} true`: p50 {r['docker_run_true_s']['p50']:.3f}s\n"
        f"server container python start + imports: p50 {r['server_python_imports_s']['p50']:.3f}s\n"
        f"resolve_images (content hashes, once per run): {r['resolve_images_s']:.3f}s"
    )
    for name in ("sequential", "concurrent", "pooled"):
        s = r[name]
        if not s["wall_s"]:
            continue
        label = {
            "sequential": "sequential, cold",
            "concurrent": f"concurrency {r['concurrency']}, cold",
            "pooled": f"warm pool of {r['pool']['size']}, one attempt at a time, each held {r['pool']['hold_s']}s",
        }[name]
        print(f"\n{label} (wall {s['wall_s']:.1f}s)        p50      p95")
        for k, v in s.items():
            if k not in ("wall_s", "failed"):
                print(f"  {k:<22} {v['p50']:7.3f}s {v['p95']:7.3f}s")
        for f in s["failed"]:
            print(f"  FAILED after {f['after_s']:.1f}s: {f['error']}")
    ratio = r["ready_p50_over_docker_run_true"]
    print("\nready p50 / docker-run-true p50: " + ", ".join(f"{k} {v:.1f}x" for k, v in ratio.items()))
    leaked = r["leaked"]
    print(f"leaked: {len(leaked['containers'])} containers, {len(leaked['networks'])} networks")


if __name__ == "__main__":
    sys.exit(main())
