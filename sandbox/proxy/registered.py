"""One registered attempt as the proxy holds it: its tool routes, its MCP
session manager, the fast path's upstream connections, the calls recorded so
far, the calls in flight (whose load a lost container may have been:
sandbox.proxy.loss) and, once its sandbox is lost, why."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import anyio
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

from sandbox.container_fate import Fate
from sandbox.proxy.loss import Loss, agent_load
from sandbox.proxy.models import Outcome, ProxyCall
from sandbox.proxy.relay import UpstreamPool
from sandbox.proxy.routes import Route


@dataclass
class RegisteredAttempt:
    attempt_id: str
    token_digest: str
    call_timeout: float
    routes: dict[str, Route] = field(default_factory=dict)
    manager: StreamableHTTPSessionManager | None = None
    pools: dict[str, UpstreamPool] | None = None  # the fast path's connections, by upstream URL
    calls: list[ProxyCall] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    closed: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None
    loss: Loss | None = None  # why its sandbox counts as lost (then nothing is relayed)
    # calls sent and not answered yet: key -> when they started (epoch seconds)
    in_flight: dict[int, float] = field(default_factory=dict)
    # their cancel scopes, each with the loop its call runs on (`sending`)
    _cuts: dict[int, tuple[asyncio.AbstractEventLoop, anyio.CancelScope]] = field(default_factory=dict)
    _keys: Iterator[int] = field(default_factory=itertools.count)

    @property
    def gone(self) -> str | None:
        """Why its sandbox counts as lost, whoever caused it; None while it is fine."""
        return None if self.loss is None else self.loss.cause

    def lost(self) -> str | None:
        """Why nothing may be relayed for this attempt any more because the infrastructure
        lost its sandbox (answered 503), else None. A loss the attempt's own load caused
        is answered call by call as a tool error instead (calls.admit)."""
        if self.loss is None or self.loss.agent_load:
            return None
        return f"{self.loss.cause}; the attempt cannot go on"

    def lose(self, cause: str, fate: Fate | None) -> Loss:
        """Mark the sandbox lost (`fate`: the lost container's, when known) and say whose
        doing it was: its own memory limit hit while a call of this attempt was in
        flight is the attempt's (sandbox.proxy.loss)."""
        with self.lock:
            spans: list[tuple[float, float | None]] = [(s, None) for s in self.in_flight.values()]
            spans += [
                (c.started_at.timestamp(), c.started_at.timestamp() + c.latency_ms / 1000) for c in self.calls
            ]
        self.loss = Loss(
            cause,
            agent_load(fate, spans, self.call_timeout, time.time()),
            unknown=fate is not None and fate.unknown,
        )
        if self.lost() is not None:
            with self.lock:
                cuts = list(self._cuts.values())
            for loop, scope in cuts:
                with contextlib.suppress(RuntimeError):  # its loop closed meanwhile
                    loop.call_soon_threadsafe(scope.cancel)
        return self.loss

    @contextlib.contextmanager
    def sending(self) -> Iterator[anyio.CancelScope]:
        """While a call is out at its server (its load is this attempt's). The scope it
        gives is cancelled once the infrastructure loses the sandbox (`lost`): a killed
        server's network goes with it, so its calls in flight get no answer at all and
        would wait out the call bound (60 s) for nothing."""
        key = next(self._keys)
        with anyio.CancelScope() as scope:
            with self.lock:
                self.in_flight[key] = time.time()
                self._cuts[key] = (asyncio.get_running_loop(), scope)
            if self.lost() is not None:  # lost as it was sent
                scope.cancel()
            try:
                yield scope
            finally:
                with self.lock:
                    self.in_flight.pop(key, None)
                    self._cuts.pop(key, None)

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
