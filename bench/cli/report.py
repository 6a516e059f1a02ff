"""`tbx report DIR [DIR...]`: metrics of one or several runs as JSON,
report.md and report.html (bench.report.markdown, bench.report.html)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any


def register(sub: Any) -> None:
    rep = sub.add_parser("report", help="metrics of one or several runs: JSON, report.md, report.html")
    rep.add_argument("dirs", nargs="+", metavar="DIR", help="run directories (results.jsonl, manifest.json)")
    rep.add_argument("--json", action="store_true", help="print the metrics as JSON (files only with --out)")
    rep.add_argument("--out", help="where report.md/.html/.json go (default: the run dir, or ./tbx-report)")
    rep.add_argument("--models-config", help="models YAML whose price table prices rows without cost_usd")
    rep.add_argument("--k", type=int, help="repeats per task (default: the manifest's, else the most seen)")
    rep.add_argument(
        "--cost-role", dest="cost_roles", action="append", help="role whose spend counts (default: agent)"
    )
    rep.set_defaults(fn=report_command)


def report_command(args: argparse.Namespace) -> int:
    from bench.llm.config import ModelsConfigError, Price, load_models_config
    from bench.report.build import build_report, report_json
    from bench.report.markdown import markdown_table
    from bench.report.tables import (
        SUMMARY_ALIGN,
        diagnostic_rows,
        frontier_text,
        has_system_errors,
        judge_errors_text,
        rubric_judge_text,
        spend_text,
        summary_rows,
        summary_title,
        unpinned_lines,
    )
    from bench.report.views import DIAGNOSTIC, view_label
    from bench.report.write import write_report
    from bench.run.results import ResultsError
    from bench.terminal_text import printable

    if getattr(args, "k", None) is not None and args.k < 1:
        print("tbx report: --k must be at least 1", file=sys.stderr)
        return 2
    try:
        prices: dict[str, Price] = {}
        if getattr(args, "models_config", None):
            prices = dict(load_models_config(args.models_config).prices)
        roles = tuple(getattr(args, "cost_roles", None) or ("agent",))
        report = build_report(args.dirs, prices=prices, k=getattr(args, "k", None), cost_roles=roles)
    except (ResultsError, ModelsConfigError) as exc:
        print(f"tbx report: {printable(exc)}", file=sys.stderr)
        return 2
    out = args.out or (args.dirs[0] if len(args.dirs) == 1 else None)
    if args.json:
        if args.out:
            write_report(report, args.out)
        print(json.dumps(report_json(report), indent=2))
        return 0
    if out is None:
        out = "tbx-report"
    paths = write_report(report, out)
    lines = [summary_title(), *markdown_table(*summary_rows(report), SUMMARY_ALIGN)]
    lines += unpinned_lines(report.runs)  # before any other note: it gates a canonical score
    if has_system_errors(report):
        lines += ["", f"Diagnostic ({view_label(DIAGNOSTIC)})", *markdown_table(*diagnostic_rows(report))]
    lines.append("")
    for r in report.runs:  # what was spent, how rubrics were asked and whether the judge could be read
        notes = [rubric_judge_text(r), judge_errors_text(r)]
        lines += [f"{r.run}: {spend_text(r)}", *[f"{r.run}: {t}" for t in notes if t]]
    if len(report.runs) > 1:
        lines.append(frontier_text(report))
    lines.append(f"wrote {paths['md']}, {paths['html']}, {paths['json']}")
    print("\n".join(printable(line) for line in lines))
    return 0
