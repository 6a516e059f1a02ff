"""One tool call of a registered attempt, on either path: `forward_call` (the
attempt's MCP `Server` hands it to the upstream MCP client) and `relay_call`
(the fast path: the request relayed as is, see `relay.py`). Both check the
route, apply the attempt's call timeout and record the call the same way."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel.server import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared.exceptions import MCPError
from starlette.types import Receive, Scope, Send

from sandbox.proxy import relay
from sandbox.proxy.attempt import RegisteredAttempt
from sandbox.proxy.models import Outcome, Upstream

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


async def forward_call(
    attempt: RegisteredAttempt, name: str, arguments: dict[str, Any] | None
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
        result = error_result(f"Unknown tool: '{name}'")
        outcome = "refused"
    elif not relay.sendable(arguments):  # lone surrogates: the caller's text, never sent on
        result, outcome, arguments = (
            error_result(relay.UNICODE_PROBLEM),
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
            result = timeout_result(name, attempt.call_timeout)
            outcome = "timeout"
        except MCPError as exc:
            result = error_result(f"Tool call '{name}' was rejected by the tool server: {exc.message}")
            outcome = "protocol_error"
        except Exception as exc:
            log.warning("attempt %s: %s failed upstream: %r", attempt.attempt_id, name, leaf(exc))
            result = unreachable_result(name, leaf(exc))
            outcome = "upstream_error"
    attempt.record_call(name, arguments, text_of(result), bool(result.is_error), outcome, domain, started, t0)
    return result


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
        t0, started, known = time.perf_counter(), datetime.now(UTC), attempt.routes.get(bad.name)
        result = error_result(str(bad))
        domain = known.domain if known else None
        attempt.record_call(bad.name, bad.arguments, text_of(result), True, "refused", domain, started, t0)
        await relay.respond(send, 200, relay.result_body(bad.request_id, result))
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
        result, outcome = timeout_result(name, attempt.call_timeout), "timeout"
    except relay.UpstreamError as exc:
        log.warning("attempt %s: %s failed upstream: %r", attempt.attempt_id, name, exc)
        result, outcome = unreachable_result(name, exc), "upstream_error"
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
        await relay.respond(send, status, reply, content_type=content_type.encode("latin-1"))
        return
    attempt.record_call(name, arguments, text_of(result), True, outcome, route.domain, started, t0)
    await relay.respond(send, 200, relay.result_body(request_id, result))
