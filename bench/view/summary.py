"""What the tasks and task pages show of an attempt, and of a task across
attempts and runs: computed once per attempt while its page is written, so
the site is built in one pass over the attempts with only these in memory."""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass, field

from bench.view.diff import label
from bench.view.load import Attempt, slug

# mark letters on the strips (and in data/tasks.js)
PASS, FAIL, ERROR, NOT_RUN = "p", "f", "e", "n"


@dataclass
class Summary:
    run: int
    task_id: str
    repeat: int
    domain: str
    attempt_id: str
    href: str  # relative to the site root
    mark: str
    signature: str | None
    finish_reason: str | None
    user_turns: int | None
    agent_turns: int | None
    tool_calls: int | None
    tool_errors: int
    tokens: int
    cost: float | None
    duration: float | None
    labels: list[str] = field(default_factory=list)  # distinct difference labels (bench.view.diff.label)
    first_difference: str | None = None
    error: str | None = None
    retried_tokens: int = 0  # spent by the earlier tries of its (task, repeat) that were retried


def task_href(task_id: str) -> str:
    digest = hashlib.sha1(task_id.encode()).hexdigest()[:6]
    return f"tasks/{slug(task_id)[:80]}-{digest}.html"


def attempt_href(run: int, attempt_id: str) -> str:
    return f"attempts/r{run}/{slug(attempt_id)}.html"


def summarize(a: Attempt) -> Summary:
    row, rec, traj = a.row, a.record, a.trajectory
    verdict = rec.verdict if rec is not None else None
    passed = verdict.passed if verdict is not None else row.passed
    signature = (verdict.signature if verdict is not None else row.signature) if not passed else None
    mark = ERROR if row.system_error else PASS if passed else FAIL
    calls: int | None = None
    errors = 0
    if traj is not None:
        calls = len(traj.tool_calls)
        errors = sum(1 for c in traj.tool_calls if c.is_error or c.error_envelope)
    elif rec is not None and rec.trajectory:
        calls = len(rec.trajectory)
        errors = sum(1 for c in rec.trajectory if c.failed)
    differences = verdict.differences if verdict is not None else []
    return Summary(
        run=a.run.index,
        task_id=row.task_id,
        repeat=row.repeat,
        domain=row.domain,
        attempt_id=a.attempt_id,
        href=attempt_href(a.run.index, a.attempt_id),
        mark=mark,
        signature=None if row.system_error else signature,
        finish_reason=row.finish_reason or (traj.finish_reason if traj is not None else None),
        user_turns=len(traj.user_turns) if traj is not None else None,
        agent_turns=traj.agent_turns if traj is not None else None,
        tool_calls=calls,
        tool_errors=errors,
        tokens=sum(u.input_tokens + u.output_tokens for u in row.usage.values()),
        cost=row.cost(a.run.prices, roles=tuple(row.usage) or ("agent",), role_models=a.run.role_models),
        duration=sum(row.timings.values()) if row.timings else None,
        labels=list(dict.fromkeys(label(d) for d in differences)),
        first_difference=differences[0].describe() if differences else None,
        error=row.error,
        retried_tokens=sum(u.input_tokens + u.output_tokens for u in row.retried_usage.values()),
    )


@dataclass
class TaskRow:
    """One task across every run: what a tasks-page row shows."""

    task_id: str
    domain: str
    href: str
    runs: list[list[Summary | None]]  # per run, per repeat (None: no row for that repeat)

    def attempts(self) -> list[Summary]:
        return [s for per_run in self.runs for s in per_run if s is not None]

    def signatures(self) -> Counter[str]:
        return Counter(s.signature for s in self.attempts() if s.signature)

    def labels(self) -> Counter[str]:
        return Counter(lab for s in self.attempts() for lab in s.labels)

    def passes(self) -> tuple[int, int, int]:
        """(passed, valid attempts, system errors) over every run."""
        att = self.attempts()
        return (
            sum(s.mark == PASS for s in att),
            sum(s.mark in (PASS, FAIL) for s in att),
            sum(s.mark == ERROR for s in att),
        )

    def flaky(self) -> bool:
        """Passed some but not all valid attempts of at least one run."""
        for per_run in self.runs:
            marks = [s.mark for s in per_run if s is not None and s.mark != ERROR]
            if PASS in marks and FAIL in marks:
                return True
        return False


def task_rows(summaries: list[Summary], repeats: list[int]) -> list[TaskRow]:
    """Group attempt summaries by task; `repeats[i]` is run i's K."""
    by_task: dict[str, TaskRow] = {}
    for s in summaries:
        t = by_task.get(s.task_id)
        if t is None:
            t = TaskRow(
                task_id=s.task_id,
                domain=s.domain,
                href=task_href(s.task_id),
                runs=[[None] * k for k in repeats],
            )
            by_task[s.task_id] = t
        per_run = t.runs[s.run]
        while len(per_run) <= s.repeat:
            per_run.append(None)
        per_run[s.repeat] = s
    return sorted(by_task.values(), key=lambda t: t.task_id)
