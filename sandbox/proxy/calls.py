"""One tool call of a registered attempt, on any of its three paths:
`forward_call` (the attempt's MCP `Server` hands it to the upstream MCP
client), `relay_call` (the fast path: an agent's request relayed as is, see
`relay.py`) and `direct_call` (an in-process caller, e.g. the Session API,
posts it straight to the server from its own event loop). All three admit the
call by the same rules (`admit`: the route, sendable arguments within the
per-call argument cap, a sandbox the attempt's own load has not brought down),
apply the attempt's call timeout and the reply cap (sandbox.proxy.caps) and
record the call the same way; the two that speak raw HTTP share `post_recorded`."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel.server import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared.exceptions import MCPError
from starlette.types import Receive, Scope, Send

from sandbox.proxy import relay
from sandbox.proxy.caps import capped_message, capped_result, oversized_arguments, recorded_arguments
from sandbox.proxy.limits import MAX_REPLY_BYTES
from sandbox.proxy.loss import limit_refusal
from sandbox.proxy.models import Outcome, SandboxGoneError, Upstream
from sandbox.proxy.registered import RegisteredAttempt
from sandbox.proxy.routes import Route

log = logging.getLogger(__name__)


def text_of(result: types.CallToolResult) -> str:
    return "".join(c.text for c in result.content if isinstance(c, types.TextContent))


def error_result(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)


def timeout_result(name: str, seconds: float) -> types.CallToolResult:
    return error_result(
        f"Tool call '{name}' timed out after {seconds:g}s; it may or may not have taken effect."
    )


def unreachable_result(name: str, exc: BaseException) -> types.CallToolResult:
    return error_result(f"Tool call '{name}' failed: the tool server did not answer ({exc!r})")


def lost_result(attempt: RegisteredAttempt, name: str) -> types.CallToolResult:
    """A call in flight when the infrastructure lost the attempt's sandbox (its server
    killed: no answer will come)."""
    return error_result(f"Tool call '{name}' failed: {attempt.lost() or 'the sandbox was lost'}")


def abandoned_result(name: str) -> types.CallToolResult:
    return error_result(
        f"Tool call '{name}' was abandoned by its caller before the tool server answered; "
        "it may or may not have taken effect."
    )


def leaf(exc: BaseException) -> BaseException:
    """The first real error inside (nested) exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def attempt_server(attempt: RegisteredAttempt, upstreams: Mapping[str, Upstream]) -> Server[Any]:
    """The attempt's own low-level MCP `Server`: lists its routes, forwards calls."""
    listing = types.ListToolsResult(tools=[r.tool for r in attempt.routes.values()])
    schemas = {name: r.tool.input_schema for name, r in attempt.routes.items()}

    async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return listing

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        return await forward_call(attempt, params.name, params.arguments)

    return Server(
        "tbx-" + "+".join(upstreams),
        version="tbx-proxy",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        get_tool_input_schema=schemas.get,
    )


@dataclass(frozen=True)
class CallReply:
    """A `tools/call`'s answer as the proxy hands it on: the tool server's reply
    unchanged, or a result the proxy made itself (refusal, timeout, no answer)."""

    status: int  # the server's HTTP status (200 for the proxy's own results)
    content_type: str
    body: bytes
    message: dict[str, Any] | None  # the JSON-RPC message of `body`, None when it holds none

    @classmethod
    def made(cls, request_id: Any, result: types.CallToolResult) -> CallReply:
        message = relay.result_message(request_id, result)
        return cls(200, "application/json", relay.message_bytes(message), message)


def refuse(
    attempt: RegisteredAttempt, name: str, arguments: Any, text: str, domain: str | None
) -> types.CallToolResult:
    """A call answered by the proxy and sent nowhere: recorded as refused."""
    started, t0 = datetime.now(UTC), time.perf_counter()
    attempt.record_call(name, arguments, text, True, "refused", domain, started, t0)
    return error_result(text)


def admit(attempt: RegisteredAttempt, name: str, arguments: Any) -> Route | types.CallToolResult:
    """The route of a call the attempt may make and can send; else its refusal (recorded)."""
    route = attempt.routes.get(name)
    if route is None:
        # Unknown, not allow-listed and reserved tools look the same: nothing reaches an upstream.
        # A lone surrogate in the name could be neither answered nor recorded.
        shown = relay.replaced(name)
        return refuse(
            attempt, shown, recorded_arguments(relay.replaced(arguments)), f"Unknown tool: '{shown}'", None
        )
    if not relay.sendable(arguments):  # lone surrogates: the caller's text, never sent on
        shown_args = recorded_arguments(relay.replaced(arguments))
        return refuse(attempt, name, shown_args, relay.UNICODE_PROBLEM, route.domain)
    too_big = oversized_arguments(name, arguments)
    if too_big is not None:  # neither sent nor recorded: the cap keeps them off every disk too
        return refuse(attempt, name, recorded_arguments(arguments), too_big, route.domain)
    loss = attempt.loss
    if loss is not None and loss.agent_load:
        # Its own load brought the sandbox down: the agent's to read, call by call.
        return refuse(attempt, name, arguments, limit_refusal(name, loss), route.domain)
    return route


def refuse_if_gone(attempt: RegisteredAttempt) -> None:
    """Nothing is relayed for an attempt whose sandbox is lost (the watch saw it go)."""
    lost = attempt.lost()
    if lost is not None:
        assert attempt.loss is not None
        raise SandboxGoneError(lost, fault=attempt.loss.fault)


async def forward_call(
    attempt: RegisteredAttempt, name: str, arguments: dict[str, Any] | None
) -> types.CallToolResult:
    """A call through the attempt's MCP `Server` and the upstream MCP client."""
    admitted = admit(attempt, name, arguments)
    if not isinstance(admitted, Route):
        return admitted
    route = admitted
    started = datetime.now(UTC)
    t0 = time.perf_counter()
    outcome: Outcome
    try:
        with attempt.sending() as cut, anyio.fail_after(attempt.call_timeout):
            result = capped_result(await route.client.call_tool(name, arguments))
        if cut.cancelled_caught:
            result, outcome = lost_result(attempt, name), "upstream_error"
        else:
            outcome = "tool_error" if result.is_error else "ok"
    except TimeoutError:
        result = timeout_result(name, attempt.call_timeout)
        outcome = "timeout"
    except MCPError as exc:
        result = error_result(f"Tool call '{name}' was rejected by the tool server: {exc.message}")
        outcome = "protocol_error"
    except asyncio.CancelledError:
        _record_abandoned(attempt, route, name, arguments, started, t0)
        raise
    except Exception as exc:
        log.warning("attempt %s: %s failed upstream: %r", attempt.attempt_id, name, leaf(exc))
        result = unreachable_result(name, leaf(exc))
        outcome = "upstream_error"
    attempt.record_call(
        name, arguments, text_of(result), bool(result.is_error), outcome, route.domain, started, t0
    )
    return result


def _record_abandoned(
    attempt: RegisteredAttempt, route: Route, name: str, arguments: Any, started: datetime, t0: float
) -> None:
    """A call its caller stopped waiting for (its own time limit, shutdown) was sent and may
    have taken effect: it goes into the record as timed out."""
    text = text_of(abandoned_result(name))
    attempt.record_call(name, arguments, text, True, "timeout", route.domain, started, t0)


async def post_recorded(
    attempt: RegisteredAttempt,
    route: Route,
    pool: relay.UpstreamPool,
    request_id: Any,
    name: str,
    arguments: Any,
    body: bytes,
    headers: list[tuple[str, str]],
) -> CallReply:
    """An admitted call's request posted to its server within the attempt's call
    timeout; the server's reply (or the proxy's timeout / no-answer result) comes
    back, and the call is recorded with its outcome."""
    started = datetime.now(UTC)
    t0 = time.perf_counter()
    outcome: Outcome
    try:
        with attempt.sending() as cut, anyio.fail_after(attempt.call_timeout):
            status, reply_headers, raw = await pool.post(body, headers)
    except TimeoutError:
        result, outcome = timeout_result(name, attempt.call_timeout), "timeout"
    except relay.UpstreamError as exc:
        log.warning("attempt %s: %s failed upstream: %r", attempt.attempt_id, name, exc)
        result, outcome = unreachable_result(name, exc), "upstream_error"
    except asyncio.CancelledError:
        _record_abandoned(attempt, route, name, arguments, started, t0)
        raise
    else:
        if cut.cancelled_caught:  # the sandbox was lost under it
            result, outcome = lost_result(attempt, name), "upstream_error"
            attempt.record_call(name, arguments, text_of(result), True, outcome, route.domain, started, t0)
            return CallReply.made(request_id, result)
        content_type = reply_headers.get("content-type", "application/json")
        message = relay.reply_message(raw, content_type)
        if len(raw) > MAX_REPLY_BYTES:  # relayed and recorded cut, saying so (sandbox.proxy.caps)
            message = capped_message(message, len(raw))
            raw, content_type = relay.message_bytes(message), "application/json"
        fallback: tuple[str, bool, Outcome] = (
            raw.decode(errors="replace")[:2000],
            True,
            "upstream_error",
        )
        text, is_error, kind = relay.reply_summary(message) or fallback
        attempt.record_call(name, arguments, text, is_error, kind, route.domain, started, t0)
        return CallReply(status, content_type, raw, message)
    attempt.record_call(name, arguments, text_of(result), True, outcome, route.domain, started, t0)
    return CallReply.made(request_id, result)


async def relay_call(
    attempt: RegisteredAttempt,
    manager: StreamableHTTPSessionManager,
    scope: Scope,
    receive: Receive,
    send: Send,
    max_request_bytes: int,
) -> None:
    """The fast path: a `tools/call` of an allow-listed tool is relayed as is
    and its reply returned unchanged; anything else (listing, refusals, a
    malformed body) goes to the attempt's MCP `Server` with the body replayed."""
    body = await relay.read_body(receive, max_request_bytes)
    if body is None:
        await relay.respond(send, 413, relay.jsonrpc_error(-32600, "request too large"))
        return
    try:
        call = relay.tool_call(body)
    except relay.UnsendableCall as bad:  # the caller's text, answered as a tool error
        known = attempt.routes.get(bad.name)
        result = refuse(attempt, bad.name, bad.arguments, str(bad), known.domain if known else None)
        await relay.respond(send, 200, relay.result_body(bad.request_id, result))
        return
    route = attempt.routes.get(call[1]) if call is not None else None
    pools = attempt.pools
    if call is None or route is None or pools is None:
        await manager.handle_request(scope, relay.replay(body, receive), send)
        return
    request_id, name, arguments, forwarded = call
    admitted = admit(attempt, name, arguments)
    if not isinstance(admitted, Route):  # over the argument cap: answered here, sent nowhere
        await relay.respond(send, 200, relay.result_body(request_id, admitted))
        return
    headers = relay.forward_headers(scope) + list(route.headers.items())
    reply = await post_recorded(
        attempt, route, pools[route.url], request_id, name, arguments, forwarded, headers
    )
    await relay.respond(send, reply.status, reply.body, content_type=reply.content_type.encode("latin-1"))


DIRECT_ID = 1  # the JSON-RPC id of the direct path's requests (one request per exchange)


async def direct_call(
    attempt: RegisteredAttempt,
    name: str,
    arguments: dict[str, Any] | None,
    pools: dict[str, relay.UpstreamPool],
) -> CallReply:
    """A `tools/call` made in process, posted straight to the route's server over
    the caller's own keep-alive connections (`pools`, by upstream URL, filled here
    and bound to the caller's loop; the caller closes them), with the route's
    headers: no loopback hop through the proxy's HTTP endpoint or its loop. The
    rules are those of the other paths: refused unless admitted, the attempt's
    call timeout, recorded; raises SandboxGoneError once the sandbox is lost."""
    refuse_if_gone(attempt)
    admitted = admit(attempt, name, arguments)
    if not isinstance(admitted, Route):
        return CallReply.made(DIRECT_ID, admitted)
    route = admitted
    pool = pools.get(route.url)
    if pool is None:
        pool = pools[route.url] = relay.UpstreamPool(route.url, route.interface)
    body, headers = relay.call_request(DIRECT_ID, name, arguments)
    headers += route.headers.items()
    return await post_recorded(attempt, route, pool, DIRECT_ID, name, arguments, body, headers)
