"""The proxy's fast-path pieces on their own: request/reply parsing, header
rules, and the keep-alive HTTP/1.1 upstream pool against a scripted server."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Awaitable, Callable

import mcp_types as types
import pytest

from sandbox.proxy import relay


def _scope(headers: dict[str, str], method: str = "POST") -> dict[str, object]:
    return {
        "type": "http",
        "method": method,
        "headers": [(k.encode(), v.encode()) for k, v in headers.items()],
    }


MODERN = {"mcp-protocol-version": "2026-07-28", "host": "127.0.0.1:5000"}


def test_relayable_headers() -> None:
    assert relay.relayable_headers(_scope(MODERN))
    assert relay.relayable_headers(
        _scope({**MODERN, "host": "localhost:1", "origin": "http://localhost:6274"})
    )
    assert not relay.relayable_headers(_scope(MODERN, method="GET"))
    assert not relay.relayable_headers(_scope({"host": "127.0.0.1:5000"}))  # no version header: 2025-era
    assert not relay.relayable_headers(_scope({**MODERN, "mcp-protocol-version": "2025-11-25"}))
    assert not relay.relayable_headers(_scope({**MODERN, "mcp-session-id": "abc"}))
    assert not relay.relayable_headers(_scope({**MODERN, "host": "evil.example:5000"}))
    assert not relay.relayable_headers(_scope({**MODERN, "origin": "http://evil.example"}))
    assert not relay.relayable_headers(_scope({**MODERN, "origin": "http://localhost.evil.example"}))


def test_forward_headers_keep_mcp_routing_only() -> None:
    scope = _scope(
        {
            **MODERN,
            "authorization": "Bearer secret",
            "cookie": "a=b",
            "accept": "application/json",
            "content-type": "application/json",
            "mcp-method": "tools/call",
            "mcp-name": "get_order",
            "mcp-session-id": "s",
        }
    )
    assert dict(relay.forward_headers(scope)) == {
        "mcp-protocol-version": "2026-07-28",
        "accept": "application/json",
        "content-type": "application/json",
        "mcp-method": "tools/call",
        "mcp-name": "get_order",
    }


def test_tool_call_parsing() -> None:
    body = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "t", "arguments": {"a": 1}}}
    parsed = relay.tool_call(json.dumps(body).encode())
    assert parsed is not None and parsed[:3] == (7, "t", {"a": 1}) and json.loads(parsed[3]) == body
    # duplicate keys: the forwarded body names the same tool the proxy checked
    tricky = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"cancel","name":"get"}}'
    parsed = relay.tool_call(tricky)
    assert parsed is not None and parsed[1] == "get" and b"cancel" not in parsed[3]
    assert relay.tool_call(json.dumps({**body, "method": "tools/list"}).encode()) is None
    assert relay.tool_call(json.dumps({k: v for k, v in body.items() if k != "id"}).encode()) is None
    assert relay.tool_call(json.dumps({**body, "params": {"name": 3}}).encode()) is None
    assert relay.tool_call(b"[1, 2]") is None
    assert relay.tool_call(b"{not json") is None


def test_reply_summary() -> None:
    ok = {
        "jsonrpc": "2.0",
        "id": 1,
        "result": {"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
    }
    assert relay.reply_summary(ok) == ("ab", False, "ok")
    failed = {
        "jsonrpc": "2.0",
        "id": 1,
        "result": {"content": [{"type": "text", "text": "x"}], "isError": True},
    }
    assert relay.reply_summary(failed) == ("x", True, "tool_error")
    error = {"jsonrpc": "2.0", "id": 1, "error": {"code": -32602, "message": "bad"}}
    assert relay.reply_summary(error) == ("bad", True, "protocol_error")
    assert relay.reply_summary({"jsonrpc": "2.0"}) is None
    assert relay.reply_summary(None) is None
    sse = b"event: message\r\ndata: " + json.dumps(ok).encode() + b"\r\n\r\n"
    assert relay.reply_message(sse, "text/event-stream") == ok
    assert relay.reply_message(b"<html>", "text/html") is None


def test_result_body_is_a_jsonrpc_response() -> None:
    result = types.CallToolResult(content=[types.TextContent(type="text", text="t")], is_error=True)
    body = json.loads(relay.result_body("r1", result))
    assert body["id"] == "r1" and body["result"]["isError"] is True
    assert body["result"]["content"] == [{"type": "text", "text": "t"}]


Handler = Callable[[int, int, asyncio.StreamReader, asyncio.StreamWriter], Awaitable[bool]]


async def _scripted_server(handler: Handler) -> tuple[asyncio.Server, str, list[int]]:
    """Each request is handed to `handler(conn_no, request_no, reader, writer)`,
    which answers (True: keep the connection) or not."""
    connections: list[int] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = len(connections)
        connections.append(conn)
        n = 0
        while True:
            head = await reader.readuntil(b"\r\n\r\n") if not reader.at_eof() else b""
            if not head:
                break
            length = next(
                int(line.split(b":")[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length")
            )
            await reader.readexactly(length)
            if not await handler(conn, n, reader, writer):
                writer.close()
                return
            n += 1

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    return server, f"http://127.0.0.1:{port}/mcp", connections


def _reply(writer: asyncio.StreamWriter, body: bytes, chunked: bool = False) -> None:
    if chunked:
        head = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n"
        chunks = b"".join(
            b"%x\r\n%s\r\n" % (len(body[i : i + 5]), body[i : i + 5]) for i in range(0, len(body), 5)
        )
        writer.write(head + chunks + b"0\r\n\r\n")
    else:
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s"
            % (len(body), body)
        )


async def test_pool_reuses_connections_and_reads_chunked() -> None:
    async def handler(conn: int, n: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        _reply(writer, b'{"n": %d, "conn": %d}' % (n, conn), chunked=n % 2 == 1)
        return True

    server, url, connections = await _scripted_server(handler)
    pool = relay.UpstreamPool(url)
    try:
        for n in range(4):
            status, headers, body = await pool.post(b"{}", [("mcp-name", "x")])
            assert headers["content-type"] == "application/json"
            assert status == 200 and json.loads(body) == {"n": n, "conn": 0}
        assert connections == [0]
    finally:
        await pool.aclose()
        server.close()


async def test_pool_retries_once_when_a_kept_connection_was_closed() -> None:
    async def handler(conn: int, n: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        if conn == 0 and n == 1:
            return False  # close the kept-alive connection without answering
        _reply(writer, b'{"conn": %d}' % conn)
        return True

    server, url, connections = await _scripted_server(handler)
    pool = relay.UpstreamPool(url)
    try:
        assert json.loads((await pool.post(b"{}", []))[2]) == {"conn": 0}
        assert json.loads((await pool.post(b"{}", []))[2]) == {"conn": 1}
        assert connections == [0, 1]
    finally:
        await pool.aclose()
        server.close()


async def test_pool_errors_are_upstream_errors() -> None:
    async def handler(conn: int, n: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        return False  # never answers

    server, url, _ = await _scripted_server(handler)
    pool = relay.UpstreamPool(url)
    try:
        with pytest.raises(relay.UpstreamError, match="without answering"):
            await pool.post(b"{}", [])
    finally:
        server.close()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}/mcp"
    with pytest.raises(relay.UpstreamError, match="cannot connect"):
        await relay.UpstreamPool(dead).post(b"{}", [])
    with pytest.raises(ValueError, match="plain http"):
        relay.UpstreamPool("https://127.0.0.1/mcp")
