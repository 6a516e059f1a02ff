"""What the agent loop costs on top of the tool calls themselves.

1. One retail sandbox (no Typesense); for each of the first N traced retail
   tasks, reseeded before every run: the golden calls played raw over MCP
   (`bench.replay.mcp_calls.replay_calls`, one session) vs. the `oracle` agent
   through `run_attempt_agent` (session, tool listing, schema conversion,
   conversation bookkeeping, recording). Both are checked against the golden
   hash.
2. `LLMClient.chat` against a local OpenAI-compatible stub (127.0.0.1): the
   client-side cost of one completion with a 20-message conversation and the
   retail tool list (request building, HTTP, parsing, usage accounting).

Usage::

    python benchmarks/agent_loop.py [--tasks 10] [--chat-calls 200]

The sandbox is labelled `tbx.run=bench-agent-...` and swept at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.dataset import Benchmark, Task, default_root, load_benchmark
from bench.llm.client import LLMClient
from bench.llm.config import RoleConfig
from bench.prepare import initial_state, sandbox_request
from bench.replay.mcp_calls import replay_calls
from bench.rollout.agent_loop import run_attempt_agent
from bench.rollout.clients import mcp_client
from bench.rollout.tools import mcp_tool_to_openai
from judge import dump_dsn, state_hash
from sandbox import AttemptHandle, Sandbox, list_all_tools, new_id, sweep
from servers.engine.seeding import copy_rows
from servers.registry import load_domain


def reseed(handle: AttemptHandle, bench: Benchmark, task: Task) -> None:
    domain = load_domain("retail")
    rows = initial_state(bench, task)
    with psycopg.connect(handle.pg.admin_dsn("retail"), autocommit=True) as conn, conn.transaction():
        conn.execute(
            sql.SQL("TRUNCATE {} RESTART IDENTITY").format(
                sql.SQL(", ").join(sql.Identifier(t.name) for t in domain.tables)
            )
        )
        for spec in domain.tables:
            copy_rows(conn, spec, rows.get(spec.name, []))


def ms(values: list[float]) -> str:
    if not values:
        return "-"
    qs = statistics.quantiles(values, n=20) if len(values) > 1 else values * 19
    return f"median {statistics.median(values):7.1f} ms  p95 {qs[18]:7.1f} ms  (n={len(values)})"


async def loop_overhead(bench: Benchmark, n_tasks: int) -> list[dict[str, Any]]:
    """Prints the figures; returns the retail tool list in OpenAI form (for the chat benchmark)."""
    traces_path = bench.root / "traces" / "sandbox_external_retail.jsonl"
    traces = {t["task_id"]: t for t in map(json.loads, traces_path.read_text().splitlines())}
    tasks = [t for t in bench.tasks if t.id in traces][:n_tasks]
    run = new_id("bench-agent")
    raw_ms: list[float] = []
    oracle_ms: list[float] = []
    connect_ms: list[float] = []
    list_ms: list[float] = []
    call_ms: list[float] = []
    per_call_overhead: list[float] = []
    try:
        t0 = time.monotonic()
        with Sandbox(sandbox_request(bench, tasks[0], typesense=False, run_id=run)) as sb:
            assert sb.handle is not None
            handle = sb.handle
            url = handle.servers["retail"]
            print(f"sandbox ready in {time.monotonic() - t0:.2f} s; {len(tasks)} tasks")
            for task in tasks:
                golden: list[tuple[str, dict[str, Any]]] = []
                for c in bench.effective_init(task).golden_tool_interactions:
                    if c.tool:
                        golden.append((c.tool, dict(c.parameters)))
                await asyncio.to_thread(reseed, handle, bench, task)
                t = time.perf_counter()
                await replay_calls(url, golden, handle.server_headers)
                raw = (time.perf_counter() - t) * 1000
                await asyncio.to_thread(reseed, handle, bench, task)
                t = time.perf_counter()
                traj = await run_attempt_agent("oracle", task, bench, url, handle.server_headers)
                full = (time.perf_counter() - t) * 1000
                got = state_hash(await asyncio.to_thread(dump_dsn, handle.pg.admin_dsn("retail"), "retail"))
                if got != traces[task.id]["golden_state_hash"]:
                    raise SystemExit(f"{task.id}: oracle missed the golden hash")
                raw_ms.append(raw)
                oracle_ms.append(full)
                connect_ms.append(traj.timings["connect"] * 1000)
                list_ms.append(traj.timings["list_tools"] * 1000)
                call_ms.extend(c.latency_ms for c in traj.tool_calls)
                per_call_overhead.append((full - raw) / max(len(golden), 1))
            async with mcp_client(url) as client:
                tools = [mcp_tool_to_openai(t) for t in await list_all_tools(client)]
    finally:
        sweep(run=run)
    print("raw golden replay per task     ", ms(raw_ms))
    print("oracle attempt per task        ", ms(oracle_ms))
    print("  of which session open        ", ms(connect_ms))
    print("  of which tools/list          ", ms(list_ms))
    print("  tool call latency (recorded) ", ms(call_ms))
    print("loop overhead per golden call  ", ms(per_call_overhead))
    return tools


class _Stub(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out as separate writes

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        data = json.dumps(
            {
                "id": "x",
                "object": "chat.completion",
                "created": 0,
                "model": "m",
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "tool_calls",
                        "message": {
                            "role": "assistant",
                            "content": None,
                            "tool_calls": [
                                {
                                    "id": "c",
                                    "type": "function",
                                    "function": {"name": "get_order", "arguments": '{"order_id": "ORD-1"}'},
                                }
                            ],
                        },
                    }
                ],
                "usage": {"prompt_tokens": 9000, "completion_tokens": 30, "total_tokens": 9030},
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


async def chat_overhead(bench: Benchmark, n_calls: int, tools: list[dict[str, Any]]) -> None:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Stub)
    threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        cfg = RoleConfig(base_url=f"http://127.0.0.1:{httpd.server_address[1]}/v1", model="m", api_key="k")
        task = next(t for t in bench.tasks if t.domain == "retail")
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": bench.agents["think"].system_instructions},
            {"role": "system", "content": bench.scenario_of(task).bot_instructions},
        ]
        for i in range(9):
            messages.append({"role": "user", "content": f"message {i} " * 20})
            messages.append({"role": "assistant", "content": f"reply {i} " * 20})
        lat: list[float] = []
        async with LLMClient(cfg) as client:
            for _ in range(n_calls):
                t = time.perf_counter()
                await client.chat(messages, tools=tools)
                lat.append((time.perf_counter() - t) * 1000)
        print(f"LLMClient.chat, {len(messages)} messages, {len(tools)} tools ", ms(lat[5:]))
    finally:
        httpd.shutdown()
        httpd.server_close()


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", type=int, default=10)
    ap.add_argument("--chat-calls", type=int, default=200)
    args = ap.parse_args()
    bench = load_benchmark(default_root())
    tools = await loop_overhead(bench, args.tasks)
    await chat_overhead(bench, args.chat_calls, tools)


if __name__ == "__main__":
    asyncio.run(main())
