"""`tbx session-proxy` for the Session API's integration tests: the server process (a
free loopback port, its log, started until its ready line, stopped by SIGTERM) and a
client written from the wire spec (specs/thinkingbox-session-proxy.md §2-§4): a
traced task's create, its calls, the reply's value and a session's effects."""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from server_process import free_port, launch, terminate

from bench.dataset import Benchmark


@dataclass
class Served:
    url: str
    proc: subprocess.Popen[str]
    log: Path
    run_id: str

    def client(self, **kw: Any) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=600, **kw)


def start(tmp: Path, dataset: Path, *extra: str, env: dict[str, str] | None = None) -> Served:
    port = free_port()
    log = tmp / "server.log"
    proc = launch(
        [
            sys.executable,
            "-m",
            "bench.cli",
            "session-proxy",
            "--dataset",
            str(dataset),
            "--port",
            str(port),
            "--golden-cache",
            str(tmp / "golden"),
            *extra,
        ],
        log,
        env,
    )
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"server exited: {log.read_text()[-3000:]}"
        text = log.read_text()
        if "ready on" in text:
            run_id = text.split("(run ", 1)[1].split(")", 1)[0]
            return Served(f"http://127.0.0.1:{port}", proc, log, run_id)
        time.sleep(0.3)
    stop(Served("", proc, log, ""))
    pytest.fail(f"no ready line within 180 s: {log.read_text()[-3000:]}")


def stop(served: Served) -> int:
    return terminate(served.proc, 120)


@contextlib.contextmanager
def serving(tmp: Path, dataset: Path, *extra: str) -> Iterator[Served]:
    """`start`, then at the end `stop`, which a served `tbx session-proxy` must answer as a
    SIGTERM'd process does (its log's tail in the failure)."""
    s = start(tmp, dataset, *extra)
    try:
        yield s
    finally:
        code = stop(s)
        assert code == 128 + signal.SIGTERM, s.log.read_text()[-3000:]


# ---- the client, from the spec -------------------------------------------------------
@dataclass
class Task:
    task_id: str
    server: str
    config: dict[str, Any]
    tools: list[str]
    trace: dict[str, Any]


def traced_task(bench: Benchmark, server: str, index: int = 0) -> Task:
    lines = (bench.root / "traces" / f"{server}.jsonl").read_text().splitlines()
    trace = json.loads(lines[index])
    task = bench.task(trace["task_id"])
    return Task(
        task.id, server, {server: bench.effective_init(task).raw}, bench.scenario_of(task).tool_names, trace
    )


def create(c: httpx.Client, sid: str, task: Task, **extra: Any) -> httpx.Response:
    body = {"session_id": sid, "server_config": task.config, "available_tools": task.tools, "timeout": 270.0}
    return c.post("/session_create", json={**body, **extra})


def call(c: httpx.Client, sid: str, tool: str, arguments: Any) -> httpx.Response:
    return c.post("/call_tool", json={"session_id": sid, "tool_name": tool, "arguments": arguments})


def value(r: httpx.Response, status: int = 200) -> Any:
    assert r.status_code == status, r.text[:1000]
    body = r.json()
    assert body["success"] is (status == 200)
    assert body["content"]["type"] in ("string", "object")
    return body["content"]["value"]


def effects(c: httpx.Client, sid: str, server: str) -> dict[str, Any]:
    out = value(c.post("/get_effects", json={"session_id": sid}))
    assert list(out) == [server]
    return dict(out[server])
