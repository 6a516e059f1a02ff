"""report.md: the report as markdown tables (`render_markdown`); `markdown_table`
is also `tbx report`'s terminal summary."""

from __future__ import annotations

import html
from collections.abc import Sequence

from bench.report.build import Report
from bench.report.tables import (
    DASH,
    SUMMARY_ALIGN,
    agent_text,
    diagnostic_rows,
    domain_rows,
    flag_lines,
    fmt_usd,
    frontier_text,
    has_system_errors,
    passk_rows,
    rubric_judge_text,
    signature_rows,
    spend_rows,
    summary_rows,
    summary_title,
    unpinned_lines,
    views_text,
)
from bench.report.views import DIAGNOSTIC, view_label, view_title


def md_text(text: str) -> str:
    """`text` as inert markdown: operator and recorded strings (run names, models, task ids,
    finish reasons) may hold HTML, which a markdown renderer would pass through as markup;
    escaped, it shows as the characters it is. A line break would end a table row or heading."""
    return html.escape(" ".join(text.splitlines()), quote=False)


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]], align: str = "") -> list[str]:
    """A markdown table; `align` is one letter per column (l/r), default: first left, rest right.
    Cells are escaped (md_text)."""
    align = align or "l" + "r" * (len(header) - 1)
    sep = ["---:" if a == "r" else "---" for a in align]
    out = ["| " + " | ".join(header) + " |", "| " + " | ".join(sep) + " |"]
    out += ["| " + " | ".join(md_text(c).replace("|", "\\|") for c in row) + " |" for row in rows]
    return out


def render_markdown(report: Report) -> str:
    lines = [
        "# tbx report",
        "",
        "Definitions: docs/metrics.md. pass@1 is the mean over tasks of each task's pass rate, "
        "with a 95% Wilson interval over tasks. "
        + views_text(report)
        + " Costs are of the "
        + ", ".join(sorted({role for r in report.runs for role in r.cost.roles}) or ["agent"])
        + f" role; {DASH} means unknown or no success.",
        "",
        f"## {summary_title()}",
        "",
    ]
    header, rows = summary_rows(report)
    lines += markdown_table(header, rows, SUMMARY_ALIGN)
    unpinned = unpinned_lines(report.runs)
    if unpinned:
        lines += ["", *[f"- {md_text(line)}" for line in unpinned]]
    if has_system_errors(report):
        lines += ["", f"## Diagnostic ({view_label(DIAGNOSTIC)})", ""]
        lines += markdown_table(*diagnostic_rows(report))
    lines += ["", "## Pareto frontier: cost per success vs pass@1", "", md_text(frontier_text(report)), ""]
    for r in report.runs:
        lines += [f"## Run: {md_text(r.run)}", ""]
        meta = [f"agent: {md_text(agent_text(r))}", f"model: {md_text(r.model or DASH)}", f"K={r.k}"]
        if r.data_provenance and r.data_provenance.git:
            meta.append(f"data: {md_text(r.data_provenance.git)}")
        if rubric := rubric_judge_text(r):  # how its rubric questions were asked
            meta.append(md_text(rubric))
        if r.path:
            meta.insert(0, f"directory: {md_text(r.path)}")
        lines += ["; ".join(meta), ""]
        lines += ["### Per domain", ""]
        h, rs = domain_rows(r)
        lines += [*markdown_table(h, rs), ""]
        if r.system_errors and r.diagnostic is not None:
            lines += [f"### Per domain ({view_title(DIAGNOSTIC)})", ""]
            lines += [*markdown_table(*domain_rows(r.diagnostic)), ""]
        lines += ["### pass@k and pass^k", ""]
        h, rs = passk_rows(r)
        lines += [*markdown_table(h, rs), ""]
        lines += ["### Failure signatures", ""]
        h, rs = signature_rows(r)
        lines += [*(markdown_table(h, rs) if rs else ["No failed attempts."]), ""]
        if r.finish_reasons:
            lines += ["### Finish reasons", ""]
            lines += [
                *markdown_table(
                    ["finish reason", "attempts"], [[k, str(v)] for k, v in r.finish_reasons.items()]
                ),
                "",
            ]
        lines += ["### Cost", ""]
        cost_rows = [
            ["total (attempts, " + ", ".join(r.cost.roles) + ")", fmt_usd(r.cost.total_usd)],
            ["mean per attempt", fmt_usd(r.cost.mean_per_attempt_usd)],
            ["per successful attempt", fmt_usd(r.cost.per_success_usd)],
            ["per reliable task (k/k)", fmt_usd(r.cost.per_reliable_task_usd)],
            [
                "spent by the cost roles: " + ", ".join(r.cost.roles) + " (all rows, all tries)",
                fmt_usd(r.cost.spent_usd),
            ],
            *[[f"{role} spent (all rows, all tries)", fmt_usd(v)] for role, v in r.cost.by_role.items()],
        ]
        lines += [*markdown_table(["cost", "USD"], cost_rows), ""]
        if r.spent:
            lines += ["### Tokens spent (all rows, all tries)", "", *markdown_table(*spend_rows(r)), ""]
        if r.tokens_mean or r.timings_mean_s:
            lines += ["### Tokens and timings (mean per valid attempt)", ""]
            trows = [
                [role, f"{t['input_tokens']:.0f}", f"{t['cached_tokens']:.0f}", f"{t['output_tokens']:.0f}"]
                for role, t in r.tokens_mean.items()
            ]
            if trows:
                lines += [*markdown_table(["role", "input", "cached", "output"], trows), ""]
            if r.timings_mean_s:
                lines += [
                    *markdown_table(
                        ["phase", "seconds"], [[p, f"{s:.2f}"] for p, s in r.timings_mean_s.items()]
                    ),
                    "",
                ]
        flags = flag_lines(r)
        lines += ["### Flags", "", *([f"- {md_text(f)}" for f in flags] or ["None."]), ""]
    return "\n".join(lines).rstrip() + "\n"
