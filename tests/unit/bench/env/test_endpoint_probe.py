"""`/ready`'s model-endpoint check (bench.env.endpoint_probe) against real HTTP servers on
127.0.0.1 that behave like the endpoints met in practice: a full OpenAI-compatible API, one
without `GET /models`, one answering 404 for everything, one rejecting the key, a vLLM-like
server addressed without `/v1`, and an address where nothing listens."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from bench.env.endpoint_probe import ProbeCache, probe
from bench.llm.config import RoleConfig

COMPLETION = {
    "id": "c1",
    "object": "chat.completion",
    "created": 0,
    "model": "m",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "p"}, "finish_reason": "length"}],
}


class Stub:
    """`routes`: (method, path) -> (status, body); anything else answers `fallback`."""

    def __init__(self, routes: dict[tuple[str, str], tuple[int, Any]], fallback: int = 404):
        self.requests: list[tuple[str, str, dict[str, Any] | None]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self, method: str) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length)) if length else None
                outer.requests.append((method, self.path, body))
                status, payload = routes.get((method, self.path), (fallback, {"error": "not found"}))
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self._answer("GET")

            def do_POST(self) -> None:
                self._answer("POST")

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.root = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def stubs() -> Iterator[list[Stub]]:
    made: list[Stub] = []
    yield made
    for s in made:
        s.close()


def role(base_url: str, **kw: Any) -> RoleConfig:
    return RoleConfig(base_url=base_url, model="m", **kw)


async def test_a_listed_model_is_ready_without_spending_a_token(stubs: list[Stub]) -> None:
    s = Stub({("GET", "/v1/models"): (200, {"object": "list", "data": [{"id": "m"}]})})
    stubs.append(s)
    result = await probe("user", role(s.root + "/v1"), 5)
    assert result.ok, result.detail
    assert [r[0] for r in s.requests] == ["GET"]


async def test_a_model_the_endpoint_does_not_list_is_not_ready(stubs: list[Stub]) -> None:
    s = Stub({("GET", "/v1/models"): (200, {"object": "list", "data": [{"id": "other"}]})})
    stubs.append(s)
    result = await probe("judge", role(s.root + "/v1"), 5)
    assert not result.ok and "'m'" in result.detail and "other" in result.detail


@pytest.mark.parametrize("status", [404, 405, 501])
async def test_no_models_route_is_proven_by_a_one_token_completion(stubs: list[Stub], status: int) -> None:
    s = Stub({("GET", "/v1/models"): (status, {}), ("POST", "/v1/chat/completions"): (200, COMPLETION)})
    stubs.append(s)
    result = await probe("user", role(s.root + "/v1"), 5)
    assert result.ok, result.detail
    assert "1-token completion" in result.detail
    method, path, body = s.requests[-1]
    assert (method, path) == ("POST", "/v1/chat/completions")
    assert body is not None and body["max_tokens"] == 1 and body["model"] == "m"


async def test_a_path_answering_404_for_everything_is_not_ready(stubs: list[Stub]) -> None:
    s = Stub({})
    stubs.append(s)
    result = await probe("user", role(s.root + "/v1"), 5)
    assert not result.ok
    assert "/v1/chat/completions answers HTTP 404" in result.detail and "base_url" in result.detail


async def test_a_base_url_without_v1_is_not_ready_and_says_so(stubs: list[Stub]) -> None:
    vllm = {
        ("GET", "/v1/models"): (200, {"object": "list", "data": [{"id": "m"}]}),
        ("POST", "/v1/chat/completions"): (200, COMPLETION),
    }
    s = Stub(vllm)
    stubs.append(s)
    result = await probe("user", role(s.root), 5)
    assert not result.ok
    assert "does base_url end with /v1?" in result.detail


@pytest.mark.parametrize("where", ["models", "completions"])
async def test_a_rejected_key_names_the_role_and_its_variable_never_the_key(
    stubs: list[Stub], where: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    routes = (
        {("GET", "/v1/models"): (401, {"error": "bad key"})}
        if where == "models"
        else {("GET", "/v1/models"): (404, {}), ("POST", "/v1/chat/completions"): (403, {})}
    )
    s = Stub(routes)
    stubs.append(s)
    monkeypatch.setenv("TBX_TEST_USER_KEY", "sk-secret-value-123")
    result = await probe("user", role(s.root + "/v1", api_key_env="TBX_TEST_USER_KEY"), 5)
    assert not result.ok
    assert result.detail.startswith("user:") and "authentication" in result.detail
    assert "TBX_TEST_USER_KEY" in result.detail
    assert "sk-secret-value-123" not in result.detail


async def test_nothing_listening_names_the_address() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    result = await probe("judge", role(f"http://127.0.0.1:{port}/v1"), 5)
    assert not result.ok
    assert f"cannot reach 127.0.0.1:{port}" in result.detail and result.detail.startswith("judge:")


async def test_an_unresolvable_host_names_the_address() -> None:
    result = await probe("user", role("http://no-such-host.invalid/v1"), 5)
    assert not result.ok and "cannot reach no-such-host.invalid" in result.detail


async def test_a_proven_endpoint_is_not_probed_again_but_a_failing_one_is(stubs: list[Stub]) -> None:
    s = Stub({("GET", "/v1/models"): (501, {}), ("POST", "/v1/chat/completions"): (200, COMPLETION)})
    stubs.append(s)
    cache = ProbeCache()
    cfg = role(s.root + "/v1")
    assert (await cache.check("user", cfg, 5)).ok
    assert (await cache.check("user", cfg, 5)).ok
    assert len(s.requests) == 2  # one GET, one POST: the second check was remembered
    down = Stub({})
    stubs.append(down)
    bad = role(down.root + "/v1")
    assert not (await cache.check("user", bad, 5)).ok
    assert not (await cache.check("user", bad, 5)).ok
    assert len(down.requests) == 4
