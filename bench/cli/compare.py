"""`tbx compare A B [C ...] [--json] [--out DIR] [--seed S]`: runs compared
pairwise on the tasks they share (bench.report.compare), with each run's
noise floor; writes compare.md, compare.html and compare.json
(bench.report.compare_render).

Where it goes: --out, default ./tbx-compare. With --json the comparison is
printed and files are written only when --out is given.

It pairs the canonical scores (an unresolved system error is a failed
attempt) unless --view names the diagnostic one; the output says which.
Warnings (runs of different datasets) go to stderr as well as into the files.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

DEFAULT_OUT = "tbx-compare"


def register(sub: Any) -> None:
    p = sub.add_parser(
        "compare", help="paired comparison of runs: deltas, bootstrap intervals, flipped tasks"
    )
    p.add_argument("dirs", nargs="+", metavar="DIR", help="two or more run directories (A B [C ...])")
    p.add_argument("--json", action="store_true", help="print the comparison as JSON (files only with --out)")
    p.add_argument("--out", help=f"where compare.md/.html/.json go (default: ./{DEFAULT_OUT})")
    p.add_argument(
        "--seed", type=int, default=0, help="seed of the bootstrap and permutation draws (default 0)"
    )
    p.add_argument(
        "--view",
        choices=["canonical", "errors_excluded"],
        default="canonical",
        help="score view to pair: canonical (a system error left after the retries is a failed "
        "attempt; default) or errors_excluded (the diagnostic view, system errors left out)",
    )
    p.set_defaults(fn=compare_command)


def compare_command(args: argparse.Namespace) -> int:
    from bench.report.compare import compare_runs, load_runs
    from bench.report.compare_render import comparison_json, print_terminal, write_comparison
    from bench.report.views import ScoreView
    from bench.run.results import ResultsError
    from bench.terminal_text import printable
    from bench.view.compare_links import add_view_links

    if len(args.dirs) < 2:
        print("tbx compare: give at least two run directories", file=sys.stderr)
        return 2
    out = Path(args.out or DEFAULT_OUT)
    try:
        runs = load_runs(args.dirs)
        comparison = compare_runs(
            [(info, run.from_the_start) for info, run in runs],
            seed=args.seed,
            view=ScoreView(getattr(args, "view", "canonical")),
        )
    except ResultsError as exc:
        print(f"tbx compare: {printable(exc)}", file=sys.stderr)
        return 2
    for warning in comparison.warnings:
        print(f"tbx compare: warning: {printable(warning)}", file=sys.stderr)
    add_view_links(comparison, runs, out if (args.out or not args.json) else Path.cwd())
    if args.json:
        if args.out:
            write_comparison(comparison, out)
        print(json.dumps(comparison_json(comparison), indent=2))
        return 0
    paths = write_comparison(comparison, out)
    print_terminal(comparison)
    print(printable(f"wrote {paths['md']}, {paths['html']}, {paths['json']}"))
    return 0
