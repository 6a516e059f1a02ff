"""`tbx`: the command line.

    tbx images build [--force] [NAME ...]
    tbx gc [--all | --run RUN | --older-than SECONDS]
    tbx up TASK_ID [--dataset DIR] | tbx up --pg-seed FILE.json --domain NAME
    tbx tasks validate [DIR]
    tbx conformance --dataset DIR --traces DIR [--domain NAME] [--tasks IDS] [--json] [--concurrency N]
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


def _tasks_validate(args: argparse.Namespace) -> int:
    from bench.dataset import default_root, validate_command

    return validate_command(Path(args.dataset) if args.dataset else default_root())


def _up(args: argparse.Namespace) -> int:
    from bench.up import up_command

    return up_command(args)


def _conformance(args: argparse.Namespace) -> int:
    from bench.conformance import conformance_command

    return conformance_command(args)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="tbx", description="Per-attempt sandboxes for stateful agent evaluation.")
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
    up.add_argument("task", nargs="?", help="task id, e.g. sandbox_external_retail_group1.py:test_case_ST002_001")
    up.add_argument("--dataset", help="benchmark directory (default: $TBX_DATASET or ../shared/...)")
    up.add_argument("--pg-seed", help="JSON file {table: [rows]} to seed instead of a task")
    up.add_argument("--domain", help="the domain whose tables --pg-seed fills (default: guessed from table names)")
    up.add_argument("--no-typesense", action="store_true", help="skip the policy-search container")
    up.add_argument("--runtime", help="container runtime, e.g. runsc (gVisor)")
    up.add_argument("--json", action="store_true", help="print the endpoints as JSON")
    up.set_defaults(fn=_up)

    tasks = sub.add_parser("tasks", help="inspect a benchmark's tasks")
    tasks_sub = tasks.add_subparsers(dest="tasks_command", required=True)
    validate = tasks_sub.add_parser("validate", help="list every problem in a benchmark directory")
    validate.add_argument("dataset", nargs="?")
    validate.set_defaults(fn=_tasks_validate)

    conf = sub.add_parser("conformance", help="replay golden calls in fresh sandboxes and compare with traces")
    conf.add_argument("--dataset", help="benchmark directory")
    conf.add_argument("--traces", help="traces directory (default: DATASET/traces)")
    conf.add_argument("--domain", action="append", help="retail, auto_insurance, consulting, travel, neobank")
    conf.add_argument("--tasks", help="comma-separated task ids (or uids)")
    conf.add_argument("--json", action="store_true")
    conf.add_argument("--concurrency", type=int, default=2)
    conf.add_argument("--runtime", help="container runtime, e.g. runsc")
    conf.set_defaults(fn=_conformance)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(message)s")
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
