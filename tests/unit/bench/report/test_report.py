"""`tbx report`: JSON, report.md and the CLI over synthetic run directories."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench.cli.main import main
from bench.report.build import build_report, report_json
from bench.report.markdown import render_markdown
from bench.report.tables import fmt_usd


def write_run(
    root: Path,
    name: str,
    outcomes: dict[str, list[bool | None]],
    *,
    cost: float | None = 0.1,
    model: str = "model-a",
    repeats: int | None = None,
    manifest: bool = True,
) -> Path:
    """A run directory: outcomes per task id "<domain>/<n>" (None = system error)."""
    d = root / name
    d.mkdir(parents=True)
    rows = []
    for task, outs in outcomes.items():
        for i, out in enumerate(outs):
            usage: dict[str, Any] = {"model": model, "input_tokens": 1000, "output_tokens": 100}
            if cost is not None:
                usage["cost_usd"] = cost
            rows.append(
                {
                    "task_id": task,
                    "repeat": i,
                    "domain": task.split("/")[0],
                    "passed": bool(out),
                    "system_error": out is None,
                    "signature": None if out is None or out else "tool_use",
                    "finish_reason": "done",
                    "usage": {"agent": usage},
                    "timings": {"agent": 2.0, "judge": 0.5},
                }
            )
    (d / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    if manifest:
        m = {"run_name": name, "agent": "llm", "config": {"agent": {"model": model}}}
        if repeats:
            m["config"]["repeats"] = repeats
        (d / "manifest.json").write_text(json.dumps(m))
    return d


T, F, S = True, False, None


def test_json_single_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = write_run(tmp_path, "r1", {"retail/1": [T, T, S], "travel/1": [T, F, F]}, repeats=3)
    assert main(["report", str(d), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    for key in ("pass_at_1", "pass_at_k", "pass_hat_k", "observed_k_of_k", "system_errors", "per_domain"):
        assert key in data
    assert data["run"] == "r1" and data["agent"] == "llm" and data["model"] == "model-a"
    # canonical: the system error is a failed attempt of retail/1
    assert data["view"] == "canonical" and data["per_domain"]["retail"]["view"] == "canonical"
    assert data["pass_at_1"] == pytest.approx((2 / 3 + 1 / 3) / 2)
    assert data["system_errors"] == 1 and data["system_error_causes"] == {"other": 1}
    assert data["short_tasks"] == [] and data["observed_k_of_k"] == {"count": 0, "share": 0.0}
    assert data["per_domain"]["travel"]["pass_at_1"] == pytest.approx(1 / 3)
    assert set(data["pass_hat_k"]) == {"1", "3"}
    # the diagnostic view beside it: system errors excluded
    diag = data["diagnostic"]
    assert diag["view"] == "errors_excluded" and diag["per_domain"]["retail"]["view"] == "errors_excluded"
    assert diag["pass_at_1"] == pytest.approx((1 + 1 / 3) / 2)
    assert diag["system_errors"] == 1 and diag["short_tasks"] == ["retail/1"]
    assert diag["observed_k_of_k"] == {"count": 1, "share": 0.5}
    assert set(diag["pass_hat_k"]) == {"1", "2"}  # smallest valid attempt count is 2
    assert not (d / "report.md").exists()  # --json writes files only with --out


def test_json_several_runs_and_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = write_run(tmp_path, "a", {"retail/1": [T, T], "retail/2": [F, F]}, cost=0.1)
    b = write_run(tmp_path, "b", {"retail/1": [T, T], "retail/2": [T, F]}, cost=0.5)
    c = write_run(tmp_path, "c", {"retail/1": [F, F], "retail/2": [F, F]}, cost=0.01)
    out = tmp_path / "out"
    assert main(["report", str(a), str(b), str(c), "--json", "--out", str(out)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [r["run"] for r in data["runs"]] == ["a", "b", "c"]
    assert data["pareto_frontier"] == ["a", "b"]  # c never passes: no cost per success
    assert [r["pareto"] for r in data["runs"]] == [True, True, False]
    assert data["runs"][2]["cost"]["per_success_usd"] is None
    assert json.loads((out / "report.json").read_text()) == data
    assert (out / "report.md").is_file() and (out / "report.html").is_file()


def test_report_md_contents(tmp_path: Path) -> None:
    a = write_run(
        tmp_path, "alpha", {"retail/1": [T, T, T], "retail/2": [T, S, F], "travel/1": [S, S, S]}, repeats=3
    )
    z = write_run(tmp_path, "zero", {"retail/1": [F, F, F], "travel/1": [F, F, F]}, repeats=3)
    md = render_markdown(build_report([a, z]))
    lines = md.splitlines()
    alpha = next(line for line in lines if line.startswith("| alpha |"))
    cells = [c.strip() for c in alpha.strip("|").split("|")]
    # canonical: run, agent, model, tasks, attempts, unresolved system errors, K, pass@1 [CI],
    # pass^k (k), k/k, retention, cost/attempt, cost/success, cost/reliable task, Pareto
    assert "## Runs (canonical: an unresolved system error counts as a failed attempt)" in md
    assert cells[:7] == ["alpha", "llm", "model-a", "3", "9", "4 (other 4)", "3"]  # system errors, by cause
    assert cells[7].startswith("44.4% [")  # (1 + 1/3 + 0) / 3
    assert cells[8] == "33.3% (3)"  # pass^3: (1 + 0 + 0) / 3
    assert cells[9] == "1 (33.3%)"
    assert cells[10] == "0.75"
    assert cells[11:14] == ["$0.100", fmt_usd(0.3 / (3 * 4 / 9)), "$0.900"]  # 9 attempts × 0.1 / 1 task
    assert cells[14] == "yes"
    # the diagnostic table: system errors excluded
    assert "## Diagnostic (diagnostic: system errors excluded from every denominator)" in md
    diag = [line for line in lines if line.startswith("| alpha |")][1]
    dcells = [c.strip() for c in diag.strip("|").split("|")]
    # run, tasks, valid attempts, system errors excluded, pass@1, pass^k (k), k/k, retention, costs
    assert dcells[:4] == ["alpha", "2", "5", "4"]
    assert dcells[4].startswith("75.0% [")  # (1 + 1/2) / 2
    assert dcells[5:8] == ["50.0% (2)", "1 (50.0%)", "0.67"]
    assert dcells[8:] == [fmt_usd(0.1 / 0.75), "$0.500"]  # 5 attempts × 0.1 / 1 task
    zero = next(line for line in lines if line.startswith("| zero |"))
    zcells = [c.strip() for c in zero.strip("|").split("|")]
    assert zcells[7].startswith("0.0% [") and zcells[10] == "—"
    assert zcells[12:15] == ["—", "—", ""]  # no success: no cost ratios, not on the frontier
    assert "On the frontier (cheapest first): alpha." in md
    assert "## Run: alpha" in md and "## Run: zero" in md
    assert "| travel | 1 | 3 | 3 | 0.0% [" in md  # a domain with only system errors: 0, canonically
    assert "| travel | 0 | 0 | 3 |" in md  # ... and left out in the diagnostic per-domain table
    assert "### Per domain (diagnostic, system errors excluded)" in md
    assert "| tool_use | 1 | 100.0% |" in md
    assert "1 tasks have no attempt without a system error: 0 in the canonical figures" in md
    assert "4 attempts ended in a system error still there after the retries (other 4)" in md
    assert "the canonical figures count them as failed attempts" in md
    # a run without system errors gets no diagnostic table: both views are the same
    clean = render_markdown(build_report([z]))
    assert "## Diagnostic" not in clean and "so the view with them excluded is the same" in clean


def test_unpriced_run_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = write_run(tmp_path, "r", {"retail/1": [T, F]}, cost=None, model="agent-model")
    assert main(["report", str(d)]) == 0
    md = (d / "report.md").read_text()
    assert "2 attempts have token usage but no recorded cost" in md
    assert "wrote " in capsys.readouterr().out
    # the example models config prices agent-model: 1000 in × 1.25/M + 100 out × 10/M
    config = Path(__file__).resolve().parents[4] / "examples/model-config.yaml"
    assert main(["report", str(d), "--json", "--models-config", str(config)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["cost"]["total_usd"] == pytest.approx(2 * (1000 * 1.25 + 100 * 10) / 1e6)
    assert data["cost"]["per_success_usd"] == pytest.approx(0.00225 / 0.5)


def test_labels_without_manifest_are_directory_names_made_unique(tmp_path: Path) -> None:
    a = write_run(tmp_path / "x", "run", {"retail/1": [T]}, manifest=False)
    b = write_run(tmp_path / "y", "run", {"retail/1": [F]}, manifest=False)
    data = report_json(build_report([a, b]))
    assert [r["run"] for r in data["runs"]] == ["run", "run #2"]
    assert data["runs"][0]["agent"] is None and data["runs"][0]["k"] == 1


def test_cli_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(tmp_path / "nope")]) == 2
    assert "not a directory" in capsys.readouterr().err
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "results.jsonl").write_text('{"task_id": "t", "repeat": 0, "domain": "retail"}\n')
    assert main(["report", str(bad)]) == 2
    assert "results.jsonl:1: passed: Field required" in capsys.readouterr().err
    d = write_run(tmp_path, "ok", {"retail/1": [T]})
    assert main(["report", str(d), "--k", "0"]) == 2
    assert main(["report", str(d), "--models-config", str(tmp_path / "none.yaml")]) == 2
    assert "cannot read models config" in capsys.readouterr().err


def test_report_md_shows_hostile_operator_strings_as_text_not_markup(tmp_path: Path) -> None:
    """`--name`, model names and recorded strings end up in report.md; a markdown viewer
    renders raw HTML in it, so each must arrive as text (rendered here with markdown-it,
    the CommonMark renderer, html enabled as GitHub-like viewers do before sanitising)."""
    from markdown_it import MarkdownIt

    name = '<img src=x onerror="alert(1)">\nrun'
    model = "<script>alert(2)</script>"
    d = write_run(tmp_path, name.replace("\n", "").replace("/", "_"), {"retail/1": [T, F]}, model=model)
    manifest = json.loads((d / "manifest.json").read_text())
    manifest["run_name"] = name
    (d / "manifest.json").write_text(json.dumps(manifest))
    rows = [json.loads(line) for line in (d / "results.jsonl").read_text().splitlines()]
    rows[1]["finish_reason"] = "<iframe src=//evil.example>"
    (d / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))

    md = render_markdown(build_report([d]))
    rendered = MarkdownIt("commonmark", {"html": True}).enable("table").render(md)
    for tag in ("<img", "<script", "<iframe"):
        assert tag not in rendered, rendered
    assert "&lt;script&gt;alert(2)&lt;/script&gt;" in rendered  # the model name, shown as written
    assert "&lt;iframe src=//evil.example&gt;" in rendered
    assert "onerror" in rendered and "## Run: &lt;img" in md  # the name kept, on one line


def test_part_way_attempts_are_listed_but_never_scored(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An episode reset with a prefix (or a fork) passes by what its prefix did: its row is
    kept, counted and named in report.md, but left out of the task's figures and of
    `tbx compare`'s pairing."""
    d = write_run(tmp_path, "r", {"retail/1": [F, F]}, repeats=2)
    part_way = {
        "task_id": "retail/1",
        "repeat": 2,
        "domain": "retail",
        "passed": True,
        "prefix_calls": 4,
    }
    with (d / "results.jsonl").open("a") as fh:
        fh.write(json.dumps(part_way) + "\n")
    assert main(["report", str(d), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["pass_at_1"] == 0.0 and data["attempts"] == 2
    assert data["part_way_rows"] == 1
    out = tmp_path / "out"
    assert main(["report", str(d), "--out", str(out)]) == 0
    assert "1 attempts started part-way" in (out / "report.md").read_text()
    capsys.readouterr()
    e = write_run(tmp_path, "e", {"retail/1": [F, F]}, repeats=2)
    assert main(["compare", str(d), str(e), "--json"]) == 0
    runs = json.loads(capsys.readouterr().out)["runs"]
    assert [r["k"] for r in runs] == [2, 2]  # the part-way row is no third repeat of retail/1


def test_the_totals_are_what_was_spent_and_judge_errors_are_counted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every token of every role and try is in the totals (a system error's, the
    retried tries' and a superseded row's too), `--cost-role judge` counts the judge, and unreadable judge
    replies are counted in the terminal, report.md, report.html and --json."""
    d = tmp_path / "spend"
    d.mkdir()
    agent = {"model": "a", "input_tokens": 17504, "output_tokens": 192}
    judge = {"model": "j", "input_tokens": 1000, "output_tokens": 100, "calls": 2}
    rows = [
        # graded after one retried try; the judge answered and one reply could not be read
        {
            "task_id": "retail/1",
            "repeat": 0,
            "domain": "retail",
            "passed": False,
            "signature": "rubric_failed",
            "finish_reason": "done",
            "usage": {"agent": agent, "judge": judge},
            "retried_usage": {"agent": agent},
            "retries": 1,
            "judge_errors": 1,
        },
        # a resumed run's earlier row for repeat 1, superseded: in no figure, but spent
        {
            "task_id": "retail/1",
            "repeat": 1,
            "domain": "retail",
            "passed": False,
            "system_error": True,
            "cause": "model endpoint",
            "usage": {"agent": agent},
        },
        # a system error that still spent its tokens
        {
            "task_id": "retail/1",
            "repeat": 1,
            "domain": "retail",
            "passed": False,
            "system_error": True,
            "cause": "model endpoint",
            "error": "ModelEndpointError: HTTP 500",
            "finish_reason": "system_error",
            "usage": {"agent": agent},
        },
    ]
    (d / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    prices = {"a": {"input": 1.0, "output": 10.0}, "j": {"input": 2.0, "output": 20.0}}
    (d / "manifest.json").write_text(json.dumps({"run_name": "spend", "config": {"prices": prices}}))
    one_try = 17504 / 1e6 + 192 * 10 / 1e6
    judged = 1000 * 2 / 1e6 + 100 * 20 / 1e6

    assert main(["report", str(d), "--json", "--cost-role", "agent", "--cost-role", "judge"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["spent"]["agent"]["input_tokens"] == 4 * 17504 and data["spent"]["judge"]["calls"] == 2
    assert data["spent"]["agent"]["usd"] == pytest.approx(4 * one_try) and data["superseded_rows"] == 1
    assert data["cost"]["by_role"] == {"agent": pytest.approx(4 * one_try), "judge": pytest.approx(judged)}
    assert data["cost"]["spent_usd"] == pytest.approx(4 * one_try + judged)
    # the attempts' own cost counts the judge now that it is a cost role (the rows' tries only)
    assert data["cost"]["total_usd"] == pytest.approx(2 * one_try + judged)
    assert data["retried_tries"] == 1
    assert (data["judge_errors"], data["judge_error_attempts"]) == (1, 1)

    assert main(["report", str(d)]) == 0
    out = capsys.readouterr().out
    assert "spend: spent (all roles, all rows and tries): $0.0" in out and "agent 70 016 in / 768 out" in out
    assert "1 retried tries included" in out
    assert "spend: judge errors: 1 rubric replies could not be read, in 1 attempts" in out
    md = (d / "report.md").read_text()
    assert "### Tokens spent (all rows, all tries)" in md and "| agent | 70 016 | 0 | 768 | 0 |" in md
    assert "Judge errors: 1 rubric replies could not be read" in md
    html = (d / "report.html").read_text()
    assert "Tokens spent (all rows, all tries)" in html and "Judge errors: 1 rubric replies" in html


def test_the_rubric_judge_style_is_shown_where_rubrics_were_judged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run whose rows show the rubric judge at work (its tokens, here) names the style its
    manifest records beside its provenance; one without says nothing but --json; a manifest
    written before the key reads as json."""
    judged = write_run(tmp_path, "judged", {"retail/1": [T, F]})
    rows = [json.loads(line) for line in (judged / "results.jsonl").read_text().splitlines()]
    rows[0]["usage"]["judge"] = {"model": "j", "input_tokens": 150, "output_tokens": 1, "calls": 1}
    (judged / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    manifest = json.loads((judged / "manifest.json").read_text())
    (judged / "manifest.json").write_text(json.dumps({**manifest, "rubric_judge": "reference"}))
    plain = write_run(tmp_path, "plain", {"retail/1": [T, F]})  # no rubric judged, no key

    assert main(["report", str(judged), str(plain), "--json"]) == 0
    data = {r["run"]: r for r in json.loads(capsys.readouterr().out)["runs"]}
    assert (data["judged"]["rubric_judge"], data["judged"]["rubric_judged_attempts"]) == ("reference", 1)
    assert (data["plain"]["rubric_judge"], data["plain"]["rubric_judged_attempts"]) == ("json", 0)

    out = tmp_path / "out"
    assert main(["report", str(judged), str(plain), "--out", str(out)]) == 0
    shown = [line for line in capsys.readouterr().out.splitlines() if "rubric judge" in line]
    assert shown == ["judged: rubric judge: reference (the benchmark's own Yes/No)"]
    md = (out / "report.md").read_text()
    assert "K=2; rubric judge: reference (the benchmark's own Yes/No)" in md
    assert md.count("rubric judge:") == 1
    html = (out / "report.html").read_text()
    assert "K=2; rubric judge: reference (the benchmark&#x27;s own Yes/No)" in html
    assert html.count("rubric judge:") == 1

    # a run of tbx before the key, whose rubric answered "no": the json style, shown
    rows[0]["usage"].pop("judge")
    rows[1]["signature"] = "rubric_failed"
    (judged / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (judged / "manifest.json").write_text(json.dumps(manifest))
    assert main(["report", str(judged)]) == 0
    assert "judged: rubric judge: json (tbx's JSON with a reason)" in capsys.readouterr().out
