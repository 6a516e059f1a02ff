"""The proxy's direct path (`ProxyServer.acall` / `calls.direct_call`): an
in-process caller's tool call posted from its own loop straight to the route's
server. Its rules are the other paths' (`admit`, `refuse_if_gone`), checked
here on their own, then against tiny local MCP servers on both proxy kinds
(fast path: direct; fast_path=False: the SDK path on the proxy's loop), side by
side with the same calls made by an MCP client through the proxy's endpoint."""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import Iterator
from typing import Any, cast

import httpx
import pytest
from fake_upstream import FakeUpstream

from sandbox import (
    Loss,
    ProxyError,
    ProxyServer,
    RegisterRequest,
    SandboxGoneError,
    ToolPolicy,
    Upstream,
    UpstreamPool,
    proxy_client,
)
from sandbox.proxy import calls, relay
from sandbox.proxy.calls import CallReply
from sandbox.proxy.registered import RegisteredAttempt
from sandbox.proxy.routes import Route

SCHEMA = {"type": "object"}


# ---- the rules, pure ------------------------------------------------------------------
def _attempt(*tools: str) -> RegisteredAttempt:
    attempt = RegisteredAttempt("att-pure", "digest", call_timeout=5.0)
    for t in tools:
        tool = calls.types.Tool(name=t, input_schema=SCHEMA)
        attempt.routes[t] = Route("alpha", "http://127.0.0.1:1/mcp", {}, cast(Any, None), tool)
    return attempt


def test_admit_routes_allowed_calls_and_records_nothing() -> None:
    attempt = _attempt("a_echo")
    assert attempt.routes["a_echo"] is calls.admit(attempt, "a_echo", {"x": "1"})
    assert attempt.snapshot() == []


def test_admit_refuses_unknown_reserved_and_unsendable_calls_and_records_them() -> None:
    attempt = _attempt("a_echo")
    for name in ("a_admin", "__reserved__init", "nope"):
        refused = calls.admit(attempt, name, {"x": "1"})
        assert isinstance(refused, calls.types.CallToolResult) and refused.is_error
        assert calls.text_of(refused) == f"Unknown tool: '{name}'"
    lone = "\ud83d"
    bad_name = calls.admit(attempt, "a" + lone, {"k": lone})
    assert isinstance(bad_name, calls.types.CallToolResult)
    unsendable = calls.admit(attempt, "a_echo", {"x": "smile " + lone})
    assert isinstance(unsendable, calls.types.CallToolResult)
    assert calls.text_of(unsendable) == relay.UNICODE_PROBLEM
    recorded = [(c.tool, c.arguments, c.outcome, c.is_error, c.domain) for c in attempt.snapshot()]
    assert recorded == [
        ("a_admin", {"x": "1"}, "refused", True, None),
        ("__reserved__init", {"x": "1"}, "refused", True, None),
        ("nope", {"x": "1"}, "refused", True, None),
        ("a\ufffd", {"k": "\ufffd"}, "refused", True, None),  # recordable: U+FFFD for the surrogate
        ("a_echo", {"x": "smile \ufffd"}, "refused", True, "alpha"),
    ]
    json.dumps([c.model_dump(mode="json") for c in attempt.snapshot()]).encode()  # every record writes


def test_nothing_is_relayed_once_the_sandbox_is_gone() -> None:
    attempt = _attempt("a_echo")
    calls.refuse_if_gone(attempt)
    assert attempt.lost() is None
    attempt.loss = Loss("sandbox gone: its postgres container was killed")
    with pytest.raises(SandboxGoneError, match="postgres container was killed; the attempt cannot go on"):
        calls.refuse_if_gone(attempt)


def test_the_direct_request_is_one_the_relay_accepts() -> None:
    body, headers = relay.call_request(calls.DIRECT_ID, "get_order", {"id": "ü"})
    parsed = relay.tool_call(body)
    assert parsed is not None and parsed[:3] == (calls.DIRECT_ID, "get_order", {"id": "ü"})
    message = json.loads(body)
    assert message["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] == relay.PROTOCOL
    sent = {k.lower(): v for k, v in headers}
    assert sent["mcp-protocol-version"] == relay.PROTOCOL and sent["mcp-name"] == "get_order"
    assert sent["mcp-method"] == "tools/call" and "authorization" not in sent
    assert dict(relay.call_request(1, "tööl", {})[1])["mcp-name"].startswith("=?base64?")
    with pytest.raises(UnicodeEncodeError):
        relay.call_request(1, "t", {"x": "\udc00"})


def test_a_made_reply_is_a_jsonrpc_result() -> None:
    reply = CallReply.made(7, calls.timeout_result("t", 2))
    assert reply.status == 200 and reply.content_type == "application/json"
    assert json.loads(reply.body) == reply.message
    assert reply.message is not None and reply.message["id"] == 7 and reply.message["result"]["isError"]


# ---- against local MCP servers ----------------------------------------------------------
@pytest.fixture(scope="module")
def upstreams() -> Iterator[dict[str, FakeUpstream]]:
    fakes = {
        "alpha": FakeUpstream(
            "alpha", ["a_echo", "a_sleep", "a_fail", "a_inband", "a_admin", "__reserved__init"]
        ),
        "beta": FakeUpstream("beta", ["b_echo"]),
    }
    yield fakes
    for f in fakes.values():
        f.stop()


@pytest.fixture(scope="module", params=[True, False], ids=["direct", "sdk"])
def proxy(request: pytest.FixtureRequest) -> Iterator[ProxyServer]:
    with ProxyServer(call_timeout=5.0, fast_path=request.param) as p:
        yield p


SECRET = {"X-Tbx-Upstream-Secret": "s3cret"}
ALLOWED = ["b_echo", "a_echo", "a_sleep", "a_fail", "a_inband"]


def _req(
    attempt_id: str, fakes: dict[str, FakeUpstream], call_timeout: float | None = None
) -> RegisterRequest:
    return RegisterRequest(
        attempt_id=attempt_id,
        upstreams={d: Upstream(url=f.url, headers=SECRET) for d, f in fakes.items()},
        policy=ToolPolicy(allowed_tools=ALLOWED),
        call_timeout=call_timeout,
    )


# (tool, arguments): allowed calls of every kind, then refusals that must reach no server
SCRIPT: list[tuple[str, dict[str, Any]]] = [
    ("a_echo", {"x": "1"}),
    ("b_echo", {"x": "2"}),
    ("a_fail", {}),
    ("a_inband", {}),
    ("a_admin", {}),
    ("__reserved__init", {"config": {}}),
    ("nope", {}),
    ("a_echo", {"x": "lone \ud800"}),
]


def _record(c: Any) -> tuple[Any, ...]:
    return (c.tool, c.arguments, c.result, c.is_error, c.outcome, c.domain)


def _text(reply: CallReply) -> str:
    assert reply.status == 200 and reply.message is not None, reply.body
    content = reply.message["result"]["content"]
    return "".join(c["text"] for c in content if c["type"] == "text")


async def test_direct_calls_are_recorded_like_calls_through_the_endpoint(
    proxy: ProxyServer, upstreams: dict[str, FakeUpstream]
) -> None:
    alpha, beta = upstreams["alpha"], upstreams["beta"]
    via_mcp = await proxy.aregister(_req("att-mcp", upstreams))
    async with proxy_client(via_mcp) as client, httpx.AsyncClient(timeout=10) as http:
        for tool, args in SCRIPT:
            if relay.sendable(args):
                await client.call_tool(tool, args)
            else:  # no MCP client sends a lone surrogate; the JSON escape \\ud800 does
                body = {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "tools/call",
                    "params": {"name": tool, "arguments": args, "_meta": relay.CALL_META},
                }
                headers = {**dict(relay.call_request(1, tool, {})[1]), **via_mcp.headers}
                r = await http.post(via_mcp.url, content=json.dumps(body), headers=headers)
                assert relay.reply_summary(relay.reply_message(r.content, r.headers["content-type"])) == (
                    relay.UNICODE_PROBLEM,
                    True,
                    "tool_error",
                ), (r.status_code, r.text)
    expected = [_record(c) for c in await proxy.aunregister(via_mcp.token)]

    reg = await proxy.aregister(_req("att-direct", upstreams))
    received = (list(alpha.received), list(beta.received))
    secrets = len(alpha.secrets) + len(beta.secrets)
    pools: dict[str, UpstreamPool] = {}
    try:
        replies = [await proxy.acall(reg.token, tool, args, pools) for tool, args in SCRIPT]
    finally:
        for pool in pools.values():
            await pool.aclose()
    recorded = [_record(c) for c in await proxy.aunregister(reg.token)]
    assert recorded == expected
    assert [r[4] for r in recorded] == [
        "ok",
        "ok",
        "tool_error",
        "ok",
        "refused",
        "refused",
        "refused",
        "refused",
    ]
    assert json.loads(_text(replies[0])) == {"server": "alpha", "tool": "a_echo", "args": {"x": "1"}}
    assert replies[2].message is not None and replies[2].message["result"]["isError"] is True
    assert _text(replies[5]) == "Unknown tool: '__reserved__init'"
    assert _text(replies[7]) == relay.UNICODE_PROBLEM
    # only the four allowed calls reached a server, each with the sandbox's secret
    assert alpha.received[len(received[0]) :] == ["a_echo", "a_fail", "a_inband"]
    assert beta.received[len(received[1]) :] == ["b_echo"]
    sent = (alpha.secrets + beta.secrets)[secrets:]
    assert set(sent) == {"s3cret"} and len(sent) >= 4
    # the direct path used the caller's connections; the SDK path the proxy's own clients
    assert set(pools) == ({alpha.url, beta.url} if proxy.fast_path else set())


async def test_call_timeout_and_an_abandoned_call_are_recorded_as_timeouts(
    proxy: ProxyServer, upstreams: dict[str, FakeUpstream]
) -> None:
    reg = await proxy.aregister(_req("att-slow", upstreams, call_timeout=0.3))
    pools: dict[str, UpstreamPool] = {}
    try:
        t = time.monotonic()
        slow = await proxy.acall(reg.token, "a_sleep", {"x": "5"}, pools)
        assert time.monotonic() - t < 3
        assert "timed out after 0.3s" in _text(slow)
        assert proxy.calls(reg.token)[-1].outcome == "timeout"
        # the caller stops waiting first (the Session API's own limit): sent, so recorded
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(proxy.acall(reg.token, "a_sleep", {"x": "0.25"}, pools), 0.05)
        deadline = time.monotonic() + 5
        while len(proxy.calls(reg.token)) < 2:  # the SDK path records on the proxy's loop
            assert time.monotonic() < deadline
            await asyncio.sleep(0.01)
        abandoned = proxy.calls(reg.token)[1]
        assert (abandoned.outcome, abandoned.is_error, abandoned.domain) == ("timeout", True, "alpha")
        assert "abandoned by its caller" in abandoned.result
        again = await proxy.acall(reg.token, "a_echo", {"x": "after"}, pools)
        assert json.loads(_text(again))["args"] == {"x": "after"}
    finally:
        for pool in pools.values():
            await pool.aclose()
        calls_made = await proxy.aunregister(reg.token)
    assert [c.outcome for c in calls_made] == ["timeout", "timeout", "ok"]


async def test_a_lost_sandbox_or_unknown_token_relays_nothing(
    proxy: ProxyServer, upstreams: dict[str, FakeUpstream]
) -> None:
    alpha = upstreams["alpha"]
    reg = await proxy.aregister(_req("att-gone", upstreams))
    pools: dict[str, UpstreamPool] = {}
    try:
        assert _text(await proxy.acall(reg.token, "a_echo", {"x": "alive"}, pools))
        received, recorded = len(alpha.received), len(proxy.calls(reg.token))
        loop = proxy._host._loop
        assert loop is not None
        proxy.registry.watch_callback(loop)(
            hashlib.sha256(reg.token.encode()).hexdigest(),
            "sandbox gone: its postgres container was killed",
            None,
        )
        deadline = time.monotonic() + 5
        while proxy.gone(reg.token) is None:
            assert time.monotonic() < deadline
            await asyncio.sleep(0.01)
        for tool in ("a_echo", "nope"):
            with pytest.raises(SandboxGoneError, match="postgres container was killed"):
                await proxy.acall(reg.token, tool, {}, pools)
        assert len(alpha.received) == received and len(proxy.calls(reg.token)) == recorded
    finally:
        for pool in pools.values():
            await pool.aclose()
        await proxy.aunregister(reg.token)
    with pytest.raises(ProxyError, match="unknown token"):
        await proxy.acall(reg.token, "a_echo", {}, pools)
