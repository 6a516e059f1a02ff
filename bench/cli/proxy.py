"""`tbx proxy`: the session proxy on its own, plus what a task contributes to
a proxy registration (its scenario's tool allow-list and description overrides).

    tbx proxy [--port N] [--admin-port N] [--call-timeout S] [--max-request-bytes N] [--json]

prints the agent-facing MCP endpoint, the admin endpoint and the admin token,
then serves until Ctrl-C/SIGTERM. Attempts are registered over the admin API
(`sandbox.proxy_admin`, documented there; `AdminClient` is its Python client).
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
from dataclasses import dataclass, field

from bench.cli.signals import stop_signals_as_interrupt
from bench.dataset import Benchmark, Task
from sandbox.proxy import DEFAULT_CALL_TIMEOUT, DEFAULT_MAX_REQUEST_BYTES, ProxyServer


@dataclass(frozen=True)
class ToolPolicy:
    """The proxy-side view of a scenario's tools: what an attempt may see and call."""

    allowed_tools: list[str] | None = None  # None: every tool its servers list
    overrides: dict[str, str] = field(default_factory=dict)  # tool -> description
    arg_overrides: dict[str, dict[str, str]] = field(default_factory=dict)  # tool -> {arg: description}


def task_tool_policy(bench: Benchmark, task: Task) -> ToolPolicy:
    scenario = bench.scenario_of(task)
    return ToolPolicy(
        allowed_tools=list(scenario.tool_names),
        overrides={
            t.name: t.override_description for t in scenario.tools if t.override_description is not None
        },
        arg_overrides={
            t.name: dict(t.override_arg_description) for t in scenario.tools if t.override_arg_description
        },
    )


def wait_for_interrupt() -> None:
    """Block until Ctrl-C (or SIGTERM/SIGHUP inside `stop_signals_as_interrupt`)."""
    stop = threading.Event()
    try:
        while not stop.wait(3600):
            pass
    except KeyboardInterrupt:
        pass


def proxy_command(args: argparse.Namespace) -> int:
    proxy = ProxyServer(
        port=args.port,
        admin_port=args.admin_port,
        call_timeout=args.call_timeout or DEFAULT_CALL_TIMEOUT,
        max_request_bytes=args.max_request_bytes or DEFAULT_MAX_REQUEST_BYTES,
    )
    with stop_signals_as_interrupt(), proxy:
        info = {"mcp_url": proxy.url, "admin_url": proxy.admin_url, "admin_token": proxy.admin_token}
        if args.json:
            print(json.dumps(info), flush=True)
        else:
            print(
                f"tbx proxy serving MCP at {proxy.url} (each attempt: Authorization: Bearer <its token>)\n"
                f"  admin API:   {proxy.admin_url}  (Authorization: Bearer {proxy.admin_token})\n"
                "  register:    POST /attempts {attempt_id, upstreams: {domain: mcp_url}, allowed_tools, overrides}\n"
                "Ctrl-C stops it.",
                flush=True,
            )
        wait_for_interrupt()
        print("stopping proxy ...", file=sys.stderr, flush=True)
    return 0
