"""`tbx judge regrade RESULTS`: recompute verdicts from recorded states
without running any agent (bench.run.regrade)."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path
from typing import Any


def register(sub: Any) -> None:
    from judge import RUBRIC_STYLES

    judge = sub.add_parser("judge", help="judge recorded attempts")
    judge_sub = judge.add_subparsers(dest="judge_command", required=True)
    rg = judge_sub.add_parser("regrade", help="recompute verdicts from recorded states (no agent runs)")
    rg.add_argument("results", help="results directory (RESULTS/attempts/*.json)")
    rg.add_argument(
        "--dataset", help="benchmark directory, when the one the run's manifest names lacks its tasks"
    )
    rg.add_argument(
        "--golden-cache", help="golden cache dir (default: $TBX_GOLDEN_CACHE or ~/.cache/tbx/golden)"
    )
    rg.add_argument("--no-replay", action="store_true", help="fail attempts whose golden state is not cached")
    rg.add_argument(
        "--rejudge-rubrics", action="store_true", help="ask the judge model again for rubric tasks"
    )
    rg.add_argument(
        "--rubric-judge",
        choices=RUBRIC_STYLES,
        help="how rubric questions are asked (docs/judge.md): reference (the benchmark's own) or json "
        "(records why); default: the style the run used (its manifest's rubric_judge; json for runs "
        "recorded before the key). Another style than the run's needs --rejudge-rubrics",
    )
    rg.add_argument("--judge-model", help="judge model (default: $TBX_JUDGE_MODEL)")
    rg.add_argument("--judge-base-url", help="OpenAI-compatible base URL (default: $TBX_JUDGE_BASE_URL)")
    rg.add_argument("--dry-run", action="store_true", help="print the summary, rewrite nothing")
    rg.add_argument("--json", action="store_true", help="print the summary as JSON")
    rg.add_argument("--concurrency", type=int, default=2)
    rg.add_argument("--runtime", help="container runtime for golden replays, e.g. runsc")
    rg.set_defaults(fn=regrade_command)


def regrade_command(args: argparse.Namespace) -> int:
    from bench.evaluator.functions import FunctionRunner
    from bench.llm.client import LLMClient
    from bench.llm.config import ModelsConfigError, judge_role_from_env
    from bench.llm.judge import rubric_judge
    from bench.run.golden import GoldenStore
    from bench.run.output import manifest_rubric_style, read_manifest, set_rubric_style
    from bench.run.regrade import RegradeSummary, format_summary, regrade
    from bench.run.run_dataset import DatasetNotFound, run_benchmark, run_task_ids
    from bench.terminal_text import printable
    from judge import JudgeUnavailable
    from sandbox import new_id

    results = Path(args.results)
    if not results.is_dir():
        print(f"tbx judge regrade: {printable(results)} is not a directory", file=sys.stderr)
        return 2
    try:  # the dataset the run was made on (its manifest's), not the default one
        bench = run_benchmark(results, run_task_ids(results), Path(args.dataset) if args.dataset else None)
    except DatasetNotFound as exc:
        print(f"tbx judge regrade: {printable(exc)}", file=sys.stderr)
        return 2
    # The style the run's answers were asked in; another one only when every rubric is asked
    # again, so that no run holds answers of two styles.
    run_style = manifest_rubric_style(read_manifest(results))
    style = args.rubric_judge or run_style
    if style != run_style and not args.rejudge_rubrics:
        print(
            f"tbx judge regrade: the run's rubric answers were asked in the {run_style} style; "
            f"--rubric-judge {style} needs --rejudge-rubrics (every rubric asked again, no run mixes two styles)",
            file=sys.stderr,
        )
        return 2
    store = GoldenStore(bench, args.golden_cache, allow_replay=not args.no_replay, runtime=args.runtime)
    client = judge = config = None
    # A judge named anywhere (flag or environment) grades what has no answers yet,
    # e.g. the rubric tasks of a --skip-rubrics run.
    if args.rejudge_rubrics or args.judge_model or os.environ.get("TBX_JUDGE_MODEL"):
        try:
            config = judge_role_from_env(model=args.judge_model, base_url=args.judge_base_url)
        except ModelsConfigError as exc:
            print(f"tbx judge regrade: {printable(exc)}", file=sys.stderr)
            return 2
        client = LLMClient(config, role="judge")
        judge = rubric_judge(client, style)

    # Tasks graded by their test function run it again (bench.evaluator), asking the judge named.
    functions = None
    if any(t.runs_function for t in bench.tasks):
        functions = FunctionRunner(new_id("regrade"), config, concurrency=max(1, args.concurrency))

    async def run() -> RegradeSummary:
        try:
            return await regrade(
                results,
                bench,
                store,
                judge,
                rejudge_rubrics=args.rejudge_rubrics,
                write=not args.dry_run,
                concurrency=args.concurrency,
                functions=functions,
            )
        finally:
            if client is not None:
                await client.aclose()

    try:
        summary = asyncio.run(run())
    except JudgeUnavailable as exc:
        print(f"tbx judge regrade: {printable(exc)}", file=sys.stderr)
        return 3
    if not args.dry_run and judge is not None and args.rejudge_rubrics:
        set_rubric_style(results, style)  # the answers are all of this style now
    if args.json:
        print(summary.model_dump_json(indent=2))
    else:
        print(format_summary(summary))
    return 1 if summary.errors else 0
