"""`tbx run`: command-line front of the run coordinator (bench.run.coordinator)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.defaults import (
    DAEMON_WAIT,
    MAX_RETRIES,
    MAX_SETUP_RETRIES,
    POLICY_SEARCH,
    POLICY_SEARCHES,
    WALL_CLOCK,
)
from bench.run.causes import causes_text
from bench.run.errors import RunError
from bench.terminal_text import printable

if TYPE_CHECKING:
    from bench.dataset import Task


def register(sub: Any) -> None:
    run = sub.add_parser("run", help="evaluate an agent: every (task, repeat) in its own fresh sandbox")
    run.add_argument("--dataset", help="benchmark directory (default: $TBX_DATASET)")
    run.add_argument("--release", help="release test list name (default: the benchmark's)")
    run.add_argument("--tasks", help="comma-separated task ids (or uids)")
    run.add_argument("--domain", action="append", help="only these domains")
    run.add_argument(
        "--agent", default="oracle", help="oracle | noop | chaos[:rate] | llm[:prompt] (needs --config)"
    )
    run.add_argument("--config", help="models config YAML (agent, user, judge roles; prices)")
    run.add_argument("--repeat", type=int, default=20, help="attempts per task (k)")
    run.add_argument(
        "--concurrency",
        type=int,
        default=0,
        help="attempts at once (default: built-in agents one per core; model agents from memory, up to 8)",
    )
    run.add_argument("--out", required=True, help="output directory (re-running resumes it)")
    run.add_argument(
        "--retry-errors", action="store_true", help="re-run only attempts that ended in a system error"
    )
    run.add_argument(
        "--max-retries",
        type=int,
        default=MAX_RETRIES,
        help="times a (task, repeat) whose try failed with a system error after the agent's first turn "
        "is tried again in the run (default %(default)s; 0 = never)",
    )
    run.add_argument(
        "--max-setup-retries",
        type=int,
        default=MAX_SETUP_RETRIES,
        help="times a try lost before the agent's first turn (its sandbox's boot or checkout, the "
        "golden replay) is tried again, apart from --max-retries (default %(default)s; 0 = never)",
    )
    run.add_argument(
        "--daemon-wait",
        type=float,
        default=DAEMON_WAIT,
        help="seconds the run holds new tries while the Docker daemon does not answer, "
        "then stops (resumable: re-run the same command); default %(default)g",
    )
    run.add_argument("--wall-clock", type=float, default=WALL_CLOCK, help="seconds per attempt")
    run.add_argument("--runtime", help="container runtime, e.g. runsc")
    run.add_argument("--golden-cache", help="golden end-state cache directory (default ~/.cache/tbx/golden)")
    run.add_argument("--name", help="run name shown in reports")
    run.add_argument(
        "--skip-rubrics", action="store_true", help="judge rubric tasks on state alone (no judge model)"
    )
    run.add_argument(
        "--warm",
        type=int,
        default=None,
        help="sandboxes booted ahead per domain (a warm pool; 0 = cold start per attempt; default: concurrency)",
    )
    run.add_argument(
        "--restart-on-change",
        action="store_true",
        help="if --out holds results of another bundle (code, dataset, images, agent, config), "
        "move them to OUT/superseded/ and start over instead of refusing",
    )
    run.add_argument(
        "--plain",
        action="store_true",
        help="plain progress lines instead of the live view (automatic off a terminal)",
    )
    run.add_argument(
        "--policy-search",
        choices=POLICY_SEARCHES,
        default=POLICY_SEARCH,
        help="policy-search tool: vector + keyword hybrid (default, as the benchmark specifies) "
        "or the keyword-only fallback; recorded in the manifest",
    )
    run.add_argument(
        "--harness",
        metavar="NAME[,NAME]",
        help="harness interventions on (error-hints, state-check, approval; docs/harness.md); "
        "default: the --config's `harness:`, else none; recorded in the manifest and the bundle",
    )
    run.add_argument(
        "--ray",
        metavar="auto|ADDRESS",
        help="run the attempts on a Ray cluster's nodes (HOST:PORT of the head, or auto; "
        "or `ray:` in the --config file); needs the ray extra (pip install 'tbx[ray]'); docs/scale-out.md",
    )
    run.set_defaults(fn=run_command)


def select_tasks(bench: Any, tasks: str | None, domains: list[str] | None) -> list[Task]:
    selected = list(bench.tasks)
    if tasks:
        wanted = set(filter(None, tasks.split(",")))
        selected = [t for t in selected if t.id in wanted or t.uid in wanted]
        unknown = wanted - {t.id for t in selected} - {t.uid for t in selected}
        if unknown:
            raise RunError(f"tbx run: unknown task(s): {', '.join(sorted(unknown))}")
    if domains:
        selected = [t for t in selected if t.domain in set(domains)]
    if not selected:
        raise RunError("tbx run: no task selected")
    return selected


def check_endpoint(base_url: str, role: str) -> None:
    """Fail before any sandbox starts when a model endpoint does not answer at all."""
    import httpx

    try:
        httpx.get(base_url.rstrip("/") + "/models", timeout=5.0)
    except httpx.HTTPError as exc:
        raise RunError(
            f"tbx run: the {role} model endpoint {base_url} is unreachable ({exc}); check --config"
        ) from exc


def _stderr(message: str) -> None:
    """The coordinator's notices: they quote task ids and error texts (bench.terminal_text)."""
    print(printable(message), file=sys.stderr)


def _by_cause(counts: Mapping[str, int]) -> str:
    """` (container 2, model endpoint 1)`, or nothing without errors."""
    text = causes_text(counts)
    return f" ({text})" if text else ""


def run_command(args: argparse.Namespace) -> int:
    from bench.cli.datasets import benchmark_for
    from bench.cli.progress import RunProgress
    from bench.cli.signals import run_async, stop_signals_as_interrupt
    from bench.harness_names import HarnessError, parse_harness
    from bench.llm.config import load_models_config
    from bench.run.coordinator import Coordinator, RunOptions
    from bench.run.retries import RetryPolicy
    from bench.run.sizing import check_memory, default_concurrency

    bench = benchmark_for("tbx run", args.dataset, args.release)
    tasks = select_tasks(bench, args.tasks, args.domain)
    # The cheap checks first: an --out that cannot be written fails before endpoints and Docker.
    Path(args.out).mkdir(parents=True, exist_ok=True)
    config = load_models_config(args.config) if args.config else None
    builtin = args.agent.split(":")[0] in ("oracle", "noop", "chaos")
    if not builtin and config is None:
        raise RunError(f"tbx run: agent {args.agent!r} needs a model config (--config FILE)")
    if config is not None and not builtin:
        for role in ("agent", "user", "judge"):
            cfg = getattr(config, role)
            if cfg is not None:
                check_endpoint(cfg.base_url, role)
    try:
        harness = parse_harness(args.harness) if args.harness is not None else ()
    except HarnessError as exc:
        raise RunError(f"tbx run: --harness: {exc}") from None
    if args.harness is None and config is not None:
        harness = config.harness
    executor = None
    args.ray = args.ray or (config.ray if config is not None else None)
    if args.ray:
        # Connected before anything starts: a dead address or a missing extra fails here.
        from bench.run.ray_executor import RayExecutor, cluster_slots, connect

        connect(args.ray)
        # Each node admits its own attempts (its tbx_attempt slots); the driver only bounds them.
        concurrency = args.concurrency or max(1, cluster_slots())
        warm = args.warm or 0
        executor = RayExecutor(args.ray, config=config, warm=warm)
    else:
        concurrency = args.concurrency or default_concurrency(model_agent=not builtin)
        warm = check_memory(bench, tasks, concurrency, args.warm, runtime=args.runtime)
    opts = RunOptions(
        out=Path(args.out),
        agent=args.agent,
        repeat=args.repeat,
        concurrency=concurrency,
        wall_clock=args.wall_clock,
        runtime=args.runtime,
        retry_errors=args.retry_errors,
        retries=RetryPolicy(max_retries=args.max_retries, max_setup_retries=args.max_setup_retries),
        daemon_wait=args.daemon_wait,
        golden_cache=Path(args.golden_cache) if args.golden_cache else None,
        run_name=args.name,
        skip_rubrics=args.skip_rubrics,
        warm=warm,
        restart_on_change=args.restart_on_change,
        policy_search=args.policy_search,
        harness=harness,
    )
    opts.out.mkdir(parents=True, exist_ok=True)
    progress = RunProgress(live=False if args.plain else None)
    coordinator = Coordinator(bench, opts, config, progress=progress, notice=_stderr, executor=executor)
    print(
        f"tbx run: {len(tasks)} tasks x {opts.repeat} repeats, agent {opts.agent}"
        f"{' + ' + ','.join(harness) if harness else ''}, "
        f"concurrency {concurrency}, warm {warm}{f', on Ray at {args.ray}' if args.ray else ''} -> {opts.out}",
        file=sys.stderr,
    )
    with stop_signals_as_interrupt(), progress.attach(coordinator):
        counts = run_async(coordinator.run(tasks))
    print(
        f"done: {counts['done']} attempts, {counts['passed']} passed, {counts['failed']} failed, "
        f"{counts['errors']} system errors{_by_cause(coordinator.error_causes)}, "
        f"{counts['retried']} tries retried{_by_cause(coordinator.retried_causes)}; "
        f"results in {opts.out}/results.jsonl",
        file=sys.stderr,
    )
    return 0 if counts["errors"] == 0 else 3
