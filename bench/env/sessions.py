"""OpenEnv sessions (`EnvSession`: OpenEnv's own word, on its wire as `session_id`; in tbx
alone "session" is a Session API session): what a client holds between messages.

A session is made by the server, under an id it draws (never the client's): one per
WebSocket `/ws` that names none (the socket's own), or by `openenv/session/create` over
`/mcp`, which a WebSocket then joins with `/ws?session_id=` (openenv's `MCPToolClient`
does both, so its HTTP tool calls and its WebSocket resets reach one episode). A session
plays one episode at a time; a new reset ends the last.

What a session costs (#38 finding 3: 80 empty MCP sessions once locked every client out):

- Episode capacity only while it plays an episode: `--max-episodes` counts episodes
  (`EnvHost.check_capacity`), never sessions.
- A socket's own session lives and dies with its socket and is never refused here.
- A session made over MCP that plays no episode ("parked") is bounded per client
  (`per_client`, `ClientSessionsFull`) and in all (`MAX_PARKED`, `SessionsFull`). A
  client is its peer address (`client_key`), the only identity the server can tell
  apart: `--token-env`'s token is one secret every client shares, so it names the
  deployment, not a client. Every loopback address is one client (the local machine),
  an IPv6 client its /64 (one host's many addresses), so behind a reverse proxy every
  client is the proxy's address (raise `--sessions-per-client` there).
- Liveness is episode activity: a parked session no socket has joined is closed once
  its last reset or step (the episode's, when it had one) is `idle_timeout` old,
  whatever else the client asks of it (a `tools/list` on it answers "no episode" and
  refreshes nothing).
"""

from __future__ import annotations

import ipaddress
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from bench.env.protocol import EnvError, ErrorCode

if TYPE_CHECKING:
    from bench.env.episode import Episode

__all__ = [
    "MAX_PARKED",
    "ClientSessionsFull",
    "EnvSession",
    "Sessions",
    "SessionsFull",
    "client_key",
    "default_per_client",
]

# Parked MCP sessions of all clients together: a bound on memory (a session is a few
# hundred bytes), far above what the per-client cap lets a few clients hold.
MAX_PARKED = 4096
LOOPBACK = "loopback"
UNKNOWN_CLIENT = "unknown"


def default_per_client(max_episodes: int) -> int:
    """Parked MCP sessions one client may hold unless `--sessions-per-client` says: the
    server's whole table before #38 (a local trainer's clients are one client)."""
    return 64 + 8 * max_episodes


def client_key(host: str | None) -> str:
    """Who a request comes from, for the per-client cap: the peer's IPv4 address, its IPv6
    /64, `loopback` for every loopback address; what the ASGI server could not tell is
    `unknown` (one client)."""
    if not host:
        return UNKNOWN_CLIENT
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host  # not an address (a Unix socket's peer): its own name
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    if address.is_loopback:
        return LOOPBACK
    if isinstance(address, ipaddress.IPv6Address):
        return str(ipaddress.IPv6Network((address, 64), strict=False))
    return str(address)


class SessionsFull(EnvError):
    """Every parked MCP session the server holds is taken: one closing or idling out cures it."""


class ClientSessionsFull(EnvError):
    """This client holds its cap of parked MCP sessions: closing one, resetting in one or its
    idle timeout cures it; other clients are unaffected."""


@dataclass(eq=False)
class EnvSession:
    id: str
    client: str  # client_key of who made it
    mcp: bool  # made by openenv/session/create (bounded while parked), not a socket's own
    last_activity: float  # made, or its last reset (the episode's own steps count too: idle_since)
    episode: Episode | None = None
    attached: bool = False  # a WebSocket plays it now
    closing: bool = False  # openenv/session/close came while attached: the socket's end closes it

    @property
    def live(self) -> bool:
        """It plays an episode now (which --max-episodes counts instead)."""
        return self.episode is not None and not self.episode.done

    @property
    def idle_since(self) -> float:
        if self.episode is None:
            return self.last_activity
        return max(self.last_activity, self.episode.last_activity)


class Sessions:
    """The server's sessions. `clock`: time.monotonic, the clock episodes keep their
    `last_activity` by (tests give their own)."""

    def __init__(
        self,
        per_client: int,
        idle_timeout: float,
        limit: int = MAX_PARKED,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.per_client, self.idle_timeout, self.limit = per_client, idle_timeout, limit
        self.clock = clock
        self._by_id: dict[str, EnvSession] = {}

    def __len__(self) -> int:
        return len(self._by_id)

    def parked(self, client: str | None = None) -> list[EnvSession]:
        """MCP sessions playing no episode (of `client`, when given)."""
        return [
            s for s in self._by_id.values() if s.mcp and not s.live and (client is None or s.client == client)
        ]

    def open_socket(self, client: str) -> EnvSession:
        """A WebSocket's own session: never refused (the socket is what it costs)."""
        return self._add(client, mcp=False, attached=True)

    def create(self, client: str) -> EnvSession:
        """A session for `openenv/session/create`, within the client's and the server's caps."""
        self._drop_idle()
        mine = self.parked(client)
        if len(mine) >= self.per_client:
            retry = self._retry_after(mine)
            raise ClientSessionsFull(
                ErrorCode.CAPACITY_REACHED,
                f"Too many sessions without an episode from this client ({client}): "
                f"{len(mine)}/{self.per_client}. Reset in one, close one (openenv/session/close), "
                f"or wait for one to idle out (--idle-timeout {self.idle_timeout:g} s)",
                429,
                scope="client",
                client_sessions=len(mine),
                max_client_sessions=self.per_client,
                **({"retry_after": retry} if retry is not None else {}),
            )
        parked = self.parked()
        if len(parked) >= self.limit:
            retry = self._retry_after(parked)
            raise SessionsFull(
                ErrorCode.CAPACITY_REACHED,
                f"Server at capacity: {len(parked)}/{self.limit} sessions without an episode open; "
                "retry when one closes or idles out",
                503,
                scope="server",
                active_sessions=len(parked),
                max_sessions=self.limit,
                **({"retry_after": retry} if retry is not None else {}),
            )
        return self._add(client, mcp=True, attached=False)

    def start_episode(self, session: EnvSession, episode: Episode) -> None:
        """`session` plays `episode` now (a reset): episode activity, which keeps it."""
        session.episode = episode
        session.last_activity = self.clock()

    def get(self, session_id: object) -> EnvSession:
        """The session; asking refreshes nothing (only episode activity does)."""
        session = self._by_id.get(session_id) if isinstance(session_id, str) else None
        if session is not None and self._idle(session, self.clock()):
            del self._by_id[session.id]
            session = None
        if session is None:
            raise EnvError(ErrorCode.SESSION_ERROR, f"Unknown session_id: {str(session_id)[:80]!r}", 404)
        return session

    def attach(self, session_id: str) -> EnvSession:
        """The session a WebSocket joins; one socket at a time (a second is refused)."""
        session = self.get(session_id)
        if session.attached:
            raise EnvError(ErrorCode.SESSION_ERROR, f"Session {session_id} already has an attached WebSocket")
        session.attached = True
        return session

    def remove(self, session_id: str) -> EnvSession | None:
        return self._by_id.pop(session_id, None)

    def all(self) -> list[EnvSession]:
        return list(self._by_id.values())

    # ---- inside -------------------------------------------------------------------
    def _add(self, client: str, *, mcp: bool, attached: bool) -> EnvSession:
        session = EnvSession(
            id=secrets.token_hex(16), client=client, mcp=mcp, last_activity=self.clock(), attached=attached
        )
        self._by_id[session.id] = session
        return session

    def _idle(self, session: EnvSession, now: float) -> bool:
        """No socket plays it, no episode runs in it, and its last episode activity is
        idle_timeout old."""
        return not session.attached and not session.live and now - session.idle_since >= self.idle_timeout

    def _drop_idle(self) -> None:
        now = self.clock()
        for sid, s in list(self._by_id.items()):
            if self._idle(s, now):
                del self._by_id[sid]

    def _retry_after(self, parked: list[EnvSession]) -> float | None:
        """Seconds until the first of `parked` no socket holds idles out (None: sockets hold all)."""
        free = [s.idle_since for s in parked if not s.attached]
        if not free:
            return None
        return round(max(0.0, min(free) + self.idle_timeout - self.clock()), 1)
