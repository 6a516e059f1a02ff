"""`tbx view` in a real headless Chromium over real demo runs: the chaos and
oracle agents on the embedded demo pack (every task, 2 repeats, real
sandboxes), then the site read back from file:// with no network.

* the tasks page lists every task with the pass counts results.jsonl holds;
* filtering by signature (in the URL fragment) shows exactly the tasks with
  an attempt of that signature;
* the attempt page of a chaos failure shows the field the verdict names, with
  the expected and the got value;
* every link of the tasks, task and attempt pages resolves to a local file,
  and following them in Chromium lands on the right page.

Needs Docker with the tbx images and Debian's `chromium` (or $TBX_CHROMIUM).
The runs are conftest's session-wide `demo_runs` (shared with test_compare_html;
TBX_DEMO_RUNS=ORACLE_DIR:CHAOS_DIR reuses two made before).
"""

from __future__ import annotations

import html
import json
import re
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import pytest
from headless_chromium import chromium, run_chromium
from pg_support import DEMO_PACK

DEMO = DEMO_PACK
# the first test pays for two demo runs (60 attempts in real sandboxes): >10 min on a busy machine
pytestmark = pytest.mark.timeout(3600)


@pytest.fixture(scope="module")
def runs(demo_runs: dict[str, Path]) -> list[Path]:
    """The chaos run, then the oracle run (the order the site is built from)."""
    return [demo_runs["chaos"], demo_runs["oracle"]]


@pytest.fixture(scope="module")
def site(runs: list[Path], tbx: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("view-site")
    proc = subprocess.run(
        [tbx, "view", *map(str, runs), "--out", str(out)], capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr
    assert (out / "report.html").is_file()
    return out / "view"


def rows_of(run: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines() if line.strip()]


def dom(page_url: str, profile: Path) -> str:
    return run_chromium(chromium(), profile, "--dump-dom", page_url).stdout


def task_rows(page: str) -> dict[str, str]:
    """task id -> the row's HTML, from a dumped tasks page."""
    return {
        html.unescape(m.group(1)): m.group(0)
        for m in re.finditer(r'<tr data-task="([^"]+)".*?</tr>', page, re.S)
    }


def test_tasks_page_lists_every_task_with_pass_counts(site: Path, runs: list[Path], tmp_path: Path) -> None:
    page = dom(site.joinpath("index.html").as_uri(), tmp_path / "p")
    rows = task_rows(page)
    expected_tasks = {r["task_id"] for run in runs for r in rows_of(run)}
    assert len(expected_tasks) == 15
    assert set(rows) == expected_tasks
    for i, run in enumerate(runs):
        for task in expected_tasks:
            mine = [r for r in rows_of(run) if r["task_id"] == task]
            passes = sum(r["passed"] for r in mine)
            valid = sum(not r["system_error"] for r in mine)
            strip = re.search(
                rf'<span class="marks" data-run="{i}">(.*?)</span><span class="kk">([^<]*)<', rows[task]
            )
            assert strip, rows[task]
            assert strip.group(1).count('data-mark="p"') == passes
            assert strip.group(2).startswith(f"{passes}/{valid}")
    chaos = rows_of(runs[0])
    oracle = rows_of(runs[1])
    assert all(r["passed"] for r in oracle if not r["system_error"])  # the oracle plays golden
    assert 0 < sum(r["passed"] for r in chaos) < len(chaos)  # chaos: some of each


def test_filter_by_signature(site: Path, runs: list[Path], tmp_path: Path) -> None:
    chaos = rows_of(runs[0])
    by_sig: dict[str, set[str]] = {}
    for r in chaos:
        if r.get("signature"):
            by_sig.setdefault(r["signature"], set()).add(r["task_id"])
    all_tasks = {r["task_id"] for r in chaos}
    assert any(tasks != all_tasks for tasks in by_sig.values())
    for sig, tasks in by_sig.items():
        page = dom(site.joinpath("index.html").as_uri() + f"#sig={sig}", tmp_path / "p")
        assert set(task_rows(page)) == tasks, sig
        assert f"{len(tasks)} of {len(all_tasks)} tasks" in page
    page = dom(site.joinpath("index.html").as_uri() + "#status=never", tmp_path / "p")
    never = {
        t for t in all_tasks if not any(r["passed"] for r in chaos + rows_of(runs[1]) if r["task_id"] == t)
    }
    assert set(task_rows(page)) == never


def field_difference(run: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """A chaos failure whose verdict names a wrong field value (any field-level difference
    if no plain wrong_value occurred): (results row, difference)."""
    found: list[tuple[int, dict[str, Any], dict[str, Any]]] = []
    for r in rows_of(run):
        if r["passed"] or r["system_error"]:
            continue
        record = json.loads((run / r["attempt_file"]).read_text())
        for d in record["verdict"]["differences"]:
            if d.get("field"):
                found.append((0 if d["kind"] == "wrong_value" else 1, r, d))
    assert found, "the chaos run left no field-level difference"
    found.sort(key=lambda x: x[0])
    return found[0][1], found[0][2]


def test_attempt_page_shows_expected_and_got(site: Path, runs: list[Path], tmp_path: Path) -> None:
    row, diff = field_difference(runs[0])
    index = (site / "data" / "tasks.js").read_text()
    data = json.loads(index.split("=", 1)[1].strip().rstrip(";"))
    task = next(t for t in data["tasks"] if t["id"] == row["task_id"])
    href = task["runs"][0]["a"][row["repeat"]]
    page = dom((site / href).as_uri(), tmp_path / "p")
    block = re.search(
        rf'<div class="diffrow" data-table="{re.escape(diff["table"])}" data-key="{re.escape(html.escape(diff["key"]))}".*?</table>',
        page,
        re.S,
    )
    assert block, f"no diff block for {diff['table']}[{diff['key']}]"
    cell = re.search(
        rf'<tr class="hl" data-field="{re.escape(diff["field"])}"[^>]*>.*?<td class="expected"><code>(.*?)</code></td>'
        r'<td class="got"><code>(.*?)</code></td>',
        block.group(0),
        re.S,
    )
    assert cell, block.group(0)[:2000]
    as_json = lambda v: json.dumps(v, ensure_ascii=False, sort_keys=True)  # noqa: E731
    assert html.unescape(cell.group(1)) == as_json(diff["expected"])
    assert html.unescape(cell.group(2)) == as_json(diff["actual"])
    assert diff["expected"] != diff["actual"]
    assert "why it failed" in page and 'id="conversation"' in page


def local_links(page: str, base: str) -> list[Path]:
    out = []
    for ref in re.findall(r'(?:href|src)="([^"]*)"', page):
        ref = html.unescape(ref)
        if ref.startswith("#"):
            continue
        assert "://" not in ref and not ref.startswith("//"), f"non-local link {ref}"
        url = urlparse(base.rsplit("/", 1)[0] + "/" + ref.split("#")[0])
        out.append(Path(unquote(url.path)).resolve())
    return out


def test_links_work_offline(site: Path, tmp_path: Path) -> None:
    index_url = site.joinpath("index.html").as_uri()
    index = dom(index_url, tmp_path / "p")
    links = local_links(index, index_url)
    assert all(p.is_file() for p in links), [p for p in links if not p.is_file()]
    tasks = [p for p in links if p.parent.name == "tasks"]
    attempts = [p for p in links if p.parent.parent.name == "attempts"]
    assert len(set(tasks)) == 15 and len(set(attempts)) == 15 * 2 * 2
    assert site.parent.joinpath("report.html").resolve() in links
    task_url = tasks[0].as_uri()
    task_page = dom(task_url, tmp_path / "p")
    task_links = local_links(task_page, task_url)
    assert all(p.is_file() for p in task_links)
    assert (site / "index.html").resolve() in task_links
    attempt_links = [p for p in task_links if p.parent.parent.name == "attempts"]
    assert len(attempt_links) >= 4  # both runs' repeats (rows and strips)
    attempt_url = attempt_links[0].as_uri()
    attempt_page = dom(attempt_url, tmp_path / "p")
    back = local_links(attempt_page, attempt_url)
    assert all(p.is_file() for p in back)
    assert tasks[0].resolve() in back and (site / "index.html").resolve() in back
    assert '<h2 id="effects">' in attempt_page
    # nothing anywhere in the site is fetched from the network
    for f in site.rglob("*"):
        if f.suffix in (".html", ".css"):
            text = f.read_text()
            assert not re.search(r'(?:src|href)="(?:https?:)?//', text), f
            assert "@import" not in text and "url(" not in text, f
    report = (site.parent / "report.html").read_text()
    assert 'href="view/index.html"' in report


def test_view_of_a_regraded_run(runs: list[Path], tbx: str, tmp_path: Path) -> None:
    """`tbx judge regrade` rewrites the records and rows in place; the view reads them back."""
    import shutil

    copy = tmp_path / "regraded"
    shutil.copytree(runs[0], copy, ignore=shutil.ignore_patterns("view", "report.*"))
    proc = subprocess.run(
        [tbx, "judge", "regrade", str(copy), "--dataset", str(DEMO)],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    # Regrade cannot judge the rubric tasks of a --skip-rubrics run (no answers recorded):
    # it reports them and leaves their rows alone; every other attempt is regraded.
    problems = [line for line in proc.stdout.splitlines() if line.startswith("  ") and ".json:" in line]
    assert proc.returncode in (0, 1), proc.stdout[-2000:] + proc.stderr[-2000:]
    assert all("no usable rubric answers" in line for line in problems), problems
    assert "regraded" in proc.stdout
    proc = subprocess.run([tbx, "view", str(copy)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    page = dom((copy / "view" / "index.html").as_uri(), tmp_path / "p")
    rows = task_rows(page)
    regraded = rows_of(copy)
    assert set(rows) == {r["task_id"] for r in regraded}
    for task, row_html in rows.items():
        passes = sum(r["passed"] for r in regraded if r["task_id"] == task)
        assert row_html.count('data-mark="p"') == passes
