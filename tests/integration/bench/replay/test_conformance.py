"""`tbx conformance` end to end: real sandboxes, MCP over HTTP, the reference traces."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench.dataset import load_benchmark
from bench.replay.conformance import load_traces, run_conformance
from sandbox import docker_client, labels

pytestmark = pytest.mark.docker

# A few traced tasks per domain, spread over each domain's list (every 16th).
STRIDE = 16


def _sample(dataset: Path) -> dict[str, set[str]]:
    traces = load_traces(dataset / "traces")
    bench = load_benchmark(dataset, strict=False)
    by_domain: dict[str, list[str]] = {}
    for t in bench.tasks:
        if t.id in traces:
            by_domain.setdefault(t.domain, []).append(t.id)
    return {d: set(ids[::STRIDE]) for d, ids in by_domain.items()}


def test_every_domain_matches_its_traces(dataset: Path) -> None:
    bench = load_benchmark(dataset, strict=False)
    sample = _sample(dataset)
    wanted = set().union(*sample.values())
    reports = asyncio.run(run_conformance(bench, dataset / "traces", task_ids=wanted, concurrency=2))
    for domain, ids in sample.items():
        rep = reports[domain]
        assert rep.total == len(ids), domain
        assert rep.mismatches == [], rep.mismatches
        assert rep.matched == rep.total


def test_concurrent_runs_stay_isolated(dataset: Path) -> None:
    """Two conformance runs of the same state-changing tasks at once: each
    attempt sees only its own writes, so both match the traces exactly."""
    bench = load_benchmark(dataset, strict=False)
    traces = load_traces(dataset / "traces")
    writers = [
        t.id
        for t in bench.tasks
        if t.domain == "retail"
        and t.id in traces
        and sum(c["state_changed"] for c in traces[t.id].calls) >= 3
    ][:2]
    assert len(writers) == 2

    async def both() -> list[dict]:
        runs = [
            run_conformance(bench, dataset / "traces", ["retail"], set(writers), concurrency=2)
            for _ in range(2)
        ]
        return await asyncio.gather(*runs)

    for reports in asyncio.run(both()):
        assert reports["retail"].matched == 2, reports["retail"].mismatches


def test_cli_reports_json_and_a_mismatch_exit_status(dataset: Path, tmp_path: Path) -> None:
    """The CLI's JSON contract, and a non-zero exit when a trace disagrees."""
    traces = tmp_path / "traces"
    traces.mkdir()
    line = (dataset / "traces" / "sandbox_external_retail.jsonl").read_text().splitlines()[0]
    tr = json.loads(line)
    tr["calls"][0]["result"] = tr["calls"][0]["result"] + " "  # the server will not say this
    (traces / "sandbox_external_retail.jsonl").write_text(json.dumps(tr) + "\n")
    cmd = [
        sys.executable,
        "-m",
        "bench.cli",
        "conformance",
        "--dataset",
        str(dataset),
        "--traces",
        str(traces),
        "--json",
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 1, stderr
    report = json.loads(stdout)
    retail = report["domains"]["retail"]
    assert (retail["matched"], retail["total"]) == (0, 1)
    assert retail["mismatches"][0]["kind"] == "call"
    assert "call 0" in retail["mismatches"][0]["detail"]
    # Nothing the command created (labelled with its pid) is left behind.
    owned = {"label": f"{labels.OWNER_PID}={proc.pid}"}
    assert docker_client().containers.list(all=True, filters=owned) == []
    assert docker_client().networks.list(filters=owned) == []
