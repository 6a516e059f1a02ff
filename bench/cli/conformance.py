"""`tbx conformance`: replay golden calls in fresh sandboxes and compare with the
reference's traces (bench.replay.conformance); `matched X/Y` per domain."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.cli.signals import run_async, stop_signals_as_interrupt
from bench.terminal_text import printable

if TYPE_CHECKING:
    from bench.dataset import Task


def register(sub: Any) -> None:
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
    conf.set_defaults(fn=conformance_command)


def conformance_command(args: argparse.Namespace) -> int:

    from bench.cli.datasets import benchmark_for
    from bench.dataset import default_root
    from bench.replay.conformance import run_conformance
    from sandbox import ORPHAN_TTL, sweep
    from servers.registry import domain_names

    dataset = Path(args.dataset) if args.dataset else default_root()
    traces_dir = Path(args.traces) if args.traces else dataset / "traces"
    if not traces_dir.is_dir():
        print(f"tbx conformance: no traces at {traces_dir}", file=sys.stderr)
        return 2
    sweep(older_than=ORPHAN_TTL, orphans=True)
    bench = benchmark_for("tbx conformance", dataset)
    unknown = [d for d in args.domain or [] if d not in domain_names()]
    if unknown:
        print(
            f"tbx conformance: unknown domain(s) {unknown}; known: {', '.join(domain_names())}",
            file=sys.stderr,
        )
        return 2
    task_ids = set(filter(None, (args.tasks or "").split(","))) or None

    def progress(task: Task | None, info: Any) -> None:
        if task is None:
            if not args.json:
                print(f"total {info:.1f}s", file=sys.stderr)
            return
        if not args.json:
            mark = "ok" if not info else "MISMATCH"
            print(f"{mark:8} {printable(task.id)}", file=sys.stderr, flush=True)

    with stop_signals_as_interrupt():
        reports = run_async(
            run_conformance(
                bench, traces_dir, args.domain, task_ids, args.concurrency, args.runtime, progress
            )
        )
    if args.json:
        print(json.dumps({"domains": {d: r.model_dump() for d, r in reports.items() if r.total}}, indent=2))
    else:
        for d, r in reports.items():
            if not r.total:
                continue
            print(f"{d}: matched {r.matched}/{r.total}  ({r.seconds:.1f}s of sandbox time)")
            for m in r.mismatches:
                print(printable(f"  {m.task_id} [{m.kind}] {m.detail}"))
    return 0 if all(r.matched == r.total for r in reports.values()) else 1
