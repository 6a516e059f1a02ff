"""A stdio MCP server written for the bridge's tests (plain JSON-RPC lines, no SDK):
the 2025 handshake, a few tools, the reserved ones, and the ways a checkout server
goes wrong, chosen by FAKE_MODE (start) and by the tool called."""

from __future__ import annotations

import json
import os
import sys

MODE = os.environ.get("FAKE_MODE", "ok")
TOOLS = [
    "__reserved__init",
    "__reserved__geteffects",
    "echo",
    "configure_data",
    "hang",
    "flood",
    "die",
    "env",
]
STATE: dict[str, object] = {"z": 1, "a": 2, "m": {"y": 1, "b": 2}}


def send(message: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def text(request_id: object, value: str, error: bool = False) -> None:
    send(
        {
            "jsonrpc": "2.0",
            "id": request_id,
            "result": {"content": [{"type": "text", "text": value}], "isError": error},
        }
    )


if MODE == "crash_on_start":
    print("Traceback (most recent call last):", file=sys.stderr)
    print("ModuleNotFoundError: No module named 'mcp.server.fastmcp'", file=sys.stderr)
    sys.exit(1)

print("not a protocol line", flush=True)  # skipped by the bridge
for line in sys.stdin:
    msg = json.loads(line)
    rid, method = msg.get("id"), msg.get("method")
    if method == "initialize":
        send(
            {
                "jsonrpc": "2.0",
                "id": rid,
                "result": {
                    "protocolVersion": msg["params"]["protocolVersion"],
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "fake", "version": "1"},
                },
            }
        )
    elif method == "tools/list":
        schema = {"type": "object", "properties": {"x": {"type": "string"}}}
        send(
            {
                "jsonrpc": "2.0",
                "id": rid,
                "result": {"tools": [{"name": n, "description": n, "inputSchema": schema} for n in TOOLS]},
            }
        )
    elif method == "tools/call":
        name, args = msg["params"]["name"], msg["params"].get("arguments") or {}
        if name == "__reserved__init":
            config = args.get("config", {})
            if "bad" in config:
                text(rid, f"Error executing tool __reserved__init: {config['bad']!r}", error=True)
            else:
                STATE.update(config)
                text(rid, json.dumps({"status": "ok", "users": list(config)}))
        elif name == "__reserved__geteffects":
            text(rid, json.dumps(STATE))
        elif name == "echo":
            STATE["echoed"] = args.get("x")
            text(rid, json.dumps({"status": "ok", "x": args.get("x")}))
        elif name == "env":
            text(rid, json.dumps(sorted(k for k in os.environ if k.startswith("TBX_"))))
        elif name == "hang":
            pass  # never answered (the server goes on reading)
        elif name == "flood":
            sys.stdout.write("x" * (1 << 20) + "\n")  # one line over the bridge's cap, then nothing
            sys.stdout.flush()
        elif name == "die":
            sys.exit(3)
    elif rid is not None:
        send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": f"no method {method}"}})
