"""`tbx env serve`'s app behind bench.web_guard: the real EnvServer app on a
real uvicorn server (127.0.0.1; lifespan off, so no sandbox is ever booted)
and real clients. What a web page can send (a foreign Origin on the
WebSocket or HTTP, a text/plain POST, a rebound Host) never reaches an
episode; a local client reaches the routes as before."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import uvicorn
from pg_support import DEMO_PACK
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from bench.dataset import load_benchmark
from bench.env.host import EnvHost, EnvOptions
from bench.env.server import EnvServer
from bench.llm.config import ModelsConfig
from bench.web_guard import GuardPolicy

PACK = DEMO_PACK


@pytest.fixture
def served(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[tuple[EnvServer, str]]:
    bench = load_benchmark(PACK)
    host = EnvHost(bench, ModelsConfig(), bench.tasks[:1], EnvOptions(out=tmp_path / "out"))
    env = EnvServer(host)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(
        uvicorn.Config(env.app(getattr(request, "param", None)), lifespan="off", log_level="warning")
    )
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    yield env, f"127.0.0.1:{sock.getsockname()[1]}"
    server.should_exit = True
    thread.join(10)


def test_a_web_page_cannot_drive_the_env_server(served: tuple[EnvServer, str]) -> None:
    env, addr = served
    task = next(iter(env.host.tasks.values()))
    with pytest.raises(InvalidStatus) as refused:
        connect(f"ws://{addr}/ws", origin="http://evil.example", open_timeout=10)  # type: ignore[arg-type]
    assert refused.value.response.status_code == 403
    form = httpx.post(
        f"http://{addr}/reset",
        content=f'{{"test_uid": "{task.uid}"}}',
        headers={"Content-Type": "text/plain"},
    )
    assert form.status_code == 415
    foreign = httpx.post(
        f"http://{addr}/reset", json={"test_uid": task.uid}, headers={"Origin": "http://evil.example"}
    )
    assert foreign.status_code == 403
    rebound = httpx.get(f"http://{addr}/metadata", headers={"Host": "evil.example"})
    assert rebound.status_code == 421 and "dataset" not in rebound.text
    assert env.host.episodes == {} and env.http_episodes == {}
    # a local client passes the guard: the route answers (here: no warm pool yet, since nothing started)
    assert httpx.get(f"http://{addr}/health").json() == {"status": "healthy"}
    reset = httpx.post(f"http://{addr}/reset", json={"test_uid": "no-such-task"})
    assert reset.status_code == 400 and "unknown task" in reset.json()["detail"]
    with connect(f"ws://{addr}/ws", open_timeout=10) as ws:
        ws.send('{"type": "state"}')
        assert json.loads(ws.recv(timeout=10))["type"] == "state"


@pytest.mark.parametrize("served", [GuardPolicy(token="env-token")], indirect=True)
def test_the_env_server_token(served: tuple[EnvServer, str]) -> None:
    _, addr = served
    assert httpx.get(f"http://{addr}/metadata").status_code == 401
    with pytest.raises(InvalidStatus):
        connect(f"ws://{addr}/ws", open_timeout=10)
    ok = httpx.get(f"http://{addr}/metadata", headers={"Authorization": "Bearer env-token"})
    assert ok.status_code == 200 and ok.json()["tasks"] == 1
