"""`tbx compare` on two real demo runs (the oracle and the chaos agent on the
embedded demo pack, every task, 2 repeats, real sandboxes): it names the
tasks that flipped, links them to the `tbx view` site of both runs, and its
compare.html renders in a real headless Chromium with nothing fetched.

Needs Docker with the tbx images and Debian's `chromium` (or $TBX_CHROMIUM).
The runs are conftest's session-wide `demo_runs` (shared with test_view_html;
TBX_DEMO_RUNS=ORACLE_DIR:CHAOS_DIR reuses two made before).
"""

from __future__ import annotations

import html
import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from headless_chromium import chromium, png_size, run_chromium

pytestmark = pytest.mark.timeout(3600)  # two demo runs: 60 attempts in real sandboxes

PROBE = """<script>
const out = [];
for (const f of document.querySelectorAll('figure[data-figure="scatter"]')) {
  const svg = f.querySelector('svg');
  const r = svg.getBoundingClientRect();
  out.push({width: r.width, height: r.height,
    points: [...svg.querySelectorAll('circle.point')].map(c => ({
      flipped: c.classList.contains('flipped'), tasks: Number(c.dataset.tasks),
      title: c.querySelector('title').textContent, r: c.getBBox().width / 2,
      fill: getComputedStyle(c).fill})),
    links: [...document.querySelectorAll('ul.flip-list a')].map(a => a.href)});
}
const pre = document.createElement('pre');
pre.id = 'probe';
pre.textContent = JSON.stringify(out);
document.body.appendChild(pre);
</script>"""


def rows_of(run: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines() if line.strip()]


def per_task(rows: list[dict[str, Any]]) -> dict[str, tuple[int, int]]:
    """task -> (passes, valid attempts)."""
    out: dict[str, tuple[int, int]] = {}
    for r in rows:
        if r["system_error"]:
            continue
        c, n = out.get(r["task_id"], (0, 0))
        out[r["task_id"]] = (c + bool(r["passed"]), n + 1)
    return out


def test_compare_names_flipped_tasks_and_renders_in_chromium(
    demo_runs: dict[str, Path], tbx: str, tmp_path: Path
) -> None:
    oracle, chaos = demo_runs["oracle"], demo_runs["chaos"]
    out = tmp_path / "cmp"
    view = subprocess.run(
        [tbx, "view", str(oracle), str(chaos), "--out", str(out)], capture_output=True, text=True, timeout=600
    )
    assert view.returncode == 0, view.stderr
    proc = subprocess.run(
        [tbx, "compare", str(oracle), str(chaos), "--out", str(out), "--seed", "1"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr

    # the expected flips, straight from the two results.jsonl
    a, b = per_task(rows_of(oracle)), per_task(rows_of(chaos))
    shared = sorted(set(a) & set(b))
    assert len(shared) >= 10
    assert all(c == n for c, n in a.values())  # the oracle plays the golden calls
    unreliable = [t for t in shared if b[t][0] < b[t][1]]
    never = [t for t in shared if b[t][0] == 0]
    assert unreliable, "chaos passed every task k/k: nothing to compare"

    data = json.loads((out / "compare.json").read_text())
    pair = data["pairs"][0]
    assert (pair["a"], pair["b"], pair["tasks"]) == ("oracle", "chaos", len(shared))
    assert sorted(pair["flips"]["reliable_only_in_a"]) == unreliable
    assert pair["flips"]["reliable_only_in_b"] == [] and pair["flips"]["solved_only_in_b"] == []
    assert sorted(pair["flips"]["solved_only_in_a"]) == never
    delta = sum(b[t][0] / b[t][1] - 1 for t in shared) / len(shared)
    assert pair["delta_pass_at_1"] == pytest.approx(delta)
    lo, hi = pair["delta_pass_at_1_ci"]
    assert lo <= delta <= hi <= 0
    assert set(pair["noise_floor"]) == {"oracle", "chaos"}
    assert pair["noise_floor"]["oracle"]["stats"]["delta_pass_at_1"] == 0
    for task in unreliable:  # named on the terminal, linked to the view of both runs
        assert task in proc.stdout
        href = pair["links"][task]["view"]
        assert (out / href).is_file()

    page = (out / "compare.html").read_text()
    assert not re.search(r"<script|<link|<img|<iframe|\bsrc=|url\(|@import", page, re.I)
    assert set(re.findall(r"https?://[^\s\"'<>]+", page)) <= {"http://www.w3.org/2000/svg"}
    assert all((out / h).is_file() for h in re.findall(r'href="([^"]+)"', page))

    probe_page = out / "probe.html"
    probe_page.write_text(page.replace("</body>", PROBE + "</body>"))
    dom = run_chromium(chromium(), tmp_path / "profile", "--dump-dom", probe_page.as_uri()).stdout
    m = re.search(r'<pre id="probe">(.*?)</pre>', dom, re.S)
    assert m, f"the probe did not run; DOM starts with {dom[:300]!r}"
    (figure,) = json.loads(html.unescape(m.group(1)))
    assert figure["width"] > 300 and figure["height"] > 300
    points = figure["points"]
    assert sum(p["tasks"] for p in points) == len(shared)
    flipped_ids = set(unreliable)
    for p in points:
        ids = set(re.findall(r"[\w.]+:\w+", p["title"].split(": ", 1)[1]))
        assert p["flipped"] == bool(ids & flipped_ids), p
        assert p["r"] > 2
    assert {p["fill"] for p in points if p["flipped"]} == {"rgb(225, 87, 89)"}
    assert len(figure["links"]) >= len(unreliable)

    shot, blank = tmp_path / "compare.png", tmp_path / "blank.png"
    (tmp_path / "blank.html").write_text("<!DOCTYPE html><html><body></body></html>")
    for target, url in ((shot, (out / "compare.html").as_uri()), (blank, (tmp_path / "blank.html").as_uri())):
        run_chromium(
            chromium(), tmp_path / "profile", "--window-size=1200,1600", f"--screenshot={target}", url
        )
    assert png_size(shot) == png_size(blank) == (1200, 1600)
    assert shot.stat().st_size > 5 * blank.stat().st_size
