"""`tbx run` end to end on the demo pack: rows, resume, --retry-errors, report."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from pg_support import DEMO_PACK
from server_process import default_stop_signals

from bench.run.results import read_rows
from judge.yesno import TEXT_YESNO_SYSTEM, text_user

pytestmark = pytest.mark.docker

TASK = "demo_retail.py:test_ret_expedite_headphones"
RUBRIC_TASK = "demo_retail.py:test_ret_change_of_mind_tablet"


def tbx(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bench.cli", *args], capture_output=True, text=True, timeout=timeout
    )


def test_run_resume_retry_and_report(tmp_path: Path) -> None:
    out = tmp_path / "run"
    cache = tmp_path / "golden"
    common = ["run", "--dataset", str(DEMO_PACK), "--tasks", TASK, "--agent", "oracle", "--repeat", "2"]
    common += ["--concurrency", "2", "--out", str(out), "--golden-cache", str(cache)]

    first = tbx(*common)
    assert first.returncode == 0, first.stderr
    rows = read_rows(out / "results.jsonl")
    assert sorted(r.repeat for r in rows) == [0, 1]
    assert all(r.passed and not r.system_error and r.signature is None for r in rows)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["agent"] == "oracle" and len(manifest["bundle_hash"]) == 64
    for r in rows:
        record = json.loads((out / f"attempts/{(r.model_extra or {})['attempt_id']}.json").read_text())
        assert record["verdict"]["strict"] is True

    # Resume: nothing left to do, nothing re-run.
    again = tbx(*common)
    assert again.returncode == 0, again.stderr
    assert "done: 0 attempts" in again.stderr
    assert len(read_rows(out / "results.jsonl")) == 2

    # A system-error row is re-run by --retry-errors only.
    lines = (out / "results.jsonl").read_text().splitlines()
    broken = json.loads(lines[1])
    broken.update(passed=False, system_error=True, error="simulated container failure")
    (out / "results.jsonl").write_text("\n".join([lines[0], json.dumps(broken)]) + "\n")
    plain = tbx(*common)
    assert "done: 0 attempts" in plain.stderr
    retried = tbx(*common, "--retry-errors")
    assert retried.returncode == 0, retried.stderr
    assert "done: 1 attempts, 1 passed" in retried.stderr
    latest = {r.repeat: r for r in read_rows(out / "results.jsonl")}  # the later row wins
    assert latest[broken["repeat"]].passed and not latest[broken["repeat"]].system_error

    report = tbx("report", str(out), "--json")
    assert report.returncode == 0, report.stderr
    metrics = json.loads(report.stdout)
    assert metrics["pass_at_1"] == 1.0
    assert metrics["system_errors"] == 0


class OneWordJudge(ThreadingHTTPServer):
    """A judge endpoint on 127.0.0.1 answering every question `Yes`, as a model asked for one
    word does (before the reference style, tbx read that as a judge error: "rubric no")."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _OneWord)
        self.asked: list[list[dict[str, str]]] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


class _OneWord(BaseHTTPRequestHandler):
    server: OneWordJudge

    def log_message(self, *args: object) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.asked.append(body["messages"])
        message = {"role": "assistant", "content": "Yes"}
        usage = {"prompt_tokens": 90, "completion_tokens": 1, "total_tokens": 91}
        data = json.dumps(
            {
                "id": "c",
                "object": "chat.completion",
                "created": 0,
                "model": body["model"],
                "choices": [{"index": 0, "finish_reason": "stop", "message": message}],
                "usage": usage,
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def test_rubric_tasks_need_a_judge_and_are_asked_as_the_benchmark_asks(tmp_path: Path) -> None:
    common = [
        "run",
        "--dataset",
        str(DEMO_PACK),
        "--tasks",
        RUBRIC_TASK,
        "--agent",
        "oracle",
        "--repeat",
        "1",
    ]
    proc = tbx(*common, "--out", str(tmp_path / "r"))
    assert proc.returncode != 0
    assert "judge" in proc.stderr and "--skip-rubrics" in proc.stderr
    assert (
        not (tmp_path / "r" / "results.jsonl").exists() or not (tmp_path / "r" / "results.jsonl").read_text()
    )

    judge = OneWordJudge()
    threading.Thread(target=judge.serve_forever, daemon=True).start()
    try:
        config = tmp_path / "models.yaml"
        config.write_text(f"judge:\n  base_url: {judge.url}\n  model: judge-stub\n")
        out = tmp_path / "judged"
        proc = tbx(*common, "--config", str(config), "--warm", "0", "--out", str(out))
    finally:
        judge.shutdown()
        judge.server_close()
    assert proc.returncode == 0, proc.stderr
    [row] = read_rows(out / "results.jsonl")
    assert row.passed and row.signature is None
    assert json.loads((out / "manifest.json").read_text())["rubric_judge"] == "reference"
    record = json.loads((out / f"attempts/{(row.model_extra or {})['attempt_id']}.json").read_text())
    answers = record["rubric_answers"]
    assert answers and [a["answer"] for a in answers] == ["yes"] * len(answers) == ["yes"] * len(judge.asked)
    assert all(
        a["usage"] == {"input_tokens": 90, "output_tokens": 1, "cached_tokens": 0, "requests": 1}
        for a in answers
    )
    final = record["final_message"]
    assert {m[1]["content"] for m in judge.asked} == {text_user(final, a["question"]) for a in answers}
    assert all(m[0] == {"role": "system", "content": TEXT_YESNO_SYSTEM} for m in judge.asked)


def _run_containers(run_id: str) -> list[str]:
    from sandbox import docker_client
    from sandbox.labels import RUN

    found = docker_client().containers.list(all=True, filters={"label": f"{RUN}={run_id}"})
    return [c.name for c in found]


def _signal_after_first_row(args: list[str], results: Path, sig: int) -> subprocess.Popen[str]:
    """Start `tbx <args>`, send `sig` once the first result row is on disk, wait for the exit."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench.cli", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=default_stop_signals,
    )
    deadline = time.monotonic() + 480
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            if results.exists() and results.read_text().count("\n") >= 1:
                break
            time.sleep(0.2)
        assert proc.poll() is None, (
            f"run ended before the signal: {proc.stderr.read() if proc.stderr else ''}"
        )
        os.kill(proc.pid, sig)
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    return proc


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP], ids=lambda s: s.name)
def test_stop_signal_mid_run_leaves_no_container_and_a_readable_output(tmp_path: Path, sig: int) -> None:
    """Ctrl-C, `kill` or a closed terminal while attempts run and the warm pool
    boots: the run stops, removes every container and network it made, and what
    it wrote reads cleanly."""
    from sandbox import leftovers

    out = tmp_path / "run"
    tasks = "demo_retail.py:test_ret_expedite_headphones,demo_retail.py:test_ret_defective_speaker_refund"
    args = ["run", "--dataset", str(DEMO_PACK), "--tasks", tasks, "--agent", "oracle", "--repeat", "3"]
    args += ["--concurrency", "2", "--warm", "2", "--out", str(out), "--golden-cache", str(tmp_path / "g")]
    proc = _signal_after_first_row([*args, "--plain"], out / "results.jsonl", sig)
    assert proc.returncode != 0
    run_id = json.loads((out / "manifest.json").read_text())["run_id"]
    assert leftovers(run_id) == ([], [])
    rows = read_rows(out / "results.jsonl")
    assert 1 <= len(rows) < 6 and all(r.passed for r in rows if not r.system_error)


def test_resume_after_sigkill_mid_run(tmp_path: Path) -> None:
    """A run killed with SIGKILL between attempts (no cleanup code runs) resumes on
    the same --out: finished attempts are kept, the rest run once, the killed run's
    containers are swept and the report reads the directory."""
    out = tmp_path / "run"
    tasks = "demo_retail.py:test_ret_expedite_headphones,demo_retail.py:test_ret_defective_speaker_refund"
    common = ["run", "--dataset", str(DEMO_PACK), "--tasks", tasks, "--agent", "oracle", "--repeat", "2"]
    common += ["--concurrency", "1", "--out", str(out), "--golden-cache", str(tmp_path / "golden"), "--plain"]

    results = out / "results.jsonl"
    _signal_after_first_row([*common, "--warm", "0"], results, signal.SIGKILL)
    killed_run = json.loads((out / "manifest.json").read_text())["run_id"]
    before = results.read_text().splitlines()
    assert 1 <= len(before) < 4
    kept = {(json.loads(line)["task_id"], json.loads(line)["repeat"]): line for line in before}
    # What a kill in the middle of a write would leave: a row cut short.
    with results.open("a") as fh:
        fh.write('{"task_id": "demo_retail.py:test_ret_expe')

    resumed = tbx(*common)  # default --warm: the resumed part runs from a warm pool
    assert resumed.returncode == 0, resumed.stderr
    assert "half-written line" in resumed.stderr
    rows = read_rows(results)
    assert len(rows) == 4, "each (task, repeat) exactly once: nothing finished before the kill ran again"
    assert {(r.task_id, r.repeat) for r in rows} == {(t, k) for t in tasks.split(",") for k in (0, 1)}
    assert all(r.passed and not r.system_error for r in rows)
    assert results.read_text().splitlines()[: len(before)] == before  # earlier rows untouched
    assert set(kept) <= {(r.task_id, r.repeat) for r in rows}
    manifest = json.loads((out / "manifest.json").read_text())
    assert killed_run in manifest["previous_run_ids"]
    assert _run_containers(killed_run) == []
    assert _run_containers(manifest["run_id"]) == []

    report = tbx("report", str(out), "--json")
    assert report.returncode == 0, report.stderr
    assert json.loads(report.stdout)["pass_at_1"] == 1.0
