"""The session proxy: one MCP endpoint (streamable HTTP) on 127.0.0.1 for every
attempt, each reached only with its own unguessable token.

    with ProxyServer() as proxy:
        reg = proxy.register(RegisterRequest.for_sandbox(handle, ToolPolicy(allowed_tools=[...])))
        # an MCP client connects to reg.url with header `Authorization: Bearer <reg.token>`
        # (or to reg.path_url, which carries the token in the path)
        ...
        calls = proxy.unregister(reg.token)   # the attempt's recorded tool calls

`AttemptRegistry` (this module) holds the attempts and serves the
agent-facing app; `ProxyServer` hosts it on its own event loop in a
background thread (`sandbox.proxy_host`) and offers the blocking and async
registration API; `tbx proxy` adds a separate admin listener
(`sandbox.proxy_admin`) taking the same `RegisterRequest`. The records are
in `sandbox.proxy_models`, the tool table in `sandbox.proxy_routes`, the MCP
clients in `sandbox.mcp_clients`.

Per attempt the proxy keeps one upstream MCP client per backend server
(entered once, reused for every call) and one low-level MCP `Server` of its
own that lists only the allow-listed tools (description overrides applied)
and forwards calls. A token selects exactly one attempt's `Server`, so it can
never reach another attempt's upstreams or sessions. Tools whose names start
with `__reserved__` and tools outside the allow-list are never listed and a
call to them is answered `Unknown tool` without reaching any upstream.

Every request to an upstream carries the upstream's headers (the sandbox's
per-attempt secret, without which its servers answer 401). A registration
naming its sandbox's containers is checked live at registration and watched
after (`sandbox.proxy_watch`): once one is gone, every later request of the
attempt is refused (HTTP 503, the cause in the error) and nothing is relayed;
`gone(token)` tells the owner why, so it can end the attempt as a system error.

Fast path (`fast_path=True`, the default): a 2026-era `tools/call` of an
allow-listed tool is relayed as is to its server over a keep-alive
connection and the server's reply returned unchanged (see
`sandbox.proxy_relay`); the checks, the timeout and the recording are the
same as on the SDK path, which serves everything else.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import math
import secrets
import threading
import time
from collections.abc import Callable, Mapping
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

import anyio
import mcp_types as types
from mcp import Client
from mcp.server.lowlevel.server import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPError
from starlette.types import Receive, Scope, Send

from sandbox import proxy_relay as relay
from sandbox.mcp_clients import list_all_tools, upstream_client
from sandbox.proxy_host import HOST, LoopHost, listen
from sandbox.proxy_models import (
    Outcome,
    ProxyCall,
    ProxyError,
    RegisterRequest,
    Registration,
    ToolPolicy,
    Upstream,
)
from sandbox.proxy_routes import RESERVED_PREFIX, Route, build_routes
from sandbox.proxy_watch import SandboxWatch, check_alive

log = logging.getLogger(__name__)

DEFAULT_CALL_TIMEOUT = 60.0
DEFAULT_MAX_REQUEST_BYTES = 1024 * 1024
DEFAULT_CONNECT_TIMEOUT = 15.0
CLOSE_TIMEOUT = 5.0


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


@dataclass
class _Attempt:
    attempt_id: str
    token_digest: str
    call_timeout: float
    routes: dict[str, Route] = field(default_factory=dict)
    manager: StreamableHTTPSessionManager | None = None
    pools: dict[str, relay.UpstreamPool] | None = None  # the fast path's connections, by upstream URL
    calls: list[ProxyCall] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    closed: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None
    gone: str | None = None  # why its sandbox counts as lost (then nothing is relayed)

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


class _ProxyApp:
    """The agent-facing ASGI app: token -> that attempt's MCP session manager."""

    def __init__(self, registry: AttemptRegistry):
        self.registry = registry

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
        attempt = self.registry.lookup(token)
        if attempt is not None and attempt.gone is not None:
            await _respond(send, 503, _jsonrpc_error(-32003, f"{attempt.gone}; the attempt cannot go on"))
            return
        if attempt is None or attempt.manager is None:
            await _respond(
                send,
                401,
                _jsonrpc_error(-32001, "missing or invalid token (send Authorization: Bearer <token>)"),
                extra=[(b"www-authenticate", b'Bearer realm="tbx"')],
            )
            return
        if content_length is not None and content_length > self.registry.max_request_bytes:
            await _respond(send, 413, _jsonrpc_error(-32600, "request too large"))
            return
        if attempt.pools is not None and relay.relayable_headers(scope):
            await self.registry.relay(attempt, attempt.manager, scope, receive, send)
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


class AttemptRegistry:
    """The registered attempts and the agent-facing app that serves them. Every
    coroutine here runs on the proxy's loop; `calls` and `lookup` are safe from
    any thread."""

    def __init__(
        self,
        base_url: Callable[[], str],
        *,
        call_timeout: float = DEFAULT_CALL_TIMEOUT,
        max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        fast_path: bool = True,
    ):
        if call_timeout <= 0 or max_request_bytes <= 0:
            raise ValueError("call_timeout and max_request_bytes must be positive")
        self.base_url = base_url  # where agents reach the app (known once its socket is bound)
        self.call_timeout = call_timeout
        self.max_request_bytes = max_request_bytes
        self.connect_timeout = connect_timeout
        self.fast_path = fast_path
        self._attempts: dict[str, _Attempt] = {}  # sha256(token) -> attempt
        self._watch: SandboxWatch | None = None
        self.app = _ProxyApp(self)

    def lookup(self, token: str | None) -> _Attempt | None:
        if not token:
            return None
        return self._attempts.get(_digest(token))

    async def register(self, request: RegisterRequest) -> Registration:
        """Register one attempt: connects to every upstream and lists its tools
        before returning; raises ProxyError when an upstream is unreachable, an
        allow-listed tool is missing or reserved, or two upstreams list the same
        allow-listed tool, and SandboxGoneError when a named container is not running."""
        attempt_id, policy = request.attempt_id, request.policy
        if not request.upstreams:
            raise ProxyError(f"attempt {attempt_id}: no upstream servers given")
        if policy.allowed_tools is not None:
            reserved = [t for t in policy.allowed_tools if t.startswith(RESERVED_PREFIX)]
            if reserved:
                raise ProxyError(f"attempt {attempt_id}: reserved tools cannot be allow-listed: {reserved}")
        if request.containers:
            # Connect only to a sandbox known alive; from here on the watch reports a loss.
            await asyncio.to_thread(check_alive, request.containers, request.network)
        token = secrets.token_urlsafe(32)
        attempt = _Attempt(attempt_id, _digest(token), request.call_timeout or self.call_timeout)
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[None] = loop.create_future()
        attempt.task = asyncio.create_task(self._attempt_lifetime(attempt, request.upstreams, policy, ready))
        await asyncio.shield(ready)
        self._attempts[attempt.token_digest] = attempt
        if request.containers:
            watch = self._watch or SandboxWatch(self.watch_callback(loop))
            self._watch = watch
            watch.add(attempt.token_digest, request.containers, request.network)
        base = self.base_url()
        return Registration(
            attempt_id=attempt_id,
            token=token,
            url=f"{base}/mcp",
            path_url=f"{base}/a/{token}/mcp",
            tools=list(attempt.routes),
        )

    def watch_callback(self, loop: asyncio.AbstractEventLoop) -> Callable[[str, str], None]:
        """What the sandbox watch calls (from its threads) on a loss: `mark_gone` on `loop`."""

        def on_gone(digest: str, cause: str) -> None:
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                loop.call_soon_threadsafe(self.mark_gone, digest, cause)

        return on_gone

    def mark_gone(self, digest: str, cause: str) -> None:
        """From now on the attempt (by token digest) relays nothing: its sandbox is lost."""
        attempt = self._attempts.get(digest)
        if attempt is None or attempt.gone is not None:
            return
        attempt.gone = cause
        pools, attempt.pools = attempt.pools, None
        for pool in (pools or {}).values():
            asyncio.get_running_loop().create_task(pool.aclose())

    def gone(self, token: str) -> str | None:
        """Why the attempt's sandbox counts as lost, or None while it is fine."""
        attempt = self.lookup(token)
        if attempt is None:
            raise ProxyError("unknown token")
        return attempt.gone

    async def _attempt_lifetime(
        self,
        attempt: _Attempt,
        upstreams: dict[str, Upstream],
        policy: ToolPolicy,
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
                        await self._open_attempt(attempt, stack, upstreams, policy)
                    except Exception as exc:
                        failure = exc
                    else:
                        scope.deadline = math.inf
                        ready.set_result(None)
                        await attempt.closed.wait()
            if scope.cancelled_caught and failure is None and not ready.done():
                failure = ProxyError(
                    f"attempt {attempt.attempt_id}: upstream servers did not answer within "
                    f"{self.connect_timeout:.0f}s ({', '.join(u.url for u in upstreams.values())})"
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
        upstreams: dict[str, Upstream],
        policy: ToolPolicy,
    ) -> None:
        listed: list[tuple[str, Upstream, Client, types.Tool]] = []
        for domain, upstream in upstreams.items():
            try:
                client = await stack.enter_async_context(
                    upstream_client(upstream.url, upstream.headers, interface=upstream.interface)
                )
                tools = await list_all_tools(client)
            except Exception as exc:
                raise ProxyError(
                    f"attempt {attempt.attempt_id}: cannot reach the {domain} server at {upstream.url}: "
                    f"{_leaf(exc)!r}"
                ) from exc
            listed.extend((domain, upstream, client, t) for t in tools)
        attempt.routes = build_routes(attempt.attempt_id, listed, policy)
        if self.fast_path and all(urlsplit(u.url).scheme == "http" for u in upstreams.values()):
            pools = {u.url: relay.UpstreamPool(u.url, u.interface) for u in upstreams.values()}
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

    def _attempt_server(self, attempt: _Attempt, upstreams: Mapping[str, Upstream]) -> Server[Any]:
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

    async def relay(
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
                status, headers, reply = await pools[route.url].post(
                    forwarded, relay.forward_headers(scope) + list(route.headers.items())
                )
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

    async def unregister(self, token: str) -> list[ProxyCall]:
        """Close the attempt's sessions; returns its recorded calls. Its token stops working at once."""
        attempt = self._attempts.pop(_digest(token), None)
        if attempt is None:
            raise ProxyError("unknown token")
        if self._watch is not None:
            self._watch.discard(attempt.token_digest)
        await self._close_attempt(attempt)
        return attempt.snapshot()

    def calls(self, token: str) -> list[ProxyCall]:
        """The attempt's recorded tool calls so far, in arrival order (thread-safe)."""
        attempt = self.lookup(token)
        if attempt is None:
            raise ProxyError("unknown token")
        return attempt.snapshot()

    def attempts(self) -> list[str]:
        return [a.attempt_id for a in list(self._attempts.values())]

    async def close_all(self) -> None:
        """Take every attempt down (on the proxy's loop) and stop watching."""
        attempts = list(self._attempts.values())
        self._attempts.clear()
        if self._watch is not None:
            await asyncio.to_thread(self._watch.close)
            self._watch = None
        await asyncio.gather(*(self._close_attempt(a) for a in attempts))

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
        self.port = port
        self.registry = AttemptRegistry(
            lambda: f"http://{HOST}:{self.port}",
            call_timeout=call_timeout,
            max_request_bytes=max_request_bytes,
            connect_timeout=connect_timeout,
            fast_path=fast_path,
        )
        self.admin_port = admin_port  # None: no admin listener (in-process API only)
        self.admin_token: str | None = None
        self._host = LoopHost("tbx-proxy")

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}/mcp"

    @property
    def fast_path(self) -> bool:
        return self.registry.fast_path

    @property
    def call_timeout(self) -> float:
        return self.registry.call_timeout

    @property
    def max_request_bytes(self) -> int:
        return self.registry.max_request_bytes

    @property
    def running(self) -> bool:
        return self._host.running

    def cpu_time(self) -> float:
        """CPU seconds the proxy's thread has used so far (for overhead measurements)."""
        return self._host.cpu_time()

    @property
    def admin_url(self) -> str | None:
        return None if self.admin_port is None else f"http://{HOST}:{self.admin_port}"

    def __enter__(self) -> ProxyServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> ProxyServer:
        sock = listen(self.port)
        self.port = sock.getsockname()[1]
        served: list[tuple[Any, Any]] = [(self.registry.app, sock)]
        if self.admin_port is not None:
            from sandbox.proxy_admin import build_admin_app

            admin_sock = listen(self.admin_port)
            self.admin_port = admin_sock.getsockname()[1]
            self.admin_token = secrets.token_urlsafe(32)
            served.append((build_admin_app(self.registry, self.admin_token), admin_sock))
        self._host.start(served, on_exit=self.registry.close_all)
        return self

    def close(self) -> None:
        """Unregister every attempt (closing their upstream sessions) and stop. Idempotent."""
        self._host.stop(before=self.registry.close_all)

    def register(self, request: RegisterRequest) -> Registration:
        """Register one attempt (see `AttemptRegistry.register`)."""
        return self._host.submit(self.registry.register(request)).result()

    async def aregister(self, request: RegisterRequest) -> Registration:
        """`register` for callers on an event loop (does not block it)."""
        return await asyncio.to_thread(self.register, request)

    def unregister(self, token: str) -> list[ProxyCall]:
        """Close the attempt's sessions; returns its recorded calls. Its token stops working at once."""
        return self._host.submit(self.registry.unregister(token)).result()

    async def aunregister(self, token: str) -> list[ProxyCall]:
        return await asyncio.to_thread(self.unregister, token)

    def calls(self, token: str) -> list[ProxyCall]:
        """The attempt's recorded tool calls so far, in arrival order."""
        return self.registry.calls(token)

    def gone(self, token: str) -> str | None:
        """Why the attempt's sandbox is lost (its containers or network vanished), else None."""
        return self.registry.gone(token)

    def attempts(self) -> list[str]:
        return self.registry.attempts()


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
