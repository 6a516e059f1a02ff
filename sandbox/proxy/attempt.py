"""One registered attempt as the proxy holds it: its tool routes, its MCP
session manager, the fast path's upstream connections, the calls recorded so
far and, once its sandbox is lost, why."""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

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
    gone: str | None = None  # why its sandbox counts as lost (then nothing is relayed)

    def lost(self) -> str | None:
        """Why nothing may be relayed for this attempt any more (its sandbox is gone), else None."""
        return None if self.gone is None else f"{self.gone}; the attempt cannot go on"

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
