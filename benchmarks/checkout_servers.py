"""A checkout's own tool server (the airline server of thinkingbox-data) per attempt:
what an attempt waits for, what a set costs, how long its effects take, beside the
reference harness's figures (docs/specs: checkout-servers §9) in one run.

* cold: `provider.checkout()` with no pool (network, the bridge container, the
  server's start and MCP handshake, `__reserved__init` with the scenario's world state);
* pool ahead: `DockerProvider(warm=2)` hands over a spare booted and initialised ahead
  (the world state is the scenario's, not the task's), each checkout after the spare refilled;
* memory: the set's containers' memory (cgroup usage minus inactive file pages) after init;
* effects: one `__reserved__geteffects` through the bridge (≈2.3 MB of JSON);
* a native set (retail, no Typesense) cold on the same machine, for the ratio.

Ends by checking nothing with the run's label is left (exit 1 otherwise).

Usage::

    python benchmarks/checkout_servers.py --checkout PATH [-n 5]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("TESTCONTAINERS_RYUK_DISABLED", "true")

from bench.dataset import load_benchmark
from bench.prepare import sandbox_request
from sandbox import DockerProvider, SandboxRequest, docker_client, leftovers, new_id, server_effects, sweep

REFERENCE = {  # the reference harness, checkout-servers spec §9 (loaded 2-vCPU machine)
    "ready cold": "2.28-2.44 s (session_create)",
    "ready, pool ahead": "- (no pool: one process per session)",
    "memory per set": "96.7 MiB (server RSS after init)",
    "effects fetch": "0.83-1.34 s (/get_effects); 0.64 s direct",
}


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def memory_mib(container_ids: list[str]) -> float:
    total = 0.0
    for cid in container_ids:
        stats = docker_client().containers.get(cid).stats(stream=False)["memory_stats"]
        inactive = stats.get("stats", {}).get("inactive_file", 0)
        total += (stats.get("usage", 0) - inactive) / 2**20
    return total


async def measure(checkout: Path, n: int) -> dict[str, Any]:
    bench = load_benchmark(checkout, release="dataset_2604_airline_tau_bench")
    task = bench.tasks[0]
    run_id = new_id("bench-checkout")
    request: SandboxRequest = sandbox_request(bench, task, run_id=run_id)  # builds/checks the image once
    out: dict[str, Any] = {"cold": [], "pool": [], "effects": [], "memory": [], "native": [], "phases": []}
    cold = DockerProvider(warm=0)
    await cold.start(run_id)
    try:
        for _ in range(n):
            t = time.monotonic()
            lease = await cold.checkout(request.model_copy(update={"attempt_id": new_id("att")}))
            out["cold"].append(time.monotonic() - t)
            handle = lease.handle
            assert handle is not None
            out["memory"].append(memory_mib(list(handle.containers.values())))
            out["phases"].append(dict(handle.timings))
            t = time.monotonic()
            effects = await asyncio.to_thread(
                server_effects,
                handle.checkout_servers,
                handle.servers,
                handle.upstream_secret,
                lease.interface,
            )
            out["effects"].append(time.monotonic() - t)
            assert len(effects["airline_tau_bench"]["reservations"]) == 2000
            await cold.release(lease)
        native_bench = load_benchmark(checkout)
        native = sandbox_request(
            native_bench, native_bench.by_domain()["retail"][0], typesense=False, run_id=run_id
        )
        for _ in range(n):
            t = time.monotonic()
            lease = await cold.checkout(native.model_copy(update={"attempt_id": new_id("att")}))
            out["native"].append(time.monotonic() - t)
            await cold.release(lease)
    finally:
        await cold.close()
        await asyncio.to_thread(sweep, run_id)
    warm = DockerProvider(warm=2)
    await warm.start(run_id)
    try:
        warm.plan({request.pool_key: n + 2})
        pool = await warm.warm_up(request)
        for _ in range(n):
            deadline = time.monotonic() + 120
            while pool.booted < 1 and time.monotonic() < deadline:
                await asyncio.sleep(0.2)
            t = time.monotonic()
            lease = await warm.checkout(request.model_copy(update={"attempt_id": new_id("att")}))
            out["pool"].append(time.monotonic() - t)
            await warm.release(lease)
    finally:
        await warm.close()
        await asyncio.to_thread(sweep, run_id)
    out["leftovers"] = leftovers(run_id)
    return out


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--checkout", type=Path, required=True)
    parser.add_argument("-n", type=int, default=5)
    args = parser.parse_args()
    load = os.getloadavg()
    out = asyncio.run(measure(args.checkout, args.n))
    print(f"machine: {os.cpu_count()} cores, load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} at start")
    rows = [
        ("ready cold", out["cold"], "s"),
        ("ready, pool ahead", out["pool"], "s"),
        ("memory per set", out["memory"], "MiB"),
        ("effects fetch", out["effects"], "s"),
    ]
    print(f"| measure (n={args.n}) | tbx p50 | tbx p95 | reference |")
    print("| --- | --- | --- | --- |")
    for name, values, unit in rows:
        print(
            f"| {name} | {pct(values, 0.5):.2f} {unit} | {pct(values, 0.95):.2f} {unit} | {REFERENCE[name]} |"
        )
    for phase in ("containers_started", "server-airline_tau_bench_ready", "checkout_init", "tools_listed"):
        values = [t[phase] for t in out["phases"] if phase in t]
        if values:
            print(f"| cold, of which {phase} | {pct(values, 0.5):.2f} s | {pct(values, 0.95):.2f} s | - |")
    native = statistics.median(out["native"])
    print(
        f"| native retail set cold (no Typesense) | {native:.2f} s | {pct(out['native'], 0.95):.2f} s | - |"
    )
    print(f"ratio cold airline / cold native: {statistics.median(out['cold']) / native:.2f}")
    if out["leftovers"] != ([], []):
        print(f"LEFTOVERS: {out['leftovers']}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
