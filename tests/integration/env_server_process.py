"""`tbx env serve` for the OpenEnv integration tests: the server process (a free loopback
port, its log and output directory, started until it listens, stopped by SIGTERM) serving
`TASK`, its models config, its /ready waited on, and the simulated user behind it: a
local OpenAI-compatible stub on 127.0.0.1 that closes the chat on its first reply."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from server_process import REPO, free_port, launch, terminate

TASK = "sandbox_external_retail_group1.py:test_case_ST002_001"  # 2 golden calls: create + update a ticket
CLOSING = "Thanks, that's all. ###STOP###"


class UserStub:
    """An OpenAI-compatible endpoint on 127.0.0.1: chat completions that answer every
    customer turn with `reply`; `GET /models` answers `models_status` (404: not implemented,
    as many servers do) and every request `auth_status` instead when that is set."""

    def __init__(self, reply: str = CLOSING, models_status: int = 404, auth_status: int | None = None):
        self.reply = reply
        self.requests: list[dict[str, Any]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if auth_status is not None:
                    self._send(auth_status, {"error": {"message": "invalid api key"}})
                elif models_status == 200:
                    self._send(200, {"object": "list", "data": [{"id": "user-m", "object": "model"}]})
                else:
                    self._send(models_status, {"error": {"message": "not found"}})

            def do_POST(self) -> None:
                if auth_status is not None:
                    self.rfile.read(int(self.headers["Content-Length"]))
                    self._send(auth_status, {"error": {"message": "invalid api key"}})
                    return
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append(body)
                message = {"role": "assistant", "content": outer.reply}
                self._send(
                    200,
                    {
                        "id": f"c{len(outer.requests)}",
                        "object": "chat.completion",
                        "created": 0,
                        "model": body["model"],
                        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                        "usage": {"prompt_tokens": 50, "completion_tokens": 8, "total_tokens": 58},
                    },
                )

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def write_config(path: Path, base_url: str) -> Path:
    path.write_text(
        json.dumps(
            {
                "defaults": {"base_url": base_url, "api_key": "k", "max_retries": 0},
                "user": {"model": "user-m"},
            }
        )
    )
    return path


@dataclass
class Served:
    url: str
    out: Path
    proc: subprocess.Popen[str]
    log: Path

    @property
    def run_id(self) -> str:
        return str(json.loads((self.out / "manifest.json").read_text())["run_id"])

    def ready(self) -> httpx.Response:
        return httpx.get(self.url + "/ready", timeout=15)


def start_server(
    tmp: Path,
    config: Path,
    dataset: Path,
    *extra: str,
    env: dict[str, str] | None = None,
    cwd: Path = REPO,
    wait_listen: bool = True,
) -> Served:
    port = free_port()
    out = tmp / "out"
    log = tmp / "server.log"
    args = [
        sys.executable,
        "-m",
        "bench.cli",
        "env",
        "serve",
        "--dataset",
        str(dataset),
        "--config",
        str(config),
        "--port",
        str(port),
        "--tasks",
        TASK,
        "--out",
        str(out),
        *extra,
    ]
    proc = launch(args, log, env, cwd)
    served = Served(f"http://127.0.0.1:{port}", out, proc, log)
    if not wait_listen:
        return served
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"server exited: {log.read_text()[-3000:]}"
        try:
            httpx.get(served.url + "/health", timeout=2)
            return served
        except httpx.HTTPError:
            time.sleep(0.5)
    stop_server(served)
    pytest.fail(f"server did not listen within 90 s: {log.read_text()[-3000:]}")


def stop_server(served: Served) -> None:
    terminate(served.proc, 60)


def wait_ready(served: Served, timeout: float = 300) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    body: dict[str, Any] = {}
    while time.monotonic() < deadline:
        r = served.ready()
        body = r.json()
        if r.status_code == 200:
            return body
        assert r.status_code == 503, r.text
        time.sleep(1)
    pytest.fail(f"/ready still 503 after {timeout} s: {body}")


def wait_failing(served: Served, names: set[str], timeout: float = 60) -> dict[str, Any]:
    """The /ready body once every component in `names` is named failing (503)."""
    deadline = time.monotonic() + timeout
    body: dict[str, Any] = {}
    while time.monotonic() < deadline:
        r = served.ready()
        body = r.json()
        assert r.status_code == 503, body
        if names <= set(body["failing"]):
            return body
        time.sleep(0.5)
    pytest.fail(f"/ready never named {names} failing: {body}")
