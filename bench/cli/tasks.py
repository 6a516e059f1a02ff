"""`tbx tasks validate [DIR]` (every problem in a benchmark directory, then a
one-line summary) and `tbx tasks list [DIR]` (the tasks, in release order)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from bench.terminal_text import printable

if TYPE_CHECKING:
    from bench.dataset import Benchmark


def register(sub: Any) -> None:
    tasks = sub.add_parser("tasks", help="inspect a benchmark's tasks")
    tasks_sub = tasks.add_subparsers(dest="tasks_command", required=True)
    validate = tasks_sub.add_parser("validate", help="list every problem in a benchmark directory")
    validate.add_argument("dataset", nargs="?")
    validate.add_argument("--release", help="release test list to check (default: the benchmark's)")
    validate.add_argument(
        "--servers",
        action="store_true",
        help="also build the image of each checkout server the tasks use and start it once (imports, MCP handshake)",
    )
    validate.add_argument(
        "--server-constraints",
        metavar="FILE",
        help="pip constraints for the checkout servers' dependencies (also $TBX_SERVER_CONSTRAINTS)",
    )
    validate.set_defaults(fn=_validate)
    listing = tasks_sub.add_parser("list", help="the tasks of a benchmark (release order), one per line")
    listing.add_argument("dataset", nargs="?")
    listing.add_argument("--release", help="release test list (default: the benchmark's)")
    listing.add_argument("--domain", action="append", help="only these domains")
    listing.add_argument("--json", action="store_true", help="one JSON object per line")
    listing.set_defaults(fn=list_command)


def _validate(args: argparse.Namespace) -> int:
    from bench.dataset import default_root

    if args.server_constraints:
        from bench.prepare import SERVER_CONSTRAINTS_ENV

        os.environ[SERVER_CONSTRAINTS_ENV] = str(Path(args.server_constraints).absolute())
    return validate_command(
        Path(args.dataset) if args.dataset else default_root(), release=args.release, servers=args.servers
    )


def list_command(args: argparse.Namespace) -> int:
    from bench.cli.datasets import benchmark_for

    bench = benchmark_for("tbx tasks list", args.dataset, args.release)
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
            cells = (task.id, task.domain, "rubrics" if task.has_rubrics else "-", f"{calls} golden calls")
            print("\t".join(map(printable, cells)))  # the columns' tabs only (bench.terminal_text)
    return 0


def release_lines(bench: Benchmark) -> list[str]:
    """What tbx can run of each release list: ``release <path>: N tasks, tbx runs M``."""
    lines = []
    for release, support in bench.release_support.items():
        mark = " (checked)" if release == bench.release else ""
        line = f"release {release}{mark}: {support.tasks} tasks, tbx runs {support.runnable}"
        if support.unsupported_servers:
            line += "; no tbx domain for " + ", ".join(
                f"{server} ({n} task{'s' if n != 1 else ''})"
                for server, n in support.unsupported_servers.items()
            )
        lines.append(line)
    return lines


def server_lines(bench: Benchmark) -> tuple[list[str], int]:
    """Each checkout server the tasks use, built and started once (tbx tasks validate
    --servers): one line each, and how many failed."""
    from bench.prepare import checkout_servers
    from sandbox import CheckoutServerError, check_tools

    lines, failed, seen = [], 0, set()
    for task in bench.tasks:
        if not bench.on_checkout_servers(task) or task.domain in seen:
            continue
        seen.add(task.domain)
        try:
            for server in checkout_servers(bench, task, check=False):
                tools = check_tools(server)
                lines.append(f"server {server.name}: starts, lists {len(tools)} tools ({server.image})")
        except CheckoutServerError as exc:
            failed += 1
            lines.append(f"error: {exc}")
    return lines, failed


def validate_command(
    dataset: Path, *, release: str | None = None, out: TextIO | None = None, servers: bool = False
) -> int:
    """Print problems one per line (``path: task: field: message``) and a summary line.

    Returns 0 when there are no errors (warnings are printed but allowed), else 1.
    """
    from bench.dataset import Problem, load_benchmark
    from bench.dataset.provenance import NOT_A_CHECKOUT, dataset_provenance

    stream = out if out is not None else sys.stdout
    bench = load_benchmark(dataset, release=release, strict=False)
    for problem in bench.problems:
        print(printable(problem), file=stream)
    # Where the data came from, as a run's manifest will record it: a warning when a run
    # would not be on pinned data, one line for a checkout, nothing for other directories.
    provenance = dataset_provenance(bench.root, bench.release)
    unpinned = provenance.note is not None
    if provenance.note is not None:
        note = Problem(path=bench.release or ".", message=provenance.note, severity="warning")
        print(printable(note), file=stream)
    elif provenance.git != NOT_A_CHECKOUT:
        print(f"data: {printable(provenance.git)}", file=stream)
    for line in release_lines(bench):
        print(line, file=stream)
    errors = len(bench.errors)
    warnings = len(bench.problems) - errors + unpinned
    if servers:
        lines, failed = server_lines(bench)
        for line in lines:
            print(printable(line), file=stream)
        errors += failed
    if errors:
        status = f"{errors} error{'s' if errors != 1 else ''}"
        if warnings:
            status += f", {warnings} warning{'s' if warnings != 1 else ''}"
        status = f"FAILED ({status}; {len(bench.tasks)} usable tasks)"
    else:
        status = "OK" if not warnings else f"OK ({warnings} warning{'s' if warnings != 1 else ''})"
    print(f"{bench.summary()}: {status}", file=stream)
    return 1 if errors else 0
