"""bench.terminal_text.printable, and the printers that show recorded data through it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.cli.main import main
from bench.run.regrade import Change, RegradeSummary, format_summary
from bench.terminal_text import printable, printable_lines

HOSTILE = "session:\x1b[2J\x1b]0;owned\x07\x1b[31mred\r\nforged\u202eevil\x9b31m\x00"


def test_control_characters_are_shown_as_escapes_on_one_line() -> None:
    shown = printable(HOSTILE)
    assert shown == "session:\\x1b[2J\\x1b]0;owned\\x07\\x1b[31mred\\r\\nforged\\u202eevil\\x9b31m\\x00"
    assert shown.isprintable() and "\n" not in shown


def test_ordinary_text_is_unchanged() -> None:
    for text in ("demo_retail.py:test_ret_expedite_headphones", "café — 日本語 ✓", "a\\x1b", ""):
        assert printable(text) == text
    assert printable(3) == "3" and printable("tab\there") == "tab\\there"


def test_regrade_summary_escapes_task_ids_and_error_texts() -> None:
    s = RegradeSummary(
        attempts=2,
        regraded=1,
        passed=1,
        skipped_system_errors=1,
        changed=[Change(attempt="a1.json", task_id=HOSTILE, before="fail", after="pass")],
        errors=[f"a2.json: KeyError: no test case {HOSTILE!s}"],
    )
    text = format_summary(s)
    assert "\x1b" not in text and "\x07" not in text and "\r" not in text
    assert len(text.splitlines()) == 6  # every line one of the summary's own
    assert "skipped 1 attempts with system errors (failed attempts in the canonical score" in text


def test_report_terminal_summary_is_labelled_and_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    run.mkdir()
    rows = [
        {"task_id": HOSTILE, "repeat": 0, "domain": "retail", "passed": True},
        {"task_id": HOSTILE, "repeat": 1, "domain": "retail", "passed": False, "system_error": "boom"},
    ]
    (run / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (run / "manifest.json").write_text(json.dumps({"run_name": "evil\x1b[2J\nname", "repeats": 2}))
    assert main(["report", str(run)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "evil\\x1b[2J name" in out  # md_text joined the lines; ESC escaped
    lines = out.splitlines()
    assert lines[0] == "Runs (canonical: an unresolved system error counts as a failed attempt)"
    canonical = next(line for line in lines if line.startswith("| evil"))
    assert "| 1 (other 1) |" in canonical and "50.0% [" in canonical
    assert "Diagnostic (diagnostic: system errors excluded from every denominator)" in lines
    diagnostic = [line for line in lines if line.startswith("| evil")][1]
    assert "100.0% [" in diagnostic


def test_printable_lines_keeps_line_breaks_only() -> None:
    assert printable_lines("problem one\x1b[2J\nproblem two\r") == "problem one\\x1b[2J\nproblem two\\r"


def test_errors_tbx_ends_with_are_printed_escaped(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import bench.cli.report as report_cli
    from bench.run.errors import RunError

    def fail(args: object) -> int:
        raise RunError(f"tbx run: attempt {HOSTILE} failed\nsecond line")

    monkeypatch.setattr(report_cli, "report_command", fail)
    assert main(["report", "x"]) == 1
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\r" not in err and len(err.splitlines()) == 1
    assert err.rstrip().endswith("failed\\nsecond line")


def test_a_dataset_error_is_one_escaped_line_per_problem(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import bench.cli.report as report_cli
    from bench.dataset import DatasetError
    from bench.dataset.errors import Problem

    problems = [
        Problem(path="dataset/test_case/x.yaml", task=HOSTILE, message="bad seed"),
        Problem(path="servers/y", message="unknown server"),
    ]

    def fail(args: object) -> int:
        raise DatasetError(problems, "tbx run: 2 problems in the benchmark data at /d")

    monkeypatch.setattr(report_cli, "report_command", fail)
    assert main(["report", "x"]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 3 and lines[0] == "tbx run: 2 problems in the benchmark data at /d"
    assert "\x1b" not in lines[1] and printable(HOSTILE) in lines[1] and "unknown server" in lines[2]
