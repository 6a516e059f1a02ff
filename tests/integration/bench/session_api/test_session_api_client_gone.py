"""A `/session_create` whose client gave up is cancelled (issue 38, burst): in a burst the
creates queue behind the boots, the trainer's client times out (600 s) and retries under
a new id; the create it left must not stay queued and boot a set nobody takes (in a
144-create burst on a busy machine that was 49 extra sets, a third more boots).
"""

from __future__ import annotations

import signal
import sys
import time
from pathlib import Path

import docker
import httpx
import pytest
from pg_support import DEMO_PACK
from server_process import free_port, launch, terminate

from bench.dataset import load_benchmark

pytestmark = pytest.mark.docker

TASK = "demo_retail.py:test_ret_defective_speaker_refund"


def run_containers(run_id: str) -> list[str]:
    client = docker.from_env()
    try:
        found = client.containers.list(all=True, filters={"label": f"tbx.run={run_id}"}, ignore_removed=True)
        return [c.name for c in found]
    finally:
        client.close()


def test_a_create_whose_client_left_boots_nothing(tmp_path: Path) -> None:
    bench = load_benchmark(DEMO_PACK, strict=False)
    task = bench.task(TASK)
    server = bench.scenario_of(task).servers[0]
    body = {
        "session_id": "gone",
        "server_config": {server: bench.effective_init(task).raw},
        "available_tools": list(bench.scenario_of(task).tool_names),
        "timeout": 570.0,
    }
    port = free_port()
    log = tmp_path / "server.log"
    args = ["session-proxy", "--dataset", str(DEMO_PACK), "--port", str(port), "--warm", "0"]
    proc = launch([sys.executable, "-m", "bench.cli", *args, "--golden-cache", str(tmp_path / "golden")], log)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while "ready on" not in log.read_text():
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.3)
        run_id = log.read_text().split("(run ", 1)[1].split(")", 1)[0]
        # The client gives up long before a cold set (and the task's golden replay) is up.
        with pytest.raises(httpx.ReadTimeout), httpx.Client(timeout=httpx.Timeout(30.0, read=0.5)) as c:
            c.post(f"{url}/session_create", json=body)
        # Its create is cancelled: whatever of its boots had started is closed by its owner.
        deadline = time.monotonic() + 90
        while run_containers(run_id) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert run_containers(run_id) == []
        with httpx.Client(base_url=url, timeout=600) as c:
            # nothing of it is held: the id is free, and no session is listed
            r = c.post("/session_info", json={"session_id": "gone"})
            assert r.status_code == 400 and r.json()["content"]["value"] == "Session does not exist"
            r = c.post("/session_create", json=body)
            assert r.status_code == 200, r.text
            assert c.post("/session_destroy", json={"session_id": "gone"}).status_code == 200
        assert run_containers(run_id) == []
    finally:
        assert terminate(proc, 120) == 128 + signal.SIGTERM
