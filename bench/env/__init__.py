"""`tbx env serve`: the OpenEnv interface over tbx sandboxes.

protocol   the wire format: actions, observations, state, WebSocket messages, error codes
host       what episodes share: dataset, config, the DockerProvider (warm pool per domain),
           tool proxy, golden store, output
episode    one episode: an attempt opened by bench.run.lifecycle.open_attempt, tool calls
           through the proxy, the simulated user, the verdict; owned by one task from reset
           to teardown
readiness  the /ready checks (cached)
recording  episodes written like `tbx run` attempts (results.jsonl, attempts/, states/, ...)
server     the Starlette app: /health /metadata /schema /ready, WS /ws, POST /reset /step, GET /state
"""
