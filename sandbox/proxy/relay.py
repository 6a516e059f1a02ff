"""Pieces of the tool proxy's fast path: relaying one 2026-era (stateless,
one HTTP request per message) MCP `tools/call` to its upstream server byte for
byte, after the proxy has checked the token and the allow-list; and the plain
ASGI responses the proxy answers with itself.

Why: the proxy's MCP `Server` + upstream `Client` cost two full SDK
traversals per call (~6 ms of CPU on a busy 2-core machine, more than a
direct call), and an httpx request alone ~2.5 ms; the relay only parses the
request to find the tool name and the reply to record it, and talks to the
upstream over plain keep-alive HTTP/1.1 connections (`UpstreamPool`, ~0.3 ms).
Anything it does not fully understand goes the SDK way.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import time
from typing import Any, Literal
from urllib.parse import urlsplit

import mcp_types as types
from mcp.shared.inbound import MCP_METHOD_HEADER, MCP_NAME_HEADER, encode_header_value
from mcp_types import CLIENT_CAPABILITIES_META_KEY, CLIENT_INFO_META_KEY, PROTOCOL_VERSION_META_KEY
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from starlette.types import Message, Receive, Scope, Send

LOCAL_HOSTS = ("127.0.0.1", "localhost")
LOCAL_ORIGINS = ("http://127.0.0.1", "http://localhost")


def relayable_headers(scope: Scope) -> bool:
    """A POST of a known 2026-era protocol version, no session, from a local
    Host/Origin (the DNS-rebinding rules of the SDK path)."""
    if scope["method"] != "POST":
        return False
    version = False
    for key, value in scope["headers"]:
        if key == b"mcp-protocol-version":
            version = value.decode("latin-1") in MODERN_PROTOCOL_VERSIONS
            if not version:
                return False
        elif key == b"mcp-session-id":
            return False
        elif key == b"host":
            if value.decode("latin-1").rsplit(":", 1)[0] not in LOCAL_HOSTS:
                return False
        elif key == b"origin":
            origin = value.decode("latin-1")
            if not any(origin == o or origin.startswith(o + ":") for o in LOCAL_ORIGINS):
                return False
    return version


def forward_headers(scope: Scope) -> list[tuple[str, str]]:
    """The request headers the upstream needs (MCP routing headers, Accept,
    Content-Type); never the proxy token, cookies or the Host."""
    return [
        (k.decode("latin-1"), v.decode("latin-1"))
        for k, v in scope["headers"]
        if (k in (b"accept", b"content-type") or k.startswith(b"mcp-")) and k != b"mcp-session-id"
    ]


async def read_body(receive: Receive, limit: int) -> bytes | None:
    """The whole request body, or None as soon as it grows past `limit`."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(chunks)
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def replay(body: bytes, receive: Receive) -> Receive:
    """A `receive` that hands out an already-read body once, then defers to the real one."""
    pending = [body]

    async def receive_again() -> Message:
        if pending:
            return {"type": "http.request", "body": pending.pop(), "more_body": False}
        return await receive()

    return receive_again


UNICODE_PROBLEM = "tool arguments are not valid Unicode: they contain a lone UTF-16 surrogate (e.g. \\ud83d without its pair)"


class UnsendableCall(Exception):
    """A `tools/call` whose JSON is valid but holds lone UTF-16 surrogates
    (`"\\ud800"`), which no UTF-8 request can carry: the caller's fault, answered
    as a tool error. Fields are copies with U+FFFD in place of the surrogates."""

    def __init__(self, request_id: Any, name: str, arguments: Any):
        super().__init__(UNICODE_PROBLEM)
        self.request_id, self.name, self.arguments = request_id, name, arguments


def sendable(value: Any) -> bool:
    """Whether a decoded JSON value (keys and strings included) can be encoded as UTF-8."""
    try:
        json.dumps(value, ensure_ascii=False).encode()
    except UnicodeEncodeError:
        return False
    return True


def replaced(value: Any) -> Any:
    """A copy of a decoded JSON value with U+FFFD in place of lone surrogates (for the record)."""
    text = json.dumps(value, ensure_ascii=False)
    return json.loads(text.encode("utf-16", "surrogatepass").decode("utf-16", "replace"))


def tool_call(body: bytes) -> tuple[Any, str, Any, bytes] | None:
    """(request id, tool name, arguments, body to forward) of a JSON-RPC
    `tools/call` request, else None. The forwarded body is re-serialised from
    what was parsed, so the server cannot read a different tool name than the
    proxy checked (duplicate keys and other parser differences). Raises
    `UnsendableCall` when that body cannot be encoded."""
    try:
        message = json.loads(body)
    except (ValueError, RecursionError):
        return None
    if not isinstance(message, dict) or message.get("method") != "tools/call" or "id" not in message:
        return None
    params = message.get("params")
    if not isinstance(params, dict) or not isinstance(params.get("name"), str):
        return None
    try:
        forwarded = json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode()
    except UnicodeEncodeError:
        raise UnsendableCall(
            replaced(message["id"]), replaced(params["name"]), replaced(params.get("arguments"))
        ) from None
    return message["id"], params["name"], params.get("arguments"), forwarded


PROTOCOL = MODERN_PROTOCOL_VERSIONS[-1]  # what the proxy's own requests speak (the servers' newest)
# A stateless 2026-era request carries its protocol version and client in `_meta`.
CALL_META = {
    PROTOCOL_VERSION_META_KEY: PROTOCOL,
    CLIENT_INFO_META_KEY: {"name": "tbx-proxy", "version": "1"},
    CLIENT_CAPABILITIES_META_KEY: {},
}


def call_request(request_id: Any, name: str, arguments: Any) -> tuple[bytes, list[tuple[str, str]]]:
    """(body, headers) of a stateless `tools/call` the proxy sends itself (the
    direct path: no agent request to relay). Raises UnicodeEncodeError for lone
    surrogates; callers check `sendable` first."""
    params = {"name": name, "arguments": arguments, "_meta": CALL_META}
    message = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}
    body = json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode()
    headers = [
        ("Accept", "application/json, text/event-stream"),
        ("Content-Type", "application/json"),
        ("MCP-Protocol-Version", PROTOCOL),
        (MCP_METHOD_HEADER, "tools/call"),
        (MCP_NAME_HEADER, encode_header_value(name)),
    ]
    return body, headers


def reply_message(body: bytes, content_type: str) -> dict[str, Any] | None:
    """The JSON-RPC message of an upstream reply (JSON, or the last SSE data line)."""
    try:
        if content_type.startswith("text/event-stream"):
            lines = [ln for ln in body.decode().splitlines() if ln.startswith("data:")]
            message = json.loads(lines[-1][5:]) if lines else None
        else:
            message = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    return message if isinstance(message, dict) else None


def reply_summary(
    message: dict[str, Any] | None,
) -> tuple[str, bool, Literal["ok", "tool_error", "protocol_error"]] | None:
    """(result text, isError, outcome) of a `tools/call` reply; None when it is neither a result nor an error."""
    if message is None:
        return None
    result = message.get("result")
    if isinstance(result, dict):
        items = result.get("content") or []
        text = "".join(
            str(c.get("text", "")) for c in items if isinstance(c, dict) and c.get("type") == "text"
        )
        is_error = bool(result.get("isError"))
        return text, is_error, "tool_error" if is_error else "ok"
    error = message.get("error")
    if isinstance(error, dict):
        return str(error.get("message", "")), True, "protocol_error"
    return None


def result_message(request_id: Any, result: types.CallToolResult) -> dict[str, Any]:
    """A JSON-RPC response carrying a result the proxy made itself (timeouts, unreachable server)."""
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "result": result.model_dump(mode="json", by_alias=True, exclude_none=True),
    }


def message_bytes(message: dict[str, Any]) -> bytes:
    return json.dumps(message, separators=(",", ":")).encode()


def result_body(request_id: Any, result: types.CallToolResult) -> bytes:
    """`result_message` as the bytes of an HTTP response."""
    return message_bytes(result_message(request_id, result))


def jsonrpc_error(code: int, message: str) -> bytes:
    """A JSON-RPC error without a request id (the proxy refusing a request)."""
    body = types.JSONRPCError(jsonrpc="2.0", id=None, error=types.ErrorData(code=code, message=message))
    return body.model_dump_json(by_alias=True, exclude_unset=True).encode()


async def respond(
    send: Send,
    status: int,
    body: bytes,
    extra: list[tuple[bytes, bytes]] | None = None,
    content_type: bytes = b"application/json",
) -> None:
    """Send one whole HTTP response on an ASGI `send`."""
    headers = [(b"content-type", content_type), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers + (extra or [])})
    await send({"type": "http.response.body", "body": body})


def bind_to_device(interface: str) -> tuple[int, int, bytes]:
    """The socket option that binds a connection to one network device (root
    only): with the device gone, connect fails rather than taking another route."""
    return (socket.SOL_SOCKET, socket.SO_BINDTODEVICE, interface.encode())


class UpstreamError(Exception):
    """The upstream server could not be reached or answered something that is not HTTP/1.1."""


IDLE_REUSE = 3.0  # seconds; servers (uvicorn) close idle keep-alive connections after 5
MAX_IDLE = 4
MAX_HEAD = 64 * 1024


class UpstreamPool:
    """Keep-alive HTTP/1.1 connections to one upstream MCP endpoint (plain http only).

    `post()` sends one request and reads one response (Content-Length or
    chunked). A connection goes back to the pool only after a complete
    response; one interrupted by a timeout or an error is closed.
    """

    def __init__(self, url: str, interface: str | None = None):
        self.interface = interface  # connections bound to this device (see `bind_to_device`)
        parts = urlsplit(url)
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(f"the relay speaks plain http only: {url}")
        self.host = parts.hostname
        self.port = parts.port or 80
        self.path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        self._authority = f"{self.host}:{self.port}"
        self._idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter, float]] = []

    async def post(self, body: bytes, headers: list[tuple[str, str]]) -> tuple[int, dict[str, str], bytes]:
        head = [f"POST {self.path} HTTP/1.1\r\nHost: {self._authority}\r\n"]
        head += [
            f"{k}: {v}\r\n" for k, v in headers if k.lower() not in ("host", "content-length", "connection")
        ]
        head.append(f"Content-Length: {len(body)}\r\n\r\n")
        request = "".join(head).encode("latin-1") + body
        reused, conn = self._take()
        if conn is None:
            conn = await self._open()
        try:
            return await self._exchange(conn, request)
        except _ClosedBeforeReply:
            if not reused:
                raise UpstreamError("the server closed the connection without answering") from None
            # A kept-alive connection the server had just closed: it never read the request.
            return await self._exchange(await self._open(), request)

    async def _exchange(
        self, conn: tuple[asyncio.StreamReader, asyncio.StreamWriter], request: bytes
    ) -> tuple[int, dict[str, str], bytes]:
        reader, writer = conn
        done = False
        try:
            writer.write(request)
            status_line = await reader.readline()
            if not status_line:
                raise _ClosedBeforeReply
            status, headers, body = await _read_response(status_line, reader)
            done = True
        except (OSError, asyncio.IncompleteReadError, ValueError) as exc:
            raise UpstreamError(f"{type(exc).__name__}: {exc}") from exc
        finally:
            if done and headers.get("connection", "").lower() != "close" and len(self._idle) < MAX_IDLE:
                self._idle.append((reader, writer, time.monotonic()))
            else:
                _close(writer)
        return status, headers, body

    def _take(self) -> tuple[bool, tuple[asyncio.StreamReader, asyncio.StreamWriter] | None]:
        now = time.monotonic()
        while self._idle:
            reader, writer, since = self._idle.pop()
            if now - since < IDLE_REUSE and not reader.at_eof() and not writer.is_closing():
                return True, (reader, writer)
            _close(writer)
        return False, None

    async def _open(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        try:
            if self.interface is None:
                return await asyncio.open_connection(self.host, self.port)
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
            try:
                sock.setsockopt(*bind_to_device(self.interface))
                sock.setblocking(False)
                await asyncio.get_running_loop().sock_connect(sock, (self.host, self.port))
            except BaseException:
                sock.close()
                raise
            return await asyncio.open_connection(sock=sock)
        except OSError as exc:
            raise UpstreamError(f"cannot connect to {self._authority}: {exc}") from exc

    async def aclose(self) -> None:
        while self._idle:
            _close(self._idle.pop()[1])


class _ClosedBeforeReply(Exception):
    pass


def _close(writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(Exception):
        writer.close()


async def _read_response(
    status_line: bytes, reader: asyncio.StreamReader
) -> tuple[int, dict[str, str], bytes]:
    version, _, rest = status_line.decode("latin-1").partition(" ")
    if not version.startswith("HTTP/1."):
        raise ValueError(f"not an HTTP/1.x response: {status_line[:80]!r}")
    status = int(rest.split(" ", 1)[0])
    headers: dict[str, str] = {}
    size = 0
    while True:
        line = await reader.readline()
        size += len(line)
        if size > MAX_HEAD or not line:
            raise ValueError("response head too large or cut off")
        if line in (b"\r\n", b"\n"):
            break
        key, _, value = line.decode("latin-1").partition(":")
        headers[key.strip().lower()] = value.strip()
    if "chunked" in headers.get("transfer-encoding", "").lower():
        chunks = []
        while True:
            size_line = await reader.readline()
            length = int(size_line.split(b";", 1)[0].strip() or b"0", 16)
            if length == 0:
                while (await reader.readline()) not in (b"\r\n", b"\n", b""):
                    pass  # trailers
                break
            chunks.append(await reader.readexactly(length))
            await reader.readexactly(2)
        return status, headers, b"".join(chunks)
    if "content-length" in headers:
        return status, headers, await reader.readexactly(int(headers["content-length"]))
    headers["connection"] = "close"  # body delimited by the end of the connection
    return status, headers, await reader.read()
