"""What report.md, report.html and `tbx report`'s terminal summary show: the
number formats, the rows of each table (as text cells), the flags, the
frontier sentence and the labels of the two score views (bench.report.views)."""

from __future__ import annotations

from collections.abc import Sequence

from bench.report.build import Report
from bench.report.metrics import GroupMetrics, RunMetrics, ViewMetrics
from bench.report.views import CANONICAL, DIAGNOSTIC, ScoreView, view_label, view_title
from bench.run.causes import causes_text

DASH = "—"
MAX_LISTED = 20  # task ids listed per flag in report.md / report.html
SUMMARY_ALIGN = "lll" + "r" * 11 + "l"  # summary_rows' columns


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


RUBRIC_STYLE_TEXT = {"reference": "the benchmark's own Yes/No", "json": "tbx's JSON with a reason"}


def rubric_judge_text(r: RunMetrics) -> str | None:
    """`rubric judge: reference (...)`, for a run whose rows show the rubric judge at work:
    rubric verdicts of two styles do not compare (docs/judge.md)."""
    if not r.rubric_judged_attempts:
        return None
    return f"rubric judge: {r.rubric_judge} ({RUBRIC_STYLE_TEXT[r.rubric_judge]})"


def k_of_k_text(m: GroupMetrics) -> str:
    share = m.observed_k_of_k.share
    return f"{m.observed_k_of_k.count} ({fmt_pct(share)})" if share is not None else DASH


def attempts_header(view: ScoreView) -> str:
    return "attempts" if view.counts_errors_as_failures else "valid attempts"


def summary_title(view: ScoreView = CANONICAL) -> str:
    """The summary table's title, naming its view."""
    return f"Runs ({view_label(view)})"


def views_text(report: Report) -> str:
    """Which view the figures are in, and where the other one is."""
    text = (
        f"Scores are {view_title(CANONICAL)}: a system error still there after the retries counts as "
        "a failed attempt, and the unresolved system errors are stated beside the scores by cause."
    )
    if has_system_errors(report):
        return text + f" The {view_title(DIAGNOSTIC)} view follows as a diagnostic."
    return text + " No run has an unresolved system error, so the view with them excluded is the same."


def has_system_errors(report: Report) -> bool:
    return any(r.system_errors for r in report.runs)


def summary_rows(report: Report) -> tuple[list[str], list[list[str]]]:
    """The canonical figures of every run."""
    header = [
        "run",
        "agent",
        "model",
        "tasks",
        attempts_header(CANONICAL),
        "unresolved system errors",
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


def diagnostic_rows(report: Report) -> tuple[list[str], list[list[str]]]:
    """Every run's figures with system errors excluded (the diagnostic view)."""
    header = [
        "run",
        "tasks",
        attempts_header(DIAGNOSTIC),
        "system errors excluded",
        "pass@1 [95% CI]",
        "pass^k (k)",
        "observed k/k",
        "retention",
        "cost / success",
        "cost / reliable task",
    ]
    rows = []
    for r in report.runs:
        m = r.diagnostic or r
        rows.append([r.run, *_score_cells(m)])
    return header, rows


def _score_cells(m: GroupMetrics | ViewMetrics) -> list[str]:
    """One group's cells after its name, in the column order of the score tables."""
    return [
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


def domain_rows(r: RunMetrics | ViewMetrics) -> tuple[list[str], list[list[str]]]:
    """Per domain and overall, in the view of `r` (a run: canonical; its `diagnostic`)."""
    header = [
        "domain",
        "tasks",
        attempts_header(r.view),
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
        rows.append([name, *_score_cells(m)])
    return header, rows


def passk_rows(r: RunMetrics) -> tuple[list[str], list[list[str]]]:
    """Canonical pass@k and pass^k; with system errors, the diagnostic ones beside them."""
    d = r.diagnostic if r.system_errors and r.diagnostic is not None else None
    ks = sorted(set(r.pass_at_k) | set(r.pass_hat_k) | (set(d.pass_at_k) if d else set()))
    header = ["k", "pass@k", "pass^k"]
    rows = [[str(k), fmt_pct(r.pass_at_k.get(k)), fmt_pct(r.pass_hat_k.get(k))] for k in ks]
    if d is not None:
        header += [f"pass@k ({view_title(DIAGNOSTIC)})", f"pass^k ({view_title(DIAGNOSTIC)})"]
        for k, row in zip(ks, rows, strict=True):
            row += [fmt_pct(d.pass_at_k.get(k)), fmt_pct(d.pass_hat_k.get(k))]
    return header, rows


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
    if r.mean_reward is not None:
        out.append(
            f"mean reward {r.mean_reward:.3f} over the {r.rewarded_attempts} attempts graded by their task's "
            "test function (a returned number in [0, 1], 1 for a plain pass; a failure or the test's own "
            "error 0). pass@1 counts a returned 0.0 as a pass, as the reference does."
        )
    if r.system_errors:
        causes = causes_text(r.system_error_causes)
        out.append(
            f"{r.system_errors} attempts ended in a system error still there after the retries"
            f"{f' ({causes})' if causes else ''}: the {view_title(CANONICAL)} figures count them as "
            f"failed attempts; the {view_title(DIAGNOSTIC)} figures leave them out of every denominator."
        )
    if r.short_tasks:
        out.append(f"{len(r.short_tasks)} tasks have fewer than K={r.k} attempts: {listed(r.short_tasks)}")
    excluded = r.diagnostic.excluded_tasks if r.diagnostic is not None else r.excluded_tasks
    if excluded:
        out.append(
            f"{len(excluded)} tasks have no attempt without a system error: 0 in the "
            f"{view_title(CANONICAL)} figures, left out of the {view_title(DIAGNOSTIC)} ones: "
            f"{listed(excluded)}"
        )
    if r.part_way_rows:
        out.append(
            f"{r.part_way_rows} attempts started part-way (a reset's or create's prefix, or a fork) "
            "and are not in these figures: a prefix decides part of the outcome."
        )
    if r.superseded_rows:
        out.append(f"{r.superseded_rows} rows were superseded by a later row for the same task and repeat.")
    if r.colliding_rows:
        out.append(
            f"**{r.colliding_rows} graded rows collide** with a later row for the same task and repeat "
            "(two attempts recorded under one repeat); only the last of each is counted."
        )
    if r.errors_logged:
        out.append(f"errors.jsonl holds {r.errors_logged} entries.")
    judge_errors = judge_errors_text(r)
    if judge_errors:
        out.append(judge_errors[0].upper() + judge_errors[1:] + ".")
    if not r.cost.priced:
        out.append(
            f"{r.cost.unpriced_attempts} attempts have token usage but no recorded cost and no price "
            f"for their model: cost metrics are not shown (give a price table with --models-config)."
        )
    return out


def fmt_tokens(n: int) -> str:
    return f"{n:,}".replace(",", " ")


def spend_rows(r: RunMetrics) -> tuple[list[str], list[list[str]]]:
    """Every token the run spent, per role: all rows (system errors too) and all their
    tries (the retried ones too), and its cost."""
    header = ["role", "input tokens", "cached", "output tokens", "requests", "USD"]
    rows = [
        [
            role,
            fmt_tokens(x.input_tokens),
            fmt_tokens(x.cached_tokens),
            fmt_tokens(x.output_tokens),
            fmt_tokens(x.calls),
            fmt_usd(x.usd),
        ]
        for role, x in r.spent.items()
    ]
    return header, rows


def spend_text(r: RunMetrics) -> str:
    """One line: what the run actually spent, by role."""
    if not r.spent:
        return "spent: no model tokens recorded"
    known = [x.usd for x in r.spent.values()]
    total = None if None in known else sum(x for x in known if x is not None)
    roles = ", ".join(
        f"{role} {fmt_tokens(x.input_tokens)} in / {fmt_tokens(x.output_tokens)} out tokens ({fmt_usd(x.usd)})"
        for role, x in r.spent.items()
    )
    retried = f"; {r.retried_tries} retried tries included" if r.retried_tries else ""
    return f"spent (all roles, all rows and tries): {fmt_usd(total)}: {roles}{retried}"


def judge_errors_text(r: RunMetrics) -> str | None:
    if not r.judge_errors:
        return None
    return (
        f"judge errors: {r.judge_errors} rubric replies could not be read, in {r.judge_error_attempts} "
        "attempts (each counted as a failed rubric, never a yes; the attempt pages show the replies)"
    )


def frontier_text(report: Report) -> str:
    if report.pareto_frontier:
        return "On the frontier (cheapest first): " + ", ".join(report.pareto_frontier) + "."
    return "No run has a known cost per success, so there is no frontier."


def unpinned_lines(runs: Sequence[RunMetrics]) -> list[str]:
    """One line per run whose data was not at its release's pin (report.md, report.html
    and the terminal print them under the summary table); unescaped."""
    return [
        f"{r.run}: {r.data_provenance.note}" for r in runs if r.data_provenance and r.data_provenance.note
    ]
