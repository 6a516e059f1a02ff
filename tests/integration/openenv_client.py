"""A line-driven OpenEnv client, run by the env-server tests with the interpreter of a
separate venv: `.venv-openenv10` (openenv 0.10, `make openenv10-client`) or `.venv-openenv`
(openenv-core 0.3, `make openenv-client`).

    python openenv_client.py BASE_URL [generic|mcp]

`generic` connects the package's real `GenericEnvClient` (WebSocket /ws); `mcp` its
`MCPToolClient` (openenv 0.10 only), which makes a session over HTTP `POST /mcp`, joins it
with `/ws?session_id=`, and calls tools over `/mcp`. One JSON command per stdin line:

    {"op": "reset", "data": {...}}   -> env.reset(**data)
    {"op": "step", "action": {...}}  -> env.step(action)
    {"op": "state"}                  -> env.state()
    {"op": "list_tools"}             -> env.list_tools()            (mcp)
    {"op": "call_tool", "name": N, "arguments": {...}} -> env.call_tool(N, **arguments)  (mcp)
    {"op": "exit"}                   -> env.close() and exit

and answers each with one JSON line on stdout: {"ok": true, "observation": ...,
"reward": ..., "done": ...} (or "state", "tools", "result"), or {"ok": false, "error": "..."}
when the client raised (it raises on the server's error messages).
"""

from __future__ import annotations

import json
import sys
from typing import Any


def _mcp_action(action: dict[str, Any]) -> Any:
    """MCPToolClient sends what an Action model dumps: wrap a dict action in one."""
    from openenv.core.env_server.types import Action
    from pydantic import ConfigDict

    class AnyAction(Action):
        model_config = ConfigDict(extra="allow")

    return AnyAction(**action)


def _plain(observation: Any) -> Any:
    return observation.model_dump() if hasattr(observation, "model_dump") else observation


def main() -> int:
    mode = sys.argv[2] if len(sys.argv) > 2 else "generic"
    if mode == "mcp":
        from openenv.core.mcp_client import MCPToolClient

        env = MCPToolClient(base_url=sys.argv[1], message_timeout_s=300.0).sync()
    else:
        from openenv.core import GenericEnvClient

        env = GenericEnvClient(base_url=sys.argv[1], message_timeout_s=300.0).sync()
    env.connect()
    print(json.dumps({"ok": True, "connected": True}), flush=True)
    for line in sys.stdin:
        if not line.strip():
            continue
        cmd = json.loads(line)
        op = cmd["op"]
        if op == "exit":
            env.close()
            print(json.dumps({"ok": True, "closed": True}), flush=True)
            return 0
        try:
            if op == "reset":
                result = env.reset(**cmd.get("data", {}))
                out = {
                    "observation": _plain(result.observation),
                    "reward": result.reward,
                    "done": result.done,
                }
            elif op == "step":
                action = _mcp_action(cmd["action"]) if mode == "mcp" else cmd["action"]
                result = env.step(action)
                out = {
                    "observation": _plain(result.observation),
                    "reward": result.reward,
                    "done": result.done,
                }
            elif op == "state":
                out = {"state": _plain(env.state())}
            elif op == "list_tools":
                out = {"tools": [_plain(t) for t in env.list_tools(use_cache=False)]}
            elif op == "call_tool":
                out = {"result": env.call_tool(cmd["name"], **cmd.get("arguments", {}))}
            else:
                raise ValueError(f"unknown op {op!r}")
        except Exception as exc:
            print(json.dumps({"ok": False, "error": f"{exc.__class__.__name__}: {exc}"}), flush=True)
            continue
        print(json.dumps({"ok": True, **out}, default=str), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
