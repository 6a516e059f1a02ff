"""The tool proxy against tiny local MCP servers (low-level `Server` on
uvicorn, 127.0.0.1): routing, allow-list, reserved names, timeouts, size cap,
tokens, overrides, recording, the admin API. No Docker needed; the same
behaviour against real sandboxes is in tests/integration/sandbox/test_proxy_sandbox.py."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import socket
import time
from collections.abc import Iterator
from typing import Any

import anyio
import httpx
import mcp_types as types
import pytest
from fake_upstream import FakeUpstream

from sandbox import (
    AdminClient,
    ProxyCall,
    ProxyError,
    ProxyServer,
    RegisterRequest,
    Registration,
    ToolPolicy,
    Upstream,
    proxy_client,
    upstream_client,
)
from sandbox.proxy import calls as proxy_calls
from sandbox.proxy import relay
from sandbox.proxy.clients import server_tools, tool_json


@pytest.fixture(scope="module")
def upstreams() -> Iterator[dict[str, FakeUpstream]]:
    fakes = {
        "alpha": FakeUpstream(
            "alpha", ["a_echo", "a_sleep", "a_fail", "a_inband", "a_admin", "__reserved__init"]
        ),
        "beta": FakeUpstream("beta", ["b_echo", "__reserved__effects"]),
    }
    yield fakes
    for f in fakes.values():
        f.stop()


@pytest.fixture(scope="module", params=[True, False], ids=["relay", "sdk"])
def proxy(request: pytest.FixtureRequest) -> Iterator[ProxyServer]:
    """Every test runs against both call paths: the fast relay and the SDK's Server + Client."""
    with ProxyServer(
        call_timeout=5.0, max_request_bytes=64 * 1024, admin_port=0, fast_path=request.param
    ) as p:
        yield p


def _req(
    attempt_id: str,
    upstreams: dict[str, str],
    allowed_tools: list[str] | None = None,
    overrides: dict[str, str] | None = None,
    *,
    arg_overrides: dict[str, dict[str, str]] | None = None,
    call_timeout: float | None = None,
) -> RegisterRequest:
    policy = ToolPolicy(
        allowed_tools=allowed_tools, overrides=overrides or {}, arg_overrides=arg_overrides or {}
    )
    return RegisterRequest(
        attempt_id=attempt_id,
        upstreams={d: Upstream(url=u) for d, u in upstreams.items()},
        policy=policy,
        call_timeout=call_timeout,
    )


def _urls(fakes: dict[str, FakeUpstream]) -> dict[str, str]:
    return {name: f.url for name, f in fakes.items()}


async def _call(reg: Registration, tool: str, args: dict[str, Any] | None = None) -> types.CallToolResult:
    async with proxy_client(reg) as client:
        return await client.call_tool(tool, args or {})


def _text(result: types.CallToolResult) -> str:
    return "".join(c.text for c in result.content if isinstance(c, types.TextContent))


async def test_merges_upstreams_and_refuses_reserved_and_unlisted(
    proxy: ProxyServer, upstreams: dict[str, FakeUpstream], monkeypatch: pytest.MonkeyPatch
) -> None:
    reg = await proxy.aregister(
        _req("att-allow", _urls(upstreams), allowed_tools=["b_echo", "a_echo", "a_fail", "a_inband"])
    )
    assert reg.tools == ["b_echo", "a_echo", "a_fail", "a_inband"]
    alpha, beta = upstreams["alpha"], upstreams["beta"]
    before = (len(alpha.received), len(beta.received))
    through_sdk: list[str] = []
    forward = proxy_calls.forward_call

    async def counting_forward(attempt: Any, name: str, arguments: Any) -> types.CallToolResult:
        through_sdk.append(name)
        return await forward(attempt, name, arguments)

    monkeypatch.setattr(proxy_calls, "forward_call", counting_forward)
    async with proxy_client(reg) as client:
        listed = [t.name for t in (await client.list_tools()).tools]
        assert listed == ["b_echo", "a_echo", "a_fail", "a_inband"]
        # routed to the server that offers each tool
        echo = await client.call_tool("a_echo", {"x": "1"})
        assert json.loads(_text(echo))["server"] == "alpha"
        assert json.loads(_text(await client.call_tool("b_echo", {"x": "2"})))["server"] == "beta"
        # upstream isError survives; in-band {"error": ...} replies pass unchanged as normal results
        failed = await client.call_tool("a_fail", {})
        assert failed.is_error and _text(failed) == "boom"
        inband = await client.call_tool("a_inband", {})
        assert not inband.is_error
        assert json.loads(_text(inband)) == {"error": "Tool execution failed: nope", "tool": "a_inband"}
        # listed upstream but not allow-listed, reserved, or unknown: refused, never forwarded
        for name in ("a_admin", "__reserved__init", "__reserved__effects", "nope"):
            refused = await client.call_tool(name, {})
            assert refused.is_error and _text(refused) == f"Unknown tool: '{name}'"
    assert (len(alpha.received), len(beta.received)) == (before[0] + 3, before[1] + 1)
    assert not {"a_admin", "__reserved__init"} & set(alpha.received)
    assert "__reserved__effects" not in beta.received
    # the relay serves allow-listed calls itself; refusals always take the SDK path
    refusals = ["a_admin", "__reserved__init", "__reserved__effects", "nope"]
    assert through_sdk == (
        refusals if proxy.fast_path else ["a_echo", "b_echo", "a_fail", "a_inband", *refusals]
    )

    calls = proxy.unregister(reg.token)
    assert [(c.tool, c.outcome, c.is_error, c.domain) for c in calls] == [
        ("a_echo", "ok", False, "alpha"),
        ("b_echo", "ok", False, "beta"),
        ("a_fail", "tool_error", True, "alpha"),
        ("a_inband", "ok", False, "alpha"),
        ("a_admin", "refused", True, None),
        ("__reserved__init", "refused", True, None),
        ("__reserved__effects", "refused", True, None),
        ("nope", "refused", True, None),
    ]
    first = calls[0]
    assert first.arguments == {"x": "1"} and json.loads(first.result)["args"] == {"x": "1"}
    assert first.latency_ms > 0 and first.started_at.tzinfo is not None
    assert calls[0].started_at <= calls[1].started_at


async def test_no_allow_list_lists_everything_but_reserved(
    proxy: ProxyServer, upstreams: dict[str, FakeUpstream]
) -> None:
    reg = await proxy.aregister(_req("att-all", _urls(upstreams), allowed_tools=None))
    try:
        assert reg.tools == ["a_echo", "a_sleep", "a_fail", "a_inband", "a_admin", "b_echo"]
        refused = await _call(reg, "__reserved__init")
        assert refused.is_error and "__reserved__init" not in upstreams["alpha"].received
    finally:
        await proxy.aunregister(reg.token)


async def test_overrides_replace_descriptions(proxy: ProxyServer, upstreams: dict[str, FakeUpstream]) -> None:
    reg = await proxy.aregister(
        _req(
            "att-over",
            {"alpha": upstreams["alpha"].url},
            ["a_echo", "a_fail"],
            {"a_echo": "scenario words"},
            arg_overrides={"a_fail": {"x": "scenario arg words"}},
        )
    )
    try:
        async with proxy_client(reg) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
        assert tools["a_echo"].description == "scenario words"
        assert tools["a_echo"].input_schema["properties"]["x"]["description"] == "upstream words"
        assert tools["a_fail"].description == "alpha:a_fail"
        assert tools["a_fail"].input_schema["properties"]["x"]["description"] == "scenario arg words"
    finally:
        await proxy.aunregister(reg.token)


async def test_call_timeout_returns_error_result_and_session_survives(
    proxy: ProxyServer, upstreams: dict[str, FakeUpstream]
) -> None:
    reg = await proxy.aregister(_req("att-slow", {"alpha": upstreams["alpha"].url}, call_timeout=0.3))
    async with proxy_client(reg) as client:
        t = time.monotonic()
        slow = await client.call_tool("a_sleep", {"x": "5"})
        assert time.monotonic() - t < 3
        assert slow.is_error and "timed out after 0.3s" in _text(slow)
        again = await client.call_tool("a_echo", {"x": "after"})
        assert not again.is_error and json.loads(_text(again))["args"] == {"x": "after"}
    calls = await proxy.aunregister(reg.token)
    assert [(c.tool, c.outcome) for c in calls] == [("a_sleep", "timeout"), ("a_echo", "ok")]
    assert 250 < calls[0].latency_ms < 3000


async def test_tokens_are_required_and_scoped(proxy: ProxyServer, upstreams: dict[str, FakeUpstream]) -> None:
    reg_a = await proxy.aregister(_req("att-a", {"alpha": upstreams["alpha"].url}))
    reg_b = await proxy.aregister(_req("att-b", {"beta": upstreams["beta"].url}))
    assert reg_a.token != reg_b.token and len(reg_a.token) >= 40
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    headers = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2026-07-28"}
    async with httpx.AsyncClient(timeout=10) as http:
        for auth in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Basic {reg_a.token}"}):
            r = await http.post(proxy.url, json=body, headers={**headers, **auth})
            assert r.status_code == 401 and r.headers["www-authenticate"].startswith("Bearer")
        r = await http.post(f"http://127.0.0.1:{proxy.port}/a/not-a-token/mcp", json=body, headers=headers)
        assert r.status_code == 401
        # path token and header token must agree
        r = await http.post(reg_a.path_url, json=body, headers={**headers, **reg_b.headers})
        assert r.status_code == 401
        r = await http.post(
            f"http://127.0.0.1:{proxy.port}/other", json=body, headers={**headers, **reg_a.headers}
        )
        assert r.status_code == 404
    # a 2025-era MCP session opened with one token is unknown to the other
    init = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "0"},
        },
    }
    accept = {"Accept": headers["Accept"]}
    async with httpx.AsyncClient(timeout=10) as http:
        r = await http.post(proxy.url, json=init, headers={**accept, **reg_a.headers})
        assert r.status_code == 200
        session = {"mcp-session-id": r.headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"}
        r = await http.post(proxy.url, json=body, headers={**accept, **session, **reg_b.headers})
        assert r.status_code == 404
        r = await http.post(proxy.url, json=body, headers={**accept, **session, **reg_a.headers})
        assert r.status_code == 200 and "a_echo" in r.text
    # each token sees only its own attempt's tools
    async with proxy_client(reg_a) as a, proxy_client(reg_b) as b:
        assert "b_echo" not in [t.name for t in (await a.list_tools()).tools]
        assert [t.name for t in (await b.list_tools()).tools] == ["b_echo"]
        assert (await a.call_tool("b_echo", {})).is_error
        assert (await b.call_tool("a_echo", {})).is_error
    # the path form works with no header at all
    async with upstream_client(reg_b.path_url) as c:
        assert json.loads(_text(await c.call_tool("b_echo", {"x": "p"})))["server"] == "beta"
    await proxy.aunregister(reg_a.token)
    # an unregistered token stops working at once; the other attempt is untouched
    async with httpx.AsyncClient(timeout=10) as http:
        r = await http.post(proxy.url, json=body, headers={**headers, **reg_a.headers})
        assert r.status_code == 401
    assert len(proxy.calls(reg_b.token)) == 2
    with pytest.raises(ProxyError):
        proxy.calls(reg_a.token)
    await proxy.aunregister(reg_b.token)


async def test_oversize_request_refused(proxy: ProxyServer, upstreams: dict[str, FakeUpstream]) -> None:
    reg = await proxy.aregister(_req("att-big", {"alpha": upstreams["alpha"].url}))
    big = "x" * (proxy.max_request_bytes + 1)
    async with proxy_client(reg) as client:
        with pytest.raises(Exception):  # noqa: B017 - the SDK surfaces the HTTP 413 as an error
            await client.call_tool("a_echo", {"x": big})
        ok = await client.call_tool("a_echo", {"x": "small"})
        assert not ok.is_error
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "a_echo", "arguments": {"x": big}},
        }
    )
    headers = {
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2026-07-28",
        **reg.headers,
    }
    async with httpx.AsyncClient(timeout=10) as http:
        r = await http.post(proxy.url, content=body, headers=headers)
        assert r.status_code == 413

        async def chunks() -> Any:  # no Content-Length: the streamed body is counted
            for i in range(0, len(body), 8192):
                yield body[i : i + 8192].encode()

        r = await http.post(proxy.url, content=chunks(), headers=headers)
        assert r.status_code == 413
    calls = await proxy.aunregister(reg.token)
    assert [c.arguments["x"] for c in calls] == ["small"]  # refused requests never reached the tool


async def test_legacy_sessions_are_served(proxy: ProxyServer, upstreams: dict[str, FakeUpstream]) -> None:
    """A 2025-era client (initialize handshake, session id) gets the same checks and recording."""
    reg = await proxy.aregister(_req("att-legacy", {"alpha": upstreams["alpha"].url}, ["a_echo", "a_fail"]))
    async with proxy_client(reg, mode="legacy") as client:
        assert client.protocol_version != "2026-07-28"
        assert [t.name for t in (await client.list_tools()).tools] == ["a_echo", "a_fail"]
        assert json.loads(_text(await client.call_tool("a_echo", {"x": "l"})))["args"] == {"x": "l"}
        assert (await client.call_tool("a_fail", {})).is_error
        assert _text(await client.call_tool("a_admin", {})) == "Unknown tool: 'a_admin'"
    calls = await proxy.aunregister(reg.token)
    assert [(c.tool, c.outcome) for c in calls] == [
        ("a_echo", "ok"),
        ("a_fail", "tool_error"),
        ("a_admin", "refused"),
    ]


async def test_a_pre_listed_upstream_costs_the_registration_no_request(
    proxy: ProxyServer, upstreams: dict[str, FakeUpstream]
) -> None:
    """Tools listed when the sandbox was prepared (`Upstream.tools`): the registration sends
    the upstream nothing, lists and routes the same tools, and returns them as tools/list
    answers them; the SDK path's client connects on its first call (a legacy session too)."""
    alpha = upstreams["alpha"]
    listing = await asyncio.to_thread(server_tools, alpha.url, {})
    policy = ToolPolicy(allowed_tools=["a_echo", "a_fail"], overrides={"a_echo": "scenario words"})
    request = RegisterRequest(
        attempt_id="att-prelisted", upstreams={"alpha": Upstream(url=alpha.url, tools=listing)}, policy=policy
    )
    before = len(alpha.secrets)
    reg = await proxy.aregister(request)
    assert len(alpha.secrets) == before  # not one request at registration
    listed_now = await proxy.aregister(
        request.model_copy(update={"upstreams": {"alpha": Upstream(url=alpha.url)}})
    )
    assert reg.tools == listed_now.tools == ["a_echo", "a_fail"]
    assert reg.listing == listed_now.listing
    try:
        async with proxy_client(reg) as client:
            answered = (await client.list_tools()).tools
            assert reg.listing == [tool_json(t) for t in answered]
            assert answered[0].description == "scenario words"
            assert json.loads(_text(await client.call_tool("a_echo", {"x": "1"})))["args"] == {"x": "1"}
            assert (await client.call_tool("a_fail", {})).is_error
        async with proxy_client(reg, mode="legacy") as client:  # always the SDK path
            assert json.loads(_text(await client.call_tool("a_echo", {"x": "2"})))["args"] == {"x": "2"}
    finally:
        calls = await proxy.aunregister(reg.token)
        await proxy.aunregister(listed_now.token)
    assert [(c.tool, c.outcome) for c in calls] == [
        ("a_echo", "ok"),
        ("a_fail", "tool_error"),
        ("a_echo", "ok"),
    ]


async def test_a_pre_listed_upstream_that_is_down_fails_its_calls_as_upstream_errors(
    proxy: ProxyServer, upstreams: dict[str, FakeUpstream]
) -> None:
    listing = await asyncio.to_thread(server_tools, upstreams["alpha"].url, {})
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}/mcp"
    reg = await proxy.aregister(
        RegisterRequest(attempt_id="att-down", upstreams={"alpha": Upstream(url=dead, tools=listing)})
    )
    try:
        for mode in ("2026-07-28", "legacy"):  # the relay's connections and the SDK path's lazy client
            async with proxy_client(reg, mode=mode) as client:
                failed = await client.call_tool("a_echo", {"x": "1"})
                assert failed.is_error and "did not answer" in _text(failed)
    finally:
        calls = await proxy.aunregister(reg.token)
    assert [c.outcome for c in calls] == ["upstream_error", "upstream_error"]


def test_bad_registrations_are_clear_errors(proxy: ProxyServer, upstreams: dict[str, FakeUpstream]) -> None:
    urls = _urls(upstreams)
    with pytest.raises(ProxyError, match="no upstream offers"):
        proxy.register(_req("att-x", urls, ["a_echo", "missing_tool"]))
    with pytest.raises(ProxyError, match="reserved"):
        proxy.register(_req("att-x", urls, ["a_echo", "__reserved__init"]))
    with pytest.raises(ProxyError, match="not listed"):
        proxy.register(_req("att-x", urls, ["a_echo"], {"b_echo": "words"}))
    with pytest.raises(ProxyError, match="more than one upstream"):
        proxy.register(_req("att-x", {"one": urls["alpha"], "two": urls["alpha"]}, ["a_echo"]))
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}/mcp"
    with pytest.raises(ProxyError, match="cannot reach the alpha server"):
        proxy.register(_req("att-x", {"alpha": dead}))
    assert "att-x" not in proxy.attempts()


def test_admin_api(proxy: ProxyServer, upstreams: dict[str, FakeUpstream]) -> None:
    assert proxy.admin_url and proxy.admin_token and proxy.admin_url != f"http://127.0.0.1:{proxy.port}"
    with AdminClient(proxy.admin_url, "wrong") as bad, pytest.raises(ProxyError, match="401"):
        bad.attempts()
    # the admin API is not on the agent-facing port
    r = httpx.post(
        f"http://127.0.0.1:{proxy.port}/attempts", headers={"Authorization": f"Bearer {proxy.admin_token}"}
    )
    assert r.status_code == 404
    with AdminClient(proxy.admin_url, proxy.admin_token) as admin:
        reg = admin.register(
            _req("att-admin", {"beta": upstreams["beta"].url}, ["b_echo"], {"b_echo": "via admin"})
        )
        assert "att-admin" in admin.attempts()
        result = anyio.run(_call, reg, "b_echo", {"x": "adm"})
        assert not result.is_error
        assert [c.tool for c in admin.calls(reg.token)] == ["b_echo"]
        assert admin.gone(reg.token) is None
        calls = admin.unregister(reg.token)
        assert isinstance(calls[0], ProxyCall) and calls[0].arguments == {"x": "adm"}
        with pytest.raises(ProxyError, match="404"):
            admin.calls(reg.token)
        with pytest.raises(ProxyError, match="404"):
            admin.gone(reg.token)
        with pytest.raises(ProxyError, match="400"):
            admin.register(_req("att-bad", {"beta": upstreams["beta"].url}, ["nope"]))


def test_close_stops_everything(upstreams: dict[str, FakeUpstream]) -> None:
    proxy = ProxyServer().start()
    assert proxy.running
    reg = proxy.register(_req("att-close", {"beta": upstreams["beta"].url}))
    proxy.close()
    proxy.close()  # idempotent
    with pytest.raises(httpx.ConnectError):
        httpx.post(reg.url, headers=reg.headers, timeout=2)
    with pytest.raises(ProxyError, match="not running"):
        proxy.register(_req("att-late", {"beta": upstreams["beta"].url}))
    assert not proxy.running and proxy._host._thread is not None and not proxy._host._thread.is_alive()


async def test_upstream_headers_go_with_every_request(
    proxy: ProxyServer, upstreams: dict[str, FakeUpstream]
) -> None:
    """The sandbox's upstream secret is sent on every request the proxy makes
    (registration, listing, calls on either path); the agent never sees it."""
    alpha = upstreams["alpha"]
    before = len(alpha.secrets)
    secret = {"X-Tbx-Upstream-Secret": "s3cret"}
    reg = await proxy.aregister(
        RegisterRequest(
            attempt_id="att-secret",
            upstreams={"alpha": Upstream(url=alpha.url, headers=secret)},
            policy=ToolPolicy(allowed_tools=["a_echo"]),
        )
    )
    try:
        async with proxy_client(reg) as client:
            await client.list_tools()
            assert not (await client.call_tool("a_echo", {"x": "1"})).is_error
            assert not (await client.call_tool("a_echo", {"x": "2"})).is_error
    finally:
        await proxy.aunregister(reg.token)
    sent = alpha.secrets[before:]
    assert len(sent) >= 3 and set(sent) == {"s3cret"}, sent


async def test_a_lost_sandbox_relays_nothing(proxy: ProxyServer, upstreams: dict[str, FakeUpstream]) -> None:
    """What the sandbox watch does on a loss: every later request is refused
    with the cause (503), nothing reaches the upstream, `gone` names it."""
    alpha = upstreams["alpha"]
    reg = await proxy.aregister(_req("att-gone", {"alpha": alpha.url}, ["a_echo"]))
    try:
        assert not (await _call(reg, "a_echo", {"x": "alive"})).is_error
        assert proxy.gone(reg.token) is None
        received, recorded = len(alpha.received), len(proxy.calls(reg.token))
        loop = proxy._host._loop
        assert loop is not None
        on_gone = proxy.registry.watch_callback(loop)  # the watch's callback
        on_gone(
            hashlib.sha256(reg.token.encode()).hexdigest(),
            "sandbox gone: its server-alpha container was removed",
            None,
        )
        deadline = time.monotonic() + 5
        while proxy.gone(reg.token) is None:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert proxy.gone(reg.token) == "sandbox gone: its server-alpha container was removed"
        body = {
            "jsonrpc": "2.0",
            "id": 7,
            "method": "tools/call",
            "params": {"name": "a_echo", "arguments": {}},
        }
        headers = {
            **reg.headers,
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": "2026-07-28",
        }
        async with httpx.AsyncClient(timeout=5) as http:
            for url in (reg.url, reg.path_url):
                r = await http.post(url, json=body, headers=headers)
                assert r.status_code == 503
                assert "sandbox gone: its server-alpha container was removed" in r.json()["error"]["message"]
        with pytest.raises(Exception):  # noqa: B017 - the SDK surfaces the 503 as an error
            await _call(reg, "a_echo", {"x": "late"})
        assert len(alpha.received) == received and len(proxy.calls(reg.token)) == recorded
    finally:
        await proxy.aunregister(reg.token)


@pytest.mark.skipif(os.geteuid() != 0, reason="binding a socket to a device needs root")
async def test_connections_are_bound_to_the_upstreams_interface(
    proxy: ProxyServer, upstreams: dict[str, FakeUpstream]
) -> None:
    """A sandbox's bridge gone, its address must not be reached another way:
    connections bound to a device that does not exist fail, on both paths."""
    alpha = upstreams["alpha"]
    bound = RegisterRequest(attempt_id="att-lo", upstreams={"alpha": Upstream(url=alpha.url, interface="lo")})
    reg = await proxy.aregister(bound)
    try:
        assert not (await _call(reg, "a_echo", {"x": "via lo"})).is_error
    finally:
        await proxy.aunregister(reg.token)
    gone = bound.model_copy(
        update={
            "attempt_id": "att-nodev",
            "upstreams": {"alpha": Upstream(url=alpha.url, interface="tbx-nosuchdev")},
        }
    )
    received = len(alpha.received)
    with pytest.raises(ProxyError, match="cannot reach the alpha server"):
        await proxy.aregister(gone)
    with pytest.raises(relay.UpstreamError, match="cannot connect"):
        await relay.UpstreamPool(alpha.url, "tbx-nosuchdev").post(b"{}", [])
    assert len(alpha.received) == received
