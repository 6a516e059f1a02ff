"""`tbx view` without a browser: the diff grouping, the task summaries, the
loader's tolerance of missing files, the site's files and links, and the
127.0.0.1-only server (a real HTTP server on loopback)."""

from __future__ import annotations

import gzip
import json
import os
import re
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from html import escape
from pathlib import Path
from typing import Any

import pytest

from bench.cli.main import main
from bench.dataset import load_benchmark
from bench.rollout.trajectory import Message, ToolCall, Trajectory, UserTurn
from bench.view.diff import group, label
from bench.view.site import SiteError, build_site
from bench.view.summary import FAIL, PASS, Summary, task_href, task_rows
from judge import AttemptRecord, Difference, Verdict, canonical_bytes, write_attempt
from servers.registry import load_domain

REPO = Path(__file__).resolve().parents[4]
TABLE = "zendesk_tickets"


def ticket(i: int, status: str = "open") -> dict[str, Any]:
    return {"id": str(i), "subject": f"ticket {i}", "status": status}


WRONG = Difference(kind="wrong_value", table=TABLE, key="2", field="status", expected="solved", actual="open")
MISSING = Difference(kind="missing_effect", op="insert", table=TABLE, key="9", expected=ticket(9, "new"))
EXTRA = Difference(kind="extra_effect", op="insert", table=TABLE, key="7", actual=ticket(7))
UNEXPECTED_UPDATE = Difference(
    kind="extra_effect", op="update", table=TABLE, key="2", field="subject", expected="ticket 2", actual="x"
)


def test_labels_drop_the_row_key() -> None:
    assert label(WRONG) == "wrong value zendesk_tickets.status"
    assert label(MISSING) == "required row missing zendesk_tickets"
    assert label(EXTRA) == "unexpected insert zendesk_tickets"
    assert label(UNEXPECTED_UPDATE) == "unexpected update zendesk_tickets.subject"


def test_group_by_table_and_key_with_terminal_rows() -> None:
    terminal = {TABLE: [ticket(1), {**ticket(2), "subject": "x"}, ticket(7)]}
    specs = load_domain("retail").tables
    [t] = group([WRONG, MISSING, EXTRA, UNEXPECTED_UPDATE], terminal, specs)
    assert t.table == TABLE
    by_key = {r.key: r for r in t.rows}
    assert [r.key for r in t.rows] == ["2", "9", "7"]  # first-seen order, one entry per row
    two = by_key["2"]
    assert two.what == "field differences"
    assert [(f.field, f.what, f.expected, f.got) for f in two.fields] == [
        ("status", "wrong value", "solved", "open"),
        ("subject", "unexpected update", "ticket 2", "x"),
    ]
    assert two.got_row == {**ticket(2), "subject": "x"}
    assert by_key["9"].what == "required row missing" and by_key["9"].row == ticket(9, "new")
    assert by_key["7"].what == "unexpected insert" and by_key["7"].row == ticket(7)
    assert t.counts() == {
        "wrong value": 1,
        "unexpected update": 1,
        "required row missing": 1,
        "unexpected insert": 1,
    }


def _summary(task: str, repeat: int, mark: str, run: int = 0, sig: str | None = None) -> Summary:
    return Summary(
        run=run,
        task_id=task,
        repeat=repeat,
        domain="retail",
        attempt_id=f"{task}-{run}-{repeat}",
        href="x",
        mark=mark,
        signature=sig,
        finish_reason="done",
        user_turns=1,
        agent_turns=1,
        tool_calls=0,
        tool_errors=0,
        tokens=0,
        cost=None,
        duration=None,
    )


def test_task_rows_passes_and_flaky() -> None:
    rows = task_rows(
        [
            _summary("a", 0, PASS),
            _summary("a", 1, FAIL, sig="tool_use"),
            _summary("b", 0, FAIL, sig="tool_use"),
            _summary("b", 0, PASS, run=1),
            _summary("c", 1, "e"),
        ],
        [2, 2],
    )
    a, b, c = rows
    assert a.passes() == (1, 2, 0) and a.flaky()
    # b: never passes in run 0, always in run 1: passed sometimes, never flaky
    assert b.passes() == (1, 2, 0) and not b.flaky()
    assert [s is None for s in b.runs[0]] == [False, True]
    assert c.passes() == (0, 0, 1) and c.runs[0][0] is None
    assert a.signatures() == {"tool_use": 1}


def write_run(root: Path, *, with_files: bool = True) -> Path:
    """Two tasks × two repeats: one pass, one wrong-value failure, one system error, one
    failure whose attempt record is missing."""
    run = root / "run"
    for sub in ("attempts", "states", "trajectories"):
        (run / sub).mkdir(parents=True)
    rows = []
    specs = [
        ("demo.py:t_one", 0, "pass"),
        ("demo.py:t_one", 1, "wrong"),
        ("demo.py:t_two", 0, "error"),
        ("demo.py:t_two", 1, "norecord"),
    ]
    for task, repeat, kind in specs:
        aid = f"{task.split(':')[1]}-r{repeat}"
        terminal = {TABLE: [ticket(1), ticket(2)]}
        (run / "states" / f"{aid}.terminal.json.gz").write_bytes(gzip.compress(canonical_bytes(terminal)))
        traj = Trajectory(
            task_id=task,
            agent="chaos",
            finish_reason="done",
            messages=[
                Message(role="user", content="Please <close> my ticket"),
                Message(
                    role="assistant",
                    tool_calls=[
                        {"id": "c0", "type": "function", "function": {"name": "t", "arguments": "{}"}}
                    ],
                ),
                Message(role="tool", tool_call_id="c0", name="t", content='{"error": "no such ticket"}'),
                Message(role="assistant", content="Done <DONE>"),
            ],
            tool_calls=[
                ToolCall(
                    index=0,
                    call_id="c0",
                    tool="t",
                    arguments={},
                    result='{"error": "no such ticket"}',
                    error_envelope=True,
                )
            ],
            user_turns=[UserTurn(index=0, source="query", text="Please <close> my ticket")],
            agent_turns=2,
        )
        (run / "trajectories" / f"{aid}.json").write_text(traj.model_dump_json())
        diffs = [WRONG] if kind == "wrong" else []
        verdict = Verdict(
            task_id=task,
            passed=kind == "pass",
            strict=kind == "pass",
            terminal_hash="t" * 64,
            golden_hash="g" * 64,
            initial_hash="i" * 64,
            differences=diffs,
            signature=None if kind == "pass" else "wrong_state_update",
        )
        if kind != "norecord" and with_files:
            write_attempt(
                run / "attempts" / f"{aid}.json",
                AttemptRecord(
                    task_id=task,
                    attempt_id=aid,
                    repeat=repeat,
                    domain="retail",
                    terminal_state_path=f"../states/{aid}.terminal.json.gz",
                    system_error="RuntimeError: boom" if kind == "error" else None,
                    verdict=None if kind == "error" else verdict,
                ),
            )
        rows.append(
            {
                "task_id": task,
                "repeat": repeat,
                "domain": "retail",
                "passed": kind == "pass",
                "system_error": "RuntimeError: boom" if kind == "error" else False,
                "signature": None if kind in ("pass", "error") else "wrong_state_update",
                "finish_reason": "done",
                "usage": {"agent": {"input_tokens": 100, "output_tokens": 10, "cost_usd": 0.01}},
                "timings": {"agent": 1.5, "judge": 0.25},
                "attempt_id": aid,
                "attempt_file": f"attempts/{aid}.json",
                "trajectory": f"trajectories/{aid}.json",
            }
        )
    (run / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (run / "manifest.json").write_text(json.dumps({"run_name": "demo", "agent": "chaos", "repeats": 2}))
    return run


def _hrefs(page: Path) -> list[str]:
    return re.findall(r'(?:href|src)="([^"]*)"', page.read_text())


def test_site_pages_and_relative_links(tmp_path: Path) -> None:
    run = write_run(tmp_path)
    res = build_site([run], tmp_path / "site")
    assert (res.tasks, res.attempts, res.runs) == (2, 4, 1)
    assert res.notes  # no dataset recorded: said, not fatal
    site = tmp_path / "site"
    data = json.loads((site / "data" / "tasks.js").read_text().split("=", 1)[1].rstrip().rstrip(";"))
    one, two = data["tasks"]
    assert one["id"] == "demo.py:t_one" and one["runs"][0]["m"] == "pf" and (one["p"], one["n"]) == (1, 2)
    assert two["runs"][0]["m"] == "ef" and two["e"] == 1
    assert one["diff"] == "wrong value zendesk_tickets.status"
    pages = [site / "index.html", *site.glob("tasks/*.html"), *site.glob("attempts/r0/*.html")]
    assert len(pages) == 1 + 2 + 4
    for page in pages:
        for ref in _hrefs(page):
            assert "://" not in ref, f"{page}: {ref}"
            target = (page.parent / ref.split("#")[0]).resolve()
            assert target.is_file() or ref.startswith("#"), f"{page}: broken link {ref}"
    for a in one["runs"][0]["a"] + two["runs"][0]["a"]:
        assert (site / a).is_file()
    wrong = (site / one["runs"][0]["a"][1]).read_text()
    assert re.search(
        r'data-field="status"[^>]*>.*?class="expected"><code>&quot;solved&quot;</code>.*?class="got"><code>&quot;open&quot;</code>',
        wrong,
        re.S,
    )
    assert "Please &lt;close&gt; my ticket" in wrong  # escaped, in order
    assert 'data-error="1"' in wrong  # the error envelope reply is highlighted
    missing = (site / two["runs"][0]["a"][1]).read_text()
    assert "no attempt record at attempts/t_two-r1.json" in missing
    error = (site / two["runs"][0]["a"][0]).read_text()
    assert (
        "system error: other (a failed attempt in the canonical score" in error
        and "RuntimeError: boom" in error
    )
    task_two = (site / two["href"]).read_text()
    assert "passed 0/2 attempts (canonical: 1 unresolved system errors count as failed)" in task_two
    assert "0/1 valid attempts (diagnostic, system errors excluded)" in task_two


def test_a_model_endpoint_failure_is_named_as_such_with_what_it_spent(tmp_path: Path) -> None:
    """A system error's page names its cause where the conversation stopped (never "agent
    error") and shows its tokens and those of the tries retried before it."""
    run = write_run(tmp_path)
    rows = [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()]
    row = next(r for r in rows if r["system_error"])
    row.update(
        system_error=True,
        error="ModelEndpointError: HTTP 500 after 7 attempts",
        cause="model endpoint",
        finish_reason="system_error",
        usage={"agent": {"input_tokens": 17504, "output_tokens": 192}},
        retried_usage={"agent": {"input_tokens": 17504, "output_tokens": 192}},
    )
    (run / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    traj_file = run / row["trajectory"]
    traj = Trajectory.model_validate_json(traj_file.read_text())
    traj.finish_reason, traj.error = "system_error", "system error: ModelEndpointError: HTTP 500"
    traj_file.write_text(traj.model_dump_json())
    site = tmp_path / "site"
    build_site([run], site)
    data = json.loads((site / "data" / "tasks.js").read_text().split("=", 1)[1].rstrip().rstrip(";"))
    page = (site / data["tasks"][1]["runs"][0]["a"][0]).read_text()
    assert "system error: model endpoint (a failed attempt" in page
    assert "finish reason <b>system_error</b>" in page and "finished: <b>system_error</b>" in page
    assert "agent error" not in page.lower()
    assert "17,696 tokens" in page and "17,696 more tokens in retried tries" in page


def test_the_tasks_page_names_the_rubric_judge_style_where_rubrics_were_judged(tmp_path: Path) -> None:
    run = write_run(tmp_path)
    build_site([run], tmp_path / "plain")
    assert "rubric judge" not in (tmp_path / "plain" / "index.html").read_text()  # none judged
    rows = [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()]
    rows[0]["usage"]["judge"] = {"input_tokens": 150, "output_tokens": 1}
    (run / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    manifest = json.loads((run / "manifest.json").read_text())
    (run / "manifest.json").write_text(json.dumps({**manifest, "rubric_judge": "reference"}))
    build_site([run], tmp_path / "judged")
    assert "agent chaos, rubric judge reference, K=2" in (tmp_path / "judged" / "index.html").read_text()


def test_cli_writes_site_and_linked_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = write_run(tmp_path)
    assert main(["view", str(run)]) == 0
    assert "2 tasks, 4 attempts" in capsys.readouterr().out
    report = (run / "report.html").read_text()
    assert 'href="view/index.html"' in report
    assert 'href="../report.html"' in (run / "view" / "index.html").read_text()
    # a second run of the command replaces its own site
    assert main(["view", str(run)]) == 0


def test_cli_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["view", str(tmp_path / "nope")]) == 2
    assert "not a directory" in capsys.readouterr().err
    run = write_run(tmp_path)
    other = tmp_path / "mine"
    other.mkdir()
    (other / "view").mkdir()
    (other / "view" / "precious.txt").write_text("keep")
    assert main(["view", str(run), "--out", str(other)]) == 2
    assert "not written by tbx view" in capsys.readouterr().err
    assert (other / "view" / "precious.txt").read_text() == "keep"
    (run / "results.jsonl").write_text("{not json\n")
    assert main(["view", str(run)]) == 2
    assert "not JSON" in capsys.readouterr().err


def test_site_refuses_a_file(tmp_path: Path) -> None:
    run = write_run(tmp_path)
    (tmp_path / "f").write_text("x")
    with pytest.raises(SiteError):
        build_site([run], tmp_path / "f")


def test_serve_on_loopback_only_the_site(tmp_path: Path) -> None:
    # `tbx view --serve` as a user runs it: the URL it prints is the one that answers.
    run = write_run(tmp_path)
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench.cli", "view", str(run), "--serve"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    try:
        assert proc.stdout is not None
        lines = [proc.stdout.readline() for _ in range(2)]
        assert lines[0].startswith("wrote ") and lines[1].startswith("serving "), lines
        url = lines[1].split()[1]
        assert url.startswith("http://127.0.0.1:") and url.endswith("/view/index.html")
        with urllib.request.urlopen(url, timeout=10) as resp:
            assert b"data/tasks.js" in resp.read()
        base = url.rsplit("/view/", 1)[0]
        with urllib.request.urlopen(base + "/report.html", timeout=10) as resp:
            assert resp.status == 200
        for private in ("/results.jsonl", "/states/t_one-r0.terminal.json.gz", "/view/../manifest.json"):
            with pytest.raises(urllib.error.HTTPError) as err:
                urllib.request.urlopen(base + private, timeout=10)
            assert err.value.code == 404
        proc.send_signal(signal.SIGINT)  # Ctrl-C: the command stops cleanly
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_rebuild_renders_only_changed_tasks(tmp_path: Path) -> None:
    run = write_run(tmp_path)
    site = tmp_path / "site"
    assert build_site([run], site).rendered == 4
    assert build_site([run], site).rendered == 0  # nothing changed: every page kept
    # a regrade rewrites one task's row and record: only that task's two pages are rendered again
    rows = [json.loads(x) for x in (run / "results.jsonl").read_text().splitlines()]
    rows[1]["passed"] = True
    (run / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    res = build_site([run], site)
    assert res.rendered == 2 and res.attempts == 4
    # rows that are gone take their pages with them
    (run / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[:2]))
    res = build_site([run], site)
    assert res.rendered == 0 and len(list(site.glob("attempts/r0/*.html"))) == 2


def test_task_page_texts_from_the_manifest_dataset(tmp_path: Path) -> None:
    demo = load_benchmark(Path(__file__).resolve().parents[4] / "bench" / "packs" / "demo", strict=False)
    task = next(t for t in demo.tasks if t.user_context)
    run = write_run(tmp_path)
    rows = [json.loads(x) for x in (run / "results.jsonl").read_text().splitlines()]
    for r in rows:
        r["task_id"] = task.id if r["task_id"] == "demo.py:t_one" else r["task_id"]
    (run / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    # a relative dataset path, as `tbx run --dataset bench/packs/demo` records it
    (run / "manifest.json").write_text(json.dumps({"run_name": "demo", "dataset": "bench/packs/demo"}))
    res = build_site([run], tmp_path / "site")
    assert not res.notes
    page = (tmp_path / "site" / task_href(task.id)).read_text()
    assert escape(task.query) in page and escape(task.user_context or "") in page
    calls = demo.golden_calls(task)
    assert f"Golden calls ({len(calls)})" in page and calls
    assert all(f'<span class="call">{escape(tool)}</span>' in page for tool, _ in calls)
