"""`inspect eval` of tbx/thinkingbox_bench on the demo pack with Inspect's `mockllm` model,
epochs 2, in a process of its own (mock_eval.py: the task found through the entry point),
the log read back with Inspect's log API.

Two retail tasks keep it lean (one domain: one warm pool of one). Scripted to play each
task's golden calls, every sample passes; the eval's first attempt has its tool server
container killed mid-sample and is retried under `retry_on_error`: an error in the log,
never a score. Playing mockllm's default output, every sample fails with `no_state_change`.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("inspect_ai")  # the `inspect` extra (make test installs it)

from inspect_ai.log import EvalLog, read_eval_log
from pg_support import DEMO_PACK

pytestmark = pytest.mark.docker

SCRIPT = Path(__file__).with_name("mock_eval.py")
TASKS = ["demo_retail.py:test_ret_expedite_headphones", "demo_retail.py:test_ret_defective_speaker_refund"]


def run(mode: str, tmp_path: Path) -> EvalLog:
    # cwd: Inspect reads `tbx/thinkingbox_bench` as a path where the directory has a tbx/
    done = subprocess.run(
        [sys.executable, str(SCRIPT), mode, str(tmp_path / "logs"), str(DEMO_PACK), ",".join(TASKS)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return read_eval_log(done.stdout.strip().splitlines()[-1])


def metrics(log: EvalLog) -> dict[str, float]:
    assert log.results is not None
    [scores] = log.results.scores
    return {name: m.value for name, m in scores.metrics.items()}


def test_golden_calls_pass_and_a_killed_container_is_retried(tmp_path: Path) -> None:
    log = run("golden-kill", tmp_path)
    assert log.status == "success"
    assert log.eval.task == "tbx/thinkingbox_bench"
    samples = log.samples or []
    assert sorted((str(s.id), s.epoch) for s in samples) == sorted((t, e) for t in TASKS for e in (1, 2))
    for s in samples:
        assert s.error is None
        score = s.scores["end_state"]
        assert score.value == 1.0, score.explanation
        assert score.metadata["signature"] is None
        assert score.metadata["terminal_hash"] == score.metadata["golden_hash"]
    # the killed attempt: a sample error Inspect retried in a fresh attempt, never a score
    retried = [s for s in samples if s.error_retries]
    assert len(retried) == 1
    [error] = retried[0].error_retries
    assert "SandboxGoneError" in error.message and "killed" in error.message
    assert metrics(log) == {"pass_at_1": 1.0, "pass_hat_k": 1.0, "k_of_k": 1.0}


def test_the_default_mock_changes_nothing_and_fails(tmp_path: Path) -> None:
    log = run("default", tmp_path)
    assert log.status == "success"
    samples = log.samples or []
    assert len(samples) == len(TASKS) * 2
    for s in samples:
        assert s.error is None and not s.error_retries
        score = s.scores["end_state"]
        assert score.value == 0.0
        assert score.metadata["signature"] == "no_state_change", score.explanation
        assert score.metadata["finish_reason"] == "user_limit"
        assert score.explanation.startswith("fail [no_state_change]")
    assert metrics(log) == {"pass_at_1": 0.0, "pass_hat_k": 0.0, "k_of_k": 0.0}
