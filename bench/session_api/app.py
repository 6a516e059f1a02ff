"""The Session API's HTTP app: the reference's routes (specs/thinkingbox-session-proxy.md
§2-§4) over the session table, and `/mcp/`, relayed to tbx's own tool proxy for
the session named by `X-TB-Session-Id`.

Bodies are parsed as JSON whatever their Content-Type; a body that is not a JSON
object is a 400 `Invalid input` (the reference answers 500; no client tells them
apart). With an API key set, every request but `/health` needs
`Authorization: Bearer <key>`, else 401 `{"success":false,"error":"Unauthorized"}`.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import httpx
from pydantic import BaseModel, ValidationError
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from bench.session_api.admission import AtCapacity
from bench.session_api.limits import loads
from bench.session_api.models import (
    INVALID_INPUT,
    TBX_FIELDS,
    ApiError,
    CallBody,
    CreateBody,
    GcBody,
    InfoBody,
    SessionRef,
    fail,
    ok,
    timed_out,
)
from bench.session_api.sessions import QueueTimeout, SessionTable

log = logging.getLogger(__name__)

T = TypeVar("T")

UNAUTHORIZED = b'{"success":false,"error":"Unauthorized"}'
SESSION_HEADER = "x-tb-session-id"
RELAYED_HEADERS = ("accept", "content-type", "last-event-id")


# A body nested deeper than the parser recurses is no input either (RecursionError).
_UNPARSABLE = (ValueError, UnicodeDecodeError, RecursionError)


async def _parse(request: Request, model: type[BaseModel]) -> Any:
    try:
        body = await request.body()
    except ClientDisconnect:  # gone, or its body refused by LimitedBodies (whose answer goes instead)
        raise ApiError(INVALID_INPUT) from None
    try:
        data = await loads(body)
    except _UNPARSABLE:
        raise ApiError(INVALID_INPUT) from None
    if not isinstance(data, dict):
        raise ApiError(INVALID_INPUT)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        errors = exc.errors()
        if errors and all(e["loc"] and e["loc"][0] in TBX_FIELDS for e in errors):
            problems = "; ".join(".".join(str(p) for p in e["loc"]) + f": {e['msg']}" for e in errors[:5])
            raise ApiError(f"{INVALID_INPUT}: {problems}") from None
        raise ApiError(INVALID_INPUT) from None


Handler = Callable[[Request], Awaitable[Response]]


def _handled(fn: Handler) -> Handler:
    async def wrapper(request: Request) -> Response:
        try:
            return await fn(request)
        except AtCapacity as exc:
            response = fail(exc.message, exc.status)
            response.headers["retry-after"] = str(exc.retry_after)
            return response
        except ApiError as exc:
            return fail(exc.message, exc.status)
        except Exception as exc:
            # The reference answers an exception while creating or calling with a 400 and its text.
            log.exception("%s failed", request.url.path)
            return fail(f"{exc.__class__.__name__}: {exc}")

    return wrapper


class SessionApi:
    def __init__(self, table: SessionTable, health: Callable[[], Awaitable[str | None]]):
        self.table = table
        self.health_problem = health  # None: healthy; else what is wrong

    # ---- JSON routes ------------------------------------------------------------
    async def health(self, request: Request) -> Response:
        problem = await self.health_problem()
        if problem is not None:
            return PlainTextResponse(problem, 503)
        return PlainTextResponse("OK")

    async def session_create(self, request: Request) -> Response:
        body = await _parse(request, CreateBody)
        response = ok(await _unless_gone(request, self.table.create(body)))
        live = self.table.get(body.session_id).live
        if live is not None:  # for operators and tests: which tbx attempt and containers serve it
            response.headers["x-tbx-attempt-id"] = live.spec.attempt_id
            response.headers["x-tbx-containers"] = json.dumps(dict(live.lease.containers))
        return response

    async def list_tools(self, request: Request) -> Response:
        body = await _parse(request, SessionRef)
        return ok({"tools": self.table.get(body.session_id).tools})

    async def call_tool(self, request: Request) -> Response:
        body = await _parse(request, CallBody)
        session = self.table.get(body.session_id)
        try:
            return ok(await self.table.call_tool(session, body.tool_name, body.arguments))
        except QueueTimeout:
            return timed_out(session.timeout)

    async def get_effects(self, request: Request) -> Response:
        body = await _parse(request, SessionRef)
        session = self.table.get(body.session_id)
        try:
            return ok(await self.table.get_effects(session))
        except QueueTimeout:
            raise ApiError(f"get_effects timed out after {float(session.timeout)!r} seconds", 500) from None

    async def session_destroy(self, request: Request) -> Response:
        body = await _parse(request, SessionRef)
        await self.table.destroy(body.session_id)
        return ok("Ok")

    async def session_destroy_all(self, request: Request) -> Response:
        await _parse(request, _AnyObject)
        await self.table.destroy_all()
        return ok("Ok")

    async def session_info(self, request: Request) -> Response:
        body = await _parse(request, InfoBody)
        session = self.table.get(body.session_id)
        session.info.update(body.update)
        return ok(session.info)

    async def garbage_collect(self, request: Request) -> Response:
        body = await _parse(request, GcBody)
        ids = await self.table.garbage_collect(body.inactivity_minutes)
        return ok({"count": len(ids), "session_ids": ids})

    # ---- /mcp/ ----------------------------------------------------------------------
    async def mcp(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        body = await request.body()
        try:
            message = await _json_message(body)
        except RecursionError:  # refused here, as every route refuses it: no relay, no traceback
            await _jsonrpc_error(b"", f"{INVALID_INPUT}: the JSON body is nested too deeply")(
                scope, receive, send
            )
            return
        tool_call = request.method == "POST" and _is_tool_call(message)
        session_id = request.headers.get(SESSION_HEADER)
        if session_id is None or session_id not in self.table.sessions:
            message = (
                "Missing X-TB-Session-Id header" if session_id is None else f"Session not found: {session_id}"
            )
            await _jsonrpc_error(body, message)(scope, receive, send)
            return
        session = self.table.sessions[session_id]
        live = session.live
        if live is None:
            await _jsonrpc_error(body, "the session has no sandbox (its server_config named no server)")(
                scope, receive, send
            )
            return
        headers = {k: v for k, v in request.headers.items() if k in RELAYED_HEADERS or k.startswith("mcp-")}
        headers.update(live.headers)
        upstream = self.table.http.build_request(request.method, live.url, content=body, headers=headers)

        async def relay() -> httpx.Response:
            reply = await self.table.http.send(upstream, stream=True)
            if tool_call:
                await reply.aread()  # the whole reply inside the queue slot: calls never overlap
            return reply

        try:
            if tool_call:
                reply = await session.run(relay)
            else:
                reply = await relay()
        except QueueTimeout:
            await _jsonrpc_error(body, f"Tool call timed out after {float(session.timeout)!r} seconds")(
                scope, receive, send
            )
            return
        except httpx.HTTPError as exc:
            await _jsonrpc_error(body, f"the tool proxy did not answer: {exc!r}")(scope, receive, send)
            return
        out_headers = {k: v for k, v in reply.headers.items() if k in ("content-type", "mcp-session-id")}
        response = StreamingResponse(_chunks(reply), status_code=reply.status_code, headers=out_headers)
        await response(scope, receive, send)


async def _unless_gone(request: Request, work: Awaitable[T]) -> T:
    """`work`, cancelled if the client disconnects first. A create waits for a boot, behind
    others in a burst; a client that gave up (the trainer's 600 s timeout, then a retry
    under a new id) must not leave it queued, booting a set nobody takes."""
    task = asyncio.ensure_future(work)

    async def gone() -> None:
        # The body is read: the next message is the client's disconnect (uvicorn).
        while (await request.receive())["type"] != "http.disconnect":
            pass

    watcher = asyncio.ensure_future(gone())
    try:
        await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            raise ApiError("the client closed its connection before the session was created")
        return task.result()
    finally:
        watcher.cancel()


async def _chunks(reply: httpx.Response) -> AsyncIterator[bytes]:
    try:
        if reply.is_stream_consumed:  # a tool call's reply, read inside its queue slot
            yield reply.content
        else:
            async for chunk in reply.aiter_raw():
                yield chunk
    finally:
        await reply.aclose()


async def _json_message(body: bytes) -> Any:
    """The body's JSON value, None when it is no JSON (the MCP transport answers that);
    RecursionError for one nested deeper than the parser goes."""
    try:
        return await loads(body)
    except (ValueError, UnicodeDecodeError):
        return None


def _is_tool_call(message: Any) -> bool:
    return isinstance(message, dict) and message.get("method") == "tools/call"


def _jsonrpc_error(body: bytes, message: str) -> Response:
    request_id = None
    with contextlib.suppress(*_UNPARSABLE, AttributeError):
        request_id = json.loads(body).get("id")
    payload = {"jsonrpc": "2.0", "id": request_id, "error": {"code": 0, "message": message}}
    return Response(json.dumps(payload), 400, media_type="application/json")


class _AnyObject(BaseModel):
    pass


class _Guard:
    """Bearer auth (when a key is set) before routing, and `/mcp/` beside the router."""

    def __init__(self, app: ASGIApp, api: SessionApi, api_key: str | None):
        self.app, self.api, self.api_key = app, api, api_key

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            path = scope["path"]
            if self.api_key is not None and path != "/health" and not self._authorized(scope):
                await Response(UNAUTHORIZED, 401, media_type="application/json")(scope, receive, send)
                return
            if path == "/mcp":
                await Response(status_code=307, headers={"location": "/mcp/"})(scope, receive, send)
                return
            if path == "/mcp/":
                await self.api.mcp(scope, receive, send)
                return
        await self.app(scope, receive, send)

    def _authorized(self, scope: Scope) -> bool:
        assert self.api_key is not None
        for key, value in scope["headers"]:
            if key == b"authorization":
                given = value.decode("latin-1")
                return given.startswith("Bearer ") and hmac.compare_digest(given[7:], self.api_key)
        return False


def build_app(
    api: SessionApi,
    *,
    api_key: str | None = None,
    lifespan: Callable[[Starlette], contextlib.AbstractAsyncContextManager[None]] | None = None,
) -> ASGIApp:
    post = ["POST"]
    routes = [
        Route("/health", api.health, methods=["GET"]),
        Route("/session_create", _handled(api.session_create), methods=post),
        Route("/list_tools", _handled(api.list_tools), methods=post),
        Route("/call_tool", _handled(api.call_tool), methods=post),
        Route("/get_effects", _handled(api.get_effects), methods=post),
        Route("/session_destroy", _handled(api.session_destroy), methods=post),
        Route("/session_destroy_all", _handled(api.session_destroy_all), methods=post),
        Route("/session_info", _handled(api.session_info), methods=post),
        Route("/garbage_collect", _handled(api.garbage_collect), methods=post),
    ]
    return _Guard(Starlette(routes=routes, lifespan=lifespan), api, api_key)


async def idle_expiry(table: SessionTable, minutes: float, every: float) -> None:
    """The reference's --gc-enable loop: every `every` s, destroy sessions idle `minutes`."""
    while True:
        await asyncio.sleep(every)
        try:
            gone = await table.garbage_collect(minutes)
            if gone:
                log.info("idle expiry destroyed %d session(s)", len(gone))
        except Exception:
            log.exception("idle expiry failed")
