"""Long haul: many sessions through one tbx server, as the RL trainer drives it, and what
the server holds after each hundred (issue 38, "Long haul and bursts").

    python benchmarks/long_haul.py session-proxy [--sessions 1000] [--concurrency 4] [--warm 1]
    python benchmarks/long_haul.py env [--sessions 1000] [--concurrency 4]
        [--json OUT.json] [--mcp-every 2]

`session-proxy`: `tbx session-proxy` on the demo pack; each session (benchmarks/
trainer_clients.SessionClient, the trainer's client and retries) is session_create of a
retail task → list_tools → the task's golden calls (every `--mcp-every`-th session over
`/mcp/`, the others over `/call_tool`) → get_effects (passed: result hash = golden hash) →
session_destroy. `env`: `tbx env serve` on the same tasks; each episode is a WebSocket:
reset → the golden calls as `call_tool` steps → one message, which the stub user answers
by closing the chat (terminal: the reward) → close.

A sampler reads every 5 s (benchmarks/server_probe.py): the RSS, open fds and threads of
the server's process tree, its connections to the Docker socket, the daemon's event
subscribers, and the containers and networks labelled with the server's run. Printed per
hundred sessions (in the order they ended): create/reset p50 and p95, errors, and the
median of the samples taken while that hundred ended; then the figures at rest before the
first session (after one warm-up session per task) and 20 s after the last, and whether
the last hundred exceeds the second by more than `--noise` (per figure; measured
run-to-run, docs/performance.md).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import docker

sys.path.insert(0, str(Path(__file__).resolve().parent))

import server_probe as probe
from trainer_clients import EnvClient, SessionClient, SystemFailure, Tries, elapsed
from trainer_servers import DemoTask, Served, demo_tasks, pct, start_env_serve, start_session_proxy

SAMPLE_EVERY = 5.0
FIGURES = ("rss_mib", "fds", "threads", "docker_conns", "event_subscribers", "networks", "containers")


# ---- one session / one episode -------------------------------------------------------------
async def session(client: SessionClient, task: DemoTask, via: str) -> dict[str, Any]:
    rec: dict[str, Any] = {"task": task.id, "via": via}
    t0 = time.monotonic()
    sid = None
    try:
        tries = Tries()
        sid, _ = await client.create(task.config, task.tools, tries)
        rec["create_s"] = elapsed(t0)
        rec["create_tries"] = tries.create_tries
        tools = await client.value("list_tools", {"session_id": sid}, "list_tools")
        if set(tools["tools"]) != set(task.tools):
            raise SystemFailure("list_tools", "protocol", "listed tools differ from available_tools")
        t = time.monotonic()
        if via == "mcp":
            await client.mcp_calls(sid, task.calls)
        else:
            for name, arguments in task.calls:
                await client.call_tool(sid, name, arguments)
        rec["calls_s"] = elapsed(t)
        t = time.monotonic()
        effects = (await client.value("get_effects", {"session_id": sid}, "effects"))[task.server]
        rec["effects_s"] = elapsed(t)
        rec["passed"] = effects["result_db_hash"] == effects["golden_db_hash"]
        t = time.monotonic()
        await client.value("session_destroy", {"session_id": sid}, "destroy")
        sid = None
        rec["destroy_s"] = elapsed(t)
    except SystemFailure as exc:
        rec["error"] = str(exc)
    finally:
        if sid is not None:
            await client.destroy_quietly(sid)
    rec["total_s"] = elapsed(t0)
    return rec


async def episode(url: str, task: DemoTask) -> dict[str, Any]:
    rec: dict[str, Any] = {"task": task.id, "via": "ws"}
    t0 = time.monotonic()
    try:
        async with EnvClient(url) as env:
            t = time.monotonic()
            tries = Tries()
            await env.reset({"test_uid": task.id}, tries)
            rec["create_s"] = elapsed(t)
            rec["create_tries"] = tries.create_tries
            t = time.monotonic()
            for name, arguments in task.calls:
                out = await env.step({"type": "call_tool", "tool_name": name, "arguments": arguments})
                if out.get("done"):
                    raise SystemFailure("step", "protocol", "the episode ended during the golden calls")
            rec["calls_s"] = elapsed(t)
            t = time.monotonic()
            final = await env.step({"type": "submit_message", "content": "All done, thank you."})
            rec["effects_s"] = elapsed(t)  # the terminal step: final dump, verdict, teardown
            obs = final.get("observation") or {}
            if obs.get("reward_type") == "system_error":
                raise SystemFailure("terminal", "system_error", str(obs.get("system_error")))
            rec["passed"] = final.get("reward") == 1.0
    except SystemFailure as exc:
        rec["error"] = str(exc)
    rec["total_s"] = elapsed(t0)
    return rec


# ---- the run ---------------------------------------------------------------------------------
class Sampler(threading.Thread):
    def __init__(self, served: Served, done: list[dict[str, Any]]):
        super().__init__(daemon=True, name="sampler")
        self.served, self.done = served, done
        self.samples: list[dict[str, Any]] = []
        self.stop = threading.Event()
        self.docker = docker.from_env(timeout=60)

    def sample(self) -> dict[str, Any]:
        s = {"t": time.monotonic(), "ended": len(self.done)}
        s.update(probe.tree_figures(self.served.proc.pid))
        s.update(probe.docker_figures(self.docker, self.served.run_id, self.served.proc.pid))
        return s

    def run(self) -> None:
        while not self.stop.wait(SAMPLE_EVERY):
            try:
                self.samples.append(self.sample())
            except Exception as exc:  # a daemon call that failed: the next tick tries again
                print(f"sampler: {exc!r}", file=sys.stderr)


async def drive(
    served: Served,
    tasks: list[DemoTask],
    n: int,
    concurrency: int,
    mcp_every: int,
    done: list[dict[str, Any]],
    on_hundred: Callable[[], None] | None = None,
) -> None:
    client = SessionClient(served.url)
    todo = iter(range(n))

    async def worker() -> None:
        for i in todo:
            task = tasks[i % len(tasks)]
            if served.kind == "env":
                rec = await episode(served.url, task)
            else:
                via = "mcp" if mcp_every and i % mcp_every == mcp_every - 1 else "call_tool"
                rec = await session(client, task, via)
            rec["i"] = i
            done.append(rec)
            if "error" in rec:
                print(f"#{i}: {rec['error']}", file=sys.stderr, flush=True)
            if len(done) % 50 == 0:
                print(f"{len(done)}/{n} ended", file=sys.stderr, flush=True)
            if on_hundred is not None and len(done) % 100 == 0:
                on_hundred()  # the table so far, should the run be stopped before its end

    await asyncio.gather(*(worker() for _ in range(concurrency)))


def _median(values: list[float]) -> float | None:
    return round(statistics.median(values), 1) if values else None


def table(done: list[dict[str, Any]], samples: list[dict[str, Any]], per: int) -> list[dict[str, Any]]:
    rows = []
    for start in range(0, len(done), per):
        chunk = done[start : start + per]
        creates = [r["create_s"] for r in chunk if "create_s" in r]
        inside = [s for s in samples if start <= s["ended"] < start + per]
        row: dict[str, Any] = {
            "sessions": f"{start + 1}-{start + len(chunk)}",
            "create_p50": round(pct(creates, 0.5) or 0, 2),
            "create_p95": round(pct(creates, 0.95) or 0, 2),
            "total_p50": round(pct([r["total_s"] for r in chunk], 0.5) or 0, 2),
            "errors": sum("error" in r for r in chunk),
            "failed": sum(r.get("passed") is False for r in chunk),
            "samples": len(inside),
        }
        for f in FIGURES:
            row[f] = _median([s[f] for s in inside if s.get(f) is not None])
            row[f + "_max"] = max((s[f] for s in inside if s.get(f) is not None), default=None)
        rows.append(row)
    return rows


def verdict(rows: list[dict[str, Any]], noise: dict[str, float]) -> dict[str, Any]:
    """Per figure: the last hundred against the second, and whether it exceeds it by more
    than the noise."""
    if len(rows) < 3:
        return {}
    second, last = rows[1], rows[-1]
    out = {}
    for f in ("create_p50", "create_p95", *FIGURES):
        a, b = second.get(f), last.get(f)
        if a is None or b is None:
            continue
        out[f] = {"second": a, "last": b, "grew": round(b - a, 2), "flat": b - a <= noise.get(f, 0.0)}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("target", choices=["session-proxy", "env"])
    ap.add_argument("--sessions", type=int, default=1000, help="sessions (episodes) in all")
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--per", type=int, default=100, help="sessions per table row")
    ap.add_argument("--warm", type=int, default=1, help="session-proxy --warm")
    ap.add_argument("--max-episodes", type=int, default=None, help="env serve (default: concurrency)")
    ap.add_argument(
        "--mcp-every", type=int, default=2, help="every n-th session's calls over /mcp/ (0: none)"
    )
    ap.add_argument("--domain", default="retail")
    ap.add_argument(
        "--noise",
        type=json.loads,
        default="{}",
        help='JSON: run-to-run noise per figure, e.g. {"rss_mib": 6, "create_p50": 0.8}',
    )
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--workdir", type=Path, default=None)
    args = ap.parse_args(argv)

    tasks = demo_tasks(args.domain)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix=f"tbx-long-haul-{args.target}-"))
    workdir.mkdir(parents=True, exist_ok=True)
    machine_before = probe.machine()
    if args.target == "env":
        served = start_env_serve(workdir, tasks, args.max_episodes or args.concurrency)
    else:
        served = start_session_proxy(workdir, args.warm)
    print(f"{served.kind} pid {served.proc.pid} run {served.run_id}; log {served.log}", file=sys.stderr)
    done: list[dict[str, Any]] = []
    sampler = Sampler(served, done)
    try:
        # one warm-up session per task: its golden replay, the pool's first spares
        warmup: list[dict[str, Any]] = []
        asyncio.run(drive(served, tasks, len(tasks), 1, 0, warmup))
        if any("error" in r for r in warmup):
            raise SystemExit(f"warm-up failed: {warmup}")
        time.sleep(20)
        at_rest_before = sampler.sample()
        other_before = probe.other_work(served.proc.pid)
        sampler.start()
        t0 = time.monotonic()

        def partial() -> None:
            if args.json is not None:
                rows = table(done, list(sampler.samples), args.per)
                partial = {
                    "partial": True,
                    "ended": len(done),
                    "at_rest_before": at_rest_before,
                    "rows": rows,
                }
                args.json.with_suffix(".partial.json").write_text(json.dumps(partial, indent=1))

        asyncio.run(drive(served, tasks, args.sessions, args.concurrency, args.mcp_every, done, partial))
        wall = time.monotonic() - t0
        sampler.stop.set()
        sampler.join()
        time.sleep(20)
        at_rest_after = sampler.sample()
        other_after = probe.other_work(served.proc.pid)
        machine_after = probe.machine()
    finally:
        code = served.stop()
    left = probe.docker_figures(sampler.docker, served.run_id, None)
    rows = table(done, sampler.samples, args.per)
    summary = {
        "target": args.target,
        "sessions": args.sessions,
        "concurrency": args.concurrency,
        "warm": args.warm if args.target == "session-proxy" else None,
        "mcp_every": args.mcp_every if args.target == "session-proxy" else None,
        "wall_s": round(wall, 1),
        "errors": sum("error" in r for r in done),
        "not_passed": sum(r.get("passed") is False for r in done),
        "error_samples": [r["error"] for r in done if "error" in r][:10],
        "create_retries": sum(r.get("create_tries", 1) - 1 for r in done),
        "rows": rows,
        "at_rest_before": at_rest_before,
        "at_rest_after": at_rest_after,
        "verdict": verdict(rows, args.noise),
        "machine_before": machine_before,
        "machine_after": machine_after,
        "other_work_before": other_before,
        "other_work_after": other_after,
        "server_exit": code,
        "left_after_stop": {"containers": left["containers"], "networks": left["networks"]},
        "log": str(served.log),
    }
    cols = ("sessions", "create_p50", "create_p95", "total_p50", "errors", "failed", *FIGURES)
    print(" | ".join(cols))
    for row in rows:
        print(" | ".join(str(row.get(c)) for c in cols))
    print(json.dumps({k: v for k, v in summary.items() if k != "rows"}, indent=1))
    if args.json:
        args.json.write_text(json.dumps(summary, indent=1))
    return 0 if summary["errors"] == 0 and summary["not_passed"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
