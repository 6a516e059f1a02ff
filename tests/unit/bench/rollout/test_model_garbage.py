"""Whatever the model emits is the model's responsibility: a stub OpenAI-compatible
model on 127.0.0.1 sends every kind of garbage tool call (lone UTF-16 surrogates,
invalid JSON, non-object and huge arguments, unknown tools, ...) through the real
agent loop, the real tool proxy (fast relay and SDK paths) and a real MCP
server. Each becomes a tool error the model sees; the attempt goes on and ends
on its merits, never as a system error, and everything recorded serialises."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import mcp_types as types
import pytest
import uvicorn
from mcp.server.lowlevel.server import Server
from mcp.server.transport_security import TransportSecuritySettings
from starlette.types import Receive, Scope, Send

from bench.llm.client import LLMClient
from bench.llm.config import RoleConfig
from bench.rollout.agent_loop import run_loop
from bench.rollout.agents import LLMAgent, ScriptedUser
from bench.rollout.conversation import LoopSpec
from sandbox import DEFAULT_MAX_REQUEST_BYTES, MAX_ARGUMENT_BYTES, ProxyServer, RegisterRequest
from sandbox.proxy.limits import MAX_REPLY_BYTES

SCHEMA = {"type": "object", "properties": {"order_id": {"type": "string"}}}


def _serve(app: Any) -> tuple[uvicorn.Server, threading.Thread, int]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline, "stub server did not start"
        time.sleep(0.01)
    return server, thread, sock.getsockname()[1]


class Upstream:
    """A real MCP server with one tool, `find_order`; remembers what reached it."""

    def __init__(self) -> None:
        self.received: list[dict[str, Any]] = []

        async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
            return types.ListToolsResult(tools=[types.Tool(name="find_order", input_schema=SCHEMA)])

        async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
            self.received.append(dict(params.arguments or {}))
            if (params.arguments or {}).get("order_id") == "all":  # a reply over the proxy's cap
                text = json.dumps({"orders": ["o" * 1000] * 1024})
                return types.CallToolResult(content=[types.TextContent(type="text", text=text)])
            text = json.dumps({"error": "order not found"})
            return types.CallToolResult(content=[types.TextContent(type="text", text=text)])

        app = Server("shop", on_list_tools=list_tools, on_call_tool=call_tool).streamable_http_app(
            streamable_http_path="/mcp",
            json_response=True,
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        )
        self.server, self.thread, port = _serve(app)
        self.url = f"http://127.0.0.1:{port}/mcp"

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(10)


class StubModel:
    """An OpenAI-compatible /v1/chat/completions answering raw bytes from a script
    (so it can emit JSON no well-behaved serialiser would), then `<DONE>`; keeps
    every request body it received, byte for byte."""

    def __init__(self) -> None:
        self.script: list[bytes] = []
        self.requests: list[bytes] = []

        async def app(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] != "http":
                return
            body = b""
            while True:
                message = await receive()
                body += message.get("body", b"")
                if not message.get("more_body"):
                    break
            self.requests.append(body)
            reply = self.script.pop(0) if self.script else _completion('{"content": "Sorry. <DONE>"}')
            headers = [(b"content-type", b"application/json"), (b"content-length", str(len(reply)).encode())]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": reply})

        self.server, self.thread, port = _serve(app)
        self.base_url = f"http://127.0.0.1:{port}/v1"

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(10)


def _completion(message: str) -> bytes:
    """A chat completion whose message object is `message`: raw JSON text, spliced in as is."""
    return (
        '{"id": "x", "object": "chat.completion", "created": 0, "model": "stub", "choices": '
        '[{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", ' + message[1:] + "}]}"
    ).encode()


def _tool_call(name: str, arguments: str) -> bytes:
    """`name` and `arguments` are JSON value texts (e.g. '"find_order"' or 'null')."""
    return _completion(
        '{"content": null, "tool_calls": [{"id": "c", "type": "function", '
        f'"function": {{"name": {name}, "arguments": {arguments}}}}}]}}'
    )


def _s(text: str) -> str:
    """`text` as a JSON string literal (escaping only quotes and backslashes)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


HUGE = "x" * (DEFAULT_MAX_REQUEST_BYTES + 10)
# (case, name JSON, arguments JSON, what the model must be told)
GARBAGE: list[tuple[str, str, str, str]] = [
    ("escaped lone surrogate", '"find_order"', _s('{"order_id": "\\ud83d"}'), "surrogate"),
    ("surrogate key", '"find_order"', _s('{"\\ud800": "1"}'), "surrogate"),
    ("surrogate in name", '"find_\\ud800"', _s("{}"), "Unknown tool"),
    ("invalid JSON", '"find_order"', _s('{"order_id": '), "not valid JSON"),
    ("trailing garbage", '"find_order"', _s('{"order_id": "1"} xx'), "not valid JSON"),
    ("NaN", '"find_order"', _s('{"order_id": NaN}'), "not valid JSON"),
    ("huge int", '"find_order"', _s('{"order_id": 1' + "0" * 5000 + "}"), "not valid JSON"),
    ("deep nesting", '"find_order"', _s("[" * 20_000 + "]" * 20_000), "not valid JSON"),
    ("array", '"find_order"', _s("[1, 2]"), "must be a JSON object"),
    ("string", '"find_order"', _s('"order 1"'), "must be a JSON object"),
    ("null", '"find_order"', _s("null"), "must be a JSON object"),
    ("list, not text", '"find_order"', "[1]", "must be a JSON object"),
    ("number, not text", '"find_order"', "7", "must be a JSON object"),
    ("huge", '"find_order"', _s(json.dumps({"order_id": HUGE})), "too large"),
    (
        "over the per-call cap",
        '"find_order"',
        _s(json.dumps({"order_id": "x" * MAX_ARGUMENT_BYTES})),
        "over the limit of 64 KiB per call; nothing was sent",
    ),
    ("unknown tool", '"drop_tables"', _s("{}"), "Unknown tool"),
    ("empty name", '""', _s("{}"), "Unknown tool"),
    ("null name", "null", _s("{}"), "Unknown tool"),
]


@pytest.fixture(scope="module")
def upstream() -> Iterator[Upstream]:
    up = Upstream()
    yield up
    up.stop()


@pytest.fixture(scope="module")
def model() -> Iterator[StubModel]:
    m = StubModel()
    yield m
    m.stop()


@pytest.fixture(scope="module", params=[True, False], ids=["relay", "sdk"])
def proxy(request: pytest.FixtureRequest) -> Iterator[ProxyServer]:
    with ProxyServer(call_timeout=10.0, fast_path=request.param) as p:
        yield p


@pytest.mark.parametrize("case", GARBAGE, ids=[g[0] for g in GARBAGE])
async def test_model_garbage_is_a_tool_error_the_model_sees(
    case: tuple[str, str, str, str], upstream: Upstream, model: StubModel, proxy: ProxyServer
) -> None:
    _, name, arguments, told = case
    upstream.received.clear()
    model.requests.clear()
    model.script = [
        _tool_call(name, arguments),
        _tool_call('"find_order"', _s('{"order_id": "A1"}')),  # the attempt goes on
    ]
    reg = await proxy.aregister(RegisterRequest(attempt_id="att-garbage", upstreams={"shop": upstream.url}))
    client = LLMClient(
        RoleConfig(base_url=model.base_url, model="stub", api_key="k", max_retries=0), role="agent"
    )
    try:
        traj = await run_loop(
            LoopSpec(task_id="t:1", agent="llm", query="find my order"),
            LLMAgent(client),
            ScriptedUser(),
            reg.url,
            reg.headers,
        )
    finally:
        await client.aclose()
        calls = await proxy.aunregister(reg.token)

    assert traj.finish_reason == "done" and traj.error is None
    bad, good = traj.tool_calls
    assert bad.is_error and told in bad.result, bad.result
    assert not good.is_error and good.result == '{"error": "order not found"}'
    assert upstream.received == [{"order_id": "A1"}]  # the garbage never reached the server
    # the model was told, in a request that is valid UTF-8 JSON
    sent = json.loads(model.requests[1].decode("utf-8"))
    tool_replies = [m for m in sent["messages"] if m["role"] == "tool"]
    assert len(tool_replies) == 1 and told in tool_replies[0]["content"]
    # everything recorded serialises (the trajectory and the proxy's own record)
    json.loads(traj.model_dump_json())
    assert [c.arguments for c in calls if c.tool == "find_order"][-1] == {"order_id": "A1"}
    for c in calls:
        json.loads(c.model_dump_json())


async def test_arguments_over_the_cap_are_kept_as_a_marker_not_carried_in_every_request(
    upstream: Upstream, model: StubModel, proxy: ProxyServer
) -> None:
    """Issue 38: an agent writing 15 calls of 900 KiB per turn grew its trajectory to
    hundreds of MB and every later request to its model with it. A call over the tool
    proxy's per-call cap is refused before it is sent, and the conversation (what the
    model is sent next) and the trajectory keep a marker naming its size, not the text."""
    upstream.received.clear()
    model.requests.clear()
    big = _s(json.dumps({"order_id": "d" * (900 * 1024)}))
    calls = ", ".join(
        f'{{"id": "c{i}", "type": "function", "function": {{"name": "find_order", "arguments": {big}}}}}'
        for i in range(15)
    )
    model.script = [_completion('{"content": null, "tool_calls": [' + calls + "]}")]
    reg = await proxy.aregister(RegisterRequest(attempt_id="att-over-cap", upstreams={"shop": upstream.url}))
    client = LLMClient(
        RoleConfig(base_url=model.base_url, model="stub", api_key="k", max_retries=0), role="agent"
    )
    try:
        traj = await run_loop(
            LoopSpec(task_id="t:1", agent="llm", query="find my order"),
            LLMAgent(client),
            ScriptedUser(),
            reg.url,
            reg.headers,
        )
    finally:
        await client.aclose()
        await proxy.aunregister(reg.token)

    assert traj.finish_reason == "done" and traj.error is None
    assert upstream.received == []
    assert len(traj.tool_calls) == 15
    for call in traj.tool_calls:
        assert call.is_error and not call.via_mcp and "over the limit of 64 KiB per call" in call.result
        assert call.arguments is None
        assert json.loads(call.arguments_raw or "") == {
            "tbx_arguments_not_recorded": f"{len(json.loads(big).encode())} bytes, over the limit of 64 KiB per call"
        }
    second = json.loads(model.requests[1].decode("utf-8"))
    sent = [c["function"]["arguments"] for m in second["messages"] for c in m.get("tool_calls") or []]
    assert len(sent) == 15 and all("tbx_arguments_not_recorded" in a for a in sent)
    assert len(model.requests[1]) < 64 * 1024  # 15 × 900 KiB were not sent back to the model
    assert len(traj.model_dump_json()) < 64 * 1024


async def test_a_reply_over_the_cap_reaches_the_agent_cut_and_readable_on_every_path(
    upstream: Upstream, model: StubModel, proxy: ProxyServer
) -> None:
    """Issue 38: a cut reply must still be a tool result every MCP client accepts (the
    2026 schema's `resultType` included), never a client-side error that ends the attempt
    as a system error."""
    upstream.received.clear()
    model.script = [_tool_call('"find_order"', _s('{"order_id": "all"}'))]
    reg = await proxy.aregister(RegisterRequest(attempt_id="att-cut", upstreams={"shop": upstream.url}))
    client = LLMClient(
        RoleConfig(base_url=model.base_url, model="stub", api_key="k", max_retries=0), role="agent"
    )
    try:
        traj = await run_loop(
            LoopSpec(task_id="t:1", agent="llm", query="find my order"),
            LLMAgent(client),
            ScriptedUser(),
            reg.url,
            reg.headers,
        )
    finally:
        await client.aclose()
        calls = await proxy.aunregister(reg.token)
    assert traj.finish_reason == "done" and traj.error is None
    [call] = traj.tool_calls
    assert upstream.received == [{"order_id": "all"}] and call.via_mcp and not call.is_error
    assert (
        call.result.startswith('{"orders": ["ooo') and "[tbx: reply cut: the tool's reply was" in call.result
    )
    assert MAX_REPLY_BYTES < len(call.result.encode()) < MAX_REPLY_BYTES + 1024
    [recorded] = [c for c in calls if c.tool == "find_order"]
    assert "[tbx: reply cut:" in recorded.result and len(recorded.result.encode()) < MAX_REPLY_BYTES + 1024


async def test_raw_lone_surrogates_in_the_reply_become_replacement_characters(
    upstream: Upstream, model: StubModel, proxy: ProxyServer
) -> None:
    """A lone surrogate in the response JSON itself (not inside the arguments text)
    cannot be carried by any UTF-8 request or file: it becomes U+FFFD where it
    stands, and the call runs with that text, on its merits."""
    upstream.received.clear()
    model.script = [
        _completion(
            '{"content": "let me look \\udc00", "tool_calls": [{"id": "c", "type": "function", '
            '"function": {"name": "find_order", "arguments": "{\\"order_id\\": \\"\\ud83d\\"}"}}]}'
        )
    ]
    reg = await proxy.aregister(RegisterRequest(attempt_id="att-raw", upstreams={"shop": upstream.url}))
    client = LLMClient(
        RoleConfig(base_url=model.base_url, model="stub", api_key="k", max_retries=0), role="agent"
    )
    try:
        traj = await run_loop(
            LoopSpec(task_id="t:1", agent="llm", query="find my order"),
            LLMAgent(client),
            ScriptedUser(),
            reg.url,
            reg.headers,
        )
    finally:
        await client.aclose()
        await proxy.aunregister(reg.token)
    assert traj.finish_reason == "done"
    assert upstream.received == [{"order_id": "\ufffd"}]
    assert traj.messages[1].content == "let me look \ufffd"
    json.loads(traj.model_dump_json())


# ---------------------------------------------------------------- raw requests to the proxy

RAW_HEADERS = {
    "Accept": "application/json, text/event-stream",
    "Content-Type": "application/json",
    "MCP-Protocol-Version": "2026-07-28",
    "Mcp-Method": "tools/call",
}


# the 2026-era request envelope the servers demand on every request
META = json.dumps(
    {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    }
)


def _raw_call(name: str, arguments: str, request_id: str = "1") -> bytes:
    return (
        f'{{"jsonrpc":"2.0","id":{request_id},"method":"tools/call",'
        f'"params":{{"name":{name},"arguments":{arguments},"_meta":{META}}}}}'
    ).encode()


RAW: list[tuple[str, bytes]] = [
    ("surrogate argument", _raw_call('"find_order"', '{"order_id":"\\ud800"}')),
    ("surrogate key", _raw_call('"find_order"', '{"\\udfff":"1"}')),
    ("surrogate id", _raw_call('"find_order"', '{"order_id":"\\ud800"}', request_id='"\\ud83d"')),
    ("surrogate name", _raw_call('"find_order\\ud800"', "{}")),
    ("invalid JSON", b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"find_order",'),
    (
        "invalid UTF-8",
        _raw_call('"find_order"', '{"order_id":"\xff\xfe"}'.encode("latin-1").decode("latin-1")),
    ),
    ("array arguments", _raw_call('"find_order"', "[1]")),
    ("string arguments", _raw_call('"find_order"', '"x"')),
    ("unknown tool", _raw_call('"drop_tables"', "{}")),
]


@pytest.mark.parametrize("case", RAW, ids=[r[0] for r in RAW])
async def test_raw_garbage_never_crashes_the_proxy(
    case: tuple[str, bytes], upstream: Upstream, proxy: ProxyServer
) -> None:
    """The raw-request fast path: a body the proxy cannot forward gets a JSON-RPC
    answer (a tool error where it is a call of a listed tool), never an HTTP 500,
    and a refused call is recorded."""
    import httpx

    kind, body = case
    if kind == "invalid UTF-8":
        body = body.replace(b'"\xc3\xbf\xc3\xbe"', b'"\xff\xfe"')
    upstream.received.clear()
    reg = await proxy.aregister(RegisterRequest(attempt_id="att-raw-http", upstreams={"shop": upstream.url}))
    try:
        async with httpx.AsyncClient(timeout=10) as http:
            named = "drop_tables" if kind == "unknown tool" else "find_order"
            headers = {**RAW_HEADERS, **reg.headers, "Mcp-Name": named}
            r = await http.post(proxy.url, content=body, headers=headers)
            assert r.status_code < 500, r.text
            reply = r.json()
            assert reply["jsonrpc"] == "2.0"
            if kind.startswith("surrogate") and kind != "surrogate name":
                assert r.status_code == 200
                assert reply["result"]["isError"] is True
                assert "lone UTF-16 surrogate" in reply["result"]["content"][0]["text"]
            # the proxy still serves the attempt
            headers["Mcp-Name"] = "find_order"
            ok = await http.post(
                proxy.url, content=_raw_call('"find_order"', '{"order_id":"A1"}'), headers=headers
            )
            assert ok.status_code == 200 and ok.json()["result"]["isError"] is False
    finally:
        calls = await proxy.aunregister(reg.token)
    assert upstream.received[-1] == {"order_id": "A1"}
    assert all("\ud800" not in str(a) for a in upstream.received)
    for c in calls:
        json.loads(c.model_dump_json())
    if kind in ("surrogate argument", "surrogate key", "surrogate id"):
        assert [(c.tool, c.outcome) for c in calls] == [("find_order", "refused"), ("find_order", "ok")]
        assert "\ufffd" in json.dumps(calls[0].arguments, ensure_ascii=False)
