"""`python -m servers.bridge [--check]`: start the checkout server the environment
names and serve it on port 8000 (or, with --check, list its tools and exit).

    TBX_BRIDGE_SERVER     the server's name (servers.yaml)
    TBX_BRIDGE_COMMAND    its argv, JSON (`{python}` already the checkout venv's interpreter)
    TBX_BRIDGE_CWD        its working directory (optional)
    TBX_BRIDGE_LINE_CAP   the longest stdout line taken from it, bytes
    TBX_UPSTREAM_SECRET   the attempt's secret every request must carry

The child gets the container's environment without the TBX_ variables: checkout
code never sees the upstream secret. It ends with the bridge; the bridge ends
when it does (exit code: the child's), so a server that dies mid-attempt is a
lost container named by its role, as a native server's.
"""

from __future__ import annotations

import json
import os
import subprocess


def child_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TBX_")}
    env.setdefault("FASTMCP_LOG_LEVEL", "WARNING")
    return env


# The server starts first, so its interpreter and imports run while the bridge imports its own.
CHILD = subprocess.Popen(
    json.loads(os.environ["TBX_BRIDGE_COMMAND"]),
    stdin=subprocess.PIPE,
    stdout=subprocess.PIPE,
    env=child_env(),
    cwd=os.environ.get("TBX_BRIDGE_CWD") or None,
    start_new_session=True,
)

import argparse  # noqa: E402
import logging  # noqa: E402
import sys  # noqa: E402
from typing import Any  # noqa: E402

import anyio  # noqa: E402
import mcp_types as types  # noqa: E402
import uvicorn  # noqa: E402
from mcp import Client  # noqa: E402

from servers.bridge.app import build_bridge_app  # noqa: E402
from servers.bridge.stdio import child_transport, exit_code  # noqa: E402
from servers.engine.app import UPSTREAM_SECRET_ENV  # noqa: E402
from servers.engine.serving import SecondTickServer  # noqa: E402

log = logging.getLogger("servers.bridge")

DEFAULT_LINE_CAP = 64 << 20  # an airline geteffects line is ~5 MB (text + structuredContent)
START_TIMEOUT = 120.0  # the handshake and listing; the sandbox's own start timeout is the real bound


async def listed(client: Client) -> list[types.Tool]:
    tools: list[types.Tool] = []
    cursor: str | None = None
    for _ in range(100):
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            break
    return tools


async def run(check: bool, host: str, port: int) -> None:
    name = os.environ.get("TBX_BRIDGE_SERVER", "server")
    line_cap = int(os.environ.get("TBX_BRIDGE_LINE_CAP", DEFAULT_LINE_CAP))
    started = False

    async def on_exit(code: int | None) -> None:
        phase = "while serving" if started else "before answering the MCP handshake"
        print(
            f"tbx bridge: checkout server {name} exited {phase} (exit code {code})",
            file=sys.stderr,
            flush=True,
        )
        os._exit(exit_code(code))

    transport = child_transport(CHILD, line_cap, on_exit)
    async with Client(transport, mode="legacy", cache=None) as client:
        with anyio.fail_after(START_TIMEOUT):
            tools = await listed(client)
        started = True
        if check:
            report: dict[str, Any] = {"server": name, "tools": [t.name for t in tools]}
            print(json.dumps(report), flush=True)
            return
        secret = os.environ.get(UPSTREAM_SECRET_ENV, "")
        if not secret:
            raise SystemExit(
                f"{UPSTREAM_SECRET_ENV} is not set: the bridge answers only requests carrying it"
            )
        app = build_bridge_app(name, client, tools, secret)
        config = uvicorn.Config(
            app,
            host=host,
            port=port,
            log_level="warning",
            access_log=False,
            loop="asyncio",
            http="h11",
            ws="none",
        )
        await SecondTickServer(config).serve()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m servers.bridge")
    parser.add_argument(
        "--check", action="store_true", help="start the server, print its tools as JSON, exit"
    )
    parser.add_argument("--host", default="0.0.0.0")
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args()
    logging.basicConfig(level=os.environ.get("TBX_LOG_LEVEL", "WARNING"))
    try:
        anyio.run(run, args.check, args.host, args.port)
    except Exception as exc:  # a failed start: the container's logs say why, its exit code that it failed
        print(
            f"tbx bridge: checkout server {os.environ.get('TBX_BRIDGE_SERVER')} failed: {exc!r}",
            file=sys.stderr,
        )
        sys.exit(3)


if __name__ == "__main__":
    main()
