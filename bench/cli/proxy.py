"""`tbx proxy`: the tool proxy on its own.

    tbx proxy [--port N] [--admin-port N] [--call-timeout S] [--max-request-bytes N] [--json]

prints the agent-facing MCP endpoint, the admin endpoint and the admin token,
then serves until Ctrl-C/SIGTERM. Attempts are registered over the admin API
(`sandbox.proxy.admin`, documented there; `AdminClient` is its Python client).
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
from collections.abc import Callable
from typing import Any

from bench.cli.signals import stop_signals_as_interrupt


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


def register(sub: Any) -> None:
    proxy = sub.add_parser("proxy", help="run the tool proxy on its own (admin API)")
    proxy.add_argument("--port", type=int, default=0, help="MCP port on 127.0.0.1 (default: any free port)")
    proxy.add_argument("--admin-port", type=int, default=0, help="admin port on 127.0.0.1 (default: any)")
    proxy.add_argument("--call-timeout", type=float, help="seconds per tool call (default 60)")
    proxy.add_argument("--max-request-bytes", type=int, help="largest accepted request body (default 1 MiB)")
    proxy.add_argument("--json", action="store_true", help="print the endpoints as one JSON line")
    proxy.set_defaults(fn=proxy_command)


def proxy_command(args: argparse.Namespace) -> int:
    from sandbox import DEFAULT_CALL_TIMEOUT, DEFAULT_MAX_REQUEST_BYTES, ProxyServer

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
