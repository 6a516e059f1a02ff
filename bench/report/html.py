"""`report.html`: one self-contained page (inline CSS and SVG; no scripts, no
fonts, images or styles from anywhere else), so it opens offline.

Figures (each a `<figure data-figure=...>` holding one `<svg>`):

* `domains`    per run: pass@1 (with its 95% interval) and observed k/k per domain
* `retention`  pass^k against k for every run (retention in the legend)
* `pareto`     cost per success against pass@1, frontier highlighted
* `signatures` failure-signature shares of failed attempts, one bar per run
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape

from bench.report.build import Report
from bench.report.metrics import RunMetrics
from bench.report.tables import (
    DASH,
    agent_text,
    diagnostic_rows,
    domain_rows,
    flag_lines,
    fmt_pct,
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
from bench.report.views import CANONICAL, DIAGNOSTIC, view_label, view_title

PALETTE = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#9c755f", "#bab0ac")
SIGNATURE_COLORS = {
    "tool_use": "#e15759",
    "wrong_state_update": "#f28e2b",
    "incomplete_resolution": "#edc948",
    "no_state_change": "#76b7b2",
    "rubric_failed": "#b07aa1",
    "unlabelled": "#bab0ac",
}
FONT = "font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif"

CSS = (
    "body{" + FONT + ";margin:24px;color:#222}.wide{overflow-x:auto}"
    "h1{font-size:1.6em}h2{margin-top:1.8em;border-bottom:1px solid #ddd;padding-bottom:4px}"
    "table{border-collapse:collapse;margin:8px 0 16px;font-size:.9em}"
    "th,td{border:1px solid #ccc;padding:4px 8px;text-align:right;white-space:nowrap}"
    "th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}"
    "figure{margin:12px 0 24px}figcaption{font-size:.85em;color:#555;max-width:760px}"
    "svg text{" + FONT + "}.note{color:#555;font-size:.9em}code{background:#f3f3f3;padding:0 3px}"
)


def _t(x: float) -> str:
    return f"{x:.1f}"


def _text(x: float, y: float, s: str, anchor: str = "start", size: int = 11, extra: str = "") -> str:
    return (
        f'<text x="{_t(x)}" y="{_t(y)}" font-size="{size}" text-anchor="{anchor}"{extra}>{escape(s)}</text>'
    )


def _svg(width: int, height: int, title: str, body: Sequence[str]) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{escape(title)}">'
        f"<title>{escape(title)}</title>" + "".join(body) + "</svg>"
    )


def _figure(kind: str, fid: str, svg: str, caption: str) -> str:
    return (
        f'<figure id="{escape(fid)}" data-figure="{kind}">{svg}'
        f"<figcaption>{escape(caption)}</figcaption></figure>"
    )


def _y_axis(x0: float, y0: float, w: float, h: float) -> list[str]:
    """Gridlines and labels for 0..100% on a plot whose bottom-left is (x0, y0)."""
    out = []
    for i in range(5):
        y = y0 - h * i / 4
        out.append(f'<line x1="{_t(x0)}" y1="{_t(y)}" x2="{_t(x0 + w)}" y2="{_t(y)}" stroke="#e3e3e3"/>')
        out.append(_text(x0 - 6, y + 4, f"{25 * i}%", "end", 10))
    out.append(f'<line x1="{_t(x0)}" y1="{_t(y0 - h)}" x2="{_t(x0)}" y2="{_t(y0)}" stroke="#888"/>')
    return out


def nice_ticks(hi: float, target: int = 5) -> list[float]:
    """0, step, 2*step, ... covering `hi`, with a 1/2/5 × 10^n step."""
    if hi <= 0:
        return [0.0, 1.0]
    raw = hi / (target - 1)
    mag = 10.0 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    n = math.ceil(hi / step - 1e-9)
    return [round(i * step, 12) for i in range(n + 1)]


def _y_label(x: float, y: float, s: str) -> str:
    return (
        f'<text x="{_t(x)}" y="{_t(y)}" font-size="10" text-anchor="middle" '
        f'transform="rotate(-90 {_t(x)} {_t(y)})">{escape(s)}</text>'
    )


def _legend(items: Sequence[tuple[str, str]], x: float, y: float, step: float = 150) -> list[str]:
    out = []
    for i, (label, color) in enumerate(items):
        lx = x + i * step
        out.append(f'<rect x="{_t(lx)}" y="{_t(y - 9)}" width="10" height="10" fill="{color}"/>')
        out.append(_text(lx + 14, y, label, size=11))
    return out


def domain_figure(r: RunMetrics, index: int) -> str:
    groups = [(d, m) for d, m in r.per_domain.items()] + [("all", r)]
    width = max(420, 90 * len(groups) + 80)
    height = 300
    x0, top, bottom = 50.0, 40.0, 250.0
    pw, ph = width - x0 - 20, bottom - top
    body = _y_axis(x0, bottom, pw, ph)
    body += _legend([("pass@1 (95% CI)", PALETTE[0]), ("observed k/k", PALETTE[1])], x0, 18, 170)
    gw = pw / len(groups)
    bw = gw * 0.32
    for i, (name, m) in enumerate(groups):
        gx = x0 + i * gw
        for j, (value, color) in enumerate(
            ((m.pass_at_1, PALETTE[0]), (m.observed_k_of_k.share, PALETTE[1]))
        ):
            bx = gx + gw * 0.16 + j * bw
            v = value or 0.0
            bh = ph * v
            body.append(
                f'<rect class="bar" x="{_t(bx)}" y="{_t(bottom - bh)}" width="{_t(bw - 2)}" '
                f'height="{_t(bh)}" fill="{color}"><title>{escape(name)}: {fmt_pct(value)}</title></rect>'
            )
            body.append(_text(bx + bw / 2 - 1, bottom - bh - 4, fmt_pct(value, 0), "middle", 9))
        if m.pass_at_1_ci is not None:
            cx = gx + gw * 0.16 + bw / 2 - 1
            lo, hi = (bottom - ph * c for c in m.pass_at_1_ci)
            body.append(
                f'<path d="M{_t(cx)},{_t(lo)}V{_t(hi)}M{_t(cx - 4)},{_t(lo)}h8M{_t(cx - 4)},{_t(hi)}h8" '
                f'stroke="#222" fill="none"/>'
            )
        body.append(_text(gx + gw / 2, bottom + 16, name, "middle", 11))
        body.append(_text(gx + gw / 2, bottom + 30, f"{m.tasks} tasks", "middle", 9, ' fill="#666"'))
    title = f"{r.run}: pass@1 and observed k/k per domain ({view_title(CANONICAL)})"
    return _figure(
        "domains",
        f"fig-domains-{index}",
        _svg(width, height, title, body),
        f"{title}. Whiskers: 95% Wilson interval of pass@1 over tasks; observed k/k: share of tasks "
        f"that passed every attempt (K={r.k}).",
    )


def retention_figure(runs: Sequence[RunMetrics]) -> str:
    kmax = max((len(r.pass_hat_curve) for r in runs), default=0)
    width, x0 = 640, 50.0
    top = 28.0 + 16 * len(runs)
    height = int(top + 220)
    bottom = height - 40.0
    pw, ph = width - x0 - 30, bottom - top
    body = _y_axis(x0, bottom, pw, ph)

    def px(k: int) -> float:
        return x0 + (pw / 2 if kmax <= 1 else (k - 1) / (kmax - 1) * pw)

    ticks = sorted({1, kmax, *(k for k in (5, 10, 15, 20) if k < kmax)}) if kmax else []
    for k in ticks:
        body.append(_text(px(k), bottom + 16, str(k), "middle", 10))
    body.append(_text(x0 + pw / 2, bottom + 32, "k (attempts that must all pass)", "middle", 10))
    body.append(_y_label(14, top + ph / 2, "pass^k"))
    for i, r in enumerate(runs):
        color = PALETTE[i % len(PALETTE)]
        pts = [(px(k), bottom - ph * v) for k, v in enumerate(r.pass_hat_curve, 1)]
        if len(pts) > 1:
            body.append(
                f'<polyline class="series" points="{" ".join(f"{_t(x)},{_t(y)}" for x, y in pts)}" '
                f'fill="none" stroke="{color}" stroke-width="2"/>'
            )
        body += [f'<circle cx="{_t(x)}" cy="{_t(y)}" r="2.5" fill="{color}"/>' for x, y in pts]
        ly = 18 + 16 * i
        body.append(f'<rect x="{_t(x0)}" y="{_t(ly - 9)}" width="10" height="10" fill="{color}"/>')
        label = (
            f"{r.run}: pass@1 {fmt_pct(r.pass_at_1)}, pass^{r.retention_k or DASH} "
            f"{fmt_pct(r.pass_hat_k.get(r.retention_k or 0))}, retention "
            f"{DASH if r.retention is None else f'{r.retention:.2f}'}"
        )
        body.append(_text(x0 + 14, ly, label))
    title = f"Retention: pass^k against k ({view_title(CANONICAL)})"
    return _figure(
        "retention",
        "fig-retention",
        _svg(width, height, title, body),
        f"{title}, per run. Retention = pass^K / pass@1 at K = the smallest attempt count "
        "(capped by the run's repeats).",
    )


def pareto_figure(report: Report) -> str:
    pts = [
        (r, r.cost.per_success_usd, r.pass_at_1)
        for r in report.runs
        if r.cost.per_success_usd is not None and r.pass_at_1 is not None
    ]
    width, height = 640, 340
    x0, top, bottom, right = 60.0, 30.0, 290.0, 150.0
    pw, ph = width - x0 - right, bottom - top
    body = _y_axis(x0, bottom, pw, ph)
    body.append(_text(x0 + pw / 2, height - 12, "cost per successful attempt (USD)", "middle", 10))
    body.append(_y_label(16, top + ph / 2, "pass@1"))
    if not pts:
        body.append(_text(x0 + pw / 2, top + ph / 2, "no run has a known cost per success", "middle", 12))
    else:
        costs = [c for _, c, _ in pts if c is not None]
        lo, hi = min(costs), max(costs)
        log = lo > 0 and hi / lo > 20
        if log:
            a, b = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
            b = b if b > a else a + 1
            ticks = [10.0**e for e in range(a, b + 1)]

            def px(c: float) -> float:
                return x0 + (math.log10(c) - a) / (b - a) * pw

        else:
            ticks = nice_ticks(hi * 1.1)
            top_c = ticks[-1]

            def px(c: float) -> float:
                return x0 + c / top_c * pw

        for t in ticks:
            x = px(t)
            body.append(f'<line x1="{_t(x)}" y1="{_t(top)}" x2="{_t(x)}" y2="{_t(bottom)}" stroke="#eee"/>')
            body.append(_text(x, bottom + 16, f"${t:g}", "middle", 10))
        front = [(px(c), bottom - ph * s) for r, c, s in pts if r.pareto and c is not None and s is not None]
        front.sort()
        if len(front) > 1:
            d = f"M{_t(front[0][0])},{_t(front[0][1])}" + "".join(f"H{_t(x)}V{_t(y)}" for x, y in front[1:])
            body.append(f'<path class="frontier" d="{d}" stroke="#59a14f" stroke-width="2" fill="none"/>')
        for i, (r, c, s) in enumerate(pts):
            assert c is not None and s is not None
            x, y = px(c), bottom - ph * s
            color = PALETTE[report.runs.index(r) % len(PALETTE)] if r in report.runs else PALETTE[i]
            ring = ' stroke="#2b7a2b" stroke-width="3"' if r.pareto else ""
            body.append(
                f'<circle class="point" cx="{_t(x)}" cy="{_t(y)}" r="6" fill="{color}"{ring}>'
                f"<title>{escape(r.run)}: {fmt_usd(c)} per success, pass@1 {fmt_pct(s)}</title></circle>"
            )
            body.append(_text(x + 9, y + 4, r.run + (" *" if r.pareto else ""), size=11))
    unpriced = [r.run for r in report.runs if r.cost.per_success_usd is None]
    if unpriced:
        body.append(_text(x0 + pw + 10, top + 10, "not plotted (no cost", size=10, extra=' fill="#666"'))
        body.append(_text(x0 + pw + 10, top + 23, "or no success):", size=10, extra=' fill="#666"'))
        for i, name in enumerate(unpriced[:12]):
            body.append(_text(x0 + pw + 10, top + 38 + 13 * i, name, size=10, extra=' fill="#666"'))
    title = f"Cost per success against pass@1 ({view_title(CANONICAL)})"
    return _figure(
        "pareto",
        "fig-pareto",
        _svg(width, height, title, body),
        f"{title}. Ringed points (*) are on the Pareto frontier: no other run is both cheaper per "
        "success and at least as good. " + frontier_text(report),
    )


def signature_figure(runs: Sequence[RunMetrics]) -> str:
    seen = {s for r in runs for s in r.signatures}
    sigs = [s for s in SIGNATURE_COLORS if s in seen] + sorted(seen - set(SIGNATURE_COLORS))
    width, label_w, bar_w = 760, 170.0, 440.0
    top = 44.0
    height = int(top + 30 * len(runs) + 20)
    body = []
    colors = {s: SIGNATURE_COLORS.get(s, PALETTE[i % len(PALETTE)]) for i, s in enumerate(sigs)}
    body += _legend([(s, colors[s]) for s in sigs], 10, 18, 150)
    for i, r in enumerate(runs):
        y = top + 30 * i
        body.append(_text(label_w - 8, y + 15, r.run, "end"))
        failed = sum(r.signatures.values())
        if not failed:
            body.append(_text(label_w, y + 15, "no failed attempts", extra=' fill="#666"'))
            continue
        x = label_w
        for s in sigs:
            n = r.signatures.get(s, 0)
            if not n:
                continue
            w = bar_w * n / failed
            body.append(
                f'<rect class="segment" x="{_t(x)}" y="{_t(y)}" width="{_t(w)}" height="20" '
                f'fill="{colors[s]}"><title>{escape(s)}: {n} ({fmt_pct(n / failed)})</title></rect>'
            )
            if w > 34:
                body.append(_text(x + w / 2, y + 14, fmt_pct(n / failed, 0), "middle", 10))
            x += w
        body.append(_text(label_w + bar_w + 8, y + 15, f"{failed} failed attempts", size=10))
    title = "Failure signatures (share of failed valid attempts)"
    return _figure("signatures", "fig-signatures", _svg(width, height, title, body), title + ".")


def _html_table(header: Sequence[str], rows: Sequence[Sequence[str]], cls: str) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in row) + "</tr>" for row in rows)
    return (
        f'<div class="wide"><table class="{cls}"><thead><tr>{head}</tr></thead>'
        f"<tbody>{body}</tbody></table></div>"
    )


def render_html(report: Report, view_href: str | None = None) -> str:
    """`view_href`: the relative link to the `tbx view` site of these runs, if one exists."""
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>tbx report</title><style>{CSS}</style></head><body>",
        "<h1>tbx report</h1>",
        *(
            [f'<p><a href="{escape(view_href)}">Browse tasks and attempts: why did an attempt fail?</a></p>']
            if view_href
            else []
        ),
        '<p class="note">pass@1: mean over tasks of each task\'s pass rate, 95% Wilson interval over '
        f"tasks. {escape(views_text(report))} pass^k: all of k "
        f"attempts pass. Costs: {escape(', '.join(sorted({x for r in report.runs for x in r.cost.roles})))} "
        f"role; {DASH} = unknown or no success. Definitions: docs/metrics.md.</p>",
        f'<h2 data-view="{CANONICAL}">{escape(summary_title())}</h2>',
    ]
    header, rows = summary_rows(report)
    parts.append(_html_table(header, rows, "runs"))
    unpinned = unpinned_lines(report.runs)
    if unpinned:
        parts.append(
            '<ul class="flags unpinned">' + "".join(f"<li>{escape(u)}</li>" for u in unpinned) + "</ul>"
        )
    if has_system_errors(report):
        parts.append(f'<h2 data-view="{DIAGNOSTIC}">Diagnostic ({escape(view_label(DIAGNOSTIC))})</h2>')
        parts.append(_html_table(*diagnostic_rows(report), "diagnostic"))
    parts += ["<h2>Reliability and cost</h2>", retention_figure(report.runs), pareto_figure(report)]
    parts.append(signature_figure(report.runs))
    for i, r in enumerate(report.runs):
        parts.append(f'<section class="run" id="run-{i}"><h2>Run: {escape(r.run)}</h2>')
        meta = f"agent: {agent_text(r)}; model: {r.model or DASH}; K={r.k}"
        if r.data_provenance and r.data_provenance.git:
            meta += f"; data: {r.data_provenance.git}"
        if rubric := rubric_judge_text(r):  # how its rubric questions were asked
            meta += f"; {rubric}"
        parts.append(
            f'<p class="note">{escape(meta)}'
            + (f"; <code>{escape(r.path)}</code>" if r.path else "")
            + "</p>"
        )
        parts.append(domain_figure(r, i))
        parts.append("<h3>Per domain</h3>")
        parts.append(_html_table(*domain_rows(r), "domains"))
        if r.system_errors and r.diagnostic is not None:
            parts.append(f"<h3>Per domain ({escape(view_title(DIAGNOSTIC))})</h3>")
            parts.append(_html_table(*domain_rows(r.diagnostic), "domains-diagnostic"))
        parts.append("<h3>pass@k and pass^k</h3>")
        parts.append(_html_table(*passk_rows(r), "passk"))
        h, rs = signature_rows(r)
        parts.append("<h3>Failure signatures</h3>")
        parts.append(_html_table(h, rs, "signatures") if rs else "<p>No failed attempts.</p>")
        cost_rows = [
            ["total (attempts)", fmt_usd(r.cost.total_usd)],
            ["mean per attempt", fmt_usd(r.cost.mean_per_attempt_usd)],
            ["per successful attempt", fmt_usd(r.cost.per_success_usd)],
            ["per reliable task (k/k)", fmt_usd(r.cost.per_reliable_task_usd)],
            [
                "spent by the cost roles: " + ", ".join(r.cost.roles) + " (all rows, all tries)",
                fmt_usd(r.cost.spent_usd),
            ],
            *[[f"{role} spent (all rows, all tries)", fmt_usd(v)] for role, v in r.cost.by_role.items()],
        ]
        parts.append("<h3>Cost</h3>")
        parts.append(_html_table(["cost", "USD"], cost_rows, "cost"))
        if r.spent:
            parts.append("<h3>Tokens spent (all rows, all tries)</h3>")
            parts.append(_html_table(*spend_rows(r), "spent"))
        flags = flag_lines(r)
        parts.append("<h3>Flags</h3>")
        parts.append(
            '<ul class="flags">' + "".join(f"<li>{escape(f)}</li>" for f in flags) + "</ul>"
            if flags
            else "<p>None.</p>"
        )
        parts.append("</section>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
