"""The registered attempts of the tool proxy: registration (connect to the
upstream servers, list and filter their tools, check and watch the sandbox),
lookup by token, the loss of a sandbox, and unregistration. Each attempt's
upstream clients and MCP session manager live in one task of the proxy's
loop (`_attempt_lifetime`); the calls themselves are `calls.py`'s.

An upstream whose tools come listed already (`Upstream.tools`, taken when its
sandbox was prepared) costs the registration no request at all: its MCP client
(the SDK path's; the fast path relays over connections of its own) connects on
its first call, in the same task (`LazyClient`)."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import math
import secrets
from collections.abc import Callable
from contextlib import AsyncExitStack
from typing import Any
from urllib.parse import urlsplit

import anyio
import mcp_types as types
from mcp import Client
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings

from sandbox.container_fate import Fate
from sandbox.proxy import calls, relay
from sandbox.proxy.app import ProxyApp
from sandbox.proxy.calls import leaf
from sandbox.proxy.clients import list_all_tools, tool_json, upstream_client
from sandbox.proxy.limits import DEFAULT_CALL_TIMEOUT, DEFAULT_CONNECT_TIMEOUT, DEFAULT_MAX_REQUEST_BYTES
from sandbox.proxy.loss import Loss
from sandbox.proxy.models import (
    ProxyCall,
    ProxyError,
    RegisterRequest,
    Registration,
    ToolPolicy,
    Upstream,
    UpstreamUnreachable,
)
from sandbox.proxy.registered import RegisteredAttempt
from sandbox.proxy.routes import RESERVED_PREFIX, ToolCaller, build_routes
from sandbox.proxy.watch import SandboxWatch, check_alive

log = logging.getLogger(__name__)

CLOSE_TIMEOUT = 5.0


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class LazyClient:
    """An upstream's MCP client connected on its first call. The connection is made by
    the attempt's lifetime task (`connects`), which owns every client it enters (anyio's
    scoping rule); a failed connection fails that call and the next one tries again."""

    def __init__(self, upstream: Upstream, connects: asyncio.Queue[LazyClient]):
        self.upstream = upstream
        self._connects = connects
        self._client: asyncio.Future[Client] | None = None

    async def call_tool(self, name: str, arguments: dict[str, Any] | None = None) -> types.CallToolResult:
        if self._client is None:
            self._client = asyncio.get_running_loop().create_future()
            self._connects.put_nowait(self)
        pending = self._client
        try:
            client = await asyncio.shield(pending)
        except Exception:
            if self._client is pending:
                self._client = None
            raise
        return await client.call_tool(name, arguments)

    def connected(self, client: Client | BaseException) -> None:
        if self._client is None or self._client.done():
            return
        if isinstance(client, BaseException):
            self._client.set_exception(client)
            self._client.exception()  # retrieved: nobody else may be waiting
        else:
            self._client.set_result(client)


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
        self._attempts: dict[str, RegisteredAttempt] = {}  # sha256(token) -> attempt
        self._watch: SandboxWatch | None = None
        self.app = ProxyApp(self.lookup, max_request_bytes)

    def lookup(self, token: str | None) -> RegisteredAttempt | None:
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
        # Connect only to a sandbox known alive; from here on the watch reports a loss.
        # A set whose whole life the watch's event stream saw needs no Docker call.
        if request.containers and not self.watch().known_alive(request.containers, request.network):
            await asyncio.to_thread(check_alive, request.containers, request.network)
        token = secrets.token_urlsafe(32)
        attempt = RegisteredAttempt(attempt_id, _digest(token), request.call_timeout or self.call_timeout)
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[None] = loop.create_future()
        attempt.task = asyncio.create_task(self._attempt_lifetime(attempt, request.upstreams, policy, ready))
        await asyncio.shield(ready)
        self._attempts[attempt.token_digest] = attempt
        if request.containers:
            self.watch().add(attempt.token_digest, request.containers, request.network)
        base = self.base_url()
        return Registration(
            attempt_id=attempt_id,
            token=token,
            url=f"{base}/mcp",
            path_url=f"{base}/a/{token}/mcp",
            tools=list(attempt.routes),
            listing=[tool_json(r.tool) for r in attempt.routes.values()],
        )

    def watch(self) -> SandboxWatch:
        """The watch of the registered sandboxes, following Docker's events from its first use
        (made on the proxy's loop: losses are marked there)."""
        if self._watch is None:
            self._watch = SandboxWatch(self.watch_callback(asyncio.get_running_loop()))
            self._watch.start()
        return self._watch

    def watch_callback(self, loop: asyncio.AbstractEventLoop) -> Callable[[str, str, Fate | None], None]:
        """What the sandbox watch calls (from its threads) on a loss: `mark_gone` on `loop`."""

        def on_gone(digest: str, cause: str, fate: Fate | None = None) -> None:
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                loop.call_soon_threadsafe(self.mark_gone, digest, cause, fate)

        return on_gone

    def mark_gone(self, digest: str, cause: str, fate: Fate | None = None) -> None:
        """From now on the attempt (by token digest) relays nothing: its sandbox is lost
        (`fate`: the lost container's, which with the calls in flight says whose doing
        it was: sandbox.proxy.loss)."""
        attempt = self._attempts.get(digest)
        if attempt is None or attempt.loss is not None:
            return
        loss = attempt.lose(cause, fate)
        if loss.agent_load:
            log.warning(
                "attempt %s: its own calls drove its sandbox over a limit: %s", attempt.attempt_id, cause
            )
        pools, attempt.pools = attempt.pools, None
        for pool in (pools or {}).values():
            asyncio.get_running_loop().create_task(pool.aclose())

    def gone(self, token: str) -> str | None:
        """Why the attempt's sandbox counts as lost (whoever caused it), or None while it is fine."""
        loss = self.loss(token)
        return None if loss is None else loss.cause

    def loss(self, token: str) -> Loss | None:
        """The attempt's sandbox loss and whose doing it was, or None while it is fine."""
        attempt = self.lookup(token)
        if attempt is None:
            raise ProxyError("unknown token")
        return attempt.loss

    async def _attempt_lifetime(
        self,
        attempt: RegisteredAttempt,
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
                    connects: asyncio.Queue[LazyClient] = asyncio.Queue()
                    try:
                        await self._open_attempt(attempt, stack, upstreams, policy, connects)
                    except Exception as exc:
                        failure = exc
                    else:
                        scope.deadline = math.inf
                        ready.set_result(None)
                        await self._serve_connects(attempt, stack, connects)
            if scope.cancelled_caught and failure is None and not ready.done():
                failure = UpstreamUnreachable(
                    f"attempt {attempt.attempt_id}: upstream servers did not answer within "
                    f"{self.connect_timeout:.0f}s ({', '.join(u.url for u in upstreams.values())})"
                )
        except BaseException as exc:
            if not ready.done():
                failure = exc if isinstance(exc, Exception) else ProxyError(f"cancelled: {exc!r}")
            elif not isinstance(exc, asyncio.CancelledError):
                log.warning("attempt %s: proxy session ended with %r", attempt.attempt_id, leaf(exc))
            if not isinstance(exc, Exception):
                raise
        finally:
            attempt.manager = None
            if not ready.done():
                ready.set_exception(
                    failure or ProxyError(f"attempt {attempt.attempt_id}: registration failed")
                )

    async def _serve_connects(
        self, attempt: RegisteredAttempt, stack: AsyncExitStack, connects: asyncio.Queue[LazyClient]
    ) -> None:
        """Until the attempt closes: connect the lazy clients that asked (in this task)."""
        closed = asyncio.ensure_future(attempt.closed.wait())
        asked: asyncio.Future[LazyClient] | None = None
        try:
            while True:
                asked = asyncio.ensure_future(connects.get())
                await asyncio.wait({closed, asked}, return_when=asyncio.FIRST_COMPLETED)
                if closed.done():
                    return
                lazy = asked.result()
                up = lazy.upstream
                try:
                    client = await stack.enter_async_context(
                        upstream_client(up.url, up.headers, interface=up.interface)
                    )
                except Exception as exc:
                    log.warning(
                        "attempt %s: connecting to %s failed: %r", attempt.attempt_id, up.url, leaf(exc)
                    )
                    lazy.connected(
                        UpstreamUnreachable(f"cannot reach the tool server at {up.url}: {leaf(exc)!r}")
                    )
                else:
                    lazy.connected(client)
        finally:
            closed.cancel()
            if asked is not None:
                asked.cancel()

    async def _open_attempt(
        self,
        attempt: RegisteredAttempt,
        stack: AsyncExitStack,
        upstreams: dict[str, Upstream],
        policy: ToolPolicy,
        connects: asyncio.Queue[LazyClient],
    ) -> None:
        listed: list[tuple[str, Upstream, ToolCaller, types.Tool]] = []
        for domain, upstream in upstreams.items():
            if upstream.tools is not None:  # listed when its sandbox was prepared
                lazy = LazyClient(upstream, connects)
                listed.extend((domain, upstream, lazy, types.Tool.model_validate(t)) for t in upstream.tools)
                continue
            try:
                client = await stack.enter_async_context(
                    upstream_client(upstream.url, upstream.headers, interface=upstream.interface)
                )
                tools = await list_all_tools(client)
            except Exception as exc:
                raise UpstreamUnreachable(
                    f"attempt {attempt.attempt_id}: cannot reach the {domain} server at {upstream.url}: "
                    f"{leaf(exc)!r}"
                ) from exc
            listed.extend((domain, upstream, client, t) for t in tools)
        attempt.routes = build_routes(attempt.attempt_id, listed, policy)
        if self.fast_path and all(urlsplit(u.url).scheme == "http" for u in upstreams.values()):
            pools = {u.url: relay.UpstreamPool(u.url, u.interface) for u in upstreams.values()}
            for pool in pools.values():
                stack.push_async_callback(pool.aclose)
            attempt.pools = pools
        manager = StreamableHTTPSessionManager(
            app=calls.attempt_server(attempt, upstreams),
            json_response=True,
            security_settings=_LOCAL_ONLY,
            max_request_body_size=self.max_request_bytes,
        )
        await stack.enter_async_context(manager.run())
        attempt.manager = manager

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

    async def _close_attempt(self, attempt: RegisteredAttempt) -> None:
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
