"""`tbx session-proxy`: the reference harness's Session Proxy API on tbx's sandboxes
(bench.session_api; docs/session-api.md).

tbx session-proxy --dataset DIR [--host 127.0.0.1] [--port 7111] [--warm N]
                  [--api-key-env VAR] [--record OUT] [--gc-minutes M]
                  [--max-sessions N] [--max-body MIB]
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from bench.defaults import MAX_BODY_MIB, MAX_SESSIONS
from bench.web_guard import add_guard_arguments

DEFAULT_PORT = 7111


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "session-proxy",
        help="serve the ThinkingBox Session Proxy API (tb infer, the OpenEnv ThinkingBox env, trainers)",
    )
    p.add_argument("--dataset", required=True, help="benchmark directory (the domains' seed rows)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"default {DEFAULT_PORT}")
    p.add_argument("--warm", type=int, default=1, help="booted sandboxes kept ready per domain (default 1)")
    p.add_argument(
        "--api-key-env",
        metavar="VAR",
        help="require `Authorization: Bearer <$VAR>` on every route but /health",
    )
    p.add_argument("--record", metavar="OUT", help="also write every session as a tbx attempt into OUT")
    p.add_argument(
        "--gc-minutes",
        type=float,
        help="destroy sessions idle this many minutes (default: never, as the reference)",
    )
    p.add_argument("--gc-every", type=float, default=60.0, help=argparse.SUPPRESS)  # the expiry tick (tests)
    p.add_argument("--golden-cache", help="golden end-state cache directory (default ~/.cache/tbx/golden)")
    p.add_argument(
        "--max-sessions",
        type=int,
        default=MAX_SESSIONS,
        metavar="N",
        help="sessions held at once, live or being created; more, or more than memory admits, are "
        f"refused at once with 503 and Retry-After (default {MAX_SESSIONS})",
    )
    p.add_argument(
        "--max-body",
        type=float,
        default=MAX_BODY_MIB,
        metavar="MIB",
        help=f"largest request body read, in MiB; a larger one is refused with 413 (default {MAX_BODY_MIB})",
    )
    # Tests: a request's head and body time, and a memory budget in place of what is available.
    p.add_argument("--head-timeout", type=float, help=argparse.SUPPRESS)
    p.add_argument("--body-timeout", type=float, help=argparse.SUPPRESS)
    p.add_argument("--memory-budget-mib", type=float, help=argparse.SUPPRESS)
    add_guard_arguments(p, token=False)  # the key is --api-key-env's (the reference's 401 body)
    p.set_defaults(fn=serve_command)


def serve_command(args: argparse.Namespace) -> int:
    import uvicorn

    from bench.cli.datasets import benchmark_for
    from bench.cli.served import GracefulServer
    from bench.session_api.limits import HEAD_TIMEOUT, MIB, BodyLimits, timed_protocol
    from bench.session_api.server import ServeOptions, session_proxy_app
    from bench.web_guard import policy_from_args

    api_key = None
    if args.api_key_env:
        api_key = os.environ.get(args.api_key_env, "").strip()
        if not api_key:
            print(f"error: --api-key-env {args.api_key_env}: the variable is unset or empty", file=sys.stderr)
            return 2
    try:
        guard = policy_from_args(args.allow_host, args.allow_origin).model_copy(
            update={"require_json": False}
        )
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    bench = benchmark_for("tbx session-proxy", args.dataset)
    opts = ServeOptions(
        warm=args.warm,
        record=Path(args.record) if args.record else None,
        api_key=api_key,
        gc_minutes=args.gc_minutes,
        gc_every=args.gc_every,
        golden_cache=Path(args.golden_cache) if args.golden_cache else None,
        guard=guard,
        max_sessions=args.max_sessions,
        memory_budget=int(args.memory_budget_mib * MIB) if args.memory_budget_mib else None,
        bodies=BodyLimits(
            max_body=int(args.max_body * MIB),
            **({"body_timeout": args.body_timeout} if args.body_timeout else {}),
        ),
    )
    url = f"http://{args.host}:{args.port}"

    class Announced(GracefulServer):
        async def startup(self, sockets: Any = None) -> None:
            await super().startup(sockets)
            if self.started:  # listening: the one line a supervisor waits for
                print(f"tbx session-proxy: ready on {url} (run {run_id})", file=sys.stderr, flush=True)

    app, run_id = session_proxy_app(bench, opts)
    served = Announced(
        uvicorn.Config(
            app,
            host=args.host,
            port=args.port,
            log_level="warning",
            lifespan="on",
            http=timed_protocol(args.head_timeout or HEAD_TIMEOUT),
            timeout_graceful_shutdown=5,
        )
    )
    served.run()
    return 128 + served.stopped_by if served.stopped_by else 0
