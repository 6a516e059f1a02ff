"""The verdict of one attempt: strict hash equality with golden (the
reference's rule, comparable with published ThinkingBox-Bench numbers), the
labelled differences, the rubric answers and, for a failure, its signature.

    verdict = decide(task_id, domain.tables, golden, terminal, trajectory,
                     initial=initial, rubrics=task.rubrics, rubric_answers=answers)

An attempt whose own calls drove its sandbox over a limit (memory, disk, time:
sandbox.proxy.loss) is a failure with the signature `resource_limit` whatever
its state (`limit_verdict`); its state's differences stay beside it when the
state could still be read.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from judge.canonical import State, state_hash
from judge.effects import StateShapeError, compute_effects, golden_differences
from judge.records import GoldenState, RubricAnswer, ToolCallView, Verdict
from judge.signature import failure_signature
from servers.engine.schema import TableSpec


class InitialStateMismatch(ValueError):
    """The attempt did not start from the state golden started from (a seeding
    problem: a system error, never the agent's failure)."""


def decide(
    task_id: str,
    tables: Iterable[TableSpec],
    golden: GoldenState,
    terminal: State,
    trajectory: Sequence[ToolCallView],
    *,
    initial: State | None = None,
    rubrics: Sequence[str] = (),
    rubric_answers: Sequence[RubricAnswer] | None = None,
) -> Verdict:
    """Judge one attempt. `initial` is the attempt's own state right after
    seeding (checked against golden's; golden's is used when omitted).
    A task with rubrics needs one answer per rubric, in order."""
    specs = list(tables)
    if initial is not None:
        initial_hash = state_hash(initial)
        if initial_hash != golden.initial_hash:
            raise InitialStateMismatch(
                f"{task_id}: attempt initial state {initial_hash[:12]} != golden initial state "
                f"{golden.initial_hash[:12]}"
            )
    if set(terminal) != set(golden.final_state):
        missing = sorted(set(golden.final_state) - set(terminal))
        extra = sorted(set(terminal) - set(golden.final_state))
        raise StateShapeError(
            f"{task_id}: terminal state tables differ from golden (missing {missing}, extra {extra})"
        )
    base = golden.initial_state
    answers = list(rubric_answers or [])
    if rubrics:
        if rubric_answers is None:
            raise ValueError(f"{task_id}: the task has {len(rubrics)} rubric(s) but no answers were given")
        if [a.question for a in answers] != list(rubrics):
            raise ValueError(f"{task_id}: rubric answers do not match the task's rubrics")
    terminal_hash = state_hash(terminal)
    strict = terminal_hash == golden.golden_hash
    differences = [] if strict else golden_differences(specs, base, terminal, golden.final_state)
    effects = compute_effects(specs, base, terminal)
    rubrics_passed = all(a.passed for a in answers) if rubrics else None
    passed = strict and rubrics_passed is not False
    return Verdict(
        task_id=task_id,
        passed=passed,
        strict=strict,
        terminal_hash=terminal_hash,
        golden_hash=golden.golden_hash,
        initial_hash=golden.initial_hash,
        differences=differences,
        effects=effects,
        rubric_answers=answers,
        rubrics_passed=rubrics_passed,
        signature=None if passed else failure_signature(differences, trajectory, effects),
        judge_errors=sum(1 for a in answers if a.answer is None),
    )


def limit_verdict(task_id: str, golden: GoldenState, cause: str, from_state: Verdict | None) -> Verdict:
    """The verdict of an attempt whose own load hit a limit (`cause`, in words): failed,
    signature `resource_limit`; `from_state`: its terminal state's verdict (differences,
    effects) when that state could be read, else None (no state diff)."""
    if from_state is None:
        return Verdict(
            task_id=task_id,
            passed=False,
            strict=False,
            terminal_hash="",
            golden_hash=golden.golden_hash,
            initial_hash=golden.initial_hash,
            signature="resource_limit",
            resource_limit=cause,
        )
    return from_state.model_copy(
        update={"passed": False, "signature": "resource_limit", "resource_limit": cause}
    )
