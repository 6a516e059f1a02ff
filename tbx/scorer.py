"""Scored by the end state: tbx's judge in an Inspect scorer, and the run metrics as
`tbx report` computes them.

`end_state` ends the sample's attempt if the solver did not (terminal dump, teardown),
takes the task's golden end state from the host's GoldenStore (replayed in a fresh
sandbox of its own when not cached; it never enters the attempt's) and grades with
bench.run.grading.grade: strict canonical equality, labelled differences, the failure
signature, the yes/no rubrics asked of Inspect's `grader` role (default: the evaluated
model). The score is 1 or 0; its metadata holds the signature, the differences and the
hashes, which `inspect view` shows beside the sample.

Over epochs, the reducer `tbx_epochs` keeps each task's attempts and passes (its value
is the task's pass rate), and the metrics are bench.report.metrics.group_metrics' over
those tallies: pass@1 (mean over tasks of c/n), pass^k (k: the fewest epochs a task
has) and the share of tasks that passed k/k, the same numbers on the same attempts.
"""

from __future__ import annotations

import contextlib
from typing import Any

from inspect_ai.model import get_model
from inspect_ai.scorer import (
    Metric,
    SampleScore,
    Score,
    Scorer,
    ScoreReducer,
    Target,
    metric,
    score_reducer,
    scorer,
)
from inspect_ai.solver import TaskState
from inspect_ai.util import sandbox

from bench.report.metrics import GroupMetrics, TaskTally, group_metrics
from bench.run.grading import grade, task_rubrics
from judge.rubric import RubricJudge
from sandbox.proxy.models import ResourceLimitHit
from tbx.roles import grader_completion
from tbx.sandboxenv import TbxSandbox

DIFFERENCES_SHOWN = 20  # labelled differences kept in a score's metadata


@score_reducer(name="tbx_epochs")
def tbx_epochs() -> ScoreReducer:
    """A task's epochs as one score: its pass rate, with `attempts` and `passed` kept for
    the metrics (pass^k needs the counts, not the mean)."""

    def reduce(scores: list[Score]) -> Score:
        attempts, passed = _counts(scores)
        failed = [s.metadata.get("signature") for s in scores if s.metadata and s.metadata.get("signature")]
        return Score(
            value=passed / attempts if attempts else 0.0,
            metadata={"attempts": attempts, "passed": passed, "signatures": failed},
        )

    return reduce


def _counts(scores: list[Score]) -> tuple[int, int]:
    attempts = passed = 0
    for s in scores:
        meta = s.metadata or {}
        if "attempts" in meta:  # reduced already
            attempts += int(meta["attempts"])
            passed += int(meta["passed"])
        else:
            attempts += 1
            passed += float(s.as_float()) >= 1.0
    return attempts, passed


def task_metrics(scores: list[SampleScore]) -> GroupMetrics:
    """bench.report.metrics over the samples' scores: one tally per task."""
    tallies: dict[str, TaskTally] = {}
    for s in scores:
        meta = s.sample_metadata or {}
        task_id = str(meta.get("task_id", s.sample_id))
        t = tallies.setdefault(task_id, TaskTally(task_id=task_id, domain=str(meta.get("domain", "unknown"))))
        attempts, passed = _counts([s.score])
        t.attempts += attempts
        t.passed += passed
    k = min((t.attempts for t in tallies.values()), default=0)
    return group_metrics(list(tallies.values()), k, k_values=(k,) if k else ())


@metric(name="pass_at_1")
def pass_at_1() -> Metric:
    def compute(scores: list[SampleScore]) -> float:
        return task_metrics(scores).pass_at_1 or 0.0

    return compute


@metric(name="pass_hat_k")
def pass_hat_k() -> Metric:
    """pass^k with k the fewest epochs a task has (every task's, with `--epochs K`)."""

    def compute(scores: list[SampleScore]) -> float:
        m = task_metrics(scores)
        return m.pass_hat_k.get(m.min_attempts, 0.0)

    return compute


@metric(name="k_of_k")
def observed_k_of_k() -> Metric:
    """The share of tasks whose every attempt passed."""

    def compute(scores: list[SampleScore]) -> float:
        return task_metrics(scores).observed_k_of_k.share or 0.0

    return compute


@scorer(metrics=[pass_at_1(), pass_hat_k(), observed_k_of_k()])
def end_state() -> Scorer:
    """tbx's verdict on the attempt's end state (see the module doc)."""

    async def score(state: TaskState, target: Target) -> Score:
        attempt = sandbox().as_type(TbxSandbox).attempt
        host, task = attempt.host, attempt.task
        # A no-op after the solver's end; a lost sandbox raises (an error, never a score). The
        # attempt's own load hitting a limit is its outcome: graded a failure (resource_limit).
        with contextlib.suppress(ResourceLimitHit):
            await attempt.end()
        outcome = attempt.outcome
        golden = await host.golden.get(task)
        judge = None
        if task_rubrics(host.bench, task) and not host.config.skip_rubrics:
            grader = get_model(role="grader")
            judge = RubricJudge(grader_completion(grader), model=str(grader)).judge
        trajectory = attempt.trajectory
        graded = await grade(
            host.bench,
            task,
            golden,
            outcome.terminal_state,
            outcome.prefix + outcome.calls,
            initial=outcome.initial_state,
            final_message=trajectory.final_message if trajectory is not None else None,
            judge=judge,
            skip_rubrics=host.config.skip_rubrics,
            resource_limit=outcome.resource_limit,
        )
        verdict = graded.verdict
        metadata: dict[str, Any] = {
            "attempt_id": outcome.attempt_id,
            "repeat": outcome.repeat,
            "signature": verdict.signature,
            "finish_reason": trajectory.finish_reason if trajectory is not None else None,
            "strict": verdict.strict,
            "terminal_hash": verdict.terminal_hash,
            "golden_hash": verdict.golden_hash,
            "differences": [d.describe() for d in verdict.differences[:DIFFERENCES_SHOWN]],
            "differences_total": len(verdict.differences),
            "rubric_answers": [a.model_dump(mode="json") for a in verdict.rubric_answers],
            "resource_limit": verdict.resource_limit,
            "calls": len(outcome.calls),
        }
        return Score(
            value=1.0 if verdict.passed else 0.0,
            answer=metadata["finish_reason"],
            explanation=verdict.summary(),
            metadata=metadata,
        )

    return score
