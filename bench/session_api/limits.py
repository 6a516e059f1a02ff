"""What one HTTP request may cost the Session API: its body's size, the time its head
and body may take to arrive, and the bodies held at once (#38 finding 7: a 97 MB
`/session_create` took the process to 2.6 GB RSS for good, and 400 half-sent requests
were still open a minute later).

    body      over `max_body` bytes: 413, refused on its Content-Length before a byte
              is read, or once a body without one passes the limit; never buffered
              beyond the limit
    in flight the bodies being read at once hold at most `budget` bytes: 503 with
              Retry-After beyond (a flood of large bodies cannot add up)
    body time a body must arrive within `body_timeout` s of its request's head: 408
    head time a request's head must arrive within `head_timeout` s of the connection's
              opening (or of the request's first byte on a kept-alive connection):
              the connection is closed (`TimedHttpToolsProtocol`, uvicorn's parser
              has no such limit)

The body is read lazily, as the app reads it, so a request refused before its body
is needed (auth, the web guard) costs nothing. A refused body's request gets its
answer and the rest of the body is read and dropped for up to `LINGER` s before the
connection closes, so a client still sending reads the answer instead of a reset.
"""

from __future__ import annotations

import asyncio
import json
import time
import weakref
from typing import Any

from pydantic import BaseModel, Field
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from bench.defaults import MAX_BODY_MIB

MIB = 2**20
MAX_BODY = MAX_BODY_MIB * MIB
BODIES_AT_ONCE = 8  # the budget of bodies being read at once, all requests together: this many of the largest
HEAD_TIMEOUT = 10.0  # s
BODY_TIMEOUT = 30.0  # s; the largest body at 140 KB/s
BUSY_RETRY_AFTER = 1  # s: bodies in flight drain within a few seconds
LINGER = 2.0  # s a refused body is still read (and dropped) so the client sees the answer


LARGE_BODY = 256 * 1024  # bytes: a body parsed one at a time (`loads`)
# Held after a large parse: the requests that came in meanwhile (`/health`) are read and
# answered before the next large parse takes the event loop.
PARSE_BREATH = 0.01


class BodyLimits(BaseModel):
    max_body: int = Field(default=MAX_BODY, gt=0)
    # Bytes of bodies read at once (None: BODIES_AT_ONCE of the largest, so a larger
    # --max-body never makes a body that fits the limit unable to fit the budget).
    budget: int | None = Field(default=None, gt=0)
    body_timeout: float = Field(default=BODY_TIMEOUT, gt=0)

    @property
    def in_flight(self) -> int:
        return self.budget if self.budget is not None else BODIES_AT_ONCE * self.max_body


class _Refusal(Exception):
    """Why a request's body was not taken: its status, message and headers."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status, self.message, self.headers = status, message, headers or {}


class _Budget:
    """Bytes of request bodies held at once, all requests together."""

    def __init__(self, limit: int):
        self.limit = limit
        self.held = 0

    def take(self, n: int) -> None:
        if self.held + n > self.limit:
            raise _Refusal(
                503,
                f"Server busy: {self.held / MIB:.1f} MiB of request bodies are being read "
                f"(limit {self.limit / MIB:.0f} MiB); retry shortly",
                {"retry-after": str(BUSY_RETRY_AFTER)},
            )
        self.held += n


def _too_large(limit: int, size: int | None) -> _Refusal:
    said = f"{size} bytes" if size is not None else "more than the limit"
    return _Refusal(413, f"Request body too large: {said} of {limit} bytes ({limit / MIB:g} MiB)")


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


class LimitedBodies:
    """ASGI middleware: the body limits of every HTTP request (module docstring)."""

    def __init__(self, app: ASGIApp, limits: BodyLimits | None = None):
        self.app = app
        self.limits = limits or BodyLimits()
        self.budget = _Budget(self.limits.in_flight)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.limits.max_body:
            await _refuse(_too_large(self.limits.max_body, declared), receive, send)
            return
        reading = _Reading(self.limits, self.budget, receive)
        answered = False

        async def guarded_send(message: Message) -> None:
            nonlocal answered
            if reading.refusal is not None:
                return  # the app's answer to a body it never got: ours goes instead
            answered = True
            await send(message)

        try:
            await self.app(scope, reading.receive, guarded_send)
        except Exception:
            if reading.refusal is None:
                raise
        finally:
            self.budget.held -= reading.held
        if reading.refusal is not None and not answered:
            await _refuse(reading.refusal, receive, send)


class _Reading:
    """One request's body as the app reads it, within the limits."""

    def __init__(self, limits: BodyLimits, budget: _Budget, receive: Receive):
        self.limits, self.budget, self._receive = limits, budget, receive
        self.deadline = time.monotonic() + limits.body_timeout
        self.size = 0
        self.held = 0  # bytes taken from the budget
        self.done = False  # the whole body arrived: later receives wait for a disconnect
        self.refusal: _Refusal | None = None

    async def receive(self) -> Message:
        if self.refusal is not None:
            return {"type": "http.disconnect"}
        if self.done:  # a streaming answer listens for the client's going
            return await self._receive()
        try:
            message = await asyncio.wait_for(self._receive(), max(0.0, self.deadline - time.monotonic()))
        except TimeoutError:
            return self._refused(
                _Refusal(408, f"Request body not received within {self.limits.body_timeout:g} s")
            )
        if message["type"] != "http.request":
            return message
        chunk = len(message.get("body", b""))
        self.size += chunk
        if self.size > self.limits.max_body:
            return self._refused(_too_large(self.limits.max_body, None))
        try:
            self.budget.take(chunk)
        except _Refusal as refusal:
            return self._refused(refusal)
        self.held += chunk
        self.done = not message.get("more_body", False)
        return message

    def _refused(self, refusal: _Refusal) -> Message:
        # The app sees its client gone (Starlette raises ClientDisconnect); the answer is ours.
        self.refusal = refusal
        return {"type": "http.disconnect"}


async def _refuse(refusal: _Refusal, receive: Receive, send: Send) -> None:
    """The Session API's error envelope with the refusal's status, then the connection
    closes once what the client still sends is dropped (at most LINGER s)."""
    body = json.dumps(
        {"success": False, "content": {"type": "string", "value": refusal.message}}, separators=(",", ":")
    ).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"),
        *((k.encode(), v.encode()) for k, v in refusal.headers.items()),
    ]
    await send({"type": "http.response.start", "status": refusal.status, "headers": headers})
    # The whole answer is written, the response left open while the rest is drained.
    await send({"type": "http.response.body", "body": body, "more_body": True})
    await _drain(receive, LINGER)
    await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _drain(receive: Receive, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        try:
            message = await asyncio.wait_for(receive(), left)
        except TimeoutError:
            return
        if message["type"] != "http.request" or not message.get("more_body", False):
            return


class TimedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with a limit on the time a request's head takes: a
    connection whose request head is not complete `HEAD_TIMEOUT` s after it opened (or
    after the request's first byte, on a kept-alive connection) is closed. Idle kept-alive
    connections stay uvicorn's (`timeout_keep_alive`)."""

    head_timeout = HEAD_TIMEOUT
    _head_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)
        self._arm_head()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self._head_timer is None:
            self._arm_head()

    def on_headers_complete(self) -> None:
        self._disarm_head()
        super().on_headers_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_head()
        super().connection_lost(exc)

    def _arm_head(self) -> None:
        self._head_timer = self.loop.call_later(self.head_timeout, self._head_expired)

    def _disarm_head(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_expired(self) -> None:
        self._head_timer = None
        if not self.transport.is_closing():
            self.transport.close()


def timed_protocol(head_timeout: float) -> type[TimedHttpToolsProtocol]:
    """The protocol class for `uvicorn.Config(http=...)` with this head timeout."""
    return type("TimedHttpToolsProtocol", (TimedHttpToolsProtocol,), {"head_timeout": head_timeout})


_parsing: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = weakref.WeakKeyDictionary()


async def loads(body: bytes) -> Any:
    """`json.loads`, large bodies one at a time. A parse holds the event loop (and the
    GIL, on any thread) for its whole length, ~30 ms a MiB of small objects: large ones
    back to back would keep every other request (`/health`) waiting for all of them."""
    if len(body) < LARGE_BODY:
        return json.loads(body)
    lock = _parsing.setdefault(asyncio.get_running_loop(), asyncio.Lock())
    async with lock:
        try:
            return json.loads(body)
        finally:
            await asyncio.sleep(PARSE_BREATH)
