"""A tiny local MCP server (low-level `Server` on uvicorn, 127.0.0.1) behind the tool
proxy in its tests: tools that echo, sleep, fail or answer in-band errors, and a record
of every call and upstream secret it received."""

from __future__ import annotations

import json
import socket
import threading
import time
from typing import Any

import anyio
import mcp_types as types
import uvicorn
from mcp.server.lowlevel.server import Server
from mcp.server.transport_security import TransportSecuritySettings

SCHEMA = {"type": "object", "properties": {"x": {"type": "string", "description": "upstream words"}}}


class FakeUpstream:
    """An MCP server whose tools echo, sleep, fail, or answer in-band errors;
    remembers every call it actually received."""

    def __init__(self, name: str, tools: list[str]):
        self.name = name
        self.received: list[str] = []
        self.secrets: list[str | None] = []  # the X-Tbx-Upstream-Secret of every HTTP request
        listed = [types.Tool(name=t, description=f"{name}:{t}", input_schema=SCHEMA) for t in tools]

        async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
            return types.ListToolsResult(tools=listed)

        async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
            self.received.append(params.name)
            args = params.arguments or {}
            if params.name.endswith("sleep"):
                await anyio.sleep(float(args.get("x", "5")))
            if params.name.endswith("fail"):
                return types.CallToolResult(
                    content=[types.TextContent(type="text", text="boom")], is_error=True
                )
            if params.name.endswith("inband"):
                text = json.dumps({"error": "Tool execution failed: nope", "tool": params.name})
            else:
                text = json.dumps({"server": name, "tool": params.name, "args": args})
            return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=False)

        server = Server(name, on_list_tools=list_tools, on_call_tool=call_tool)
        app = server.streamable_http_app(
            streamable_http_path="/mcp",
            json_response=True,
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        )

        async def recording(scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] == "http":
                found = [v.decode() for k, v in scope["headers"] if k == b"x-tbx-upstream-secret"]
                self.secrets.append(found[0] if found else None)
            await app(scope, receive, send)

        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
        self._server = uvicorn.Server(uvicorn.Config(recording, log_level="warning", lifespan="on"))
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [sock]}, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            assert time.monotonic() < deadline, "fake upstream did not start"
            time.sleep(0.01)

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(10)
