"""bench.terminal_text.printable, and the printers that show recorded data through it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.cli.main import main
from bench.run.regrade import Change, RegradeSummary, format_summary
from bench.terminal_text import printable

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
