"""`tbx env serve`: the OpenEnv environment server (see bench.env and docs/openenv.md).

tbx env serve --dataset DIR --config FILE [--port 8000] [--max-episodes N] [--out DIR]
              [--tasks IDS] [--domain D] [--warm W] [--idle-timeout S] [--skip-rubrics]
              [--allow-host NAME] [--allow-origin ORIGIN] [--token-env VAR]   (bench.web_guard)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bench.defaults import CALL_TIMEOUT, START_TIMEOUT, WALL_CLOCK
from bench.web_guard import add_guard_arguments


def register(sub: argparse._SubParsersAction) -> None:
    env = sub.add_parser("env", help="serve tasks as an OpenEnv environment (training and evaluation loops)")
    env_sub = env.add_subparsers(dest="env_command", required=True)
    serve = env_sub.add_parser(
        "serve", help="OpenEnv HTTP + WebSocket server: one fresh sandbox per episode, /ready gate"
    )
    serve.add_argument("--dataset", required=True, help="benchmark directory")
    serve.add_argument(
        "--config", required=True, help="models config YAML (the `user` role; `judge` for rubrics)"
    )
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument(
        "--max-episodes",
        type=int,
        default=0,
        help="episodes at once; more get OpenEnv's capacity error (default: what memory admits, up to 8)",
    )
    serve.add_argument(
        "--out", default="results/env", help="where episodes are recorded (like `tbx run --out`)"
    )
    serve.add_argument("--release", help="release test list name (default: the benchmark's)")
    serve.add_argument("--tasks", help="comma-separated task ids (or uids) to serve (default: all)")
    serve.add_argument("--domain", action="append", help="only these domains (each gets a warm pool)")
    serve.add_argument(
        "--warm", type=int, default=1, help="booted sandboxes kept ready per domain (default 1)"
    )
    serve.add_argument(
        "--idle-timeout", type=float, default=300.0, help="seconds without a step before teardown"
    )
    serve.add_argument("--wall-clock", type=float, default=WALL_CLOCK, help="seconds per episode")
    serve.add_argument("--call-timeout", type=float, default=CALL_TIMEOUT, help="seconds per tool call")
    serve.add_argument(
        "--start-timeout",
        type=float,
        default=START_TIMEOUT,
        help="seconds for a sandbox to boot (default %(default)g)",
    )
    serve.add_argument("--runtime", help="container runtime, e.g. runsc")
    serve.add_argument(
        "--golden-cache", help="golden end-state cache directory (default ~/.cache/tbx/golden)"
    )
    serve.add_argument(
        "--skip-rubrics", action="store_true", help="judge rubric tasks on state alone (no judge model)"
    )
    serve.add_argument("--name", help="run name shown in reports")
    add_guard_arguments(serve)
    serve.set_defaults(fn=serve_command)


def serve_command(args: argparse.Namespace) -> int:
    import uvicorn

    from bench.cli.run import select_tasks
    from bench.cli.served import GracefulServer
    from bench.dataset import load_benchmark
    from bench.env.host import EnvHost, EnvOptions
    from bench.env.server import EnvServer
    from bench.llm.config import load_models_config
    from bench.run.sizing import default_concurrency
    from bench.web_guard import policy_from_args

    try:
        guard = policy_from_args(args.allow_host, args.allow_origin, args.token_env)
    except ValueError as exc:
        print(f"tbx env serve: {exc}", file=sys.stderr)
        return 2
    bench = load_benchmark(Path(args.dataset), release=args.release, strict=False)
    for p in bench.errors:
        print(f"warning: {p}", file=sys.stderr)
    tasks = select_tasks(bench, args.tasks, args.domain)
    config = load_models_config(args.config)
    opts = EnvOptions(
        out=Path(args.out),
        max_episodes=args.max_episodes or default_concurrency(model_agent=True),
        warm=args.warm,
        idle_timeout=args.idle_timeout,
        wall_clock=args.wall_clock,
        call_timeout=args.call_timeout,
        start_timeout=args.start_timeout,
        runtime=args.runtime,
        golden_cache=Path(args.golden_cache) if args.golden_cache else None,
        skip_rubrics=args.skip_rubrics,
        run_name=args.name,
    )
    opts.out.mkdir(parents=True, exist_ok=True)
    server = EnvServer(EnvHost(bench, config, tasks, opts))
    print(
        f"tbx env serve: {len(tasks)} tasks, up to {opts.max_episodes} episodes at once, "
        f"recording to {opts.out}; ws://{args.host}:{args.port}/ws (GET /ready says when it can take work)",
        file=sys.stderr,
        flush=True,
    )
    served = GracefulServer(
        uvicorn.Config(
            server.app(guard),
            host=args.host,
            port=args.port,
            ws="websockets-sansio",
            log_level="warning",
            # open episodes are torn down by the app's shutdown, which waits for this
            timeout_graceful_shutdown=5,
        )
    )
    served.run()
    return 128 + served.stopped_by if served.stopped_by else 0
