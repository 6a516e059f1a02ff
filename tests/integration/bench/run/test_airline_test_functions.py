"""The airline release end to end on a thinkingbox-data checkout (skipped without one):
its tasks run on the checkout's own airline server and are graded by their test
functions on that server's effects, no golden state. One `tbx run --agent scripted`
(two tasks, one attempt each, the scripts of benchmarks/airline_scripts/): a good script
passes by its test function, a bad one fails with `test_assert` at its assert line; and
`--agent oracle` is refused before anything starts (no golden calls)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.docker

REPO = Path(__file__).resolve().parents[4]
CHECKOUT = Path(os.environ.get("TBX_CHECKOUT", REPO.parent / "shared/benchmarks/thinkingbox-data"))
RELEASE = "dataset_2604_airline_tau_bench"
SCRIPTS = REPO / "benchmarks" / "airline_scripts"
GOOD = "test_002_downgrade_business_to_economy"  # every business reservation downgraded
BAD = "test_000_book_one_way_economy_flight"  # paid with the smaller certificate


@pytest.fixture(scope="module")
def checkout() -> Path:
    if not (CHECKOUT / "servers" / "thinkingbox_tools").is_dir():
        pytest.skip(f"no thinkingbox-data checkout with its servers at {CHECKOUT} (set TBX_CHECKOUT)")
    return CHECKOUT


def _tbx(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bench.cli", *argv], capture_output=True, text=True, timeout=600
    )


def test_the_oracle_is_refused_before_anything_starts(checkout: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = _tbx("run", "--dataset", str(checkout), "--release", RELEASE, "--tasks", GOOD, "--out", str(out))
    assert proc.returncode == 2, proc.stderr
    assert "--agent oracle replays golden calls" in proc.stderr and "--agent scripted" in proc.stderr
    assert not out.exists()


def test_a_good_script_passes_and_a_bad_one_fails_by_the_test_function(
    checkout: Path, tmp_path: Path
) -> None:
    good = json.loads((SCRIPTS / "good.json").read_text())[GOOD]
    bad = json.loads((SCRIPTS / "bad.json").read_text())[BAD]
    script = tmp_path / "script.json"
    script.write_text(json.dumps({GOOD: good, BAD: bad}))
    out = tmp_path / "run"
    proc = _tbx(
        "run", "--dataset", str(checkout), "--release", RELEASE, "--tasks", f"{GOOD},{BAD}",
        "--agent", "scripted", "--script", str(script), "--repeat", "1", "--concurrency", "2",
        "--max-retries", "0", "--out", str(out), "--plain",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "done: 2 attempts, 1 passed, 1 failed, 0 system errors" in proc.stderr, proc.stderr

    lines = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    rows = {r["task_id"].split(":")[1]: r for r in lines}
    passed, failed = rows[GOOD], rows[BAD]
    assert passed["passed"] and passed["signature"] is None and passed["reward"] == 1.0
    assert not failed["passed"] and not failed["system_error"] and failed["signature"] == "test_assert"
    assert failed["test_line"] > 0
    assert "smaller certificate should not have been used" in failed["test_message"]
    # no golden state: nothing is claimed against one
    assert failed["differences"] == 0 and not failed["strict_match"]
    record = json.loads((out / failed["attempt_file"]).read_text())
    assert record["verdict"]["golden_hash"] == "" and record["verdict"]["differences"] == []
    assert record["initial_state_path"] is None and record["server_effects_path"]
