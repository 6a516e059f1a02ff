"""Density: memory per live set, CPU per attempt, time-to-ready, checkout, teardown,
oracle throughput, each for a *baseline* and the *current* image set in one run.

A variant is a set of image tags (`SandboxRequest.images`); the baseline is
given as `--baseline postgres=TAG,servers=TAG,typesense=TAG` (e.g. the tags
`tbx images build` made at the previous commit; they stay on the daemon with
TBX_KEEP_IMAGES=1), the current one is what `resolve_images()` gives for
this checkout. Series of the two variants are interleaved, so both see the
same machine; on a shared machine compare ratios and CPU seconds, not wall.

* memory: per domain, one sandbox seeded for the domain's task with the most
  golden calls, the calls played, then each container's cgroup working set
  (usage - inactive file) and its rss / shmem (tmpfs) split, plus the
  containerd shims' RSS (host memory per container outside its cgroup);
* hold: K retail sets held at once, MemAvailable before and after (what the
  machine really gives up per set, shims and fuse-overlayfs included);
* cold: N start+close one after another: ready, teardown, and CPU seconds
  split by who used it: the containers (cgroup cpuacct just before close), their
  shims, this process, dockerd+containerd, and the machine (/proc/stat busy);
* pool: N checkouts from a warm pool (acquire = a booted set + seed + index);
* oracle: `tbx run`'s Coordinator with the oracle agent at concurrency 1, 2, 4
  (warm pool = concurrency), attempts/min and machine CPU per attempt; the
  baseline variant also removes each set inside its attempt
  (TBX_TEARDOWN_INLINE=1), the current one through the reaper;
* model: the Coordinator with a model agent against benchmarks/stub_model.py
  (fixed delay per completion), attempts/min, attempts in flight, tool-call
  latency through the proxy (current images only by default).

Variants (`--variants`): baseline (the --baseline tags), current (this checkout's
images), fuse (this checkout's images with sandbox.runtime_volumes off: every
file read through the storage driver, as before). baseline and fuse run with
TBX_RUNTIME_VOLUMES=0.

    python benchmarks/density.py --baseline postgres=...,servers=...,typesense=... \
        [--sections memory hold cold pool oracle] [-n 8] [--hold 10] [--tasks 20] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import math
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

os.environ.setdefault("TESTCONTAINERS_RYUK_DISABLED", "true")

import docker.errors

import bench.run.golden as golden_mod
import sandbox.provider as provider_mod
import sandbox.sandbox as sandbox_mod
from bench.dataset import Benchmark, Task, default_root, load_benchmark
from bench.prepare import sandbox_request
from bench.replay.mcp_calls import replay_calls
from bench.run import coordinator as runner_mod
from bench.run.results import read_rows
from sandbox import (
    MIB,
    Sandbox,
    SandboxError,
    SandboxPool,
    SandboxRequest,
    available_memory,
    docker_client,
    leftovers,
    measure_set,
    resolve_images,
    runtime_volumes,
    sweep,
)
from sandbox import labels as lbl

TCK = os.sysconf("SC_CLK_TCK")
CGROUP = Path("/sys/fs/cgroup")


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[max(0, math.ceil(q / 100 * len(s)) - 1)] if s else float("nan")


# ---- CPU and memory probes --------------------------------------------------------


def busy_cpu() -> float:
    """Machine-wide CPU seconds outside idle/iowait (every process, kernel included)."""
    f = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    return (sum(f[:8]) - f[3] - f[4]) / TCK


def _proc_cpu(pid: str) -> float:
    stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(stat[11]) + int(stat[12])) / TCK


def daemon_cpu() -> float:
    total = 0.0
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                if (p / "comm").read_text().strip() in ("dockerd", "containerd"):
                    total += _proc_cpu(p.name)
            except OSError:
                continue
    return total


def shims(container_ids: list[str]) -> dict[str, str]:
    """container id -> pid of its containerd shim."""
    out = {}
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            if not (p / "comm").read_text().startswith("containerd-shim"):
                continue
            args = (p / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        for cid in container_ids:
            if cid.encode() in args:
                out[cid] = p.name
    return out


def rss_bytes(pid: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def container_cpu(cid: str) -> float:
    # Docker's parent or tbx's own (sandbox.cgroups; this file also runs on older trees)
    for d in (
        CGROUP / "cpuacct" / "docker" / cid,
        CGROUP / "cpuacct" / "tbx" / cid,
        CGROUP / "system.slice" / f"docker-{cid}.scope",
    ):
        if (d / "cpuacct.usage").exists():
            return int((d / "cpuacct.usage").read_text()) / 1e9
        if (d / "cpu.stat").exists():
            return int((d / "cpu.stat").read_text().split()[1]) / 1e6
    return float("nan")


def memory_split(cid: str) -> dict[str, int]:
    stat: dict[str, int] = {}
    for d in (
        CGROUP / "memory" / "docker" / cid,
        CGROUP / "memory" / "tbx" / cid,
        CGROUP / "system.slice" / f"docker-{cid}.scope",
    ):
        if (d / "memory.stat").exists():
            for line in (d / "memory.stat").read_text().splitlines():
                k, _, v = line.partition(" ")
                stat[k] = int(v)
    return {
        "rss": stat.get("total_rss", stat.get("anon", 0)),
        "shmem": stat.get("total_shmem", stat.get("shmem", 0)),
        "file": stat.get("total_cache", stat.get("file", 0)),
    }


# ---- workloads ----------------------------------------------------------------------


@contextlib.contextmanager
def running_images(images: dict[str, str], golden_servers: str) -> Iterator[None]:
    """Every sandbox started inside (the Coordinator's and the golden replays') runs
    `images`, and golden states are keyed by the `golden_servers` image for every
    variant: both variants must reach the same end states (conformance), so they are
    replayed once, before the timed runs, and never inside one."""
    originals = (provider_mod.resolve_images, sandbox_mod.resolve_images, golden_mod.servers_image_id)
    image_id = docker_client().images.get(golden_servers).id
    provider_mod.resolve_images = sandbox_mod.resolve_images = lambda typesense=True: dict(images)  # type: ignore[assignment]
    golden_mod.servers_image_id = lambda: image_id  # type: ignore[assignment]
    try:
        yield
    finally:
        provider_mod.resolve_images, sandbox_mod.resolve_images, golden_mod.servers_image_id = originals  # type: ignore[assignment]


def measuring_task(bench: Benchmark, domain: str) -> Task:
    tasks = [t for t in bench.tasks if t.domain == domain]
    return max(tasks, key=lambda t: len(bench.effective_init(t).golden_tool_interactions))


def golden_calls(bench: Benchmark, task: Task) -> list[tuple[str, dict[str, Any]]]:
    return [
        (c.tool, dict(c.parameters)) for c in bench.effective_init(task).golden_tool_interactions if c.tool
    ]


def memory_of_domain(bench: Benchmark, domain: str, images: dict[str, str], run_id: str) -> dict[str, Any]:
    task = measuring_task(bench, domain)
    req = sandbox_request(bench, task, images=images, run_id=run_id)
    with Sandbox(req) as sb:
        assert sb.handle is not None
        seeded = measure_set(domain, sb.handle.containers, images)
        asyncio.run(
            replay_calls(sb.handle.servers[domain], bench.golden_calls(task), sb.handle.server_headers)
        )
        usage = measure_set(domain, sb.handle.containers, images)
        shim_pids = shims(list(sb.handle.containers.values()))
        out: dict[str, Any] = {
            "after_seed_mib": seeded.working_set / MIB,
            "calls": len(golden_calls(bench, task)),
            "task": task.id,
            "total_mib": usage.working_set / MIB,
            "need_mib": usage.need_bytes / MIB,
        }
        for role, cid in sb.handle.containers.items():
            split = memory_split(cid)
            out[role] = {
                "working_set_mib": usage.containers[role].working_set / MIB,
                **{k: v / MIB for k, v in split.items()},
                "shim_rss_mib": rss_bytes(shim_pids[cid]) / MIB if cid in shim_pids else None,
            }
    return out


def hold_sets(template: SandboxRequest, k: int, run_id: str) -> dict[str, Any]:
    before = available_memory()
    held: list[Sandbox] = []
    try:
        for _ in range(k):
            sb = Sandbox(template.model_copy(update={"run_id": run_id, "attempt_id": lbl.new_id("att")}))
            sb.start()
            held.append(sb)
        time.sleep(2)
        after = available_memory()
    finally:
        for sb in held:
            sb.close()
    return {
        "sets": k,
        "mem_available_drop_per_set_mib": (before - after) / k / MIB,
        "after_gib": after / 2**30,
    }


def cold_one(template: SandboxRequest, run_id: str) -> dict[str, Any]:
    sb = Sandbox(template.model_copy(update={"run_id": run_id, "attempt_id": lbl.new_id("att")}))
    t0, c0 = time.perf_counter(), time.process_time()
    try:
        handle = sb.start()
    except (SandboxError, docker.errors.APIError) as exc:  # recorded; the series goes on
        sb.close()
        return {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0]}"}
    ready = time.perf_counter() - t0
    cids = list(handle.containers.values())
    cpu_containers = sum(container_cpu(c) for c in cids)
    cpu_shims = sum(_proc_cpu(p) for p in shims(cids).values())
    t1 = time.perf_counter()
    sb.close()
    return {
        "ready": ready,
        "teardown": time.perf_counter() - t1,
        "cpu_containers": cpu_containers,
        "cpu_shims": cpu_shims,
        "cpu_tbx": time.process_time() - c0,
        **{k: v for k, v in handle.timings.items() if k in ("server-retail_ready", "containers_started")},
    }


def pooled(template: SandboxRequest, n: int, run_id: str, hold: float) -> dict[str, list[dict[str, float]]]:
    """n checkouts from each of two warm pools, interleaved: `plain` prepares (seed +
    index) at checkout, `ahead` was told the checkouts to come (`SandboxPool.plan`) and
    prepared its spares for them. Each checkout is timed once a spare is booted (the
    wait for a boot the pool had not finished is not the checkout's own cost)."""

    async def go() -> dict[str, list[dict[str, float]]]:
        out: dict[str, list[dict[str, float]]] = {"plain": [], "ahead": []}
        pools = {
            name: SandboxPool(
                template.domains,
                2,
                typesense=template.typesense,
                run_id=run_id,
                images=template.images,
                budget=n,
            )
            for name in out
        }
        if hasattr(pools["ahead"], "plan"):
            pools["ahead"].plan([lambda: template.prepare] * n)  # type: ignore[list-item,return-value]
        else:
            del out["ahead"], pools["ahead"]  # older code: no plan, the plain series only
        for pool in pools.values():
            await pool.__aenter__()
        try:
            for _ in range(n):
                for name, pool in pools.items():
                    while pool.booted < 1:
                        await asyncio.sleep(0.05)
                    t = time.perf_counter()
                    sb = await pool.acquire(template.prepare)
                    out[name].append(
                        {"acquire": time.perf_counter() - t, "prepare": sb.handle.timings["prepared"]}
                    )
                    await asyncio.sleep(hold / len(pools))  # the attempt; the pool boots the next meanwhile
                    await sb.__aexit__(None, None, None)
        finally:
            for pool in pools.values():
                await pool.close()
        return out

    return asyncio.run(go())


def oracle(
    bench: Benchmark,
    tasks: list[Task],
    images: dict[str, str],
    conc: int,
    root: Path,
    inline_teardown: bool,
    golden_servers: str,
) -> dict[str, Any]:
    out = root / f"{variant_key(images)}-c{conc}"
    opts = runner_mod.RunOptions(
        out=out,
        agent="oracle",
        repeat=1,
        concurrency=conc,
        warm=conc,
        golden_cache=root / "golden",
        skip_rubrics=True,
    )
    # The baseline removes each set inside its attempt, as before sandbox.reaper.
    runner = runner_mod.Coordinator(bench, opts)
    with running_images(images, golden_servers):
        busy0, c0, d0 = busy_cpu(), time.process_time(), daemon_cpu()
        os.environ["TBX_TEARDOWN_INLINE"] = "1" if inline_teardown else "0"  # read when the run starts
        asyncio.run(runner.run(tasks))
        os.environ.pop("TBX_TEARDOWN_INLINE")
        wall = time.monotonic() - runner.started
        busy, cpu, dcpu = busy_cpu() - busy0, time.process_time() - c0, daemon_cpu() - d0
    rows = read_rows(out / "results.jsonl")
    c, n = leftovers(runner.run_id)
    return {
        "concurrency": conc,
        "attempts": len(rows),
        "passed": sum(r.passed for r in rows),
        "errors": sum(r.system_error for r in rows),
        "error_samples": [r.error for r in rows if r.system_error][:3],
        "per_min": len(rows) / wall * 60,
        "machine_cpu_per_attempt": busy / len(rows),
        "tbx_cpu_per_attempt": cpu / len(rows),
        "daemons_cpu_per_attempt": dcpu / len(rows),
        "teardown_p50": statistics.median(r.timings.get("teardown", 0.0) for r in rows),
        "sandbox_start_p50": statistics.median(r.timings.get("sandbox_start", 0.0) for r in rows),
        "leftovers": len(c) + len(n),
    }


def _errors(out: Path) -> list[dict[str, Any]]:
    path = out / "errors.jsonl"
    return (
        [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []
    )


def model_run(
    bench: Benchmark,
    tasks: list[Task],
    images: dict[str, str],
    conc: int,
    warm: int,
    delay: float,
    root: Path,
    golden_servers: str,
    repeat: int = 1,
    time_limit: float | None = None,
) -> dict[str, Any]:
    """`tbx run`'s Coordinator with a model agent: the stub model (benchmarks/stub_model.py) answers
    every completion after `delay` s, playing the golden calls, then ends the attempt."""
    from stub_model import AGENT_MODEL, USER_MODEL, StubModel

    from bench.llm.config import ModelsConfig, RoleConfig

    stub = StubModel(bench, delay=delay).start()
    out = root / f"model-{variant_key(images)}-c{conc}"
    role = {"base_url": stub.base_url, "api_key": "stub", "max_retries": 0, "timeout": 60}
    config = ModelsConfig(
        agent=RoleConfig(model=AGENT_MODEL, **role), user=RoleConfig(model=USER_MODEL, **role)
    )
    opts = runner_mod.RunOptions(
        out=out,
        agent="llm",
        repeat=repeat,
        concurrency=conc,
        warm=warm,
        golden_cache=root / "golden",
        skip_rubrics=True,
    )
    runner = runner_mod.Coordinator(bench, opts, config)
    in_flight: list[int] = []
    holding: list[int] = []
    lag: list[float] = []
    boots_running: list[int] = []
    teardowns: list[int] = []  # sets handed to the reaper and not removed yet

    async def go() -> None:
        async def sample() -> None:
            # Event-loop lag: how late a 0.5 s sleep wakes (blocking work on the loop shows here).
            while True:
                t = time.perf_counter()
                await asyncio.sleep(0.5)
                lag.append((time.perf_counter() - t - 0.5) * 1000)
                # Start no new attempt after the time limit (counted from the first attempt,
                # after the golden states); those in flight finish and count.
                attempts_began = runner.phase.startswith("attempts")
                if time_limit and attempts_began and time.monotonic() - runner.started > time_limit:
                    runner.stop()
                provider = getattr(runner, "provider", None) or runner.executor.provider
                in_flight.append(provider.alive)
                holding.append(getattr(provider, "held", -1))
                gate = getattr(provider, "boots", None)
                boots_running.append(gate.running if gate is not None else -1)
                reaper = getattr(provider, "reaper", None)
                if reaper is not None:
                    teardowns.append(reaper.pending)

        sampler = asyncio.create_task(sample())
        try:
            await runner.run(tasks)
        finally:
            sampler.cancel()

    try:
        with running_images(images, golden_servers):
            busy0, c0, d0 = busy_cpu(), time.process_time(), daemon_cpu()
            asyncio.run(go())
            wall = time.monotonic() - runner.started
            busy, cpu, dcpu = busy_cpu() - busy0, time.process_time() - c0, daemon_cpu() - d0
    finally:
        stub.close()
    rows = read_rows(out / "results.jsonl")
    latencies = [
        call["latency_ms"]
        for f in (out / "attempts").glob("*.json")
        for call in json.loads(f.read_text()).get("trajectory") or []
    ]
    c, n = leftovers(runner.run_id)
    return {
        "concurrency": conc,
        "warm": warm,
        "delay_s": delay,
        "attempts": len(rows),
        "passed": sum(r.passed for r in rows),
        "errors": sum(r.system_error for r in rows),
        "error_samples": [r.error for r in rows if r.system_error][:3],
        # Tries that ended in a system error and were run again (the coordinator's retries).
        "retried": [e.get("error", "")[:160] for e in _errors(out) if e.get("retried")],
        "per_min": len(rows) / wall * 60,
        "wall_s": wall,
        "in_flight_max": max(in_flight, default=0),
        "in_flight_p50": statistics.median(in_flight) if in_flight else 0,
        "holding_sandbox_max": max(holding, default=0),
        "holding_sandbox_p50": statistics.median(holding) if holding else 0,
        "boots_running_p50": statistics.median(boots_running) if boots_running else 0,
        "teardowns_pending_max": max(teardowns, default=0),
        "teardowns_pending_p50": statistics.median(teardowns) if teardowns else 0,
        "loop_lag_ms_p50": statistics.median(lag) if lag else None,
        "loop_lag_ms_p95": pct(lag, 95) if lag else None,
        "loop_lag_ms_max": max(lag, default=0.0),
        "phases_p50_p95": {
            k: [statistics.median(v), pct(v, 95)]
            for k in ("sandbox_start", "initial_dump", "agent", "final_dump", "teardown", "judge")
            if (v := [r.timings[k] for r in rows if k in r.timings])
        },
        "tool_latency_ms_p50": statistics.median(latencies) if latencies else None,
        "tool_latency_ms_p95": pct(latencies, 95) if latencies else None,
        "machine_cpu_per_attempt": busy / max(1, len(rows)),
        "tbx_cpu_per_attempt": cpu / max(1, len(rows)),
        "daemons_cpu_per_attempt": dcpu / max(1, len(rows)),
        "load_end": os.getloadavg()[0],
        "stub_unknown_queries": stub.unknown,
        "leftovers": len(c) + len(n),
    }


# ---- main ---------------------------------------------------------------------------


def variant_key(images: dict[str, str]) -> str:
    """A run directory per variant: variants may share some tags, and the runtime-volume
    switch changes no tag at all."""
    tags = ",".join(f"{k}={v}" for k, v in sorted(images.items()))
    return hashlib.sha256(f"{tags};{os.environ.get(runtime_volumes.ENABLE_ENV)}".encode()).hexdigest()[:12]


@contextlib.contextmanager
def variant_env(name: str) -> Iterator[None]:
    """The `fuse` variant: this checkout's images with their code read through the
    storage driver, as before sandbox.runtime_volumes."""
    before = os.environ.get(runtime_volumes.ENABLE_ENV)
    os.environ[runtime_volumes.ENABLE_ENV] = "0" if name in ("fuse", "baseline") else "1"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(runtime_volumes.ENABLE_ENV, None)
        else:
            os.environ[runtime_volumes.ENABLE_ENV] = before


def parse_images(text: str) -> dict[str, str]:
    out = dict(part.split("=", 1) for part in text.split(",") if part)
    missing = {"postgres", "servers", "typesense"} - set(out)
    if missing:
        raise SystemExit(
            f"--baseline needs postgres=, servers= and typesense= tags (missing {sorted(missing)})"
        )
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--baseline", type=parse_images, required=True)
    ap.add_argument("--dataset", type=Path, default=None)
    ap.add_argument(
        "--sections",
        nargs="+",
        default=["memory", "hold", "cold", "pool", "oracle"],
        choices=["memory", "hold", "cold", "pool", "oracle", "model"],
    )
    ap.add_argument(
        "--domains", nargs="+", default=["retail", "auto_insurance", "consulting", "travel", "neobank"]
    )
    ap.add_argument("-n", type=int, default=8, help="cold starts and pooled checkouts per variant")
    ap.add_argument("--hold", type=int, default=10, help="sets held at once per variant")
    ap.add_argument("--tasks", type=int, default=20, help="retail tasks per oracle run")
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--pool-hold", type=float, default=3.0, help="seconds each pooled set is held")
    ap.add_argument("--model-concurrency", type=int, nargs="+", default=[16])
    ap.add_argument("--model-tasks", type=int, default=50, help="retail tasks per model run")
    ap.add_argument("--model-delay", type=float, default=3.0)
    ap.add_argument("--golden-cache", type=Path, default=None, help="model section: keep golden states here")
    ap.add_argument(
        "--model-time-limit", type=float, default=None, help="seconds after which no new attempt starts"
    )
    ap.add_argument("--model-repeat", type=int, default=1, help="repeats of each model task")
    ap.add_argument("--model-warm", type=int, default=None, help="warm pool (default: concurrency / 4)")
    ap.add_argument("--variants", nargs="+", default=["baseline", "current"])
    ap.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = ap.parse_args(argv)

    bench = load_benchmark(args.dataset or default_root(), strict=False)
    # The current tags are resolved only when measured: a baseline-only run works from
    # a checkout whose own images are not built yet.
    variants = {name: args.baseline if name == "baseline" else resolve_images(True) for name in args.variants}
    unknown = set(variants) - {"baseline", "current", "fuse"}
    if unknown:
        ap.error(f"unknown variants {sorted(unknown)}: baseline, current, fuse")
    golden_images = next(iter(variants.values()))  # golden end states are replayed with these
    run_id = lbl.new_id("run")
    task = next(t for t in bench.tasks if t.id == "sandbox_external_retail_group1.py:test_case_ST002_001")
    result: dict[str, Any] = {
        "variants": variants,
        "machine": {"cores": os.cpu_count(), "load_start": os.getloadavg()[0], "shared": True},
    }
    log = lambda msg: print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)  # noqa: E731
    try:
        if "memory" in args.sections:
            for name, images in variants.items():
                for d in args.domains:
                    with variant_env(name):
                        m = memory_of_domain(bench, d, images, run_id)
                    result.setdefault("memory", {}).setdefault(name, {})[d] = m
                    log(f"memory {name} {d}: {m['total_mib']:.1f} MiB")
        templates = {
            name: sandbox_request(bench, task, images=images, run_id=run_id)
            for name, images in variants.items()
        }
        if "hold" in args.sections:
            for name in variants:
                with variant_env(name):
                    result.setdefault("hold", {})[name] = h = hold_sets(templates[name], args.hold, run_id)
                log(f"hold {name}: {h}")
        if "cold" in args.sections:
            samples: dict[str, list[dict[str, Any]]] = {name: [] for name in variants}
            spent: dict[str, dict[str, float]] = {name: {"machine": 0.0, "daemons": 0.0} for name in variants}
            for _ in range(args.n):
                for name in variants:  # interleaved: both variants see the same moments of load
                    with variant_env(name):
                        runtime_volumes.prepare(list(variants[name].values()))  # not in the first sample
                        b0, d0 = busy_cpu(), daemon_cpu()
                        samples[name].append(cold_one(templates[name], run_id))
                    spent[name]["machine"] += busy_cpu() - b0
                    spent[name]["daemons"] += daemon_cpu() - d0
            for name, ss in samples.items():
                ok = [s for s in ss if "error" not in s]
                result.setdefault("cold", {})[name] = c = {
                    "ok": len(ok),
                    "errors": [s["error"] for s in ss if "error" in s],
                    **{f"{k}_p50": statistics.median(s[k] for s in ok) for k in ok[0] if k != "error"},
                    **{f"{k}_p95": pct([s[k] for s in ok], 95) for k in ("ready", "teardown")},
                    "machine_cpu_per_attempt": spent[name]["machine"] / len(ss),
                    "daemons_cpu_per_attempt": spent[name]["daemons"] / len(ss),
                }
                log(f"cold {name}: {json.dumps(c)}")
        if "pool" in args.sections:
            for name in variants:
                with variant_env(name):
                    series = pooled(templates[name], args.n, run_id, args.pool_hold)
                for kind, ws in series.items():
                    result.setdefault("pool", {}).setdefault(name, {})[kind] = p = {
                        f"{k}_{q}": pct([w[k] for w in ws], q)
                        for k in ("acquire", "prepare")
                        for q in (50, 95)
                    }
                    log(f"pool {name} {kind}: {p}")
        if "oracle" in args.sections:
            tasks = [t for t in bench.tasks if t.domain == "retail"][: args.tasks]
            with tempfile.TemporaryDirectory(prefix="tbx-density-") as tmp:
                root = Path(tmp)
                warm = runner_mod.Coordinator(
                    bench,
                    runner_mod.RunOptions(out=root / "w", golden_cache=root / "golden", skip_rubrics=True),
                )
                with running_images(golden_images, golden_images["servers"]):
                    asyncio.run(warm.compute_goldens(tasks, asyncio.Semaphore(2)))
                for conc in args.concurrency:
                    for name, images in variants.items():
                        with variant_env(name):
                            o = oracle(
                                bench,
                                tasks,
                                images,
                                conc,
                                root,
                                inline_teardown=name == "baseline",
                                golden_servers=golden_images["servers"],
                            )
                        result.setdefault("oracle", {}).setdefault(name, []).append(o)
                        log(f"oracle {name} c{conc}: {o}")
        if "model" in args.sections:
            tasks = [t for t in bench.tasks if t.domain == "retail"][: args.model_tasks]
            with tempfile.TemporaryDirectory(prefix="tbx-density-model-") as tmp:
                root = Path(tmp)
                if args.golden_cache is not None:  # golden states kept between runs of the benchmark
                    (root / "golden").symlink_to(args.golden_cache.resolve(), target_is_directory=True)
                warm = runner_mod.Coordinator(
                    bench,
                    runner_mod.RunOptions(out=root / "w", golden_cache=root / "golden", skip_rubrics=True),
                )
                with running_images(golden_images, golden_images["servers"]):
                    asyncio.run(warm.compute_goldens(tasks, asyncio.Semaphore(2)))
                for conc in args.model_concurrency:
                    for name, images in variants.items():
                        with variant_env(name):
                            mo = model_run(
                                bench,
                                tasks,
                                images,
                                conc,
                                args.model_warm if args.model_warm is not None else max(2, conc // 4),
                                args.model_delay,
                                root,
                                golden_images["servers"],
                                repeat=args.model_repeat,
                                time_limit=args.model_time_limit,
                            )
                        result.setdefault("model", {}).setdefault(name, []).append(mo)
                        log(f"model {name} c{conc}: {mo}")
    finally:
        sweep(run_id)
    containers, networks = leftovers(run_id)
    result["leftovers"] = len(containers) + len(networks)
    result["machine"]["load_end"] = os.getloadavg()[0]
    text = json.dumps(result, indent=1, default=str)
    if args.json:
        args.json.write_text(text)
    print(text)
    return 0 if result["leftovers"] == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
