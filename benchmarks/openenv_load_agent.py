"""The agent side of benchmarks/openenv_load.py, run with the interpreter of `.venv-openenv10`
(openenv 0.10): B tasks x G episodes at once, each over its own official `GenericEnvClient`
(async, one event loop), playing the task's golden calls, then a closing message.

    python openenv_load_agent.py BASE_URL PLAN.json   -> one JSON object on stdout

PLAN: {"group": G, "tasks": [{"test_uid": ..., "calls": [[name, arguments], ...]}, ...]}.
Per episode: reset seconds, each tool call's seconds, the terminal step's seconds, the reward.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

from openenv.core import GenericEnvClient


async def episode(url: str, task: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"test_uid": task["test_uid"], "calls_s": []}
    env = GenericEnvClient(base_url=url, message_timeout_s=900.0)
    try:
        await env.connect()
        t = time.monotonic()
        await env.reset(test_uid=task["test_uid"])
        out["reset_s"] = time.monotonic() - t
        for name, arguments in task["calls"]:
            t = time.monotonic()
            result = await env.step({"type": "call_tool", "tool_name": name, "arguments": arguments})
            out["calls_s"].append(time.monotonic() - t)
            if result.done:
                break
        t = time.monotonic()
        final = await env.step({"type": "submit_message", "content": "All done, thank you."})
        out["final_s"] = time.monotonic() - t
        out["reward"] = final.reward
        out["reward_type"] = final.observation.get("reward_type")
    except Exception as exc:
        out["error"] = f"{exc.__class__.__name__}: {str(exc)[:300]}"
    finally:
        await env.close()
    out["end"] = time.monotonic()
    return out


async def main() -> int:
    url, plan = sys.argv[1], json.loads(Path(sys.argv[2]).read_text())
    jobs = [task for task in plan["tasks"] for _ in range(plan["group"])]
    start = time.monotonic()
    episodes = await asyncio.gather(*(episode(url, task) for task in jobs))
    wall = max(e["end"] for e in episodes) - start
    print(json.dumps({"wall_s": wall, "episodes": episodes}))
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
