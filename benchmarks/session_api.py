"""`tbx session-proxy` figures: session_create latency with the warm pool ahead,
call_tool overhead over a direct MCP call, and many concurrent sessions.

Starts `tbx session-proxy` (a subprocess, --warm W, its own golden cache
directory unless --golden-cache) and drives it with httpx as the reference
clients do:

1. ``create``: sessions of traced tasks, one task per server in turn, each
   created, one golden call made, effects read, destroyed. The first session of a
   task pays its golden replay (a sandbox of its own); later ones of the same task
   find it cached. Both are reported, each including the golden state.
2. ``call``: N calls of a read-only tool (consulting `zendesk_get_items` of the tickets),
   interleaved call by call: ``direct`` = an MCP client straight to a server
   container of a sandbox this script starts itself; ``api`` = POST /call_tool
   (session FIFO, tbx's tool proxy, recording). Added p50 = api - direct; also
   the session-proxy process's CPU per call (a figure the machine's load hardly moves).
3. ``concurrent``: C sessions of one task created at once, each replaying the
   golden calls, reading effects and destroying; wall time and create p50/p95,
   and how many ended with result_db_hash == golden_db_hash.

Usage::

    python benchmarks/session_api.py [--warm 2] [--rounds 3] [-n 200] [--concurrent 32]

Containers carry the server's run label and are swept when it stops.
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
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.dataset import default_root, load_benchmark  # noqa: E402
from bench.prepare import sandbox_request  # noqa: E402
from sandbox import Sandbox, upstream_client  # noqa: E402

SERVERS = (
    "sandbox_external_retail",
    "sandbox_auto_insurance",
    "sandbox_consulting",
    "external_booking_v1",
    "sandbox_neobank_support_v1",
)


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, round(q * (len(s) - 1)))]


def summary(values: list[float], unit: str = "s", scale: float = 1.0) -> str:
    v = [x * scale for x in values]
    return f"p50 {pct(v, 0.5):.3f} {unit}, p95 {pct(v, 0.95):.3f} {unit}, n={len(v)}"


def traced(bench: Any, server: str, index: int) -> dict[str, Any]:
    trace = json.loads((bench.root / "traces" / f"{server}.jsonl").read_text().splitlines()[index])
    task = bench.task(trace["task_id"])
    return {
        "task": task,
        "trace": trace,
        "config": {server: bench.effective_init(task).raw},
        "tools": bench.scenario_of(task).tool_names,
        "server": server,
    }


def start(dataset: Path, warm: int, golden: Path) -> tuple[subprocess.Popen[str], str, Path]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = Path(tempfile.mkdtemp(prefix="tbx-sessapi-bench-")) / "server.log"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "bench.cli",
            "session-proxy",
            "--dataset",
            str(dataset),
            "--port",
            str(port),
            "--warm",
            str(warm),
            "--golden-cache",
            str(golden),
        ],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        text=True,
    )
    deadline = time.monotonic() + 300
    while "ready on" not in log.read_text():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"session-proxy did not start: {log.read_text()[-2000:]}")
        time.sleep(0.2)
    return proc, f"http://127.0.0.1:{port}", log


def session(c: httpx.Client, sid: str, t: dict[str, Any], calls: int | None = 1) -> tuple[float, bool]:
    t0 = time.monotonic()
    r = c.post(
        "/session_create",
        json={
            "session_id": sid,
            "server_config": t["config"],
            "available_tools": t["tools"],
            "timeout": 570.0,
        },
    )
    created = time.monotonic() - t0
    r.raise_for_status()
    golden = t["trace"]["calls"] if calls is None else t["trace"]["calls"][:calls]
    for g in golden:
        c.post(
            "/call_tool", json={"session_id": sid, "tool_name": g["tool"], "arguments": g["parameters"]}
        ).raise_for_status()
    e = c.post("/get_effects", json={"session_id": sid}).json()["content"]["value"][t["server"]]
    c.post("/session_destroy", json={"session_id": sid}).raise_for_status()
    return created, e["result_db_hash"] == e["golden_db_hash"]


def bench_create(url: str, bench: Any, rounds: int, warm: int) -> None:
    tasks = [traced(bench, s, i) for i in range(rounds) for s in SERVERS]
    first: list[float] = []
    again: list[float] = []
    with httpx.Client(base_url=url, timeout=900) as c:
        for s in SERVERS:  # each domain's pool comes up (and is refilled) before the series
            session(c, f"warmup-{s}", traced(bench, s, rounds), calls=0)
        time.sleep(3 * warm)
        for i, t in enumerate(tasks):
            first.append(session(c, f"first-{i}", t)[0])
            time.sleep(1.0)  # the pool refills behind each checkout
        for i, t in enumerate(tasks):
            again.append(session(c, f"again-{i}", t)[0])
            time.sleep(1.0)
    print(f"session_create, new task (golden replayed):  {summary(first)}")
    print(f"session_create, task seen (golden cached):   {summary(again)}")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds process `pid` has used (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def bench_call(url: str, bench: Any, n: int, pid: int) -> None:
    t = traced(bench, "sandbox_consulting", 0)
    call = {"tool": "zendesk_get_items", "parameters": {"table": "tickets"}}  # read-only, every domain has it
    sb = Sandbox(sandbox_request(bench, t["task"], typesense=False))
    handle = sb.start()
    try:

        async def direct_and_api() -> tuple[list[float], list[float], float]:
            direct, api = [], []
            cpu = 0.0
            async with (
                upstream_client(handle.servers["consulting"], handle.server_headers) as mcp,
                httpx.AsyncClient(base_url=url, timeout=60) as c,
            ):
                body = {
                    "session_id": "calls",
                    "server_config": t["config"],
                    "available_tools": t["tools"],
                    "timeout": 570.0,
                }
                (await c.post("/session_create", json=body)).raise_for_status()
                api_body = {"session_id": "calls", "tool_name": call["tool"], "arguments": call["parameters"]}
                for i in range(n + 20):
                    if i == 20:
                        cpu = cpu_seconds(pid)
                    t0 = time.perf_counter()
                    await mcp.call_tool(call["tool"], call["parameters"])
                    t1 = time.perf_counter()
                    (await c.post("/call_tool", json=api_body)).raise_for_status()
                    t2 = time.perf_counter()
                    if i >= 20:
                        direct.append(t1 - t0)
                        api.append(t2 - t1)
                cpu = cpu_seconds(pid) - cpu
                await c.post("/session_destroy", json={"session_id": "calls"})
            return direct, api, cpu

        direct, api, cpu = asyncio.run(direct_and_api())
    finally:
        sb.close()
    print(f"call_tool direct MCP:   {summary(direct, 'ms', 1000)}")
    print(f"call_tool via the API:  {summary(api, 'ms', 1000)}")
    print(f"added p50: {(pct(api, 0.5) - pct(direct, 0.5)) * 1000:.2f} ms")
    # The server's CPU per call hardly depends on the machine's load, unlike the latencies.
    print(f"session-proxy CPU per /call_tool: {cpu / n * 1000:.2f} ms")


def bench_concurrent(url: str, bench: Any, count: int) -> None:
    t = traced(bench, "sandbox_consulting", 0)
    with httpx.Client(base_url=url, timeout=900) as c:
        session(c, "prime", t, calls=0)  # the golden state is cached: this measures the sessions

    def one(i: int) -> tuple[float, bool]:
        with httpx.Client(base_url=url, timeout=1800) as c:
            return session(c, f"conc-{i}", t, calls=None)

    t0 = time.monotonic()
    with ThreadPoolExecutor(count) as pool:
        results = list(pool.map(one, range(count)))
    wall = time.monotonic() - t0
    ok = sum(1 for _, same in results if same)
    print(
        f"{count} concurrent sessions: wall {wall:.1f} s, create {summary([r[0] for r in results])}, "
        f"{ok}/{count} result_db_hash == golden_db_hash"
    )


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--dataset", type=Path, default=None)
    p.add_argument("--warm", type=int, default=2)
    p.add_argument("--rounds", type=int, default=3, help="traced tasks per server in the create series")
    p.add_argument("-n", type=int, default=200, help="tool calls per path")
    p.add_argument("--concurrent", type=int, default=32)
    p.add_argument("--golden-cache", type=Path, default=None)
    p.add_argument("--only", choices=["create", "call", "concurrent"], action="append")
    args = p.parse_args()
    dataset = args.dataset or default_root()
    bench = load_benchmark(dataset, strict=False)
    golden = args.golden_cache or Path(tempfile.mkdtemp(prefix="tbx-sessapi-golden-"))
    proc, url, _log = start(dataset, args.warm, golden)
    print(f"load average at start: {os.getloadavg()}")
    try:
        only = set(args.only or ["create", "call", "concurrent"])
        if "create" in only:
            bench_create(url, bench, args.rounds, args.warm)
        if "call" in only:
            bench_call(url, bench, args.n, proc.pid)
        if "concurrent" in only:
            bench_concurrent(url, bench, args.concurrent)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=300)
        print(f"load average at end: {os.getloadavg()}; server exit {proc.returncode}")


if __name__ == "__main__":
    main()
