"""The tbx servers the trainer benchmarks drive (benchmarks/long_haul.py,
benchmarks/burst.py): `tbx session-proxy` and `tbx env serve` on the embedded demo pack,
each a subprocess on a free loopback port with its output in a log file; and the
demo pack's tasks as the trainer sends them.

`tbx env serve` needs a simulated user: benchmarks/openenv_load.py's stub, which closes
the chat on its first reply (an episode is then reset, the golden calls, one message).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[1]
PACK = REPO / "bench" / "packs" / "demo"
sys.path.insert(0, str(REPO))

from bench.dataset import load_benchmark  # noqa: E402


@dataclass
class DemoTask:
    id: str
    server: str
    config: dict[str, Any]  # server_config: {server: the task's init entry}
    tools: list[str]  # available_tools: the scenario's tools
    calls: list[tuple[str, dict[str, Any]]]  # the golden calls, the client's tool calls


def demo_tasks(domain: str = "retail") -> list[DemoTask]:
    bench = load_benchmark(PACK, strict=False)
    out = []
    for task in bench.tasks:
        if task.domain != domain:
            continue
        init = bench.effective_init(task)
        scenario = bench.scenario_of(task)
        server = scenario.servers[0]  # one server per Bench task
        out.append(
            DemoTask(
                task.id,
                server,
                {server: init.raw},
                list(scenario.tool_names),
                [(name, dict(args)) for name, args in bench.golden_calls(task)],
            )
        )
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Served:
    kind: str  # "session-proxy" or "env"
    proc: subprocess.Popen[str]
    url: str
    log: Path
    run_id: str
    stub: Any = None  # env serve's simulated user

    def stop(self, timeout: float = 300) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.stub is not None:
            self.stub.shutdown()
        return self.proc.returncode


def _launch(cmd: list[str], log: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        cmd,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO), "TESTCONTAINERS_RYUK_DISABLED": "true"},
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        text=True,
    )


def start_session_proxy(workdir: Path, warm: int, *extra: str) -> Served:
    port = free_port()
    log = workdir / "session-proxy.log"
    cmd = [sys.executable, "-m", "bench.cli", "session-proxy", "--dataset", str(PACK)]
    cmd += ["--port", str(port), "--warm", str(warm), "--golden-cache", str(workdir / "golden"), *extra]
    proc = _launch(cmd, log)
    deadline = time.monotonic() + 600
    while True:
        text = log.read_text()
        if "ready on" in text:
            run_id = text.split("(run ", 1)[1].split(")", 1)[0]
            return Served("session-proxy", proc, f"http://127.0.0.1:{port}", log, run_id)
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise SystemExit(f"session-proxy did not start: {text[-2000:]}")
        time.sleep(0.3)


def start_env_serve(workdir: Path, tasks: list[DemoTask], max_episodes: int, *extra: str) -> Served:
    sys.path.insert(0, str(REPO / "benchmarks"))
    from openenv_load import closing_user

    stub, base_url = closing_user()
    config = workdir / "models.json"
    config.write_text(
        json.dumps({"defaults": {"base_url": base_url, "api_key": "k"}, "user": {"model": "user-m"}})
    )
    port = free_port()
    out = workdir / "env-out"
    log = workdir / "env-serve.log"
    cmd = [sys.executable, "-m", "bench.cli", "env", "serve", "--dataset", str(PACK), "--config", str(config)]
    cmd += ["--port", str(port), "--out", str(out), "--tasks", ",".join(t.id for t in tasks)]
    cmd += ["--max-episodes", str(max_episodes), "--golden-cache", str(workdir / "golden"), "--skip-rubrics"]
    cmd += list(extra)
    proc = _launch(cmd, log)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 900
    while True:
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            stub.shutdown()
            raise SystemExit(f"env serve not ready: {log.read_text()[-2000:]}")
        try:
            if httpx.get(url + "/ready", timeout=10).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        time.sleep(1)
    run_id = json.loads((out / "manifest.json").read_text())["run_id"]
    return Served("env", proc, url, log, run_id, stub)


def pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    s = sorted(values)
    return s[min(len(s) - 1, round(q * (len(s) - 1)))]
