"""Episodes recorded like `tbx run` attempts, through the same `Runner` writers:
a row in results.jsonl, an AttemptRecord in attempts/, the initial and terminal
states in states/, the trajectory in trajectories/, system errors in
errors.jsonl (kept out of every score). `tbx report` and `tbx judge regrade`
read a server's output directory as they read a run's.

What goes back to the client is `verdict_metadata`: the signature and how many
differences of each kind, never a golden value.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from bench.dataset import Task
from bench.rollout.trajectory import Trajectory
from bench.run.runner import Runner, _views
from judge.canonical import State
from judge.records import AttemptRecord, RubricAnswer, Verdict
from sandbox.proxy import ProxyCall


def verdict_metadata(verdict: Verdict) -> dict[str, Any]:
    return {
        "signature": verdict.signature,
        "strict_match": verdict.strict,
        "differences": dict(Counter(d.kind for d in verdict.differences)),
        "rubrics_passed": verdict.rubrics_passed,
    }


def record_judged(
    runner: Runner,
    task: Task,
    repeat: int,
    record: AttemptRecord,
    traj: Trajectory,
    verdict: Verdict,
    answers: list[RubricAnswer] | None,
    states: tuple[State, State],
    calls: list[ProxyCall],
    timings: dict[str, float],
    rubrics_skipped: bool,
) -> None:
    initial, terminal = states
    record.initial_state_path = runner.output.write_state(f"{record.attempt_id}.initial", initial)
    record.terminal_state_path = runner.output.write_state(f"{record.attempt_id}.terminal", terminal)
    record.trajectory = _views(calls)
    record.final_message = traj.final_message
    record.rubric_answers = answers
    record.verdict = verdict
    runner._finish(task, repeat, record, traj, verdict, timings, rubrics_skipped)


def record_system_error(
    runner: Runner,
    task: Task,
    repeat: int,
    record: AttemptRecord,
    traj: Trajectory | None,
    exc: BaseException,
    timings: dict[str, float],
) -> None:
    runner._system_error(task, repeat, record, traj, exc, timings)
