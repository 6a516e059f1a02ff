"""Serve one domain over MCP streamable HTTP with the low-level MCP server:
the tool list and the argument handling are ours, so invalid arguments reach
the domain's own validator and come back as the reference's error replies."""

from __future__ import annotations

import hmac
import logging
import threading
import time
from typing import Any

import anyio
import mcp_types as types
import psycopg
from mcp.server.lowlevel.server import Server
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from servers.engine.marking import mark_tool
from servers.engine.store import Store
from servers.engine.tools import NOMINAL_NOW, Domain, Tool, ToolContext, run_tool

log = logging.getLogger(__name__)

# The per-attempt secret every request must carry (the sandbox sets the
# variable and sends the header: sandbox/services.py names both too).
UPSTREAM_SECRET_ENV = "TBX_UPSTREAM_SECRET"
UPSTREAM_SECRET_HEADER = "X-Tbx-Upstream-Secret"
_UNAUTHORIZED = b'{"error": "missing or invalid upstream secret"}'


class DomainRuntime:
    """Holds the domain's database connection and runs calls one at a time
    (one agent per attempt; the reference is single-threaded too)."""

    def __init__(
        self, domain: Domain, dsn: str, services: dict[str, Any] | None = None, connect_timeout: float = 30.0
    ):
        self.domain = domain
        self.dsn = dsn
        self.services = services or {}
        self.connect_timeout = connect_timeout
        self._conn: psycopg.Connection[Any] | None = None
        self._lock = threading.Lock()

    def _connection(self) -> psycopg.Connection[Any]:
        if self._conn is not None and not self._conn.closed:
            return self._conn
        deadline = time.monotonic() + self.connect_timeout
        while True:
            try:
                self._conn = psycopg.connect(self.dsn, autocommit=True, connect_timeout=5)
                return self._conn
            except psycopg.OperationalError:
                # The attempt's PostgreSQL starts concurrently with this server.
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.02)

    def call(self, name: str, arguments: dict[str, Any] | None) -> str | None:
        t = self.domain.tool(name)
        if t is None:
            return None
        with self._lock:
            ctx = ToolContext(
                db=Store(self._connection(), self.domain.tables, NOMINAL_NOW), services=self.services
            )
            return run_tool(t, ctx, arguments)


def tool_annotations(t: Tool) -> types.ToolAnnotations:
    """The MCP tool annotations: the tool's marking (servers/engine/marking.py)."""
    m = mark_tool(t)
    return types.ToolAnnotations(
        read_only_hint=m.read_only, destructive_hint=m.destructive, idempotent_hint=m.idempotent
    )


def build_mcp_server(runtime: DomainRuntime) -> Server[Any]:
    # names, schemas and replies are the reference's; the annotations are only added beside them
    listed = [
        types.Tool(
            name=t.name,
            description=t.description,
            input_schema=t.input_schema,
            annotations=tool_annotations(t),
        )
        for t in runtime.domain.tools
    ]

    async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=listed)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        text = await anyio.to_thread.run_sync(runtime.call, params.name, params.arguments)
        if text is None:
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=f"Unknown tool: '{params.name}'")], is_error=True
            )
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=False)

    return Server(runtime.domain.server, version="tbx", on_list_tools=list_tools, on_call_tool=call_tool)


class RequireSecret:
    """Answer 401 to any HTTP request without the attempt's secret: only the
    attempt's own proxy (and host tooling holding the handle) reaches the tools,
    and a proxy whose sandbox was replaced at the same address gets nothing."""

    def __init__(self, app: ASGIApp, secret: str):
        self.app = app
        self.secret = secret.encode()
        self.header = UPSTREAM_SECRET_HEADER.lower().encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            given = next((v for k, v in scope["headers"] if k == self.header), b"")
            if not hmac.compare_digest(given, self.secret):
                headers = [
                    (b"content-type", b"application/json"),
                    (b"content-length", b"%d" % len(_UNAUTHORIZED)),
                ]
                await send({"type": "http.response.start", "status": 401, "headers": headers})
                await send({"type": "http.response.body", "body": _UNAUTHORIZED})
                return
        await self.app(scope, receive, send)


def build_app(runtime: DomainRuntime, secret: str) -> Starlette:
    """The domain's MCP app at /mcp (and /healthz); every request needs `secret`."""
    if not secret:
        raise ValueError(f"an upstream secret is required ({UPSTREAM_SECRET_ENV})")
    server = build_mcp_server(runtime)

    async def health(request: Request) -> JSONResponse:
        return JSONResponse({"ok": True, "domain": runtime.domain.name})

    # Reached by bridge IP inside a private network (or via the tool
    # proxy), so the localhost-only Host-header check must not apply.
    security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
    app = server.streamable_http_app(
        streamable_http_path="/mcp",
        json_response=True,
        host="0.0.0.0",
        transport_security=security,
        custom_starlette_routes=[Route("/healthz", health)],
    )
    app.add_middleware(RequireSecret, secret=secret)
    return app
