"""`tbx run`: command-line front of bench.run.runner."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any

from bench.cli.progress import RunProgress
from bench.cli.signals import stop_signals_as_interrupt
from bench.dataset import Task, default_root, load_benchmark
from bench.run.runner import Runner, RunOptions, check_memory, default_concurrency


def select_tasks(bench: Any, tasks: str | None, domains: list[str] | None) -> list[Task]:
    selected = list(bench.tasks)
    if tasks:
        wanted = set(filter(None, tasks.split(",")))
        selected = [t for t in selected if t.id in wanted or t.uid in wanted]
        unknown = wanted - {t.id for t in selected} - {t.uid for t in selected}
        if unknown:
            raise SystemExit(f"tbx run: unknown task(s): {', '.join(sorted(unknown))}")
    if domains:
        selected = [t for t in selected if t.domain in set(domains)]
    if not selected:
        raise SystemExit("tbx run: no task selected")
    return selected


def check_endpoint(base_url: str, role: str) -> None:
    """Fail before any sandbox starts when a model endpoint does not answer at all."""
    import httpx

    try:
        httpx.get(base_url.rstrip("/") + "/models", timeout=5.0)
    except httpx.HTTPError as exc:
        raise SystemExit(
            f"tbx run: the {role} model endpoint {base_url} is unreachable ({exc}); check --config"
        ) from exc


def run_command(args: argparse.Namespace) -> int:
    from bench.llm.config import load_models_config

    dataset = Path(args.dataset) if args.dataset else default_root()
    bench = load_benchmark(dataset, release=args.release, strict=False)
    for p in bench.errors:
        print(f"warning: {p}", file=sys.stderr)
    tasks = select_tasks(bench, args.tasks, args.domain)
    config = load_models_config(args.config) if args.config else None
    builtin = args.agent.split(":")[0] in ("oracle", "noop", "chaos")
    if not builtin and config is None:
        raise SystemExit(f"tbx run: agent {args.agent!r} needs a model config (--config FILE)")
    if config is not None and not builtin:
        for role in ("agent", "user", "judge"):
            cfg = getattr(config, role)
            if cfg is not None:
                check_endpoint(cfg.base_url, role)
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
        golden_cache=Path(args.golden_cache) if args.golden_cache else None,
        run_name=args.name,
        skip_rubrics=args.skip_rubrics,
        warm=warm,
        restart_on_change=args.restart_on_change,
    )
    opts.out.mkdir(parents=True, exist_ok=True)
    progress = RunProgress(live=False if args.plain else None)
    runner = Runner(bench, opts, config, progress=progress)
    print(
        f"tbx run: {len(tasks)} tasks x {opts.repeat} repeats, agent {opts.agent}, "
        f"concurrency {concurrency}, warm {warm} -> {opts.out}",
        file=sys.stderr,
    )
    with stop_signals_as_interrupt(), progress.attach(runner):
        counts = asyncio.run(runner.run(tasks))
    print(
        f"done: {counts['done']} attempts, {counts['passed']} passed, {counts['failed']} failed, "
        f"{counts['errors']} system errors; results in {opts.out}/results.jsonl",
        file=sys.stderr,
    )
    return 0 if counts["errors"] == 0 else 3
