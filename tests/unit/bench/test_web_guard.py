"""bench.web_guard against a real uvicorn server (127.0.0.1) with an HTTP and a
WebSocket route, driven by real clients (httpx, websockets, a raw socket):
what a hostile web page can send is refused with the documented status, and
what a local client sends passes."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from bench.web_guard import GuardPolicy, WebGuard, check_request, policy_from_args, token_from_env


class Target:
    """The guarded app: counts what reached it, so a refusal is seen to stop the request."""

    def __init__(self) -> None:
        self.reached: list[str] = []

    async def post(self, request: Request) -> JSONResponse:
        self.reached.append(f"POST {await request.body()!r}")
        return JSONResponse({"ok": True})

    async def get(self, request: Request) -> JSONResponse:
        self.reached.append("GET")
        return JSONResponse({"ok": True})

    async def ws(self, websocket: WebSocket) -> None:
        await websocket.accept()
        self.reached.append("WS")
        await websocket.send_text(await websocket.receive_text())
        await websocket.close()

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/reset", self.post, methods=["POST"]),
                Route("/health", self.get, methods=["GET"]),
                WebSocketRoute("/ws", self.ws),
            ]
        )


def serve(app: Any) -> tuple[uvicorn.Server, threading.Thread, int]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", ws="websockets-sansio"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline, "server did not start"
        time.sleep(0.01)
    return server, thread, sock.getsockname()[1]


@pytest.fixture
def guarded(request: pytest.FixtureRequest) -> Iterator[tuple[Target, int]]:
    policy: GuardPolicy = getattr(request, "param", GuardPolicy())
    target = Target()
    server, thread, port = serve(WebGuard(target.app(), policy))
    yield target, port
    server.should_exit = True
    thread.join(10)


def raw_request(port: int, head: str, body: bytes = b"") -> tuple[int, bytes]:
    """Send exactly these bytes (no client normalises Host or duplicates here); (status, body)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(head.replace("\n", "\r\n").encode() + b"\r\n" + body)
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    status = int(data.split(b" ", 2)[1])
    return status, data.split(b"\r\n\r\n", 1)[1]


# ---- HTTP ---------------------------------------------------------------------------------


def test_a_local_client_passes(guarded: tuple[Target, int]) -> None:
    target, port = guarded
    base = f"http://127.0.0.1:{port}"
    assert httpx.post(base + "/reset", json={"a": 1}).json() == {"ok": True}
    assert httpx.get(base + "/health").status_code == 200
    # localhost and [::1]-style names are loopback too; a charset parameter is still JSON
    r = httpx.post(
        base + "/reset",
        content=b"{}",
        headers={"Host": f"localhost:{port}", "Content-Type": "application/json; charset=utf-8"},
    )
    assert r.status_code == 200
    assert len(target.reached) == 3


def test_a_foreign_origin_is_refused_on_http(guarded: tuple[Target, int]) -> None:
    target, port = guarded
    base = f"http://127.0.0.1:{port}"
    for origin in ("http://evil.example", "null", f"http://localhost:{port}", "http://127.0.0.1:1"):
        r = httpx.post(base + "/reset", json={}, headers={"Origin": origin})
        assert r.status_code == 403, origin
        assert "cross-origin" in r.json()["detail"]
    # the server's own page (same origin) may post
    assert httpx.post(base + "/reset", json={}, headers={"Origin": base}).status_code == 200
    assert target.reached == ["POST b'{}'"]


def test_a_text_plain_post_is_refused(guarded: tuple[Target, int]) -> None:
    target, port = guarded
    base = f"http://127.0.0.1:{port}"
    for headers in (
        {"Content-Type": "text/plain"},
        {"Content-Type": "application/x-www-form-urlencoded"},
        {},
    ):
        r = httpx.post(base + "/reset", content=b'{"test_uid": "x"}', headers=headers)
        assert r.status_code == 415, headers
        assert "application/json" in r.json()["detail"]
    assert target.reached == []


def test_a_foreign_host_is_refused_against_dns_rebinding(guarded: tuple[Target, int]) -> None:
    target, port = guarded
    for host in ("evil.example", f"evil.example:{port}", "127.0.0.1.evil.example", "10.0.0.1", ""):
        status, body = raw_request(
            port,
            f"GET /health HTTP/1.1\nHost: {host}\nConnection: close\n",
        )
        assert status == 421, host
        assert b"Host" in body
    # no Host header at all (HTTP/1.0)
    status, _ = raw_request(port, "GET /health HTTP/1.0\n")
    assert status == 421
    # two Host headers: refused, whichever one a proxy would read
    status, _ = raw_request(
        port, f"GET /health HTTP/1.1\nHost: 127.0.0.1:{port}\nHost: evil.example\nConnection: close\n"
    )
    assert status == 400
    assert target.reached == []
    status, _ = raw_request(port, f"GET /health HTTP/1.1\nHost: [::1]:{port}\nConnection: close\n")
    assert status == 200


@pytest.mark.parametrize(
    "guarded",
    [GuardPolicy(allowed_hosts=("env.internal",), allowed_origins=("https://notebook.example",))],
    indirect=True,
)
def test_configured_hosts_and_origins_pass(guarded: tuple[Target, int]) -> None:
    target, port = guarded
    status, _ = raw_request(port, "GET /health HTTP/1.1\nHost: env.internal:8000\nConnection: close\n")
    assert status == 200
    body = b"{}"
    status, _ = raw_request(
        port,
        "POST /reset HTTP/1.1\nHost: env.internal\nOrigin: https://notebook.example:443\n"
        f"Content-Type: application/json\nContent-Length: {len(body)}\nConnection: close\n",
        body,
    )
    assert status == 200
    status, _ = raw_request(port, "GET /health HTTP/1.1\nHost: other.internal\nConnection: close\n")
    assert status == 421
    assert len(target.reached) == 2


@pytest.mark.parametrize("guarded", [GuardPolicy(token="s3cret-token")], indirect=True)
def test_a_token_is_required_when_configured(guarded: tuple[Target, int]) -> None:
    target, port = guarded
    base = f"http://127.0.0.1:{port}"
    for auth in (None, "Bearer wrong", "Basic s3cret-token", "Bearer s3cret-token-and-more", "Bearer"):
        headers = {"Authorization": auth} if auth else {}
        r = httpx.get(base + "/health", headers=headers)
        assert r.status_code == 401, auth
        assert r.headers["www-authenticate"] == "Bearer"
        assert "s3cret" not in r.text
    assert httpx.get(base + "/health", headers={"Authorization": "Bearer s3cret-token"}).status_code == 200
    assert target.reached == ["GET"]


# ---- WebSocket ----------------------------------------------------------------------------


def test_a_websocket_from_a_foreign_origin_is_refused(guarded: tuple[Target, int]) -> None:
    target, port = guarded
    url = f"ws://127.0.0.1:{port}/ws"
    with pytest.raises(InvalidStatus) as refused:
        connect(url, origin="http://evil.example", open_timeout=10)  # type: ignore[arg-type]
    assert refused.value.response.status_code == 403
    # a rebound name: the handshake by hand (the websockets client sets Host from the URL)
    status, _ = raw_request(
        port,
        "GET /ws HTTP/1.1\nHost: evil.example\nUpgrade: websocket\nConnection: Upgrade\n"
        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\nSec-WebSocket-Version: 13\n",
    )
    assert status == 403
    assert target.reached == []
    # a client without an Origin (not a browser), and the server's own page
    for origin in (None, f"http://127.0.0.1:{port}"):
        with connect(url, origin=origin, open_timeout=10) as ws:  # type: ignore[arg-type]
            ws.send("ping")
            assert ws.recv(timeout=10) == "ping"
    assert target.reached == ["WS", "WS"]


@pytest.mark.parametrize("guarded", [GuardPolicy(token="ws-token")], indirect=True)
def test_a_websocket_needs_the_token_when_configured(guarded: tuple[Target, int]) -> None:
    target, port = guarded
    url = f"ws://127.0.0.1:{port}/ws"
    with pytest.raises(InvalidStatus) as refused:
        connect(url, open_timeout=10)
    assert refused.value.response.status_code == 403
    assert target.reached == []
    with connect(url, additional_headers={"Authorization": "Bearer ws-token"}, open_timeout=10) as ws:
        ws.send("hi")
        assert ws.recv(timeout=10) == "hi"


# ---- the decision and the configuration ---------------------------------------------------


def test_the_decision_for_other_servers() -> None:
    policy = GuardPolicy()
    assert check_request("GET", {"Host": "127.0.0.2:80"}, policy) is None
    refusal = check_request("POST", {"Host": "localhost"}, policy)
    assert refusal is not None and refusal.status == 415
    assert check_request("POST", {"Host": "localhost"}, GuardPolicy(require_json=False)) is None
    refusal = check_request("GET", [("Host", "localhost"), ("Origin", "a"), ("origin", "b")], policy)
    assert refusal is not None and refusal.status == 400


def test_bad_configuration_gets_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError, match="without scheme or port"):
        policy_from_args(["http://env.internal"])
    with pytest.raises(ValueError, match="without scheme or port"):
        policy_from_args(["env.internal:8000"])
    with pytest.raises(ValueError, match="scheme://host"):
        policy_from_args(None, ["notebook.example"])
    monkeypatch.delenv("TBX_TEST_TOKEN", raising=False)
    with pytest.raises(ValueError, match=r"TBX_TEST_TOKEN.*unset or empty"):
        token_from_env("TBX_TEST_TOKEN")
    monkeypatch.setenv("TBX_TEST_TOKEN", " tok ")
    assert policy_from_args(["Env.Internal", "[::2]"], token_env="TBX_TEST_TOKEN") == GuardPolicy(
        allowed_hosts=("env.internal", "::2"), token="tok"
    )
