"""Burst: a whole RL batch at once (18 prompts x 8 rollouts = 144), with the trainer's
timeout and retries, against the CPU floor measured in the same run (issue 38).

    python benchmarks/burst.py session-proxy [--n 144] [--warm 0] [--hold 0] [--json OUT]
    python benchmarks/burst.py env [--n 144] [--max-episodes 144] [--hold 0] [--json OUT]

1. The server starts on the demo pack (`tbx session-proxy --warm W`, by default 0 so that
   every session is a cold set; `tbx env serve --max-episodes M`, whose pool keeps its
   default spares), and one session per retail task primes the golden cache.
2. **The cold set's CPU**: `--cold K` sessions one after another on the otherwise idle
   server, each create (reset) → the golden calls → effects (the terminal step) → destroy,
   then a rest until the server is idle (env serve's pool refilled). Its CPU
   (benchmarks/server_probe.CpuLedger): the containers' cgroup counters plus tbx's process
   tree (what it reaped included), divided by K; the Docker daemon's CPU beside it.
   Floor = N x that / cores.
3. **The burst**: N clients start at once (`asyncio.gather`), prompt i // 8 being demo task
   i // 8 mod 3, each over the trainer's client (benchmarks/trainer_clients: 600 s timeout,
   its HTTP retries, 3 create/reset retries 15/30/45 s or a longer Retry-After); each holds
   its session `--hold` s (the rollout's model time), then the calls, effects and destroy.
   Printed: ready and done times (p50, p95, last), tries and refusals (status, Retry-After),
   failures by kind, and the burst's own CPU ledger (per set and the machine's busy share:
   idle CPU while sets wait is time lost to something other than CPU).

The ratio wall-to-last-ready / floor is the issue's figure (target <= 1.2).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import server_probe as probe
from attempt_cpu import read_profile
from trainer_clients import EnvClient, SessionClient, SystemFailure, Tries, elapsed
from trainer_servers import DemoTask, Served, demo_tasks, pct, start_env_serve, start_session_proxy

PROMPT_GROUP = 8  # rollouts per prompt


async def session_client(
    served: Served, task: DemoTask, t0: float, hold: float, client: SessionClient
) -> dict[str, Any]:
    rec: dict[str, Any] = {"task": task.id}
    tries = Tries()
    sid = None
    try:
        sid, _ = await client.create(task.config, task.tools, tries)
        rec["ready_at"] = elapsed(t0)
        await asyncio.sleep(hold)
        for name, arguments in task.calls:
            await client.call_tool(sid, name, arguments)
        effects = (await client.value("get_effects", {"session_id": sid}, "effects"))[task.server]
        rec["passed"] = effects["result_db_hash"] == effects["golden_db_hash"]
        await client.value("session_destroy", {"session_id": sid}, "destroy")
        sid = None
    except SystemFailure as exc:
        rec["error"] = str(exc)
        rec["error_kind"] = f"{exc.stage}:{exc.kind}:{exc.status}"
    finally:
        if sid is not None:
            await client.destroy_quietly(sid)
    rec["done_at"] = elapsed(t0)
    rec["tries"] = tries.create_tries
    rec["refusals"] = tries.refusals
    rec["failed_tries"] = tries.failed_tries
    return rec


async def env_client(served: Served, task: DemoTask, t0: float, hold: float) -> dict[str, Any]:
    rec: dict[str, Any] = {"task": task.id}
    tries = Tries()
    try:
        async with EnvClient(served.url) as env:
            await env.reset({"test_uid": task.id}, tries)
            rec["ready_at"] = elapsed(t0)
            await asyncio.sleep(hold)
            for name, arguments in task.calls:
                await env.step({"type": "call_tool", "tool_name": name, "arguments": arguments})
            final = await env.step({"type": "submit_message", "content": "All done, thank you."})
            obs = final.get("observation") or {}
            if obs.get("reward_type") == "system_error":
                raise SystemFailure("terminal", "system_error", str(obs.get("system_error")))
            rec["passed"] = final.get("reward") == 1.0
    except SystemFailure as exc:
        rec["error"] = str(exc)
        rec["error_kind"] = f"{exc.stage}:{exc.kind}:{exc.status}"
    rec["done_at"] = elapsed(t0)
    rec["tries"] = tries.create_tries
    rec["refusals"] = tries.refusals
    rec["failed_tries"] = tries.failed_tries
    return rec


async def one(served: Served, task: DemoTask, hold: float, client: SessionClient) -> dict[str, Any]:
    t0 = time.monotonic()
    if served.kind == "env":
        return await env_client(served, task, t0, hold)
    return await session_client(served, task, t0, hold, client)


async def many(served: Served, tasks: list[DemoTask], hold: float) -> list[dict[str, Any]]:
    client = SessionClient(served.url)
    return await asyncio.gather(*(one(served, t, hold, client) for t in tasks))


@contextlib.contextmanager
def spied(pid: int, out: Path | None) -> Iterator[None]:
    """py-spy samples of `pid` while inside (collapsed stacks, `out`), when asked."""
    if out is None:
        yield
        return
    exe = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    cmd = [exe, "record", "--pid", str(pid), "--rate", "50", "--format", "raw", "--nonblocking"]
    spy = subprocess.Popen(
        [*cmd, "--output", str(out)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    time.sleep(1.0)
    try:
        yield
    finally:
        spy.send_signal(signal.SIGINT)
        with contextlib.suppress(subprocess.TimeoutExpired):
            spy.wait(timeout=60)


def rest(served: Served, seconds: float = 15.0, settle: float = 0.15, limit: float = 300.0) -> None:
    """Wait until the server's tree used under `settle` of a core over `seconds` (its pool
    refilled, teardowns done), at most `limit` s."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        a = probe.tree_cpu(served.proc.pid)
        time.sleep(seconds)
        if probe.tree_cpu(served.proc.pid) - a < settle * seconds:
            return


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("target", choices=["session-proxy", "env"])
    ap.add_argument("--n", type=int, default=144, help="clients at once")
    ap.add_argument("--cold", type=int, default=3, help="sequential sessions measuring a cold set's CPU")
    ap.add_argument("--warm", type=int, default=0, help="session-proxy --warm")
    ap.add_argument("--max-episodes", type=int, default=None, help="env serve (default: --n)")
    ap.add_argument("--capacity-wait", type=float, default=0.0, help="env serve --capacity-wait")
    ap.add_argument(
        "--hold", type=float, default=0.0, help="seconds each client holds its session when ready"
    )
    ap.add_argument("--profile", type=Path, default=None, help="py-spy the server during the burst (raw)")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--workdir", type=Path, default=None)
    args = ap.parse_args(argv)

    tasks = demo_tasks("retail")
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix=f"tbx-burst-{args.target}-"))
    workdir.mkdir(parents=True, exist_ok=True)
    cores = os.cpu_count() or 1
    machine_before = probe.machine()
    if args.target == "env":
        extra = ["--capacity-wait", str(args.capacity_wait), "--idle-timeout", "900"]
        served = start_env_serve(workdir, tasks, args.max_episodes or args.n, *extra)
    else:
        served = start_session_proxy(workdir, args.warm)
    print(f"{served.kind} pid {served.proc.pid} run {served.run_id}; log {served.log}", file=sys.stderr)
    try:
        primed = asyncio.run(many(served, tasks, 0.0))  # one at a time would be slower; all differ
        if any("error" in r for r in primed):
            raise SystemExit(f"priming failed: {primed}")
        rest(served)
        # ---- the cold set's CPU
        with probe.CpuLedger(served.proc.pid, served.run_id) as cold:
            cold_runs = [asyncio.run(many(served, [tasks[i % len(tasks)]], 0.0))[0] for i in range(args.cold)]
            rest(served)
        if any("error" in r for r in cold_runs):
            raise SystemExit(f"cold sessions failed: {cold_runs}")
        c = cold.totals()
        per_set = (c["tbx"] + c["containers"]) / args.cold
        floor = args.n * per_set / cores
        print(f"cold set: {c} -> {per_set:.2f} CPU-s per set; floor {floor:.0f} s", file=sys.stderr)
        other_before = probe.other_work(served.proc.pid)
        # ---- the burst
        batch = [tasks[(i // PROMPT_GROUP) % len(tasks)] for i in range(args.n)]
        figures_before = probe.tree_figures(served.proc.pid)
        with spied(served.proc.pid, args.profile), probe.CpuLedger(served.proc.pid, served.run_id) as burst:
            t0 = time.monotonic()
            results = asyncio.run(many(served, batch, args.hold))
            wall_done = time.monotonic() - t0
        figures_after = probe.tree_figures(served.proc.pid)
        machine_after = probe.machine()
    finally:
        code = served.stop()
    left = probe.docker_figures(probe.docker.from_env(), served.run_id, None)
    b = burst.totals()
    ready = [r["ready_at"] for r in results if "ready_at" in r]
    refusals = Counter((s, ra) for r in results for s, ra in r["refusals"])
    summary = {
        "target": args.target,
        "n": args.n,
        "hold_s": args.hold,
        "warm": args.warm if args.target == "session-proxy" else None,
        "max_episodes": (args.max_episodes or args.n) if args.target == "env" else None,
        "cores": cores,
        "cold": {**c, "sessions": args.cold, "per_set_cpu_s": round(per_set, 2)},
        "floor_s": round(floor, 1),
        "ready": len(ready),
        "errors": Counter(r.get("error_kind") for r in results if "error" in r),
        "error_samples": [r["error"] for r in results if "error" in r][:5],
        "not_passed": sum(r.get("passed") is False for r in results),
        "timeouts": sum("timeout" in r.get("error_kind", "") for r in results),
        "ready_p50_s": pct(ready, 0.5),
        "ready_p95_s": pct(ready, 0.95),
        "last_ready_s": max(ready, default=None),
        "last_done_s": round(wall_done, 1),
        "ratio_last_ready_to_floor": round(max(ready) / floor, 2) if ready and floor else None,
        "tries": Counter(r["tries"] for r in results),
        "failed_tries": Counter(kind for r in results for kind in r["failed_tries"]),
        "refusals": {f"{s} retry-after={ra}": n for (s, ra), n in refusals.items()},
        "burst_cpu": {
            **b,
            "per_set_cpu_s": round((b["tbx"] + b["containers"]) / args.n, 2),
            "busy_share": round(b["machine"] / (b["wall"] * cores), 2),
        },
        "tree_before": figures_before,
        "tree_after": figures_after,
        "machine_before": machine_before,
        "machine_after": machine_after,
        "other_work_before": other_before,
        "profile": read_profile(args.profile) if args.profile is not None else None,
        "server_exit": code,
        "left_after_stop": {"containers": left["containers"], "networks": left["networks"]},
        "log": str(served.log),
    }
    print(json.dumps(summary, indent=1, default=str))
    if args.json:
        args.json.write_text(json.dumps(summary, indent=1, default=str))
    return 0 if len(ready) == args.n and not summary["errors"] else 1


if __name__ == "__main__":
    sys.exit(main())
