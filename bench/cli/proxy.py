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
from collections.abc import Callable

from bench.cli.signals import stop_signals_as_interrupt
from bench.dataset import Benchmark, Task
from sandbox.proxy import DEFAULT_CALL_TIMEOUT, DEFAULT_MAX_REQUEST_BYTES, ProxyServer, ToolPolicy


def task_tool_policy(bench: Benchmark, task: Task) -> ToolPolicy:
    """The proxy-side view of a scenario's tools: what an attempt may see and call."""
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


def wait_for_interrupt(failed: Callable[[], str | None] | None = None, every: float = 0.5) -> str | None:
    """Block until Ctrl-C (or SIGTERM/SIGHUP inside `stop_signals_as_interrupt`),
    or until `failed()` (asked every `every` s) returns a reason, which is returned."""
    stop = threading.Event()
    try:
        while not stop.wait(every if failed else 3600):
            if failed is not None and (reason := failed()) is not None:
                return reason
    except KeyboardInterrupt:
        pass
    return None


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
                "  register:    POST /attempts {attempt_id, upstreams: {domain: {url, headers}}, policy, "
                "containers, network}\n"
                "Ctrl-C stops it.",
                flush=True,
            )
        wait_for_interrupt()
        print("stopping proxy ...", file=sys.stderr, flush=True)
    return 0
