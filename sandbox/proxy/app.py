"""The agent-facing ASGI app of the tool proxy: finds the attempt by its
token (Authorization header or `/a/<token>/mcp`) and hands the request to that
attempt's MCP endpoint, on the fast path when it can; refuses what no attempt
may send (401 unknown token, 404 other paths, 413 too large, 503 sandbox lost)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable

from starlette.types import Receive, Scope, Send

from sandbox.proxy import calls, relay
from sandbox.proxy.registered import RegisteredAttempt


class ProxyApp:
    """token -> that attempt's MCP session manager (`lookup` is the registry's)."""

    def __init__(self, lookup: Callable[[str | None], RegisteredAttempt | None], max_request_bytes: int):
        self.lookup = lookup
        self.max_request_bytes = max_request_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        path: str = scope["path"]
        if path == "/healthz":
            await relay.respond(send, 200, b'{"ok": true}')
            return
        path_token: str | None = None
        if path.startswith("/a/") and path.endswith("/mcp"):
            path_token = path[3:-4]
        elif path != "/mcp":
            await relay.respond(send, 404, relay.jsonrpc_error(-32601, "not found: the MCP endpoint is /mcp"))
            return
        header_token: str | None = None
        content_length: int | None = None
        for key, value in scope["headers"]:
            if key == b"authorization":
                scheme, _, credentials = value.decode("latin-1").partition(" ")
                if scheme.lower() == "bearer":
                    header_token = credentials.strip()
            elif key == b"content-length":
                with contextlib.suppress(ValueError):
                    content_length = int(value)
        token = path_token if path_token is not None else header_token
        if path_token is not None and header_token is not None and header_token != path_token:
            token = None
        attempt = self.lookup(token)
        lost = attempt.lost() if attempt is not None else None
        if lost is not None:
            await relay.respond(send, 503, relay.jsonrpc_error(-32003, lost))
            return
        if attempt is None or attempt.manager is None:
            await relay.respond(
                send,
                401,
                relay.jsonrpc_error(-32001, "missing or invalid token (send Authorization: Bearer <token>)"),
                extra=[(b"www-authenticate", b'Bearer realm="tbx"')],
            )
            return
        if content_length is not None and content_length > self.max_request_bytes:
            await relay.respond(send, 413, relay.jsonrpc_error(-32600, "request too large"))
            return
        if attempt.pools is not None and relay.relayable_headers(scope):
            await calls.relay_call(attempt, attempt.manager, scope, receive, send, self.max_request_bytes)
        else:
            await attempt.manager.handle_request(scope, receive, send)
