"""The outputs of `tbx compare`: the terminal table (rich), compare.md, a
self-contained compare.html (inline CSS and SVG, no scripts, nothing fetched)
with a per-task scatter of A's pass rate against B's per pair, and
compare.json (`bench.report.compare.Comparison`).

View links (`PairComparison.links`, filled by `bench.view.compare_links`): a
flipped task links to its `tbx view` task page where a site holds one.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from html import escape
from pathlib import Path
from typing import Any

from bench.report.compare import Comparison, Flips, NoiseFloor, PairComparison, PairStats, RunInfo
from bench.report.html import CSS, _svg, _t, _text
from bench.report.markdown import markdown_table, md_text
from bench.report.tables import DASH
from bench.terminal_text import printable

FLIP_KINDS = (
    ("reliable_only_in_a", "reliable (k/k) only in {a}"),
    ("reliable_only_in_b", "reliable (k/k) only in {b}"),
    ("solved_only_in_a", "solved at least once only in {a}"),
    ("solved_only_in_b", "solved at least once only in {b}"),
)
FLIPPED_COLOR = "#e15759"
POINT_COLOR = "#4e79a7"
MAX_TITLE_IDS = 12  # task ids named in one scatter point's tooltip


# -- formatting --------------------------------------------------------------


def fmt_delta(x: float) -> str:
    """A difference of shares in percentage points, signed."""
    return f"{x * 100:+.1f} pt"


def fmt_interval(ci: Sequence[float]) -> str:
    return f"[{ci[0] * 100:+.1f}, {ci[1] * 100:+.1f}]"


def fmt_p(p: float) -> str:
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def p_text(p: float) -> str:
    return "p < 0.001" if p < 0.001 else f"p = {p:.3f}"


def fmt_share(x: float) -> str:
    return f"{x * 100:.1f}%"


def metric_rows(s: PairStats) -> list[list[str]]:
    return [
        ["pass@1", fmt_share(s.pass_at_1_a), fmt_share(s.pass_at_1_b), fmt_delta(s.delta_pass_at_1),
         fmt_interval(s.delta_pass_at_1_ci)],
        [f"pass^{s.k}", fmt_share(s.pass_hat_k_a), fmt_share(s.pass_hat_k_b), fmt_delta(s.delta_pass_hat_k),
         fmt_interval(s.delta_pass_hat_k_ci)],
        ["observed k/k", fmt_share(s.observed_k_of_k_a), fmt_share(s.observed_k_of_k_b),
         fmt_delta(s.delta_observed_k_of_k), fmt_interval(s.delta_observed_k_of_k_ci)],
    ]  # fmt: skip


METRIC_HEADER = ["metric", "A", "B", "Δ (B − A)", "95% CI (pt)"]
PAIRS_HEADER = ["A", "B", "tasks", "Δpass@1 [95% CI]", "Δpass^k [95% CI]", "Δk/k [95% CI]", "p", "flips"]
DOMAIN_HEADER = ["domain", "tasks", "Δpass@1 [95% CI]", "Δpass^k [95% CI]", "Δk/k [95% CI]", "p"]
FLOOR_HEADER = ["run", "K", "tasks", "halves", "Δpass@1 [95% CI]", "Δpass^k [95% CI]", "Δk/k [95% CI]", "p"]


def _cells(s: PairStats) -> list[str]:
    return [
        f"{fmt_delta(s.delta_pass_at_1)} {fmt_interval(s.delta_pass_at_1_ci)}",
        f"{fmt_delta(s.delta_pass_hat_k)} {fmt_interval(s.delta_pass_hat_k_ci)} (k={s.k})",
        f"{fmt_delta(s.delta_observed_k_of_k)} {fmt_interval(s.delta_observed_k_of_k_ci)}",
        fmt_p(s.p_value),
    ]


def flip_count_text(f: Flips) -> str:
    return (
        f"k/k: -{len(f.reliable_only_in_a)} +{len(f.reliable_only_in_b)}; "
        f"solved: -{len(f.solved_only_in_a)} +{len(f.solved_only_in_b)}"
    )


def pairs_rows(c: Comparison) -> list[list[str]]:
    return [[p.a, p.b, str(p.tasks), *_cells(p), flip_count_text(p.flips)] for p in c.pairs]


def domain_table_rows(p: PairComparison) -> list[list[str]]:
    return [[d, str(s.tasks), *_cells(s)] for d, s in p.per_domain.items()]


def _floor_row(f: NoiseFloor, info: RunInfo) -> list[str]:
    if f.stats is None:
        return [f.run, str(info.k), DASH, DASH, f.note or DASH, DASH, DASH, DASH]
    halves = f"repeats <{f.split} vs ≥{f.split}"
    return [f.run, str(info.k), str(f.stats.tasks), halves, *_cells(f.stats)]


def floor_rows(c: Comparison) -> list[list[str]]:
    return [_floor_row(c.noise_floor[info.label], info) for info in c.runs]


def view_text(c: Comparison) -> str:
    """Which score view the pairs are in (bench.report.views)."""
    return f"Scores paired: {c.view_label}."


def method_text(c: Comparison) -> str:
    return (
        f"{view_text(c)} "
        f"Δ = B − A over the tasks both runs have a counted attempt of, in percentage points. "
        f"Intervals: {c.level:.0%} paired bootstrap over tasks ({c.bootstrap_resamples} resamples, "
        f"seed {c.seed}). p: {c.test} ({c.permutation_resamples} resamples, exact when fewer sign "
        "patterns). Noise floor: the same between a run's first and second half of repeats. "
        "Definitions: docs/metrics.md."
    )


# -- terminal ------------------------------------------------------------------


def print_terminal(c: Comparison) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    def text(value: str) -> Text:  # recorded ids and labels: shown as text, never as markup or escapes
        return Text(printable(value))

    console = Console(highlight=False)
    console.print(text(view_text(c)))
    table = Table(title=f"tbx compare, {c.view} (Δ = B − A, percentage points)")
    for h in PAIRS_HEADER:
        table.add_column(h, justify="left" if h in ("A", "B", "flips") else "right")
    for row in pairs_rows(c):
        table.add_row(*map(text, row))
    console.print(table)
    floor = Table(title="noise floor: first vs second half of each run's repeats")
    for h in FLOOR_HEADER:
        floor.add_column(h, justify="left" if h in ("run", "halves") else "right")
    for row in floor_rows(c):
        floor.add_row(*map(text, row))
    console.print(floor)
    for p in c.pairs:
        for key, title in FLIP_KINDS:
            ids = getattr(p.flips, key)
            if ids:
                console.print(text(f"{title.format(a=p.a, b=p.b)}: {', '.join(ids)}"))
        for side, ids in ((p.a, p.only_in_a), (p.b, p.only_in_b)):
            if ids:
                console.print(text(f"not compared, counted only in {side}: {', '.join(ids)}"))


# -- markdown ----------------------------------------------------------------


def _md_task(task: str, links: dict[str, str] | None) -> str:
    if not links:
        return f"`{task}`"
    return f"`{task}` (" + ", ".join(f"[{md_text(name)}]({href})" for name, href in links.items()) + ")"


def render_markdown(c: Comparison) -> str:
    lines = ["# tbx compare", "", md_text(method_text(c)), ""]
    lines += [f"- **warning**: {md_text(w)}" for w in c.warnings] + ([""] if c.warnings else [])
    lines += ["## Pairs", ""]
    lines += markdown_table(PAIRS_HEADER, pairs_rows(c), "ll" + "r" * 5 + "l")
    lines += ["", "## Noise floor", ""]
    lines += markdown_table(FLOOR_HEADER, floor_rows(c), "lrrl" + "r" * 4)
    for p in c.pairs:
        lines += [
            "",
            f"## {md_text(p.b)} vs {md_text(p.a)}",
            "",
            f"{p.tasks} shared tasks; {p_text(p.p_value)}.",
            "",
        ]
        lines += markdown_table(METRIC_HEADER, metric_rows(p))
        lines += ["", "### Per domain", ""]
        lines += markdown_table(DOMAIN_HEADER, domain_table_rows(p))
        lines += ["", "### Flipped tasks", ""]
        any_flip = False
        for key, title in FLIP_KINDS:
            ids = getattr(p.flips, key)
            if ids:
                any_flip = True
                lines.append(
                    f"- {md_text(title.format(a=p.a, b=p.b))}: "
                    + ", ".join(_md_task(t, p.links.get(t)) for t in ids)
                )
        if not any_flip:
            lines.append("None.")
        for side, ids in ((p.a, p.only_in_a), (p.b, p.only_in_b)):
            if ids:
                lines += ["", md_text(f"Not compared (a counted attempt only in {side}): " + ", ".join(ids))]
    return "\n".join(lines).rstrip() + "\n"


# -- html --------------------------------------------------------------------

COMPARE_CSS = CSS + ".flip-list li{margin:2px 0}.flipped{color:" + FLIPPED_COLOR + "}"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], cls: str) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{escape(x)}</td>" for x in row) + "</tr>" for row in rows)
    return f'<div class="wide"><table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


def scatter_figure(p: PairComparison, index: int) -> str:
    """Per-task pass rate, A on x and B on y; tasks at the same point share one
    circle (area grows with their count); flipped tasks' circles in red."""
    size, m = 420, 56
    w = size - 2 * m
    flipped = p.flips.tasks()
    groups: dict[tuple[float, float], list[str]] = defaultdict(list)
    for t in p.points:
        groups[(round(t.a_rate, 6), round(t.b_rate, 6))].append(t.task_id)
    body = []
    for i in range(6):
        v = i / 5
        x, y = m + v * w, m + (1 - v) * w
        body.append(f'<line x1="{_t(m)}" y1="{_t(y)}" x2="{_t(m + w)}" y2="{_t(y)}" stroke="#eee"/>')
        body.append(f'<line x1="{_t(x)}" y1="{_t(m)}" x2="{_t(x)}" y2="{_t(m + w)}" stroke="#eee"/>')
        body.append(_text(m - 6, y + 4, f"{v:.0%}", anchor="end", size=10))
        body.append(_text(x, m + w + 14, f"{v:.0%}", anchor="middle", size=10))
    body.append(
        f'<rect x="{m}" y="{m}" width="{w}" height="{w}" fill="none" stroke="#999"/>'
        f'<line class="diagonal" x1="{m}" y1="{m + w}" x2="{m + w}" y2="{m}" stroke="#bbb" stroke-dasharray="4 3"/>'
    )
    body.append(_text(m + w / 2, size - 12, f"A: {p.a} (pass rate per task)", anchor="middle"))
    body.append(
        _text(
            14, m + w / 2, f"B: {p.b}", anchor="middle", extra=f' transform="rotate(-90 14 {_t(m + w / 2)})"'
        )
    )
    for (ra, rb), ids in sorted(groups.items()):
        hot = any(t in flipped for t in ids)
        r = min(18.0, 3.0 + 2.0 * len(ids) ** 0.5)
        names = ", ".join(ids[:MAX_TITLE_IDS]) + (
            f" … (+{len(ids) - MAX_TITLE_IDS})" if len(ids) > MAX_TITLE_IDS else ""
        )
        title = f"{len(ids)} task(s) at A {ra:.0%}, B {rb:.0%}: {names}"
        body.append(
            f'<circle class="point{" flipped" if hot else ""}" data-tasks="{len(ids)}" '
            f'cx="{_t(m + ra * w)}" cy="{_t(m + (1 - rb) * w)}" r="{_t(r)}" '
            f'fill="{FLIPPED_COLOR if hot else POINT_COLOR}" fill-opacity="0.6" stroke="#333" stroke-width="0.5">'
            f"<title>{escape(title)}</title></circle>"
        )
    title = f"Per-task pass rate: {p.b} against {p.a}"
    caption = (
        f"{p.tasks} shared tasks; above the diagonal B does better. Red: flipped tasks "
        f"({len(flipped)}); a circle's area grows with the tasks at that point (hover for their ids)."
    )
    return (
        f'<figure id="fig-scatter-{index}" data-figure="scatter">{_svg(size, size, title, body)}'
        f"<figcaption>{escape(caption)}</figcaption></figure>"
    )


def _html_task(task: str, links: dict[str, str] | None) -> str:
    out = f"<code>{escape(task)}</code>"
    if links:
        out += " (" + ", ".join(f'<a href="{escape(h)}">{escape(n)}</a>' for n, h in links.items()) + ")"
    return out


def render_html(c: Comparison) -> str:
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>tbx compare</title><style>{COMPARE_CSS}</style></head><body>",
        "<h1>tbx compare</h1>",
        f'<p class="note" data-view="{escape(c.view)}">{escape(method_text(c))}</p>',
        *(f'<p class="warning"><b>warning</b>: {escape(w)}</p>' for w in c.warnings),
        "<h2>Pairs</h2>",
        _table(PAIRS_HEADER, pairs_rows(c), "pairs"),
        "<h2>Noise floor</h2>",
        _table(FLOOR_HEADER, floor_rows(c), "noise"),
    ]
    for i, p in enumerate(c.pairs):
        parts.append(f'<section class="pair" id="pair-{i}"><h2>{escape(p.b)} vs {escape(p.a)}</h2>')
        parts.append(f'<p class="note">{p.tasks} shared tasks; {escape(p_text(p.p_value))}.</p>')
        parts.append(_table(METRIC_HEADER, metric_rows(p), "metrics"))
        parts.append(scatter_figure(p, i))
        parts.append("<h3>Per domain</h3>")
        parts.append(_table(DOMAIN_HEADER, domain_table_rows(p), "domains"))
        parts.append("<h3>Flipped tasks</h3>")
        items = [
            f'<li data-flip="{key}">{escape(title.format(a=p.a, b=p.b))}: '
            + ", ".join(_html_task(t, p.links.get(t)) for t in getattr(p.flips, key))
            + "</li>"
            for key, title in FLIP_KINDS
            if getattr(p.flips, key)
        ]
        parts.append(f'<ul class="flip-list">{"".join(items)}</ul>' if items else "<p>None.</p>")
        for side, ids in ((p.a, p.only_in_a), (p.b, p.only_in_b)):
            if ids:
                parts.append(
                    f'<p class="note">Not compared (a counted attempt only in {escape(side)}): '
                    + escape(", ".join(ids))
                    + "</p>"
                )
        parts.append("</section>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


# -- json and files ----------------------------------------------------------


def comparison_json(c: Comparison) -> dict[str, Any]:
    return c.model_dump(mode="json")


def write_comparison(c: Comparison, out: str | Path) -> dict[str, Path]:
    """Write compare.md, compare.html and compare.json into `out` (created if needed)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"md": out / "compare.md", "html": out / "compare.html", "json": out / "compare.json"}
    paths["md"].write_text(render_markdown(c))
    paths["html"].write_text(render_html(c))
    paths["json"].write_text(json.dumps(comparison_json(c), indent=2) + "\n")
    return paths
