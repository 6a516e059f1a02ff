"""report.html in a real headless Chromium: the figures and tables render,
and the page needs nothing from the network.

Needs Debian's `chromium` package (apt-get install chromium) or a Chromium /
Chrome binary named by $TBX_CHROMIUM; without one the test fails.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from typing import Any

import pytest
from headless_chromium import chromium, png_size, run_chromium

from bench.report.build import build_report
from bench.report.write import write_report

DOMAINS = ("retail", "travel", "auto_insurance")

# appended to a copy of the report: measures what Chromium laid out and writes it into the DOM
PROBE = """<script>
const out = {figures: [], tables: []};
for (const f of document.querySelectorAll('figure[data-figure]')) {
  const svg = f.querySelector('svg');
  const r = svg.getBoundingClientRect();
  const count = (sel) => svg.querySelectorAll(sel).length;
  out.figures.push({kind: f.dataset.figure, id: f.id, width: r.width, height: r.height,
    bars: [...svg.querySelectorAll('rect.bar')].map(b => b.getBBox().height),
    series: count('polyline.series'), points: count('circle.point'), frontier: count('path.frontier'),
    segments: count('rect.segment'), caption: f.querySelector('figcaption').textContent});
}
for (const t of document.querySelectorAll('table')) {
  out.tables.push({cls: t.className, rows: t.tBodies[0].rows.length,
    width: t.getBoundingClientRect().width, head: [...t.tHead.rows[0].cells].map(c => c.textContent)});
}
const pre = document.createElement('pre');
pre.id = 'probe';
pre.textContent = JSON.stringify(out);
document.body.appendChild(pre);
</script>"""


def make_runs(root: Path) -> list[Path]:
    """Three runs × 3 domains × 4 tasks × 5 repeats with different pass rates and costs."""
    dirs = []
    signatures = ("tool_use", "wrong_state_update", "incomplete_resolution", "no_state_change")
    for r, (name, passes, cost) in enumerate((("large", 5, 0.05), ("small", 3, 0.004), ("medium", 4, 0.03))):
        d = root / name
        d.mkdir()
        rows: list[dict[str, Any]] = []
        for di, domain in enumerate(DOMAINS):
            for t in range(4):
                for i in range(5):
                    system_error = (r, di, t, i) == (1, 0, 0, 4)
                    passed = not system_error and i < passes - (t + di) % 2
                    rows.append(
                        {
                            "task_id": f"{domain}:{t}",
                            "repeat": i,
                            "domain": domain,
                            "passed": passed,
                            "system_error": system_error,
                            "signature": None if passed or system_error else signatures[(t + i) % 4],
                            "finish_reason": "done",
                            "usage": {"agent": {"model": name, "input_tokens": 900, "cost_usd": cost}},
                            "timings": {"agent": 1.0},
                        }
                    )
        (d / "results.jsonl").write_text("".join(json.dumps(x) + "\n" for x in rows))
        (d / "manifest.json").write_text(
            json.dumps({"run_name": name, "agent": "llm", "config": {"repeats": 5}})
        )
        dirs.append(d)
    return dirs


def test_report_html_renders_in_chromium(tmp_path: Path) -> None:
    binary = chromium()
    report = build_report(make_runs(tmp_path))
    paths = write_report(report, tmp_path / "out")
    page = paths["html"].read_text()

    # self-contained: nothing to fetch (the SVG namespace URI is an identifier, not a request)
    assert not re.search(r"<script|<link|<img|<iframe|\bsrc=|\bhref=|url\(|@import", page, re.I)
    assert set(re.findall(r"https?://[^\s\"'<>]+", page)) <= {"http://www.w3.org/2000/svg"}

    probe_page = tmp_path / "probe.html"
    probe_page.write_text(page.replace("</body>", PROBE + "</body>"))
    dom = run_chromium(binary, tmp_path / "profile", "--dump-dom", probe_page.as_uri()).stdout
    m = re.search(r'<pre id="probe">(.*?)</pre>', dom, re.S)
    assert m, f"the probe did not run; DOM starts with {dom[:300]!r}"
    probe = json.loads(html.unescape(m.group(1)))

    figures = {f["id"]: f for f in probe["figures"]}
    assert sorted(f["kind"] for f in probe["figures"]) == [
        "domains",
        "domains",
        "domains",
        "pareto",
        "retention",
        "signatures",
    ]
    for f in probe["figures"]:
        assert f["width"] > 300 and f["height"] > 150, f
    # per-domain figure: two bars (pass@1, observed k/k) per domain plus "all"
    large = figures["fig-domains-0"]
    assert len(large["bars"]) == 2 * (len(DOMAINS) + 1)
    run = report.runs[0]
    assert run.pass_at_1 is not None and run.observed_k_of_k.share is not None
    assert large["bars"][-2] > large["bars"][-1] > 0  # pass@1 above observed k/k
    assert large["bars"][-2] / large["bars"][-1] == pytest.approx(
        run.pass_at_1 / run.observed_k_of_k.share, rel=0.02
    )
    assert figures["fig-retention"]["series"] == 3
    pareto = figures["fig-pareto"]
    assert pareto["points"] == 3 and pareto["frontier"] == 1
    assert "On the frontier (cheapest first): " + ", ".join(report.pareto_frontier) in pareto["caption"]
    assert figures["fig-signatures"]["segments"] == sum(len(r.signatures) for r in report.runs)

    tables = probe["tables"]
    assert tables[0]["cls"] == "runs" and tables[0]["rows"] == 3
    assert "pass@1 [95% CI]" in tables[0]["head"] and "cost / success" in tables[0]["head"]
    domain_tables = [t for t in tables if t["cls"] == "domains"]
    assert len(domain_tables) == 3 and all(t["rows"] == len(DOMAINS) + 1 for t in domain_tables)
    assert all(t["width"] > 0 for t in tables)

    # a screenshot of the untouched page is painted (far more detail than a blank page)
    shot, blank = tmp_path / "report.png", tmp_path / "blank.png"
    (tmp_path / "blank.html").write_text("<!DOCTYPE html><html><body></body></html>")
    run_chromium(
        binary,
        tmp_path / "profile",
        "--window-size=1200,2000",
        f"--screenshot={shot}",
        paths["html"].as_uri(),
    )
    run_chromium(
        binary,
        tmp_path / "profile",
        "--window-size=1200,2000",
        f"--screenshot={blank}",
        (tmp_path / "blank.html").as_uri(),
    )
    assert png_size(shot) == png_size(blank) == (1200, 2000)
    assert shot.stat().st_size > 5 * blank.stat().st_size
