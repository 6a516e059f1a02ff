"""Where a pool-ahead OpenEnv reset's time goes, in process: an `EnvHost` as `tbx env serve`
builds it, B tasks x G `Episode.start()` at once once the pool holds W spares prepared
for them, for R rounds; no WebSocket (`openenv_load.py` measures the client side).

    python benchmarks/reset_profile.py [--domain retail] [--tasks 2] [--group 4]
        [--warm 8] [--rounds 3] [--profile N] [--json]

Printed per round: each reset's wall (p50 / max), the process's CPU over the resets
(every thread), the proxy loop's CPU, and with `--profile N` the N functions with the most
own time on the event loop's thread and the proxy's thread (cProfile, summed over rounds).
Each round's episodes are closed unplayed (recorded as abandoned) before the next.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import json
import pstats
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from openenv_load import closing_user, pct

from bench.dataset import default_root, load_benchmark
from bench.env.episode import Episode
from bench.env.host import EnvHost, EnvOptions
from bench.llm.config import parse_models_config
from bench.run.coordinator import Coordinator, RunOptions
from sandbox import leftovers
from sandbox.proxy import registry

DOCKER_CHECKS = [0]


def count_docker_checks() -> None:
    """Count the registrations that asked Docker whether their sandbox lives."""
    real = registry.check_alive

    def counted(*args: Any) -> None:
        DOCKER_CHECKS[0] += 1
        real(*args)

    registry.check_alive = counted  # type: ignore[assignment]


async def pool_ahead(host: EnvHost, warm: int, timeout: float = 900) -> None:
    deadline = time.monotonic() + timeout
    while not (
        host.bring_up_error is None and host.pools and all(p.booted >= warm for p in host.pools.values())
    ):
        if host.fatal or time.monotonic() > deadline:
            raise SystemExit(f"pool not ahead: {host.fatal or host.bring_up_error}")
        await asyncio.sleep(0.5)
    await asyncio.sleep(3)  # the last boot's clean-up settles


def thread_cpu() -> dict[str, float]:
    """CPU seconds so far of each live thread, summed by name (workers' numbered names merged)."""
    out: dict[str, float] = {}
    for t in threading.enumerate():
        if t.ident is None:
            continue
        try:
            cpu = time.clock_gettime(time.pthread_getcpuclockid(t.ident))
        except OSError:  # ended meanwhile
            continue
        name = t.name.split("_")[0].rstrip("0123456789-") or t.name
        out[name] = out.get(name, 0.0) + cpu
    return out


def on_proxy_thread(host: EnvHost, fn: Any) -> Any:
    async def call() -> Any:
        return fn()

    assert host.proxy is not None
    return host.proxy._host.submit(call()).result()


async def one_round(
    host: EnvHost, tasks: list[Any], group: int, profiles: dict[str, cProfile.Profile] | None
):
    episodes = [Episode(host, t, host.next_repeat(t, None)) for t in tasks for _ in range(group)]
    walls: list[float] = []

    async def start(ep: Episode) -> None:
        t = time.perf_counter()
        obs = await ep.start()
        walls.append(time.perf_counter() - t)
        if obs.kind != "reset":
            raise SystemExit(f"reset failed: {obs.system_error}")

    assert host.proxy is not None
    if profiles is not None:
        on_proxy_thread(host, profiles["proxy"].enable)
        profiles["loop"].enable()
    asked = DOCKER_CHECKS[0]
    threads = thread_cpu()
    cpu, proxy_cpu, t0 = time.process_time(), host.proxy.cpu_time(), time.perf_counter()
    await asyncio.gather(*(start(ep) for ep in episodes))
    wall = time.perf_counter() - t0
    cpu, proxy_cpu = time.process_time() - cpu, host.proxy.cpu_time() - proxy_cpu
    after = thread_cpu()
    by_thread = {n: round((c - threads.get(n, 0.0)) * 1000, 1) for n, c in after.items()}
    if profiles is not None:
        profiles["loop"].disable()
        on_proxy_thread(host, profiles["proxy"].disable)
    handovers = sum(p.handovers for p in host.pools.values())
    await asyncio.gather(*(ep.close("profiled") for ep in episodes))
    return {
        "resets": len(walls),
        "reset_p50_ms": round(pct(walls, 0.5) * 1000, 1),
        "reset_max_ms": round(max(walls) * 1000, 1),
        "all_resets_ms": round(wall * 1000, 1),
        "process_cpu_ms": round(cpu * 1000, 1),
        "proxy_cpu_ms": round(proxy_cpu * 1000, 1),
        "handovers_so_far": handovers,
        "docker_liveness_checks": DOCKER_CHECKS[0] - asked,  # registrations that asked the daemon
        "thread_cpu_ms": {n: c for n, c in sorted(by_thread.items(), key=lambda x: -x[1]) if c >= 0.5},
    }


def top(profile: cProfile.Profile, n: int) -> str:
    out = io.StringIO()
    pstats.Stats(profile, stream=out).sort_stats("tottime").print_stats(n)
    return out.getvalue()


async def main_async(args: argparse.Namespace) -> int:
    count_docker_checks()
    bench = load_benchmark(default_root())
    tasks = [t for t in bench.tasks if t.domain == args.domain and not t.has_rubrics][: args.tasks]
    stub, base_url = closing_user()
    rounds: list[dict[str, Any]] = []
    profiles = {"loop": cProfile.Profile(), "proxy": cProfile.Profile()} if args.profile else None
    with tempfile.TemporaryDirectory(prefix="tbx-reset-profile-") as tmp:
        root = Path(tmp)
        cache = root / "golden"
        warmup = Coordinator(bench, RunOptions(out=root / "warmup", golden_cache=cache, skip_rubrics=True))
        if failures := await warmup.compute_goldens(tasks, asyncio.Semaphore(2)):
            raise SystemExit(f"golden replay failed: {failures[0]}")
        config = parse_models_config(
            {"defaults": {"base_url": base_url, "api_key": "k"}, "user": {"model": "user-m"}}, "stub"
        )
        opts = EnvOptions(
            out=root / "env", max_episodes=len(tasks) * args.group, warm=args.warm,
            golden_cache=cache, skip_rubrics=True, start_timeout=600,
        )  # fmt: skip
        host = EnvHost(bench, config, tasks, opts)
        await host.start()
        try:
            for _ in range(args.rounds):
                await pool_ahead(host, args.warm)
                rounds.append(await one_round(host, tasks, args.group, profiles))
                print(json.dumps(rounds[-1]) if args.json else rounds[-1], flush=True)
        finally:
            await host.close()
            stub.shutdown()
        containers, networks = leftovers(host.run_id)
    if profiles is not None:
        for name, profile in profiles.items():
            print(f"---- {name} thread, own time over {args.rounds} rounds ----")
            print(top(profile, args.profile))
            if args.dump is not None:
                args.dump.mkdir(parents=True, exist_ok=True)
                profile.dump_stats(args.dump / f"{name}.pstats")
    print(f"leftovers: {len(containers)} containers, {len(networks)} networks")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--domain", default="retail")
    ap.add_argument("--tasks", type=int, default=2)
    ap.add_argument("--group", type=int, default=4)
    ap.add_argument("--warm", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--profile", type=int, default=0, metavar="N")
    ap.add_argument("--dump", type=Path, default=None, help="write the profiles (pstats files) here")
    ap.add_argument("--json", action="store_true")
    return asyncio.run(main_async(ap.parse_args()))


if __name__ == "__main__":
    sys.exit(main())
