"""The bridge that puts a checkout's stdio MCP server behind tbx's HTTP upstream contract.

A `thinkingbox-data` checkout declares servers that speak MCP over stdio
(`servers/servers.yaml`, `type: mcp-process`). tbx runs each in a container of the
attempt's set, where this bridge starts it as a child process, speaks to it with
the MCP client of tbx's own SDK (the 2025 handshake the checkout's mcp 1.x
answers), and serves it over streamable HTTP exactly as a native domain's server
(`servers.engine.app`): the same upstream secret, `/healthz`, `/mcp`. The reserved
tools (`__reserved__*`) are neither listed nor callable on `/mcp`; tbx's host
side calls them on `/reserved/<name>`. The bridge lives in its own venv
(`/opt/tbx/venv`), apart from the checkout's (`/opt/checkout/venv`).
"""
