"""A user's thinkingbox-data checkout as the dataset, end to end: conformance against the
export's traces (byte-identical replies, hash-identical end states) on a sample of every
domain, and a `tbx run` of the oracle that passes without a system error."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench.dataset import load_benchmark
from bench.replay.conformance import load_traces, run_conformance

pytestmark = pytest.mark.docker

REPO = Path(__file__).resolve().parents[4]
CHECKOUT = REPO.parent / "shared/benchmarks/thinkingbox-data"
TRACES = REPO.parent / "shared/benchmarks/thinkingbox-bench-v1/traces"
STRIDE = 40  # a few traced tasks per domain, spread over its list (the full run is `make conformance`)
RETAIL_TASK = "sandbox_external_retail_group1.py:test_case_ST003_006"


def test_a_checkout_matches_the_traces_in_every_domain() -> None:
    bench = load_benchmark(CHECKOUT)
    assert bench.layout == "checkout"
    traces = load_traces(TRACES)
    by_domain: dict[str, list[str]] = {}
    for task in bench.tasks:
        if task.id in traces:
            by_domain.setdefault(task.domain, []).append(task.id)
    sample = {d: set(ids[::STRIDE]) for d, ids in by_domain.items()}
    assert len(sample) == 5
    wanted = set().union(*sample.values())
    reports = asyncio.run(run_conformance(bench, TRACES, task_ids=wanted, concurrency=2))
    for domain, ids in sample.items():
        rep = reports[domain]
        assert rep.total == len(ids), domain
        assert rep.mismatches == [], rep.mismatches
        assert rep.matched == rep.total


def test_the_oracle_runs_on_a_checkout(tmp_path: Path) -> None:
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "bench.cli", "run", "--dataset", str(CHECKOUT), "--tasks", RETAIL_TASK]
    done = subprocess.run(
        [*cmd, "--agent", "oracle", "--repeat", "1", "--plain", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "1 passed, 0 failed, 0 system errors" in done.stderr
    (row,) = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert row["task_id"] == RETAIL_TASK and row["passed"] and not row["system_error"]
    assert not (out / "errors.jsonl").exists() or not (out / "errors.jsonl").read_text().strip()
