"""The bridge's HTTP side: the checkout server's tools over MCP streamable HTTP
(the reserved ones left out and refused), `/reserved/<name>` for tbx's host side,
`/healthz`; every request needs the attempt's upstream secret (as a native server)."""

from __future__ import annotations

import json
import logging
import os
from typing import Any

import mcp_types as types
from mcp import Client
from mcp.server.lowlevel.server import Server
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from servers.engine.app import RequireSecret

log = logging.getLogger(__name__)

RESERVED_PREFIX = "__reserved__"
# Bounds on one call to the server: a tool call (the tool proxy's own, shorter, bound
# answers the agent first) and a reserved call (init and effects move megabytes).
CALL_TIMEOUT = float(os.environ.get("TBX_BRIDGE_CALL_TIMEOUT", "120"))
RESERVED_TIMEOUT = 300.0
# The header of a `/reserved/<name>` answer that says the tool answered with isError.
TOOL_ERROR_HEADER = "X-Tbx-Tool-Error"


def is_reserved(name: str) -> bool:
    return name.startswith(RESERVED_PREFIX)


def first_text(result: types.CallToolResult) -> str:
    """The first text content of a result (what the reference reads of a reserved tool)."""
    for item in result.content:
        if isinstance(item, types.TextContent):
            return item.text
    return ""


def unknown_tool(name: str) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=f"Unknown tool: {name}")], is_error=True
    )


def build_bridge_app(server_name: str, client: Client, tools: list[types.Tool], secret: str) -> Starlette:
    """`tools`: the child's full listing (reserved ones included), taken once at start."""
    visible = [t for t in tools if not is_reserved(t.name)]
    names = {t.name for t in tools}

    async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=visible)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        if is_reserved(params.name):
            return unknown_tool(params.name)  # tbx's host side only, on /reserved/
        return await client.call_tool(params.name, params.arguments, read_timeout_seconds=CALL_TIMEOUT)

    server: Server[Any] = Server(
        server_name, version="tbx-bridge", on_list_tools=list_tools, on_call_tool=call_tool
    )

    async def health(request: Request) -> JSONResponse:
        return JSONResponse({"ok": True, "server": server_name})

    async def reserved(request: Request) -> Response:
        name = RESERVED_PREFIX + request.path_params["name"]
        if name not in names:
            return JSONResponse({"error": f"{server_name} has no tool {name}"}, status_code=404)
        try:
            arguments = json.loads(await request.body() or b"{}")
        except ValueError:
            return JSONResponse({"error": "the body must be a JSON object of arguments"}, status_code=400)
        try:
            result = await client.call_tool(name, arguments, read_timeout_seconds=RESERVED_TIMEOUT)
        except Exception as exc:  # an MCP error answer, a timeout: the host side names the server
            return JSONResponse({"error": f"{name}: {exc!r}"}, status_code=502)
        return Response(
            first_text(result),
            media_type="text/plain; charset=utf-8",
            headers={TOOL_ERROR_HEADER: "1" if result.is_error else "0"},
        )

    security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
    app = server.streamable_http_app(
        streamable_http_path="/mcp",
        json_response=True,
        host="0.0.0.0",
        transport_security=security,
        custom_starlette_routes=[
            Route("/healthz", health),
            Route("/reserved/{name}", reserved, methods=["POST"]),
        ],
    )
    app.add_middleware(RequireSecret, secret=secret)
    return app
