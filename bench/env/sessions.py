"""OpenEnv sessions: what a client holds between messages.

A session is made by the server, under an id it draws (never the client's): one per
WebSocket `/ws` that names none, or by `openenv/session/create` over `/mcp`, which a
WebSocket then joins with `/ws?session_id=` (openenv's `MCPToolClient` does both, so
its HTTP tool calls and its WebSocket resets reach one episode). A session plays one
episode at a time; a new reset ends the last. Sessions without an episode cost
nothing but memory, so their number is bounded and idle ones are dropped.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from bench.env.protocol import EnvError, ErrorCode

if TYPE_CHECKING:
    from bench.env.episode import Episode


@dataclass
class Session:
    id: str
    episode: Episode | None = None
    attached: bool = False  # a WebSocket plays it now
    closing: bool = False  # openenv/session/close came while attached: the socket's end closes it
    last_activity: float = field(default_factory=time.monotonic)

    def touch(self) -> None:
        self.last_activity = time.monotonic()


class Sessions:
    def __init__(self, limit: int, idle_timeout: float):
        self.limit, self.idle_timeout = limit, idle_timeout
        self._by_id: dict[str, Session] = {}

    def __len__(self) -> int:
        return len(self._by_id)

    def create(self) -> Session:
        self._drop_idle()
        if len(self._by_id) >= self.limit:
            raise EnvError(
                ErrorCode.CAPACITY_REACHED,
                f"Server at capacity: {len(self._by_id)}/{self.limit} sessions open; close one first",
                503,
                active_sessions=len(self._by_id),
                max_sessions=self.limit,
            )
        session = Session(id=secrets.token_hex(16))
        self._by_id[session.id] = session
        return session

    def get(self, session_id: object) -> Session:
        session = self._by_id.get(session_id) if isinstance(session_id, str) else None
        if session is None:
            raise EnvError(ErrorCode.SESSION_ERROR, f"Unknown session_id: {str(session_id)[:80]!r}", 404)
        session.touch()
        return session

    def attach(self, session_id: str) -> Session:
        """The session a WebSocket joins; one socket at a time (a second is refused)."""
        session = self.get(session_id)
        if session.attached:
            raise EnvError(ErrorCode.SESSION_ERROR, f"Session {session_id} already has an attached WebSocket")
        session.attached = True
        return session

    def remove(self, session_id: str) -> Session | None:
        return self._by_id.pop(session_id, None)

    def all(self) -> list[Session]:
        return list(self._by_id.values())

    def _drop_idle(self) -> None:
        """Sessions nobody played for idle_timeout and without a live episode."""
        cutoff = time.monotonic() - self.idle_timeout
        for sid, s in list(self._by_id.items()):
            live = s.episode is not None and not s.episode.done
            if not s.attached and not live and s.last_activity < cutoff:
                del self._by_id[sid]
