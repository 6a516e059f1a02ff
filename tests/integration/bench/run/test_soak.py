"""The soak (benchmarks/soak.py) at CI size: a few dozen attempts, oracle and
chaos side by side, containers killed under them, no daemon restart (that is
tests/integration/bench/run/test_daemon_restart.py and the full soak), on the shared
daemon: the chaos thread kills only containers of the soak's own runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.docker

SOAK = Path(__file__).resolve().parents[4] / "benchmarks" / "soak.py"


@pytest.mark.timeout(1500)  # a loaded shared machine boots sandboxes slowly
def test_ci_soak_every_attempt_once_kills_retried_nothing_left(tmp_path: Path) -> None:
    summary_file = tmp_path / "summary.json"
    args = ["--daemon", "shared", "--no-restart", "--attempts", "24", "--tasks", "4", "--concurrency", "4"]
    args += [
        "--kills",
        "2",
        "--kill-every",
        "4",
        "--out",
        str(tmp_path / "soak"),
        "--json",
        str(summary_file),
    ]
    proc = subprocess.run(
        [sys.executable, str(SOAK), *args, "--timeout", "900"],
        capture_output=True,
        text=True,
        timeout=1200,
        env={**os.environ, "TESTCONTAINERS_RYUK_DISABLED": "true"},
    )
    assert summary_file.exists(), proc.stderr[-3000:]
    summary = json.loads(summary_file.read_text())
    failed = [name for name, ok in summary["checks"].items() if not ok]
    assert not failed, (failed, summary["details"], proc.stderr[-3000:])
    assert proc.returncode == 0
    details = summary["details"]
    assert details["oracle_rows"] == 12 and details["chaos_rows"] == 12  # 4 tasks x 3 repeats each
    # The kills landed on attempts' sets. Each costs at most one retried try: a set killed
    # before its attempt used it is replaced at no cost, one killed mid-attempt is retried
    # (tests/integration/bench/run/test_kill_per_phase.py holds each phase to its cost). A kill that
    # struck a set in teardown is not counted and another is made (at most 3 x 2 in all).
    assert 2 <= summary["kills"] <= 6, details
    # Per try killed (two kills may strike two containers of one try): each accounted for.
    assert 1 <= details["killed"] <= summary["kills"]
    assert (
        details["killed_retried"] + details["killed_out_of_retries"] + details["killed_after_end"]
        == details["killed"]
    )
    assert details["retried_tries"] >= details["killed_retried"]
