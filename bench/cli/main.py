"""`tbx`: the command line.

tbx images build [--force] [NAME ...]
tbx gc [--all | --run RUN | --older-than SECONDS]
tbx up TASK_ID [--dataset DIR] [--json] | tbx up --pg-seed FILE.json --domain NAME
tbx proxy [--port N] [--admin-port N] [--call-timeout S] [--json]
tbx tasks validate [DIR]
tbx conformance --dataset DIR --traces DIR [--domain NAME] [--tasks IDS] [--json] [--concurrency N]
tbx judge regrade RESULTS [--golden-cache DIR] [--no-replay] [--rejudge-rubrics] [--dry-run] [--json]
tbx report DIR [DIR...] [--json] [--out DIR] [--models-config FILE] [--k K]
tbx env serve --dataset DIR --config FILE [--port 8000] [--max-episodes N] [--out DIR]
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from sandbox.errors import SandboxError


def _images(args: argparse.Namespace) -> int:
    from sandbox.images import build_command

    return build_command(args.names, force=args.force)


def _gc(args: argparse.Namespace) -> int:
    from sandbox.sweeper import sweep

    if args.run:
        result = sweep(run=args.run)
    elif args.older_than is not None:
        result = sweep(older_than=args.older_than, orphans=True)
    else:
        result = sweep()
    print(result)
    return 0


def _tasks_list(args: argparse.Namespace) -> int:
    import json

    from bench.dataset import default_root, load_benchmark

    bench = load_benchmark(
        Path(args.dataset) if args.dataset else default_root(), release=args.release, strict=False
    )
    for problem in bench.errors:
        print(f"warning: {problem}", file=sys.stderr)
    for task in bench.tasks:
        if args.domain and task.domain not in args.domain:
            continue
        init = bench.effective_init(task)
        calls = len(init.golden_tool_interactions)
        if args.json:
            print(
                json.dumps(
                    {"id": task.id, "domain": task.domain, "rubrics": task.has_rubrics, "golden_calls": calls}
                )
            )
        else:
            print(f"{task.id}\t{task.domain}\t{'rubrics' if task.has_rubrics else '-'}\t{calls} golden calls")
    return 0


def _tasks_validate(args: argparse.Namespace) -> int:
    from bench.dataset import default_root, validate_command

    return validate_command(Path(args.dataset) if args.dataset else default_root())


def _up(args: argparse.Namespace) -> int:
    from bench.cli.up import up_command

    return up_command(args)


def _proxy(args: argparse.Namespace) -> int:
    from bench.cli.proxy import proxy_command

    return proxy_command(args)


def _conformance(args: argparse.Namespace) -> int:
    from bench.replay.conformance import conformance_command

    return conformance_command(args)


def _judge_regrade(args: argparse.Namespace) -> int:
    from bench.run.regrade import regrade_command

    return regrade_command(args)


def _report(args: argparse.Namespace) -> int:
    from bench.report.markdown import report_command

    return report_command(args)


def _run(args: argparse.Namespace) -> int:
    from bench.cli.run import run_command

    return run_command(args)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="tbx", description="Per-attempt sandboxes for stateful agent evaluation."
    )
    p.add_argument("-v", "--verbose", action="store_true")
    sub = p.add_subparsers(dest="command", required=True)

    images = sub.add_parser("images", help="build tbx's container images")
    images_sub = images.add_subparsers(dest="images_command", required=True)
    build = images_sub.add_parser("build", help="build (or reuse) images tagged by the hash of their inputs")
    build.add_argument("names", nargs="*", help="postgres, typesense, servers (default: all)")
    build.add_argument("--force", action="store_true", help="rebuild even when the tag exists")
    build.set_defaults(fn=_images)

    gc = sub.add_parser("gc", help="remove containers and networks tbx left behind")
    gc.add_argument("--run", help="only this run's items")
    gc.add_argument("--older-than", type=float, help="only items older than SECONDS (or whose owner died)")
    gc.add_argument("--all", action="store_true", help="everything tbx created (the default)")
    gc.set_defaults(fn=_gc)

    up = sub.add_parser("up", help="start one sandbox and keep it until Ctrl-C")
    up.add_argument(
        "task", nargs="?", help="task id, e.g. sandbox_external_retail_group1.py:test_case_ST002_001"
    )
    up.add_argument("--dataset", help="benchmark directory (default: $TBX_DATASET or ../shared/...)")
    up.add_argument("--pg-seed", help="JSON file {table: [rows]} to seed instead of a task")
    up.add_argument(
        "--domain", help="the domain whose tables --pg-seed fills (default: guessed from table names)"
    )
    up.add_argument("--no-typesense", action="store_true", help="skip the policy-search container")
    up.add_argument("--runtime", help="container runtime, e.g. runsc (gVisor)")
    up.add_argument("--json", action="store_true", help="print the endpoints as one JSON line once ready")
    up.add_argument("--proxy-port", type=int, default=0, help="proxy port on 127.0.0.1 (default: any)")
    up.add_argument("--call-timeout", type=float, help="proxy per-call timeout in seconds")
    up.set_defaults(fn=_up)

    proxy = sub.add_parser("proxy", help="run the session proxy on its own (admin API)")
    proxy.add_argument("--port", type=int, default=0, help="MCP port on 127.0.0.1 (default: any free port)")
    proxy.add_argument("--admin-port", type=int, default=0, help="admin port on 127.0.0.1 (default: any)")
    proxy.add_argument("--call-timeout", type=float, help="seconds per tool call (default 60)")
    proxy.add_argument("--max-request-bytes", type=int, help="largest accepted request body (default 1 MiB)")
    proxy.add_argument("--json", action="store_true", help="print the endpoints as one JSON line")
    proxy.set_defaults(fn=_proxy)

    tasks = sub.add_parser("tasks", help="inspect a benchmark's tasks")
    tasks_sub = tasks.add_subparsers(dest="tasks_command", required=True)
    validate = tasks_sub.add_parser("validate", help="list every problem in a benchmark directory")
    validate.add_argument("dataset", nargs="?")
    validate.set_defaults(fn=_tasks_validate)
    listing = tasks_sub.add_parser("list", help="the tasks of a benchmark (release order), one per line")
    listing.add_argument("dataset", nargs="?")
    listing.add_argument("--release", help="release test list (default: the benchmark's)")
    listing.add_argument("--domain", action="append", help="only these domains")
    listing.add_argument("--json", action="store_true", help="one JSON object per line")
    listing.set_defaults(fn=_tasks_list)

    run = sub.add_parser("run", help="evaluate an agent: every (task, repeat) in its own fresh sandbox")
    run.add_argument("--dataset", help="benchmark directory (default: $TBX_DATASET or ../shared/...)")
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
    run.add_argument("--wall-clock", type=float, default=900.0, help="seconds per attempt")
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
    run.set_defaults(fn=_run)

    conf = sub.add_parser(
        "conformance", help="replay golden calls in fresh sandboxes and compare with traces"
    )
    conf.add_argument("--dataset", help="benchmark directory")
    conf.add_argument("--traces", help="traces directory (default: DATASET/traces)")
    conf.add_argument("--domain", action="append", help="retail, auto_insurance, consulting, travel, neobank")
    conf.add_argument("--tasks", help="comma-separated task ids (or uids)")
    conf.add_argument("--json", action="store_true")
    conf.add_argument("--concurrency", type=int, default=2)
    conf.add_argument("--runtime", help="container runtime, e.g. runsc")
    conf.set_defaults(fn=_conformance)

    judge = sub.add_parser("judge", help="judge recorded attempts")
    judge_sub = judge.add_subparsers(dest="judge_command", required=True)
    rg = judge_sub.add_parser("regrade", help="recompute verdicts from recorded states (no agent runs)")
    rg.add_argument("results", help="results directory (RESULTS/attempts/*.json)")
    rg.add_argument("--dataset", help="benchmark directory")
    rg.add_argument(
        "--golden-cache", help="golden cache dir (default: $TBX_GOLDEN_CACHE or ~/.cache/tbx/golden)"
    )
    rg.add_argument("--no-replay", action="store_true", help="fail attempts whose golden state is not cached")
    rg.add_argument(
        "--rejudge-rubrics", action="store_true", help="ask the judge model again for rubric tasks"
    )
    rg.add_argument("--judge-model", help="judge model (default: $TBX_JUDGE_MODEL)")
    rg.add_argument("--judge-base-url", help="OpenAI-compatible base URL (default: $TBX_JUDGE_BASE_URL)")
    rg.add_argument("--dry-run", action="store_true", help="print the summary, rewrite nothing")
    rg.add_argument("--json", action="store_true", help="print the summary as JSON")
    rg.add_argument("--concurrency", type=int, default=2)
    rg.add_argument("--runtime", help="container runtime for golden replays, e.g. runsc")
    rg.set_defaults(fn=_judge_regrade)

    rep = sub.add_parser("report", help="metrics of one or several runs: JSON, report.md, report.html")
    rep.add_argument("dirs", nargs="+", metavar="DIR", help="run directories (results.jsonl, manifest.json)")
    rep.add_argument("--json", action="store_true", help="print the metrics as JSON (files only with --out)")
    rep.add_argument("--out", help="where report.md/.html/.json go (default: the run dir, or ./tbx-report)")
    rep.add_argument("--models-config", help="models YAML whose price table prices rows without cost_usd")
    rep.add_argument("--k", type=int, help="repeats per task (default: the manifest's, else the most seen)")
    rep.add_argument(
        "--cost-role", dest="cost_roles", action="append", help="role whose spend counts (default: agent)"
    )
    rep.set_defaults(fn=_report)

    from bench.cli.env import add_parser as add_env_parser

    add_env_parser(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(message)s"
    )
    try:
        return int(args.fn(args))
    except SandboxError as exc:
        print(f"tbx: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("tbx: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
