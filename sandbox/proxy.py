"""The session proxy: one MCP endpoint (streamable HTTP) on 127.0.0.1 for every
attempt, each reached only with its own unguessable token.

    with ProxyServer() as proxy:
        reg = proxy.register("att-1", {"retail": handle.servers["retail"]}, allowed_tools=[...])
        # an MCP client connects to reg.url with header `Authorization: Bearer <reg.token>`
        # (or to reg.path_url, which carries the token in the path)
        ...
        calls = proxy.unregister(reg.token)   # the attempt's recorded tool calls

Per attempt the proxy keeps one upstream MCP client per backend server
(entered once, reused for every call) and one low-level MCP `Server` of its
own that lists only the allow-listed tools (description overrides applied)
and forwards calls. A token selects exactly one attempt's `Server`, so it can
never reach another attempt's upstreams or sessions. Tools whose names start
with `__reserved__` and tools outside the allow-list are never listed and a
call to them is answered `Unknown tool` without reaching any upstream.

Fast path (`fast_path=True`, the default): a 2026-era `tools/call` of an
allow-listed tool is relayed as is to its server over a keep-alive
connection and the server's reply returned unchanged (see
`sandbox.proxy_relay`); the checks, the timeout and the recording are the
same as on the SDK path, which serves everything else.

The proxy runs its own event loop (uvicorn) in a background thread; the
registration API is plain Python, in-process, never on the agent-facing port
(`tbx proxy` adds a separate admin listener, see `sandbox.proxy_admin`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import copy
import hashlib
import logging
import math
import secrets
import socket
import threading
import time
from collections.abc import AsyncIterator, Coroutine, Mapping, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal, TypeVar
from urllib.parse import urlsplit

import anyio
import httpx2
import mcp_types as types
import uvicorn
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.lowlevel.server import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel
from starlette.types import Receive, Scope, Send

from sandbox import proxy_relay as relay
from sandbox.errors import SandboxError

log = logging.getLogger(__name__)

HOST = "127.0.0.1"
RESERVED_PREFIX = "__reserved__"
DEFAULT_CALL_TIMEOUT = 60.0
DEFAULT_MAX_REQUEST_BYTES = 1024 * 1024
DEFAULT_CONNECT_TIMEOUT = 15.0
CLOSE_TIMEOUT = 5.0
T = TypeVar("T")

Outcome = Literal["ok", "tool_error", "refused", "timeout", "upstream_error", "protocol_error"]


class ProxyError(SandboxError):
    pass


class ProxyCall(BaseModel):
    """One tool call that reached the proxy, as it goes into the attempt's trajectory."""

    attempt_id: str
    tool: str
    arguments: dict[str, Any]
    result: str  # the text content of the result (what the agent reads)
    is_error: bool  # MCP's isError flag of the result handed to the agent
    # ok | tool_error (upstream isError) | refused (unknown, not allow-listed or reserved) | timeout |
    # upstream_error (the server did not answer) | protocol_error (it answered with a JSON-RPC error)
    outcome: Outcome
    domain: str | None = None  # the backend that served it (None when refused)
    started_at: datetime
    latency_ms: float


class Registration(BaseModel):
    attempt_id: str
    token: str
    url: str  # send `Authorization: Bearer <token>`
    path_url: str  # the same endpoint with the token in the path (for clients that cannot set headers)
    tools: list[str]  # what tools/list shows, in order

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _text(result: types.CallToolResult) -> str:
    return "".join(c.text for c in result.content if isinstance(c, types.TextContent))


def _error_result(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)


def _timeout_result(name: str, seconds: float) -> types.CallToolResult:
    return _error_result(
        f"Tool call '{name}' timed out after {seconds:g}s; it may or may not have taken effect."
    )


def _unreachable_result(name: str, exc: BaseException) -> types.CallToolResult:
    return _error_result(f"Tool call '{name}' failed: the tool server did not answer ({exc!r})")


def _apply_overrides(
    tool: types.Tool, description: str | None, arg_descriptions: Mapping[str, str] | None
) -> types.Tool:
    if description is None and not arg_descriptions:
        return tool
    update: dict[str, Any] = {}
    if description is not None:
        update["description"] = description
    if arg_descriptions:
        schema = copy.deepcopy(dict(tool.input_schema))
        props = schema.get("properties") or {}
        for arg, text in arg_descriptions.items():
            if arg in props and isinstance(props[arg], dict):
                props[arg]["description"] = text
        update["input_schema"] = schema
    return tool.model_copy(update=update)


@dataclass
class _Route:
    domain: str
    url: str
    client: Client
    tool: types.Tool  # as listed to the agent (overrides applied)


@dataclass
class _Attempt:
    attempt_id: str
    token_digest: str
    call_timeout: float
    routes: dict[str, _Route] = field(default_factory=dict)
    manager: StreamableHTTPSessionManager | None = None
    pools: dict[str, relay.UpstreamPool] | None = None  # the fast path's connections, by upstream URL
    calls: list[ProxyCall] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    closed: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None

    def snapshot(self) -> list[ProxyCall]:
        with self.lock:
            return list(self.calls)

    def record_call(
        self,
        name: str,
        arguments: Any,
        text: str,
        is_error: bool,
        outcome: Outcome,
        domain: str | None,
        started: datetime,
        t0: float,
    ) -> None:
        call = ProxyCall(
            attempt_id=self.attempt_id,
            tool=name,
            arguments=dict(arguments) if isinstance(arguments, dict) else {},
            result=text,
            is_error=is_error,
            outcome=outcome,
            domain=domain,
            started_at=started,
            latency_ms=(time.perf_counter() - t0) * 1000,
        )
        with self.lock:
            self.calls.append(call)


def upstream_client(url: str, headers: Mapping[str, str] | None = None, *, mode: str = "auto") -> Client:
    """An MCP client for `url` (streamable HTTP). With headers, the HTTP client
    is owned by the returned `Client` (closed when it exits). `mode` as in
    `mcp.Client` ("legacy" forces a 2025-era session)."""
    if not headers:
        return Client(url, cache=None, mode=mode)

    @contextlib.asynccontextmanager
    async def transport() -> AsyncIterator[Any]:
        timeout = httpx2.Timeout(30.0, read=300.0)
        async with (
            httpx2.AsyncClient(headers=dict(headers), timeout=timeout) as http,
            streamable_http_client(url, http_client=http) as streams,
        ):
            yield streams

    return Client(transport(), cache=None, mode=mode)


def proxy_client(registration: Registration, *, mode: str = "auto") -> Client:
    """An MCP client for one attempt's proxy endpoint (bearer token set)."""
    return upstream_client(registration.url, registration.headers, mode=mode)


class _ProxyApp:
    """The agent-facing ASGI app: token -> that attempt's MCP session manager."""

    def __init__(self, proxy: ProxyServer):
        self.proxy = proxy

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        path: str = scope["path"]
        if path == "/healthz":
            await _respond(send, 200, b'{"ok": true}')
            return
        path_token: str | None = None
        if path.startswith("/a/") and path.endswith("/mcp"):
            path_token = path[3:-4]
        elif path != "/mcp":
            await _respond(send, 404, _jsonrpc_error(-32601, "not found: the MCP endpoint is /mcp"))
            return
        header_token: str | None = None
        content_length: int | None = None
        for key, value in scope["headers"]:
            if key == b"authorization":
                scheme, _, credentials = value.decode("latin-1").partition(" ")
                if scheme.lower() == "bearer":
                    header_token = credentials.strip()
            elif key == b"content-length":
                with contextlib.suppress(ValueError):
                    content_length = int(value)
        token = path_token if path_token is not None else header_token
        if path_token is not None and header_token is not None and header_token != path_token:
            token = None
        attempt = self.proxy._lookup(token)
        if attempt is None or attempt.manager is None:
            await _respond(
                send,
                401,
                _jsonrpc_error(-32001, "missing or invalid token (send Authorization: Bearer <token>)"),
                extra=[(b"www-authenticate", b'Bearer realm="tbx"')],
            )
            return
        if content_length is not None and content_length > self.proxy.max_request_bytes:
            await _respond(send, 413, _jsonrpc_error(-32600, "request too large"))
            return
        if attempt.pools is not None and relay.relayable_headers(scope):
            await self.proxy._relay(attempt, attempt.manager, scope, receive, send)
        else:
            await attempt.manager.handle_request(scope, receive, send)


def _jsonrpc_error(code: int, message: str) -> bytes:
    body = types.JSONRPCError(jsonrpc="2.0", id=None, error=types.ErrorData(code=code, message=message))
    return body.model_dump_json(by_alias=True, exclude_unset=True).encode()


async def _respond(
    send: Send,
    status: int,
    body: bytes,
    extra: list[tuple[bytes, bytes]] | None = None,
    content_type: bytes = b"application/json",
) -> None:
    headers = [(b"content-type", content_type), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers + (extra or [])})
    await send({"type": "http.response.body", "body": body})


def _listen(port: int) -> socket.socket:
    # proto=IPPROTO_TCP: asyncio sets TCP_NODELAY on accepted sockets only then (else +40 ms per request).
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((HOST, port))
    except OSError as exc:
        sock.close()
        raise ProxyError(
            f"cannot listen on {HOST}:{port} ({exc}); pick another port or 0 for any free one"
        ) from exc
    return sock


class ProxyServer:
    """The session proxy. `start()` (or `with`) binds 127.0.0.1:`port` (0 = any
    free port) and serves in a background thread; `close()` unregisters every
    attempt and stops it."""

    def __init__(
        self,
        port: int = 0,
        *,
        call_timeout: float = DEFAULT_CALL_TIMEOUT,
        max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        admin_port: int | None = None,
        fast_path: bool = True,
    ):
        if call_timeout <= 0 or max_request_bytes <= 0:
            raise ValueError("call_timeout and max_request_bytes must be positive")
        self.port = port
        self.call_timeout = call_timeout
        self.max_request_bytes = max_request_bytes
        self.connect_timeout = connect_timeout
        self.admin_port = admin_port  # None: no admin listener (in-process API only)
        self.admin_token: str | None = None
        self.fast_path = fast_path
        self._attempts: dict[str, _Attempt] = {}  # sha256(token) -> attempt
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._servers: list[uvicorn.Server] = []
        self._started = threading.Event()
        self._start_error: BaseException | None = None
        self._closed = False

    # ---- lifecycle ---------------------------------------------------------
    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}/mcp"

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive() and not self._closed

    def cpu_time(self) -> float:
        """CPU seconds the proxy's thread has used so far (for overhead measurements)."""
        if self._thread is None or self._thread.ident is None:
            return 0.0
        return time.clock_gettime(time.pthread_getcpuclockid(self._thread.ident))

    @property
    def admin_url(self) -> str | None:
        return None if self.admin_port is None else f"http://{HOST}:{self.admin_port}"

    def __enter__(self) -> ProxyServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> ProxyServer:
        if self._thread is not None:
            raise ProxyError("proxy already started")
        sockets = [_listen(self.port)]
        self.port = sockets[0].getsockname()[1]
        apps: list[Any] = [_ProxyApp(self)]
        if self.admin_port is not None:
            from sandbox.proxy_admin import build_admin_app

            sockets.append(_listen(self.admin_port))
            self.admin_port = sockets[1].getsockname()[1]
            self.admin_token = secrets.token_urlsafe(32)
            apps.append(build_admin_app(self, self.admin_token))
        self._thread = threading.Thread(target=self._run, args=(apps, sockets), name="tbx-proxy", daemon=True)
        self._thread.start()
        self._started.wait()
        if self._start_error is not None:
            raise ProxyError(f"proxy failed to start: {self._start_error}") from self._start_error
        return self

    def _run(self, apps: list[Any], sockets: list[socket.socket]) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._serve(apps, sockets))
        except BaseException as exc:  # surfaced by start()
            self._start_error = exc
        finally:
            self._started.set()
            with contextlib.suppress(Exception):
                pending = asyncio.all_tasks(loop)
                for task in pending:
                    task.cancel()
                loop.run_until_complete(asyncio.wait(pending, timeout=2) if pending else asyncio.sleep(0))
                loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()
            for sock in sockets:
                sock.close()

    async def _serve(self, apps: list[Any], sockets: list[socket.socket]) -> None:
        for app in apps:
            config = uvicorn.Config(
                app,
                lifespan="off",
                access_log=False,
                log_level="warning",
                ws="none",
                timeout_graceful_shutdown=2,
            )
            self._servers.append(uvicorn.Server(config))
        tasks = [
            asyncio.create_task(srv.serve(sockets=[sock]))
            for srv, sock in zip(self._servers, sockets, strict=True)
        ]
        while not all(srv.started for srv in self._servers):
            done = [t for t in tasks if t.done()]
            if done:
                await done[0]  # raises the start-up error
                raise ProxyError("the HTTP server stopped during start-up")
            await asyncio.sleep(0.005)
        self._started.set()
        await asyncio.gather(*tasks)
        # Stopped: take every remaining attempt down on this loop.
        await asyncio.gather(*(self._close_attempt(a) for a in list(self._attempts.values())))
        self._attempts.clear()

    def close(self) -> None:
        """Unregister every attempt (closing their upstream sessions) and stop. Idempotent."""
        if self._closed or self._thread is None:
            self._closed = True
            return
        loop = self._loop
        if loop is not None and self._start_error is None and self._thread.is_alive():
            with contextlib.suppress(RuntimeError, concurrent.futures.TimeoutError):
                asyncio.run_coroutine_threadsafe(self._shutdown(), loop).result(timeout=CLOSE_TIMEOUT + 2)
        self._closed = True
        self._thread.join(timeout=CLOSE_TIMEOUT + 5)

    async def _shutdown(self) -> None:
        attempts = list(self._attempts.values())
        self._attempts.clear()
        await asyncio.gather(*(self._close_attempt(a) for a in attempts))
        for srv in self._servers:
            srv.should_exit = True

    # ---- thread hopping ----------------------------------------------------
    def _submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        if self._loop is None or self._closed or not self._started.is_set() or self._start_error is not None:
            coro.close()
            raise ProxyError("proxy is not running (call start() or use `with ProxyServer() as proxy:`)")
        if threading.current_thread() is self._thread:
            coro.close()
            raise ProxyError("the blocking proxy API cannot be used from the proxy's own thread")
        return asyncio.run_coroutine_threadsafe(coro, self._loop)

    # ---- registration API --------------------------------------------------
    def register(
        self,
        attempt_id: str,
        upstreams: Mapping[str, str],
        allowed_tools: Sequence[str] | None = None,
        overrides: Mapping[str, str] | None = None,
        *,
        arg_overrides: Mapping[str, Mapping[str, str]] | None = None,
        call_timeout: float | None = None,
    ) -> Registration:
        """Register one attempt: `upstreams` maps domain -> MCP URL of its server;
        `allowed_tools` (None: every tool the upstreams list) is the allow-list;
        `overrides` maps tool -> description shown instead of the server's,
        `arg_overrides` tool -> {argument: description}. Connects to every
        upstream and lists its tools before returning; raises ProxyError when an
        upstream is unreachable, an allow-listed tool is missing or reserved, or
        two upstreams list the same allow-listed tool."""
        coro = self._register(
            attempt_id, dict(upstreams), allowed_tools, overrides, arg_overrides, call_timeout
        )
        return self._submit(coro).result()

    async def aregister(self, *args: Any, **kwargs: Any) -> Registration:
        """`register` for callers on an event loop (does not block it)."""
        return await asyncio.to_thread(self.register, *args, **kwargs)

    def unregister(self, token: str) -> list[ProxyCall]:
        """Close the attempt's sessions; returns its recorded calls. Its token stops working at once."""
        return self._submit(self._unregister(token)).result()

    async def aunregister(self, token: str) -> list[ProxyCall]:
        return await asyncio.to_thread(self.unregister, token)

    def calls(self, token: str) -> list[ProxyCall]:
        """The attempt's recorded tool calls so far, in arrival order."""
        attempt = self._lookup(token)
        if attempt is None:
            raise ProxyError("unknown token")
        return attempt.snapshot()

    def attempts(self) -> list[str]:
        return [a.attempt_id for a in list(self._attempts.values())]

    # ---- internals (proxy loop) --------------------------------------------
    def _lookup(self, token: str | None) -> _Attempt | None:
        if not token:
            return None
        return self._attempts.get(_digest(token))

    async def _register(
        self,
        attempt_id: str,
        upstreams: dict[str, str],
        allowed_tools: Sequence[str] | None,
        overrides: Mapping[str, str] | None,
        arg_overrides: Mapping[str, Mapping[str, str]] | None,
        call_timeout: float | None,
    ) -> Registration:
        if not upstreams:
            raise ProxyError(f"attempt {attempt_id}: no upstream servers given")
        if allowed_tools is not None:
            reserved = [t for t in allowed_tools if t.startswith(RESERVED_PREFIX)]
            if reserved:
                raise ProxyError(f"attempt {attempt_id}: reserved tools cannot be allow-listed: {reserved}")
        token = secrets.token_urlsafe(32)
        attempt = _Attempt(attempt_id, _digest(token), call_timeout or self.call_timeout)
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[None] = loop.create_future()
        attempt.task = asyncio.create_task(
            self._attempt_lifetime(
                attempt, upstreams, allowed_tools, overrides or {}, arg_overrides or {}, ready
            )
        )
        await asyncio.shield(ready)
        self._attempts[attempt.token_digest] = attempt
        return Registration(
            attempt_id=attempt_id,
            token=token,
            url=self.url,
            path_url=f"http://{HOST}:{self.port}/a/{token}/mcp",
            tools=list(attempt.routes),
        )

    async def _attempt_lifetime(
        self,
        attempt: _Attempt,
        upstreams: dict[str, str],
        allowed_tools: Sequence[str] | None,
        overrides: Mapping[str, str],
        arg_overrides: Mapping[str, Mapping[str, str]],
        ready: asyncio.Future[None],
    ) -> None:
        """Owns the attempt's upstream clients and session manager: they are
        entered and exited in this one task (anyio's scoping rule)."""
        failure: BaseException | None = None
        try:
            with anyio.CancelScope(deadline=anyio.current_time() + self.connect_timeout) as scope:
                async with AsyncExitStack() as stack:
                    # Errors are caught inside the stack: raised through the
                    # clients' task groups they would arrive wrapped in groups.
                    try:
                        await self._open_attempt(
                            attempt, stack, upstreams, allowed_tools, overrides, arg_overrides
                        )
                    except Exception as exc:
                        failure = exc
                    else:
                        scope.deadline = math.inf
                        ready.set_result(None)
                        await attempt.closed.wait()
            if scope.cancelled_caught and failure is None and not ready.done():
                failure = ProxyError(
                    f"attempt {attempt.attempt_id}: upstream servers did not answer within "
                    f"{self.connect_timeout:.0f}s ({', '.join(upstreams.values())})"
                )
        except BaseException as exc:
            if not ready.done():
                failure = exc if isinstance(exc, Exception) else ProxyError(f"cancelled: {exc!r}")
            elif not isinstance(exc, asyncio.CancelledError):
                log.warning("attempt %s: proxy session ended with %r", attempt.attempt_id, _leaf(exc))
            if not isinstance(exc, Exception):
                raise
        finally:
            attempt.manager = None
            if not ready.done():
                ready.set_exception(
                    failure or ProxyError(f"attempt {attempt.attempt_id}: registration failed")
                )

    async def _open_attempt(
        self,
        attempt: _Attempt,
        stack: AsyncExitStack,
        upstreams: dict[str, str],
        allowed_tools: Sequence[str] | None,
        overrides: Mapping[str, str],
        arg_overrides: Mapping[str, Mapping[str, str]],
    ) -> None:
        listed: list[tuple[str, str, Client, types.Tool]] = []
        for domain, url in upstreams.items():
            try:
                client = await stack.enter_async_context(upstream_client(url))
                tools = await list_all_tools(client)
            except Exception as exc:
                raise ProxyError(
                    f"attempt {attempt.attempt_id}: cannot reach the {domain} server at {url}: {_leaf(exc)!r}"
                ) from exc
            listed.extend((domain, url, client, t) for t in tools)
        attempt.routes = _routes(attempt.attempt_id, listed, allowed_tools, overrides, arg_overrides)
        if self.fast_path and all(urlsplit(u).scheme == "http" for u in upstreams.values()):
            pools = {u: relay.UpstreamPool(u) for u in upstreams.values()}
            for pool in pools.values():
                stack.push_async_callback(pool.aclose)
            attempt.pools = pools
        manager = StreamableHTTPSessionManager(
            app=self._attempt_server(attempt, upstreams),
            json_response=True,
            security_settings=_LOCAL_ONLY,
            max_request_body_size=self.max_request_bytes,
        )
        await stack.enter_async_context(manager.run())
        attempt.manager = manager

    def _attempt_server(self, attempt: _Attempt, upstreams: Mapping[str, str]) -> Server[Any]:
        listing = types.ListToolsResult(tools=[r.tool for r in attempt.routes.values()])
        schemas = {name: r.tool.input_schema for name, r in attempt.routes.items()}

        async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
            return listing

        async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
            return await self._forward(attempt, params.name, params.arguments)

        return Server(
            "tbx-" + "+".join(upstreams),
            version="tbx-proxy",
            on_list_tools=list_tools,
            on_call_tool=call_tool,
            get_tool_input_schema=schemas.get,
        )

    async def _forward(
        self, attempt: _Attempt, name: str, arguments: dict[str, Any] | None
    ) -> types.CallToolResult:
        """A call through the attempt's MCP `Server` and the upstream MCP client."""
        name = relay.replaced(name)  # a lone surrogate in the name could be neither answered nor recorded
        started = datetime.now(UTC)
        t0 = time.perf_counter()
        route = attempt.routes.get(name)
        domain: str | None = None
        outcome: Outcome
        if route is None:
            # Unknown, not allow-listed and reserved tools look the same: nothing reaches an upstream.
            result = _error_result(f"Unknown tool: '{name}'")
            outcome = "refused"
        elif not relay.sendable(arguments):  # lone surrogates: the caller's text, never sent on
            result, outcome, arguments = (
                _error_result(relay.UNICODE_PROBLEM),
                "refused",
                relay.replaced(arguments),
            )
            domain = route.domain
        else:
            domain = route.domain
            try:
                with anyio.fail_after(attempt.call_timeout):
                    result = await route.client.call_tool(name, arguments)
                outcome = "tool_error" if result.is_error else "ok"
            except TimeoutError:
                result = _timeout_result(name, attempt.call_timeout)
                outcome = "timeout"
            except MCPError as exc:
                result = _error_result(f"Tool call '{name}' was rejected by the tool server: {exc.message}")
                outcome = "protocol_error"
            except Exception as exc:
                log.warning("attempt %s: %s failed upstream: %r", attempt.attempt_id, name, _leaf(exc))
                result = _unreachable_result(name, _leaf(exc))
                outcome = "upstream_error"
        attempt.record_call(
            name, arguments, _text(result), bool(result.is_error), outcome, domain, started, t0
        )
        return result

    async def _relay(
        self,
        attempt: _Attempt,
        manager: StreamableHTTPSessionManager,
        scope: Scope,
        receive: Receive,
        send: Send,
    ) -> None:
        """The fast path: a `tools/call` of an allow-listed tool is relayed as is
        and its reply returned unchanged; anything else (listing, refusals, a
        malformed body) goes to the attempt's MCP `Server` with the body replayed."""
        body = await relay.read_body(receive, self.max_request_bytes)
        if body is None:
            await _respond(send, 413, _jsonrpc_error(-32600, "request too large"))
            return
        try:
            call = relay.tool_call(body)
        except relay.UnsendableCall as bad:  # the caller's text, answered as a tool error
            t0, started, known = time.perf_counter(), datetime.now(UTC), attempt.routes.get(bad.name)
            result = _error_result(str(bad))
            domain = known.domain if known else None
            attempt.record_call(bad.name, bad.arguments, _text(result), True, "refused", domain, started, t0)
            await _respond(send, 200, relay.result_body(bad.request_id, result))
            return
        route = attempt.routes.get(call[1]) if call is not None else None
        pools = attempt.pools
        if call is None or route is None or pools is None:
            await manager.handle_request(scope, relay.replay(body, receive), send)
            return
        request_id, name, arguments, forwarded = call
        started = datetime.now(UTC)
        t0 = time.perf_counter()
        outcome: Outcome
        try:
            with anyio.fail_after(attempt.call_timeout):
                status, headers, reply = await pools[route.url].post(forwarded, relay.forward_headers(scope))
        except TimeoutError:
            result, outcome = _timeout_result(name, attempt.call_timeout), "timeout"
        except relay.UpstreamError as exc:
            log.warning("attempt %s: %s failed upstream: %r", attempt.attempt_id, name, exc)
            result, outcome = _unreachable_result(name, exc), "upstream_error"
        else:
            content_type = headers.get("content-type", "application/json")
            summary = relay.reply_summary(relay.reply_message(reply, content_type))
            fallback: tuple[str, bool, Outcome] = (
                reply.decode(errors="replace")[:2000],
                True,
                "upstream_error",
            )
            text, is_error, kind = summary or fallback
            attempt.record_call(name, arguments, text, is_error, kind, route.domain, started, t0)
            await _respond(send, status, reply, content_type=content_type.encode("latin-1"))
            return
        attempt.record_call(name, arguments, _text(result), True, outcome, route.domain, started, t0)
        await _respond(send, 200, relay.result_body(request_id, result))

    async def _unregister(self, token: str) -> list[ProxyCall]:
        attempt = self._attempts.pop(_digest(token), None)
        if attempt is None:
            raise ProxyError("unknown token")
        await self._close_attempt(attempt)
        return attempt.snapshot()

    async def _close_attempt(self, attempt: _Attempt) -> None:
        attempt.manager = None
        attempt.closed.set()
        task = attempt.task
        if task is None:
            return
        done, _ = await asyncio.wait({task}, timeout=CLOSE_TIMEOUT)
        if not done:
            task.cancel()
            await asyncio.wait({task}, timeout=1.0)


_LOCAL_ONLY = TransportSecuritySettings(
    enable_dns_rebinding_protection=True,
    allowed_hosts=["127.0.0.1:*", "localhost:*"],
    allowed_origins=["http://127.0.0.1:*", "http://localhost:*"],
)


def _leaf(exc: BaseException) -> BaseException:
    """The first real error inside (nested) exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


async def list_all_tools(client: Client) -> list[types.Tool]:
    """Every tool an MCP server lists, following pagination (at most 100 pages;
    an empty cursor ends the listing like a missing one)."""
    tools: list[types.Tool] = []
    cursor: str | None = None
    for _ in range(100):
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            break
    return tools


def _routes(
    attempt_id: str,
    listed: Sequence[tuple[str, str, Client, types.Tool]],
    allowed_tools: Sequence[str] | None,
    overrides: Mapping[str, str],
    arg_overrides: Mapping[str, Mapping[str, str]],
) -> dict[str, _Route]:
    """The attempt's tool table, in allow-list order (else upstream order)."""
    by_name: dict[str, list[tuple[str, str, Client, types.Tool]]] = {}
    for entry in listed:
        if not entry[3].name.startswith(RESERVED_PREFIX):
            by_name.setdefault(entry[3].name, []).append(entry)
    names = list(by_name) if allowed_tools is None else list(dict.fromkeys(allowed_tools))
    missing = [n for n in names if n not in by_name]
    if missing:
        raise ProxyError(f"attempt {attempt_id}: allow-listed tools no upstream offers: {missing}")
    clashes = {n: [entry[0] for entry in by_name[n]] for n in names if len(by_name[n]) > 1}
    if clashes:
        raise ProxyError(f"attempt {attempt_id}: tools offered by more than one upstream: {clashes}")
    unknown = sorted((set(overrides) | set(arg_overrides)) - set(names))
    if unknown:
        raise ProxyError(f"attempt {attempt_id}: overrides for tools that are not listed: {unknown}")
    routes: dict[str, _Route] = {}
    for name in names:
        domain, url, client, tool = by_name[name][0]
        routes[name] = _Route(
            domain, url, client, _apply_overrides(tool, overrides.get(name), arg_overrides.get(name))
        )
    return routes
