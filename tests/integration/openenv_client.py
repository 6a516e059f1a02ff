"""A line-driven OpenEnv client, run by tests/integration/test_env_server.py with the
interpreter of the separate `.venv-openenv` (openenv-core installed; `make openenv-client`).

    python openenv_client.py BASE_URL

It connects openenv-core's real `GenericEnvClient` (WebSocket) to BASE_URL and
reads one JSON command per stdin line:

    {"op": "reset", "data": {...}}   -> env.reset(**data)
    {"op": "step", "action": {...}}  -> env.step(action)
    {"op": "state"}                  -> env.state()
    {"op": "exit"}                   -> env.close() and exit

and answers each with one JSON line on stdout: {"ok": true, "observation": ...,
"reward": ..., "done": ...} (or "state"), or {"ok": false, "error": "..."} when
the client raised (openenv-core raises on the server's error messages).
"""

from __future__ import annotations

import json
import sys

from openenv.core import GenericEnvClient


def main() -> int:
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
                out = {"observation": result.observation, "reward": result.reward, "done": result.done}
            elif op == "step":
                result = env.step(cmd["action"])
                out = {"observation": result.observation, "reward": result.reward, "done": result.done}
            elif op == "state":
                out = {"state": env.state()}
            else:
                raise ValueError(f"unknown op {op!r}")
        except Exception as exc:
            print(json.dumps({"ok": False, "error": f"{exc.__class__.__name__}: {exc}"}), flush=True)
            continue
        print(json.dumps({"ok": True, **out}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
