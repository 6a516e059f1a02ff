"""One attempt's files and result row, written the same way wherever it ran:
`tbx run`'s coordinator and `tbx env serve`'s episodes both end here.

A graded attempt: its states, trajectory and AttemptRecord, then its row in
results.jsonl. A system error: its trajectory and record (when writable),
a line in errors.jsonl, and a row marked `system_error` (kept out of every
score), both with the error's cause (and the line with whether it was
retryable) as its type said (bench.run.causes), so a report never reads them
off the message. Counting and progress stay with the caller.
"""

from __future__ import annotations

import contextlib
import json
import traceback
from collections.abc import Mapping
from datetime import UTC, datetime

from bench.dataset import Task
from bench.llm.config import ModelsConfig
from bench.rollout.trajectory import SYSTEM_ERROR, Trajectory
from bench.run.attempt import AttemptOutcome, TryPhase, usage_of
from bench.run.grading import Graded
from bench.run.output import RunOutput
from bench.run.results import ResultRow, RoleUsage, add_usage
from judge import AttemptRecord, Verdict
from sandbox import Fault


def _timings(timings: dict[str, float]) -> dict[str, float]:
    return {k: round(v, 4) for k, v in timings.items()}


def _retry_fields(
    retried: list[str] | None, retried_usage: Mapping[str, RoleUsage] | None
) -> dict[str, object]:
    """A row's record of the earlier tries of its (task, repeat) that were retried: how
    many, their errors, and what they spent (per role)."""
    return {
        "retries": len(retried or []),
        "retried_errors": list(retried or []),
        "retried_usage": dict(retried_usage or {}),
    }


def try_usage(traj: Trajectory | None) -> dict[str, RoleUsage]:
    """What a try spent, per role, as its trajectory recorded it (a system error's too)."""
    return usage_of(traj) if traj is not None else {}


def test_function_fields(verdict: Verdict) -> dict[str, object]:
    """A row's fields of a task graded by its test function (none on other rows): the
    reward, and where a failing test stopped."""
    tf = verdict.test_function
    if tf is None:
        return {}
    out: dict[str, object] = {"reward": verdict.reward, "test_seconds": round(tf.seconds, 3)}
    if tf.judge_calls:
        out["judge_questions"] = len(tf.judge_calls)
    if not tf.result:
        out["test_line"] = tf.lineno
        out["test_message"] = (tf.message or "")[:500]
    return out


test_function_fields.__test__ = False  # type: ignore[attr-defined]  # not a pytest test


def write_graded(
    output: RunOutput,
    task: Task,
    record: AttemptRecord,
    outcome: AttemptOutcome,
    graded: Graded,
    timings: dict[str, float],
    *,
    retried: list[str] | None = None,
    retried_usage: Mapping[str, RoleUsage] | None = None,
    models: ModelsConfig | None = None,
) -> ResultRow:
    """Write a graded attempt (states, trajectory, record, row); returns the row.
    `retried`: the messages of this (task, repeat)'s earlier tries that ended in
    a system error (bench.run.retries), `retried_usage` what they spent. The row's
    usage is the try's and the judge's on the answers asked now (priced by `models`)."""
    verdict = graded.verdict
    if outcome.initial_state is None:  # a checkout's own servers: their effects, no database state
        record.server_effects_path = output.write_effects(  # type: ignore[attr-defined]
            f"{record.attempt_id}.effects", outcome.server_effects
        )
        record.init_results = outcome.init_results  # type: ignore[attr-defined]
    else:
        assert outcome.terminal_state is not None or outcome.resource_limit is not None
        record.initial_state_path = output.write_state(f"{record.attempt_id}.initial", outcome.initial_state)
    if outcome.terminal_state is not None:  # none after a limit that took the database down
        record.terminal_state_path = output.write_state(
            f"{record.attempt_id}.terminal", outcome.terminal_state
        )
    record.resource_limit = outcome.resource_limit
    record.prefix = outcome.prefix
    record.trajectory = outcome.calls
    record.final_message = outcome.final_message
    record.rubric_answers = graded.answers
    record.verdict = verdict
    rel = output.write_trajectory(record.attempt_id, outcome.trajectory)
    attempt_file = output.write_record(record)
    row = ResultRow.model_validate(
        {
            "task_id": task.id,
            "repeat": record.repeat,
            "domain": task.domain,
            "passed": verdict.passed,
            "system_error": False,
            "signature": verdict.signature,
            "finish_reason": outcome.finish_reason,
            "usage": add_usage(outcome.usage, graded.judge_usage(models)),
            "timings": _timings(timings),
            "attempt_id": record.attempt_id,
            "attempt_file": attempt_file,
            "trajectory": rel,
            "strict_match": verdict.strict,
            "differences": len(verdict.differences),
            "rubrics_skipped": graded.rubrics_skipped,
            "judge_errors": verdict.judge_errors,
            **_retry_fields(retried, retried_usage),
            **test_function_fields(verdict),
            **({"node": outcome.node} if outcome.node else {}),
            # started part-way: this many calls were replayed before the agent had it
            **({"prefix_calls": len(outcome.prefix)} if outcome.prefix else {}),
        }
    )
    output.append(output.results, row.to_json_line())
    return row


def write_system_error(
    output: RunOutput,
    task: Task,
    record: AttemptRecord,
    traj: Trajectory | None,
    message: str,
    trace: str,
    timings: dict[str, float],
    *,
    fault: Fault,
    retried: list[str] | None = None,
    retried_usage: Mapping[str, RoleUsage] | None = None,
    phase: TryPhase | None = None,
) -> ResultRow:
    """Write an attempt that ended in a system error (its last try); returns its row.
    `fault`: the error's (bench.run.causes.fault_of), written with it as its `cause`;
    `phase`: where the try failed (errors.jsonl's `phase`), when known. The row's finish
    reason is `system_error` (what ended it), its usage what the trajectory recorded."""
    _error_line(
        output,
        task,
        record,
        traj,
        message,
        trace,
        fault=fault,
        retried=False,
        tries=len(retried or []) + 1,
        timings=timings,
        phase=phase,
    )
    row = ResultRow.model_validate(
        {
            "task_id": task.id,
            "repeat": record.repeat,
            "domain": task.domain,
            "passed": False,
            "system_error": True,
            "error": message,
            "cause": fault.cause,
            "finish_reason": SYSTEM_ERROR,
            "usage": try_usage(traj),
            "timings": _timings(timings),
            "attempt_id": record.attempt_id,
            **_retry_fields(retried, retried_usage),
        }
    )
    output.append(output.results, row.to_json_line())
    return row


def write_retried_error(
    output: RunOutput,
    task: Task,
    record: AttemptRecord,
    traj: Trajectory | None,
    message: str,
    trace: str,
    timings: dict[str, float],
    *,
    fault: Fault,
    tries: int,
    phase: TryPhase | None = None,
) -> None:
    """Write a try that ended in a system error and will be tried again: its files
    and a line in errors.jsonl marked `retried`, but no row (the next try writes it)."""
    _error_line(
        output,
        task,
        record,
        traj,
        message,
        trace,
        fault=fault,
        retried=True,
        tries=tries,
        timings=timings,
        phase=phase,
    )


def _error_line(
    output: RunOutput,
    task: Task,
    record: AttemptRecord,
    traj: Trajectory | None,
    message: str,
    trace: str,
    *,
    fault: Fault,
    retried: bool,
    tries: int,
    timings: dict[str, float],
    phase: TryPhase | None = None,
) -> None:
    rel = output.write_trajectory(record.attempt_id, traj)
    record.system_error = message
    with contextlib.suppress(OSError):
        output.write_record(record)
    error: dict[str, object] = {
        "task_id": task.id,
        "repeat": record.repeat,
        "attempt_id": record.attempt_id,
        "error": message,
        "cause": fault.cause,
        "retryable": fault.retryable,
        "traceback": trace[-4000:],
        "trajectory": rel,
        "try": tries,
        "retried": retried,
        "at": datetime.now(UTC).isoformat(),
    }
    if phase is not None:
        error["phase"] = phase
    error["timings"] = _timings(timings)  # what was measured before the failure (maybe nothing)
    spent = try_usage(traj)
    if spent:  # what this try spent (a retried try's is also summed into its row's retried_usage)
        error["usage"] = {role: u.model_dump(mode="json") for role, u in spent.items()}
    output.append(output.errors, json.dumps(error))


def error_message(exc: BaseException) -> tuple[str, str]:
    """(message, traceback) of an exception, as both writers record them."""
    return f"{exc.__class__.__name__}: {exc}", "".join(traceback.format_exception(exc))
