"""MCP clients over streamable HTTP: to a server (optionally with headers and
bound to a network device) and to an attempt's proxy endpoint, plus the
paginated tool listing the proxy and the agent loop share."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping
from typing import Any

import httpx2
import mcp_types as types
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types.version import LATEST_PROTOCOL_VERSION

from sandbox.proxy.models import Registration
from sandbox.proxy.relay import bind_to_device
from sandbox.tls import client_ssl_context

PROXY_PROTOCOL = LATEST_PROTOCOL_VERSION  # what the tool proxy's MCP server speaks
# Every MCP client over HTTP that tbx owns the HTTP client of (the proxy's to a server, an
# agent's to the proxy: bench.rollout.clients): the SDK's own defaults, 30 s to connect or
# write and 300 s between reads. A call's own bound is the proxy's (sandbox.timeouts).
MCP_HTTP_TIMEOUT = httpx2.Timeout(30.0, read=300.0)


def upstream_client(
    url: str, headers: Mapping[str, str] | None = None, *, mode: str = "auto", interface: str | None = None
) -> Client:
    """An MCP client for `url` (streamable HTTP). With headers or an interface
    (connections bound to that network device, see `Upstream.interface`), the
    HTTP client is owned by the returned `Client` (closed when it exits).
    `mode` as in `mcp.Client` ("legacy" forces a 2025-era session)."""
    if not headers and not interface:
        return Client(url, cache=None, mode=mode)

    @contextlib.asynccontextmanager
    async def transport() -> AsyncIterator[Any]:
        options = [bind_to_device(interface)] if interface else None
        async with (
            httpx2.AsyncClient(
                headers=dict(headers or {}),
                timeout=MCP_HTTP_TIMEOUT,
                transport=httpx2.AsyncHTTPTransport(verify=client_ssl_context(), socket_options=options),
            ) as http,
            streamable_http_client(url, http_client=http) as streams,
        ):
            yield streams

    return Client(transport(), cache=None, mode=mode)


def proxy_client(registration: Registration, *, mode: str = PROXY_PROTOCOL) -> Client:
    """An MCP client for one attempt's proxy endpoint (bearer token set). The proxy is
    this SDK's own server, so its protocol version is known: no discover round trip
    (`mode="auto"` asks for one)."""
    return upstream_client(registration.url, registration.headers, mode=mode)


async def list_all_tools(client: Client) -> list[types.Tool]:
    """Every tool an MCP server lists, following pagination (at most 100 pages;
    an empty cursor ends the listing like a missing one)."""
    tools: list[types.Tool] = []
    cursor: str | None = None
    for _ in range(100):
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            break
    return tools


def tool_json(tool: types.Tool) -> dict[str, Any]:
    """A listed tool as MCP JSON (what `types.Tool.model_validate` reads back)."""
    return tool.model_dump(mode="json", by_alias=True, exclude_none=True)


def server_tools(url: str, headers: Mapping[str, str], interface: str | None = None) -> list[dict[str, Any]]:
    """A server's tools/list as MCP JSON, from a thread without an event loop (a
    sandbox's prepare: the listing the proxy's registration then reuses)."""

    async def listing() -> list[dict[str, Any]]:
        async with upstream_client(url, headers, interface=interface) as client:
            return [tool_json(t) for t in await list_all_tools(client)]

    return asyncio.run(listing())
