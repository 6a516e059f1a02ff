"""`python -m llama_cpp.server` (llama-cpp-python) as a child process on 127.0.0.1, for
benchmarks/local_model.py and tests/integration/local_model/: started with the command
docs/local-model.md gives, waited for until it answers `GET /v1/models`, stopped with its
process group. Its output goes to `log`.

    server = LlamaServer(python, model_path, n_ctx=32768, log=Path("server.log")).start()
    server.url            # http://127.0.0.1:PORT (the OpenAI API under /v1)
    server.stop()
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import httpx


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LlamaServer:
    """`python -m llama_cpp.server` on 127.0.0.1, its log in `log`; started, waited for, stopped."""

    def __init__(self, python: str, model: str, n_ctx: int, log: Path, port: int | None = None):
        self.python, self.model, self.n_ctx, self.log = python, model, n_ctx, log
        self.port = port or free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.started_in = 0.0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        return [
            self.python,
            "-m",
            "llama_cpp.server",
            "--model",
            self.model,
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--n_ctx",
            str(self.n_ctx),
            "--logits_all",
            "false",
            "--chat_format",
            "chatml-function-calling",
        ]

    def start(self, timeout: float = 600) -> LlamaServer:
        t0 = time.monotonic()
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                self.command(), stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        while time.monotonic() - t0 < timeout:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the model server exited ({self.proc.returncode}); see {self.log}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(self.url + "/v1/models", timeout=5).status_code == 200:
                    self.started_in = time.monotonic() - t0
                    return self
            time.sleep(1)
        raise RuntimeError(f"the model server did not answer in {timeout:.0f} s; see {self.log}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


def alias_of(server_url: str) -> str:
    data = httpx.get(server_url + "/v1/models", timeout=30).json()
    return str(data["data"][0]["id"])
