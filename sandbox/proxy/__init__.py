"""The tool proxy: one MCP endpoint (streamable HTTP) on 127.0.0.1 for every
attempt, each reached only with its own unguessable token.

    with ProxyServer() as proxy:
        reg = proxy.register(register_request(session, attempt_id, ToolPolicy(allowed_tools=[...])))
        # an MCP client connects to reg.url with header `Authorization: Bearer <reg.token>`
        # (or to reg.path_url, which carries the token in the path)
        ...
        calls = proxy.unregister(reg.token)   # the attempt's recorded tool calls

The modules, each holding one thing (import a name from its module, or the
public ones from `sandbox`; this package re-exports nothing):

    server.py    ProxyServer: hosts the registry on its own loop (host.py); blocking + async API
    registry.py  AttemptRegistry: register / unregister / gone, each attempt's upstream sessions
    registered.py  RegisteredAttempt: one attempt's routes, upstream MCP clients, recorded calls, loss
    app.py       the agent-facing ASGI app: token -> that attempt's MCP endpoint
    calls.py     one tool call: the SDK path (forward_call), the fast path (relay_call), the direct path (direct_call)
    relay.py     the fast path's wire pieces and keep-alive upstream connections
    routes.py    the attempt's tool table (allow-list, overrides, reserved tools)
    watch.py     the watch on registered sandboxes' containers and networks
    models.py    the records: RegisterRequest, ToolPolicy, Registration, ProxyCall, errors
    limits.py    the default per-call limits
    host.py      uvicorn on 127.0.0.1 in a background thread (LoopHost)
    admin.py     the standalone proxy's admin API (`tbx proxy`) and its AdminClient
    clients.py   MCP clients: to a tool server (upstream_client), to the proxy (proxy_client)

Per attempt the proxy keeps one upstream MCP client per backend server
(entered once, reused for every call) and one low-level MCP `Server` of its
own that lists only the allow-listed tools (description overrides applied)
and forwards calls. A token selects exactly one attempt's `Server`, so it can
never reach another attempt's upstreams or sessions. Tools whose names start
with `__reserved__` and tools outside the allow-list are never listed and a
call to them is answered `Unknown tool` without reaching any upstream.

Every request to an upstream carries the upstream's headers (the sandbox's
per-attempt secret, without which its servers answer 401). A registration
naming its sandbox's containers is checked live at registration and watched
after (`watch.py`): once one is gone, every later request of the attempt is
refused (HTTP 503, the cause in the error) and nothing is relayed;
`gone(token)` tells the owner why, so it can end the attempt as a system error.

Fast path (`fast_path=True`, the default): a 2026-era `tools/call` of an
allow-listed tool is relayed as is to its server over a keep-alive
connection and the server's reply returned unchanged (`relay.py`); the
checks, the timeout and the recording are the same as on the SDK path, which
serves everything else.

Direct path (`await proxy.acall(token, name, arguments, pools)`): a caller in
the proxy's process (the Session API) makes a tool call without the loopback
hop and the proxy's loop: it is admitted, timed and recorded by the same rules
and posted straight to the route's server over the caller's own keep-alive
connections (`pools`, bound to the caller's loop); once the sandbox is lost it
raises SandboxGoneError and relays nothing.
"""
