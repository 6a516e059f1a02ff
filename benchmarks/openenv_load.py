"""RL-shaped load on `tbx env serve`: B tasks x G episodes in flight (GRPO groups), an agent
playing each task's golden calls over openenv 0.10's official client, beside `tbx run`'s
oracle on the same tasks (repeat G, the same concurrency) in one invocation.

    python benchmarks/openenv_load.py [--domain retail] [--tasks 8] [--groups 4 8] [--warm W]
        [--json]

Needs `.venv-openenv10` (`make openenv10-client`) and the images. Golden end states are
computed once before the timed runs (a shared cache), so both sides time attempts. The
simulated user is a local stub that closes the chat on its first reply.

Printed per group size: reset p50/p95 (client side), tool-call p95, episodes/min over the
episodes' wall time, rewards, system errors, leftovers after the server stopped, and how many
resets were hand-overs of a spare prepared ahead (`/ready`'s pool counts); and `tbx run`'s
attempts/min, with the load average around each run.

With `--warm W` the resets start only once `/ready` is 200 *and* the pool holds W booted
spares, each prepared for a served task ("the pool ahead": a reset is then a hand-over);
without it, as soon as `/ready` is 200 (a booted sandbox per domain).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx

from bench.dataset import default_root, load_benchmark
from bench.run.coordinator import Coordinator, RunOptions
from bench.run.results import read_rows
from sandbox import leftovers

REPO = Path(__file__).resolve().parents[1]
AGENT = Path(__file__).with_name("openenv_load_agent.py")
CLOSING = "Thanks, that's all. ###STOP###"


def free_port() -> int:
    """A port on 127.0.0.1 free now (for a server the benchmark starts)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def closing_user_config(root: Path) -> tuple[ThreadingHTTPServer, Path]:
    """`closing_user` and a models config (root/models.json) whose user model it serves."""
    stub, base_url = closing_user()
    config = root / "models.json"
    config.write_text(
        json.dumps({"defaults": {"base_url": base_url, "api_key": "k"}, "user": {"model": "user-m"}})
    )
    return stub, config


def closing_user() -> tuple[ThreadingHTTPServer, str]:
    """An OpenAI-compatible user endpoint that ends the chat on its first reply."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            message = {"role": "assistant", "content": CLOSING}
            data = json.dumps(
                {
                    "id": "c",
                    "object": "chat.completion",
                    "created": 0,
                    "model": body["model"],
                    "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
                }
            ).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            data = json.dumps({"object": "list", "data": [{"id": "user-m"}]}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd, f"http://127.0.0.1:{httpd.server_address[1]}/v1"


def pct(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def serve_and_play(
    bench: Any, tasks: list[Any], group: int, warm: int | None, cache: Path, root: Path
) -> dict[str, Any]:
    stub, config = closing_user_config(root)
    port = free_port()
    out = root / f"env-g{group}"
    inflight = len(tasks) * group
    cmd = [
        sys.executable, "-m", "bench.cli", "env", "serve", "--dataset", str(bench.root),
        "--config", str(config), "--port", str(port), "--out", str(out),
        "--tasks", ",".join(t.id for t in tasks), "--max-episodes", str(inflight),
        "--capacity-wait", "900", "--golden-cache", str(cache), "--skip-rubrics",
        "--start-timeout", "600", *(["--warm", str(warm)] if warm else []),
    ]  # fmt: skip
    log = (root / f"server-g{group}.log").open("w")
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        waiting = time.monotonic()
        deadline = waiting + 900
        while True:
            if proc.poll() is not None:
                raise SystemExit(f"env serve exited: {(root / f'server-g{group}.log').read_text()[-2000:]}")
            if time.monotonic() > deadline:
                raise SystemExit(
                    f"env serve not ready (or its pool not ahead) within 900 s: {ready_body(url)}"
                )
            body = ready_body(url)
            if body.get("ready") and (warm is None or pool_ahead(body, warm)):
                break
            time.sleep(1)
        settle = time.monotonic()
        time.sleep(3)  # the last boot's clean-up and CPU settle before the timed resets
        plan = root / f"plan-g{group}.json"
        plan.write_text(
            json.dumps(
                {"group": group, "tasks": [{"test_uid": t.id, "calls": bench.golden_calls(t)} for t in tasks]}
            )
        )
        load_before = os.getloadavg()[0]
        agent = subprocess.run(
            [str(REPO / ".venv-openenv10" / "bin" / "python"), str(AGENT), url, str(plan)],
            capture_output=True, text=True, timeout=3600, check=True,
        )  # fmt: skip
        played = json.loads(agent.stdout)
        load_after = os.getloadavg()[0]
        pools = ready_body(url).get("pools", {})
        run_id = json.loads((out / "manifest.json").read_text())["run_id"]
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=300)
        stub.shutdown()
    containers, networks = leftovers(run_id)
    eps = played["episodes"]
    resets = [e["reset_s"] for e in eps if "reset_s" in e]
    calls = [c for e in eps for c in e["calls_s"]]
    return {
        "side": "env serve",
        "tasks": len(tasks),
        "group": group,
        "in_flight": inflight,
        "episodes": len(eps),
        "rewards": {str(r): sum(1 for e in eps if e.get("reward") == r) for r in (1.0, 0.0, None)},
        "client_errors": [e["error"] for e in eps if "error" in e][:3],
        "reset_p50_s": round(pct(resets, 0.5), 3),
        "reset_p95_s": round(pct(resets, 0.95), 3),
        "tool_call_p95_s": round(pct(calls, 0.95), 3),
        "episodes_per_min": round(len(eps) / played["wall_s"] * 60, 2),
        "wall_s": round(played["wall_s"], 1),
        "leftovers": len(containers) + len(networks),
        "load": [round(load_before, 1), round(load_after, 1)],
        "ready_wait_s": round(settle - waiting, 1),  # start-up until ready (and the pool ahead)
        # resets served by the pools, and of those the hand-overs of a spare prepared for them
        "handovers": sum(p.get("handovers", 0) for p in pools.values()),
        "checkouts": sum(p.get("checkouts", 0) for p in pools.values()),
    }


def ready_body(url: str) -> dict[str, Any]:
    """`/ready`'s body (its status aside), or {} while the server does not answer."""
    try:
        body = httpx.get(url + "/ready", timeout=10).json()
    except (httpx.HTTPError, ValueError):
        return {}
    return body if isinstance(body, dict) else {}


def pool_ahead(body: dict[str, Any], warm: int) -> bool:
    """Every served domain's pool holds `warm` booted spares; with the env server's plan,
    a spare counts as booted only once it is prepared for its task too."""
    pools = body.get("pools") or {}
    return bool(pools) and all(p.get("booted", 0) >= warm for p in pools.values())


def tbx_run(bench: Any, tasks: list[Any], group: int, warm: int, cache: Path, root: Path) -> dict[str, Any]:
    out = root / f"run-g{group}"
    opts = RunOptions(
        out=out, agent="oracle", repeat=group, concurrency=len(tasks) * group, warm=warm,
        golden_cache=cache, skip_rubrics=True,
    )  # fmt: skip
    runner = Coordinator(bench, opts)
    load_before = os.getloadavg()[0]
    asyncio.run(runner.run(tasks))
    wall = time.monotonic() - runner.started
    rows = read_rows(out / "results.jsonl")
    containers, networks = leftovers(runner.run_id)
    return {
        "side": "tbx run",
        "group": group,
        "attempts": len(rows),
        "passed": sum(r.passed for r in rows),
        "system_errors": sum(r.system_error for r in rows),
        "attempts_per_min": round(len(rows) / wall * 60, 2),
        "wall_s": round(wall, 1),
        "leftovers": len(containers) + len(networks),
        "load": [round(load_before, 1), round(os.getloadavg()[0], 1)],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--domain", default="retail")
    ap.add_argument("--tasks", type=int, default=8, help="B: different tasks in flight")
    ap.add_argument("--groups", type=int, nargs="+", default=[4, 8], help="G: episodes per task")
    ap.add_argument("--warm", type=int, default=None, help="env serve --warm (default: its own sizing)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    bench = load_benchmark(default_root())
    tasks = [t for t in bench.tasks if t.domain == args.domain and not t.has_rubrics][: args.tasks]
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="tbx-openenv-load-") as tmp:
        root = Path(tmp)
        cache = root / "golden"
        warmup = Coordinator(bench, RunOptions(out=root / "warmup", golden_cache=cache, skip_rubrics=True))
        failures = asyncio.run(warmup.compute_goldens(tasks, asyncio.Semaphore(2)))
        if failures:
            raise SystemExit(f"golden replay failed: {failures[0]}")
        for group in args.groups:
            results.append(serve_and_play(bench, tasks, group, args.warm, cache, root))
            results.append(tbx_run(bench, tasks, group, args.warm or 2, cache, root))  # env serve's default
            for r in results[-2:]:
                print(json.dumps(r) if args.json else r, flush=True)
    if not args.json:
        for g in args.groups:
            env = next(r for r in results if r["side"] == "env serve" and r["group"] == g)
            run = next(r for r in results if r["side"] == "tbx run" and r["group"] == g)
            ratio = env["episodes_per_min"] / run["attempts_per_min"] if run["attempts_per_min"] else 0
            print(f"G={g}: env serve {env['episodes_per_min']}/min vs tbx run {run['attempts_per_min']}/min "
                  f"({ratio:.0%}); reset p50 {env['reset_p50_s']} s p95 {env['reset_p95_s']} s; "
                  f"leftovers {env['leftovers']} + {run['leftovers']}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
