"""`tbx env serve`: the OpenEnv environment server (see bench.env and docs/openenv.md).

tbx env serve --dataset DIR --config FILE [--port 8000] [--max-episodes N] [--out DIR]
              [--tasks FILE|IDS] [--domain D] [--warm W] [--idle-timeout S] [--skip-rubrics]
              [--sessions-per-client N]
              [--capacity-wait S] [--allow-host NAME] [--allow-origin ORIGIN] [--token-env VAR]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bench.defaults import CALL_TIMEOUT, START_TIMEOUT, WALL_CLOCK
from bench.terminal_text import printable
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
    serve.add_argument(
        "--tasks",
        help="the tasks to serve: a task-list file (a YAML list of ids, the layout of the benchmark's "
        "releases/testlist*.yaml) or comma-separated task ids (or uids); default: the release list",
    )
    serve.add_argument("--domain", action="append", help="only these domains (each gets a warm pool)")
    serve.add_argument(
        "--warm",
        type=int,
        default=None,
        help="booted sandboxes kept ready per domain (default: 2 in all, at most --max-episodes, shared by "
        "the domains' shares of the served tasks); a domain serving one task keeps them seeded for it",
    )
    serve.add_argument(
        "--idle-timeout",
        type=float,
        default=300.0,
        help="seconds without a step before an episode is torn down, and before an MCP session "
        "without an episode is closed (default %(default)g)",
    )
    serve.add_argument(
        "--sessions-per-client",
        type=int,
        default=None,
        help="MCP sessions without an episode one client (peer address; all loopback clients are one) "
        "may hold at once (default 64 + 8 x --max-episodes); a /ws connection is never refused for them",
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
    serve.add_argument(
        "--capacity-wait",
        type=float,
        default=0.0,
        help="seconds a reset at capacity waits for a free slot before CAPACITY_REACHED (default 0)",
    )
    add_guard_arguments(serve)
    serve.set_defaults(fn=serve_command)


def task_source(tasks: str | None, release: str | None) -> tuple[str | Path | None, str | None]:
    """(the release list to load, the ids to pick from it): `--tasks FILE` is a task list of
    the release layout, served in its order; anything else is comma-separated ids."""
    if tasks and _is_file(tasks):
        return Path(tasks).resolve(), None
    return release, tasks


def _is_file(text: str) -> bool:
    """False for what cannot be a path at all (a list of ids longer than a file name may be)."""
    try:
        return Path(text).is_file()
    except (OSError, ValueError):
        return False


def serve_command(args: argparse.Namespace) -> int:
    import uvicorn

    from bench.cli.datasets import benchmark_for
    from bench.cli.run import select_tasks
    from bench.cli.served import GracefulServer
    from bench.env.host import EnvHost, EnvOptions
    from bench.env.server import EnvServer
    from bench.llm.config import check_models_config, load_models_config
    from bench.run.sizing import default_concurrency
    from bench.web_guard import policy_from_args

    release, ids = task_source(args.tasks, args.release)
    try:  # the request guard (#29 finding 3): loopback Host, same-origin pages, JSON bodies, token
        guard = policy_from_args(args.allow_host, args.allow_origin, args.token_env)
    except ValueError as exc:
        print(f"tbx env serve: {exc}", file=sys.stderr)
        return 2
    config = load_models_config(args.config)  # a config's typo before the data is read
    bench = benchmark_for("tbx env serve", args.dataset, release)
    tasks = select_tasks(bench, ids, args.domain)
    # The simulated user always; the judge when a served task has rubrics (usage errors, before
    # anything is written; whether the endpoints answer is `/ready`'s to say, it may start later).
    needs_judge = not args.skip_rubrics and any(t.has_rubrics for t in tasks)
    check_models_config(config, ["user", "judge"] if needs_judge else ["user"], args.config)
    opts = EnvOptions(
        out=Path(args.out),
        max_episodes=args.max_episodes or default_concurrency(model_agent=True),
        warm=args.warm,
        idle_timeout=args.idle_timeout,
        sessions_per_client=args.sessions_per_client,
        wall_clock=args.wall_clock,
        call_timeout=args.call_timeout,
        start_timeout=args.start_timeout,
        runtime=args.runtime,
        golden_cache=Path(args.golden_cache) if args.golden_cache else None,
        skip_rubrics=args.skip_rubrics,
        run_name=args.name,
    )
    opts.out.mkdir(parents=True, exist_ok=True)
    fatal: list[str] = []

    def stop_on_fatal(message: str) -> None:
        """A start-up condition waiting cannot cure: say so and exit, never 503 forever."""
        fatal.append(message)
        print(f"tbx env serve: cannot serve: {printable(message)}", file=sys.stderr, flush=True)
        served.should_exit = True

    server = EnvServer(
        EnvHost(bench, config, tasks, opts), capacity_wait=args.capacity_wait, on_fatal=stop_on_fatal
    )
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
    if served.stopped_by:
        return 128 + served.stopped_by
    return 2 if fatal else 0
