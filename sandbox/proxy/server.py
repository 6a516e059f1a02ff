"""`ProxyServer`, the tool proxy's front: binds 127.0.0.1, serves the
`AttemptRegistry`'s agent-facing app (and, for `tbx proxy`, the admin API) on
its own event loop in a background thread (`host.py`), and offers the
blocking and async registration API."""

from __future__ import annotations

import asyncio
import secrets
from typing import Any

from sandbox.proxy.calls import DIRECT_ID, CallReply, direct_call, forward_call, refuse_if_gone
from sandbox.proxy.host import HOST, LoopHost, listen
from sandbox.proxy.limits import DEFAULT_CALL_TIMEOUT, DEFAULT_CONNECT_TIMEOUT, DEFAULT_MAX_REQUEST_BYTES
from sandbox.proxy.loss import Loss
from sandbox.proxy.memory import return_large_buffers
from sandbox.proxy.models import ProxyCall, ProxyError, RegisterRequest, Registration
from sandbox.proxy.registry import AttemptRegistry
from sandbox.proxy.relay import UpstreamPool


class ProxyServer:
    """The tool proxy. `start()` (or `with`) binds 127.0.0.1:`port` (0 = any
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
        follow_events: bool = True,
    ):
        self.port = port
        return_large_buffers()  # the replies it reads whole go back to the system when freed
        # Docker's events followed from start(), not from the first registration: sets
        # booted after that register without a Docker call (see sandbox.proxy.watch).
        self.follow_events = follow_events
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
            from sandbox.proxy.admin import build_admin_app

            admin_sock = listen(self.admin_port)
            self.admin_port = admin_sock.getsockname()[1]
            self.admin_token = secrets.token_urlsafe(32)
            served.append((build_admin_app(self.registry, self.admin_token), admin_sock))
        self._host.start(served, on_exit=self.registry.close_all)
        if self.follow_events:
            self._host.submit(self._start_watch()).result()
        return self

    async def _start_watch(self) -> None:
        self.registry.watch()

    def close(self) -> None:
        """Unregister every attempt (closing their upstream sessions) and stop. Idempotent."""
        self._host.stop(before=self.registry.close_all)

    def register(self, request: RegisterRequest) -> Registration:
        """Register one attempt (see `AttemptRegistry.register`)."""
        return self._host.submit(self.registry.register(request)).result()

    async def aregister(self, request: RegisterRequest) -> Registration:
        """`register` for callers on an event loop (does not block it). It waits for the
        proxy's loop without holding a worker thread: resets at once would otherwise queue
        for the caller's few default-executor threads. A cancelled caller does not cancel
        the registration (as a blocked thread would not have)."""
        return await asyncio.shield(asyncio.wrap_future(self._host.submit(self.registry.register(request))))

    def unregister(self, token: str) -> list[ProxyCall]:
        """Close the attempt's sessions; returns its recorded calls. Its token stops working at once."""
        return self._host.submit(self.registry.unregister(token)).result()

    async def aunregister(self, token: str) -> list[ProxyCall]:
        return await asyncio.shield(asyncio.wrap_future(self._host.submit(self.registry.unregister(token))))

    async def acall(
        self, token: str, name: str, arguments: dict[str, Any] | None, pools: dict[str, UpstreamPool]
    ) -> CallReply:
        """One tool call of the attempt from a caller in this process, on the caller's
        loop (`calls.direct_call`): the same checks, timeout and recording as a call
        through `url`, without the loopback hop and the proxy's loop. `pools`: the
        caller's connections (start with {}; `aclose()` each when done). An attempt
        without the fast path (fast_path=False, a server not on plain http) is served
        by the SDK path on the proxy's loop instead. Raises ProxyError for an unknown
        token, SandboxGoneError once the attempt's sandbox is lost."""
        attempt = self.registry.lookup(token)
        if attempt is None:
            raise ProxyError("unknown token")
        refuse_if_gone(attempt)
        if attempt.pools is None:
            result = await asyncio.wrap_future(self._host.submit(forward_call(attempt, name, arguments)))
            return CallReply.made(DIRECT_ID, result)
        return await direct_call(attempt, name, arguments, pools)

    def calls(self, token: str) -> list[ProxyCall]:
        """The attempt's recorded tool calls so far, in arrival order."""
        return self.registry.calls(token)

    def gone(self, token: str) -> str | None:
        """Why the attempt's sandbox is lost (its containers or network vanished), else None."""
        return self.registry.gone(token)

    def loss(self, token: str) -> Loss | None:
        """The attempt's sandbox loss and whether the attempt's own load caused it
        (sandbox.proxy.loss), else None."""
        return self.registry.loss(token)

    def attempts(self) -> list[str]:
        return self.registry.attempts()
