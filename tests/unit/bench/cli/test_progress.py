"""Live progress of `tbx run`: the figures it shows and the two output forms."""

from __future__ import annotations

import io
import time
from dataclasses import dataclass, field
from types import SimpleNamespace

from rich.console import Console

from bench.cli.progress import RunProgress, eta_seconds, status_line


@dataclass
class FakeRun:
    counts: dict[str, int] = field(
        default_factory=lambda: {"done": 0, "passed": 0, "failed": 0, "errors": 0, "alive": 0}
    )
    total: int = 0
    started: float = 0.0
    phase: str = "starting"
    warm_sandboxes: int = 0
    judge_errors: int = 0


def test_eta_extrapolates_the_mean_attempt_time() -> None:
    assert eta_seconds(0, 10, 5.0) is None
    assert eta_seconds(2, 10, 20.0) == 80.0
    assert eta_seconds(10, 10, 99.0) == 0.0


def test_status_line_counts_an_unresolved_system_error_as_a_failed_attempt() -> None:
    run = FakeRun(total=10, started=100.0)
    run.counts.update(done=4, passed=2, failed=1, errors=1, retried=3, alive=2)
    run.warm_sandboxes = 1
    line = status_line(run, now=140.0)
    # canonical: 2 of 4 finished attempts passed; the system error (out of retries) is a failure
    assert line.startswith("[4/10] pass 50% (2/4 canonical) errors 1 retried 3 alive 2+1 warm")
    assert "elapsed 00:40" in line and "eta 01:00" in line and "judge errors" not in line
    run.judge_errors = 2  # unreadable judge replies: said so, never as the agent's "no"
    assert status_line(run, now=140.0).endswith("eta 01:00 judge errors 2")


def test_plain_mode_prints_one_line_per_attempt() -> None:
    out = io.StringIO()
    run = FakeRun(total=2, started=time.monotonic())
    progress = RunProgress(stream=out, live=False).attach(run)
    task = SimpleNamespace(id="t.py:one")
    with progress:
        run.counts.update(done=1, passed=1)
        progress(run, task, 0, "passed")
        run.counts.update(done=2, failed=1)
        progress(run, task, 1, "failed: wrong_state_update")
    lines = out.getvalue().splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("[1/2] pass 100%") and lines[0].endswith("t.py:one #0: passed")
    assert lines[1].endswith("t.py:one #1: failed: wrong_state_update")


def test_live_panel_shows_figures_and_lists_only_non_passing_attempts() -> None:
    out = io.StringIO()
    run = FakeRun(total=5, started=time.monotonic() - 30, phase="attempts, concurrency 2")
    progress = RunProgress(stream=out, live=True)
    progress.console = Console(file=out, force_terminal=True, width=160, color_system=None)
    progress.attach(run)
    task = SimpleNamespace(id="t.py:two")
    with progress:
        run.counts.update(done=3, passed=1, failed=1, errors=1, alive=2)
        run.warm_sandboxes = 2
        progress(run, task, 0, "passed")
        progress(run, task, 1, "failed: incomplete_resolution")
        progress(run, task, 2, "system error: DockerUnavailable: daemon down")
    text = out.getvalue()
    assert "t.py:two #1: failed: incomplete_resolution" in text
    assert "t.py:two #2: system error: DockerUnavailable" in text
    assert "t.py:two #0: passed" not in text
    # The final redraw of the panel (Live prints it once more on exit).
    for figure in (
        "3/5 attempts",
        "pass 33.3% (canonical)",
        "failed 1",
        "system errors 1",
        "sandboxes alive 2 (+2 warm)",
    ):
        assert figure in text, figure
    assert "eta 00:20" in text or "eta 00:19" in text or "eta 00:21" in text


def test_live_panel_before_attempts_names_the_phase() -> None:
    run = FakeRun(phase="golden end states of 3 tasks")
    console = Console(file=io.StringIO(), force_terminal=True, width=120, color_system=None, record=True)
    console.print(RunProgress(stream=io.StringIO(), live=False).attach(run))
    assert "golden end states of 3 tasks" in console.export_text()


def test_attempt_lines_escape_recorded_ids_and_error_texts() -> None:
    out = io.StringIO()
    run = FakeRun(total=1, started=time.monotonic())
    progress = RunProgress(stream=out, live=False).attach(run)
    with progress:
        run.counts.update(done=1, errors=1)
        progress(run, SimpleNamespace(id="t\x1b]0;title\x07"), 0, "system error: boom\x1b[2J\nforged")
    text = out.getvalue()
    assert "\x1b" not in text and "\x07" not in text and len(text.splitlines()) == 1
    assert text.rstrip().endswith("t\\x1b]0;title\\x07 #0: system error: boom\\x1b[2J\\nforged")
