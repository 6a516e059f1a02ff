"""The RL trainer's two clients, written from the wire specs (never the reference's code),
for benchmarks/long_haul.py and benchmarks/burst.py.

`SessionClient`: the Session API as `MCPProxyClient` calls it
(../shared/specs/thinkingbox-session-proxy.md §7.1, §7.4): a new HTTP connection per
request, read timeout T (the trainer's 600 s; connect and write 30 s), `session_create`
with `timeout = max(0.9 T, T - 30)`, and its retry wrapper: 502/503/504 retried 5 times
after a random wait in [0, min(2^(n-1), 32)] s, 429 without limit and at least its
`Retry-After` (capped at 32 s), timeouts never. On top, the trainer's own
`max_retries_session_create: 3` with 15/30/45 s between tries (a capacity refusal's
`Retry-After` is waited instead when it is longer); each try has a new session id, so a
try that timed out cannot meet its own id ("Session already exists").

Tool calls go through `/call_tool` (what the trainer does) or `/mcp/` (JSON-RPC over
streamable HTTP with `X-TB-Session-Id`, §3.10, an MCP client's session flow: initialize,
initialized, tools/call, no DELETE).

`EnvClient`: OpenEnv's WebSocket protocol (docs/openenv.md): one socket per episode,
`reset` / `step` / `close` messages; a reset refused with `CAPACITY_REACHED` is retried
like a session_create (15/30/45 s, or the error's `retry_after` when longer), every
message bounded by the trainer's 600 s.

Every failure is a `SystemFailure` naming where it happened and how (an HTTP status and
the envelope's message, a transport error, a timeout): what the trainer would drop as a
system error, never a graded 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import httpx

TRAINER_TIMEOUT = 600.0
CREATE_BACKOFF = (15.0, 30.0, 45.0)  # max_retries_session_create: 3
SERVER_ERROR_RETRIES = 5
RETRYABLE = (502, 503, 504)
MCP_HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


class SystemFailure(Exception):
    """A request the trainer counts as a system error: `stage` (create, call, effects,
    destroy, reset, step), `status` (HTTP status, None for a transport error or timeout),
    `kind` (`http`, `transport`, `timeout`, `protocol`)."""

    def __init__(self, stage: str, kind: str, message: str, status: int | None = None):
        super().__init__(f"{stage}: {kind}{f' {status}' if status else ''}: {message[:300]}")
        self.stage, self.kind, self.status, self.message = stage, kind, status, message


@dataclass
class Tries:
    """What a retried request met on its way: each refusal's status and Retry-After."""

    refusals: list[tuple[int, str | None]] = field(default_factory=list)
    create_tries: int = 0
    failed_tries: list[str] = field(default_factory=list)  # how each failed create/reset try ended


def _message(r: httpx.Response) -> str:
    try:
        body = r.json()
    except ValueError:
        return r.text[:300]
    if isinstance(body, dict):
        if "error" in body:
            return str(body["error"])
        content = body.get("content")
        if isinstance(content, dict):
            return str(content.get("value"))[:300]
    return r.text[:300]


def _retry_after(r: httpx.Response) -> float | None:
    value = r.headers.get("retry-after")
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


class SessionClient:
    def __init__(self, endpoint: str, timeout: float = TRAINER_TIMEOUT):
        self.endpoint = endpoint.rstrip("/")
        self.timeout = timeout
        self._timeouts = httpx.Timeout(connect=30.0, write=30.0, read=timeout, pool=timeout)

    async def post(self, route: str, body: dict[str, Any], tries: Tries | None = None) -> httpx.Response:
        """One request through the reference's retry wrapper; the final response
        (non-2xx included), or SystemFailure for a timeout or a transport error."""
        n = 0
        while True:
            try:
                # a new client (and connection) per request, as MCPProxyClient makes them
                async with httpx.AsyncClient(timeout=self._timeouts) as http:
                    r = await http.post(f"{self.endpoint}/{route}", json=body)
            except httpx.TimeoutException as exc:
                raise SystemFailure(route, "timeout", repr(exc)) from None
            except httpx.HTTPError as exc:
                raise SystemFailure(route, "transport", repr(exc)) from None
            if r.status_code == 429 or r.status_code in RETRYABLE:
                if tries is not None:
                    tries.refusals.append((r.status_code, r.headers.get("retry-after")))
                n += 1
                if r.status_code != 429 and n > SERVER_ERROR_RETRIES:
                    return r
                wait = random.uniform(0, min(2 ** (n - 1), 32))
                after = _retry_after(r)
                if r.status_code == 429 and after is not None:
                    wait = max(wait, min(after, 32.0))
                await asyncio.sleep(wait)
                continue
            return r

    async def value(self, route: str, body: dict[str, Any], stage: str) -> Any:
        r = await self.post(route, body)
        if not 200 <= r.status_code < 300:
            raise SystemFailure(stage, "http", _message(r), r.status_code)
        return r.json()["content"]["value"]

    async def create(
        self, server_config: dict[str, Any], tools: list[str], tries: Tries | None = None
    ) -> tuple[str, httpx.Response]:
        """session_create with the trainer's 3 retries (15/30/45 s, or a longer Retry-After);
        the session id that was created and its response."""
        tries = tries if tries is not None else Tries()
        last: SystemFailure | None = None
        for backoff in (*CREATE_BACKOFF, None):
            sid = str(uuid.uuid4())
            tries.create_tries += 1
            body = {
                "session_id": sid,
                "server_config": server_config,
                "available_tools": tools,
                "timeout": max(0.9 * self.timeout, self.timeout - 30),
            }
            after: float | None = None
            try:
                r = await self.post("session_create", body, tries)
                if 200 <= r.status_code < 300:
                    return sid, r
                after = _retry_after(r)
                last = SystemFailure("create", "http", _message(r), r.status_code)
                tries.failed_tries.append(f"http {r.status_code}")
            except SystemFailure as exc:
                last = exc
                tries.failed_tries.append(exc.kind)
                if exc.kind == "timeout":  # its session may exist: the trainer's exit destroys it
                    await self.destroy_quietly(sid)
            if backoff is None:
                break
            await asyncio.sleep(max(backoff, after or 0.0))
        assert last is not None
        raise last

    async def destroy_quietly(self, sid: str) -> None:
        with contextlib.suppress(SystemFailure):
            await self.post("session_destroy", {"session_id": sid})

    # ---- the session's calls --------------------------------------------------------
    async def call_tool(self, sid: str, name: str, arguments: dict[str, Any]) -> str:
        text = await self.value(
            "call_tool", {"session_id": sid, "tool_name": name, "arguments": arguments}, "call"
        )
        if not isinstance(text, str):
            raise SystemFailure("call", "protocol", f"content.value is {type(text).__name__}, not a string")
        return text

    async def mcp_calls(self, sid: str, calls: list[tuple[str, dict[str, Any]]]) -> list[str]:
        """The calls over `/mcp/`, one MCP session (initialize, initialized, tools/call...)."""
        headers = {**MCP_HEADERS, "x-tb-session-id": sid}
        out = []
        async with httpx.AsyncClient(timeout=self._timeouts) as http:

            async def rpc(message: dict[str, Any]) -> httpx.Response:
                try:
                    return await http.post(f"{self.endpoint}/mcp/", json=message, headers=headers)
                except httpx.TimeoutException as exc:
                    raise SystemFailure("mcp", "timeout", repr(exc)) from None
                except httpx.HTTPError as exc:
                    raise SystemFailure("mcp", "transport", repr(exc)) from None

            init = {
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "tbx-long-haul", "version": "1"},
                },
            }
            r = await rpc(init)
            _jsonrpc_result(r, "mcp initialize")
            if "mcp-session-id" in r.headers:
                headers["mcp-session-id"] = r.headers["mcp-session-id"]
            r = await rpc({"jsonrpc": "2.0", "method": "notifications/initialized"})
            if r.status_code >= 300:
                raise SystemFailure("mcp initialized", "http", r.text[:300], r.status_code)
            for i, (name, arguments) in enumerate(calls, 1):
                message = {
                    "jsonrpc": "2.0",
                    "id": i,
                    "method": "tools/call",
                    "params": {"name": name, "arguments": arguments},
                }
                result = _jsonrpc_result(await rpc(message), "mcp tools/call")
                content = result.get("content") or [{}]
                out.append(str(content[0].get("text", "")))
        return out


def _jsonrpc_result(r: httpx.Response, stage: str) -> dict[str, Any]:
    """The JSON-RPC result of a reply (JSON or one SSE event), or SystemFailure."""
    if r.status_code >= 300:
        raise SystemFailure(stage, "http", r.text[:300], r.status_code)
    text = r.text
    if r.headers.get("content-type", "").startswith("text/event-stream"):
        data = [line[5:].strip() for line in text.splitlines() if line.startswith("data:")]
        text = data[-1] if data else ""
    try:
        message = json.loads(text)
    except ValueError:
        raise SystemFailure(stage, "protocol", f"not JSON: {text[:200]}") from None
    if "error" in message:
        raise SystemFailure(stage, "protocol", json.dumps(message["error"])[:300])
    result = message.get("result")
    if not isinstance(result, dict):
        raise SystemFailure(stage, "protocol", "no result")
    if result.get("isError"):
        text = str((result.get("content") or [{}])[0].get("text", ""))
        raise SystemFailure(stage, "tool", text[:300])
    return result


# ---- OpenEnv over WebSocket -----------------------------------------------------------
class EnvClient:
    """One episode's socket: `async with EnvClient(url) as env: await env.reset(...)`."""

    def __init__(self, base_url: str, timeout: float = TRAINER_TIMEOUT):
        self.url = base_url.replace("http://", "ws://").rstrip("/") + "/ws"
        self.timeout = timeout
        self.ws: Any = None

    async def __aenter__(self) -> EnvClient:
        from websockets.asyncio.client import connect

        try:
            self.ws = await asyncio.wait_for(connect(self.url, max_size=2**25, open_timeout=30), 60)
        except TimeoutError:
            raise SystemFailure("connect", "timeout", self.url) from None
        except OSError as exc:
            raise SystemFailure("connect", "transport", repr(exc)) from None
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.ws is not None:
            try:
                await asyncio.wait_for(self.ws.send(json.dumps({"type": "close"})), 10)
                await asyncio.wait_for(self.ws.close(), 10)
            except Exception:
                pass

    async def send(self, message: dict[str, Any], stage: str) -> dict[str, Any]:
        """One message and its reply: the reply's `data`; an `error` reply raises
        SystemFailure (kind `error:<code>`, its data kept on the exception)."""
        try:
            await self.ws.send(json.dumps(message))
            reply = json.loads(await asyncio.wait_for(self.ws.recv(), self.timeout))
        except TimeoutError:
            raise SystemFailure(stage, "timeout", f"no reply within {self.timeout:.0f} s") from None
        except Exception as exc:  # the socket closed, a frame the client could not read
            raise SystemFailure(stage, "transport", repr(exc)) from None
        if reply.get("type") == "error":
            data = reply.get("data") or {}
            failure = SystemFailure(stage, f"error:{data.get('code')}", str(data.get("message")))
            failure.data = data  # type: ignore[attr-defined]
            raise failure
        return dict(reply.get("data") or {})

    async def reset(self, data: dict[str, Any], tries: Tries | None = None) -> dict[str, Any]:
        """reset with the trainer's retries on a capacity refusal (15/30/45 s, or its
        `retry_after` when longer); any other error is final."""
        tries = tries if tries is not None else Tries()
        for backoff in (*CREATE_BACKOFF, None):
            tries.create_tries += 1
            try:
                return await self.send({"type": "reset", "data": data}, "reset")
            except SystemFailure as exc:
                tries.failed_tries.append(exc.kind)
                if exc.kind != "error:CAPACITY_REACHED" or backoff is None:
                    raise
                after = (getattr(exc, "data", {}) or {}).get("retry_after")
                tries.refusals.append((503, None if after is None else str(after)))
                await asyncio.sleep(max(backoff, float(after or 0.0)))
        raise AssertionError("unreachable")

    async def step(self, action: dict[str, Any]) -> dict[str, Any]:
        return await self.send({"type": "step", "data": action}, "step")


def elapsed(since: float) -> float:
    return round(time.monotonic() - since, 4)
