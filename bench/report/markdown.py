"""`tbx report DIR [DIR...]`: metrics of one or several runs as JSON,
`report.md` and a self-contained `report.html` (inline SVG figures, no
scripts, no network).

`build_report` reads the run directories and computes every run's metrics
(`bench.report.metrics`) plus the Pareto frontier of cost per success against
pass@1; `report_json`, `render_markdown` and `bench.report.html.render_html`
turn it into the outputs; `write_report` writes report.md, report.html and
report.json into a directory.
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from bench.llm.config import Price
from bench.report.metrics import GroupMetrics, RunMetrics, mark_pareto, metrics_for_run
from bench.run.causes import causes_text
from bench.run.results import ResultsError, load_run

DASH = "—"
MAX_LISTED = 20  # task ids listed per flag in report.md / report.html


class Report(BaseModel):
    runs: list[RunMetrics]
    pareto_frontier: list[str] = Field(default_factory=list)  # run labels, cheapest first


def build_report(
    dirs: Sequence[str | Path],
    *,
    prices: Mapping[str, Price] | None = None,
    k: int | None = None,
    cost_roles: Sequence[str] = ("agent",),
) -> Report:
    """Read every run directory and compute its metrics; labels are made unique."""
    if not dirs:
        raise ResultsError("no run directory given")
    runs = [metrics_for_run(load_run(d), k=k, prices=prices, cost_roles=cost_roles) for d in dirs]
    for m, label in zip(runs, unique_labels([m.run for m in runs]), strict=True):
        m.run = label
    front = mark_pareto(runs)
    return Report(runs=runs, pareto_frontier=front)


def unique_labels(labels: Sequence[str]) -> list[str]:
    """Run labels made unique: the second and later of a name get ` #2`, ` #3`."""
    seen: dict[str, int] = {}
    out = []
    for label in labels:
        n = seen[label] = seen.get(label, 0) + 1
        out.append(label if n == 1 else f"{label} #{n}")
    return out


def report_json(report: Report) -> dict[str, Any]:
    """One run: that run's metrics object. Several: {"runs": [...], "pareto_frontier": [...]}."""
    runs = [r.model_dump(mode="json") for r in report.runs]
    if len(runs) == 1:
        return runs[0]
    return {"runs": runs, "pareto_frontier": report.pareto_frontier}


# -- formatting --------------------------------------------------------------


def fmt_pct(x: float | None, digits: int = 1) -> str:
    return DASH if x is None else f"{x * 100:.{digits}f}%"


def fmt_ci(ci: Sequence[float] | None) -> str:
    return DASH if ci is None else f"[{fmt_pct(ci[0])}, {fmt_pct(ci[1])}]"


def fmt_usd(x: float | None) -> str:
    if x is None:
        return DASH
    if x == 0:
        return "$0"
    if abs(x) >= 100:
        return f"${x:,.0f}"
    if abs(x) >= 1:
        return f"${x:,.2f}"
    return f"${x:#.3g}"


def fmt_ratio(x: float | None) -> str:
    return DASH if x is None else f"{x:.2f}"


def pass_hat_big_k(m: GroupMetrics) -> float | None:
    """pass^k at k = retention_k."""
    return None if m.retention_k is None else m.pass_hat_k.get(m.retention_k)


def agent_text(r: RunMetrics) -> str:
    """The agent and the harness interventions it ran with."""
    return (r.agent or DASH) + (f" + {', '.join(r.harness)}" if r.harness else "")


def k_of_k_text(m: GroupMetrics) -> str:
    share = m.observed_k_of_k.share
    return f"{m.observed_k_of_k.count} ({fmt_pct(share)})" if share is not None else DASH


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


def summary_rows(report: Report) -> tuple[list[str], list[list[str]]]:
    header = [
        "run",
        "agent",
        "model",
        "tasks",
        "valid attempts",
        "system errors",
        "K",
        "pass@1 [95% CI]",
        "pass^k (k)",
        "observed k/k",
        "retention",
        "cost / attempt",
        "cost / success",
        "cost / reliable task",
        "Pareto",
    ]
    rows = []
    for r in report.runs:
        rows.append(
            [
                r.run,
                agent_text(r),
                r.model or DASH,
                str(r.tasks),
                str(r.attempts),
                errors_text(r),
                str(r.k),
                f"{fmt_pct(r.pass_at_1)} {fmt_ci(r.pass_at_1_ci)}",
                f"{fmt_pct(pass_hat_big_k(r))} ({r.retention_k or DASH})",
                k_of_k_text(r),
                fmt_ratio(r.retention),
                fmt_usd(r.cost.mean_per_attempt_usd),
                fmt_usd(r.cost.per_success_usd),
                fmt_usd(r.cost.per_reliable_task_usd),
                "yes" if r.pareto else "",
            ]
        )
    return header, rows


def domain_rows(r: RunMetrics) -> tuple[list[str], list[list[str]]]:
    header = [
        "domain",
        "tasks",
        "valid attempts",
        "system errors",
        "pass@1 [95% CI]",
        "pass^k (k)",
        "observed k/k",
        "retention",
        "cost / success",
        "cost / reliable task",
    ]
    rows = []
    for name, m in [*r.per_domain.items(), ("all", r)]:
        rows.append(
            [
                name,
                str(m.tasks),
                str(m.attempts),
                str(m.system_errors),
                f"{fmt_pct(m.pass_at_1)} {fmt_ci(m.pass_at_1_ci)}",
                f"{fmt_pct(pass_hat_big_k(m))} ({m.retention_k or DASH})",
                k_of_k_text(m),
                fmt_ratio(m.retention),
                fmt_usd(m.cost.per_success_usd),
                fmt_usd(m.cost.per_reliable_task_usd),
            ]
        )
    return header, rows


def passk_rows(r: RunMetrics) -> tuple[list[str], list[list[str]]]:
    ks = sorted(set(r.pass_at_k) | set(r.pass_hat_k))
    rows = [[str(k), fmt_pct(r.pass_at_k.get(k)), fmt_pct(r.pass_hat_k.get(k))] for k in ks]
    return ["k", "pass@k", "pass^k"], rows


def signature_rows(r: RunMetrics) -> tuple[list[str], list[list[str]]]:
    failed = sum(r.signatures.values())
    rows = [[s, str(n), fmt_pct(n / failed if failed else None)] for s, n in r.signatures.items()]
    return ["signature", "failed attempts", "share of failures"], rows


def listed(ids: Sequence[str]) -> str:
    shown = ", ".join(ids[:MAX_LISTED])
    return shown + (f" … and {len(ids) - MAX_LISTED} more" if len(ids) > MAX_LISTED else "")


def errors_text(r: RunMetrics) -> str:
    """`3 (model endpoint 2, container 1)`: how many system errors, and of which cause."""
    causes = causes_text(r.system_error_causes)
    return f"{r.system_errors} ({causes})" if causes else str(r.system_errors)


def flag_lines(r: RunMetrics) -> list[str]:
    out = []
    if r.system_errors:
        causes = causes_text(r.system_error_causes)
        out.append(
            f"{r.system_errors} attempts ended in a system error{f' ({causes})' if causes else ''}; "
            "they are outside every denominator."
        )
    if r.short_tasks:
        out.append(
            f"{len(r.short_tasks)} tasks have fewer than K={r.k} valid attempts: {listed(r.short_tasks)}"
        )
    if r.excluded_tasks:
        out.append(
            f"{len(r.excluded_tasks)} tasks have no valid attempt and are left out: {listed(r.excluded_tasks)}"
        )
    if r.superseded_rows:
        out.append(f"{r.superseded_rows} rows were superseded by a later row for the same task and repeat.")
    if r.errors_logged:
        out.append(f"errors.jsonl holds {r.errors_logged} entries.")
    if not r.cost.priced:
        out.append(
            f"{r.cost.unpriced_attempts} attempts have token usage but no recorded cost and no price "
            f"for their model: cost metrics are not shown (give a price table with --models-config)."
        )
    return out


def frontier_text(report: Report) -> str:
    if report.pareto_frontier:
        return "On the frontier (cheapest first): " + ", ".join(report.pareto_frontier) + "."
    return "No run has a known cost per success, so there is no frontier."


# -- markdown ----------------------------------------------------------------


def render_markdown(report: Report) -> str:
    lines = [
        "# tbx report",
        "",
        "Definitions: docs/metrics.md. pass@1 is the mean over tasks of each task's pass rate, "
        "with a 95% Wilson interval over tasks. System errors are outside every denominator and "
        "counted beside them. Costs are of the "
        + ", ".join(sorted({role for r in report.runs for role in r.cost.roles}) or ["agent"])
        + f" role; {DASH} means unknown or no success.",
        "",
        "## Runs",
        "",
    ]
    header, rows = summary_rows(report)
    lines += markdown_table(header, rows, "lll" + "r" * 11 + "l")
    lines += ["", "## Pareto frontier: cost per success vs pass@1", "", md_text(frontier_text(report)), ""]
    for r in report.runs:
        lines += [f"## Run: {md_text(r.run)}", ""]
        meta = [f"agent: {md_text(agent_text(r))}", f"model: {md_text(r.model or DASH)}", f"K={r.k}"]
        if r.path:
            meta.insert(0, f"directory: {md_text(r.path)}")
        lines += ["; ".join(meta), ""]
        lines += ["### Per domain", ""]
        h, rs = domain_rows(r)
        lines += [*markdown_table(h, rs), ""]
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
            ["total (valid attempts, " + ", ".join(r.cost.roles) + ")", fmt_usd(r.cost.total_usd)],
            ["mean per attempt", fmt_usd(r.cost.mean_per_attempt_usd)],
            ["per successful attempt", fmt_usd(r.cost.per_success_usd)],
            ["per reliable task (k/k)", fmt_usd(r.cost.per_reliable_task_usd)],
            *[[f"{role} total (all rows)", fmt_usd(v)] for role, v in r.cost.by_role.items()],
        ]
        lines += [*markdown_table(["cost", "USD"], cost_rows), ""]
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


def write_report(report: Report, out: str | Path) -> dict[str, Path]:
    """Write report.md, report.html and report.json into `out` (created if needed)."""
    from bench.report.html import render_html

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"md": out / "report.md", "html": out / "report.html", "json": out / "report.json"}
    paths["md"].write_text(render_markdown(report))
    view = out / "view" / "index.html"  # written by `tbx view`
    paths["html"].write_text(render_html(report, "view/index.html" if view.is_file() else None))
    paths["json"].write_text(json.dumps(report_json(report), indent=2) + "\n")
    return paths
