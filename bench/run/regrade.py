"""`tbx judge regrade RESULTS`: recompute every attempt's verdict from its
recorded states and trajectory, without running any agent.

Reads RESULTS/attempts/*.json (and any RESULTS/results.jsonl row whose
`attempt_file` points at an attempt record), judges each against the task's
golden end state (from the golden cache; replayed in a fresh sandbox when
missing, unless --no-replay), rewrites the record's `verdict` (and the
`passed` / `strict` / `signature` / `verdict` keys of its results.jsonl row, where
present) and prints a summary. Rubric answers recorded with the attempt are
reused; --rejudge-rubrics asks the judge model again. The rubric tasks of a
`--skip-rubrics` run (their rows say `rubrics_skipped`) are graded by the judge
once one is configured; without one they are judged on state alone again, and
the summary says how many still wait for a judge.

A task graded by its test function (bench.evaluator) has it run again in the
evaluator sandbox on the recorded attempt (the reference's `tb runtest`): the
context is rebuilt from the recorded states and the attempt's trajectory file.

`grade_record` reads a record and grades it through `bench.run.grading.grade`,
the one grading path (the run coordinator grades its outcomes with it too).
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from bench.dataset import Benchmark
from bench.evaluator.functions import FunctionRunner
from bench.rollout.trajectory import Trajectory
from bench.run.errors import GradingError
from bench.run.golden import GoldenStore
from bench.run.grading import JUDGE_ROLE, Graded, grade
from bench.run.recording import test_function_fields
from bench.run.results import RoleUsage
from bench.terminal_text import printable
from judge import (
    AttemptRecord,
    JudgeUnavailable,
    RubricJudge,
    Verdict,
    atomic_write,
    initial_state_of,
    read_attempt,
    terminal_state_of,
    write_attempt,
)


class RegradeError(RuntimeError):
    pass


class Change(BaseModel):
    attempt: str
    task_id: str
    before: str | None  # "pass" / "fail" / None (no verdict recorded)
    after: str


class RegradeSummary(BaseModel):
    attempts: int = 0
    regraded: int = 0
    passed: int = 0
    skipped_system_errors: int = 0
    errors: list[str] = Field(default_factory=list)
    changed: list[Change] = Field(default_factory=list)
    signatures: dict[str, int] = Field(default_factory=dict)
    per_task: dict[str, list[int]] = Field(default_factory=dict)  # task -> [passed, judged]
    golden_replays: int = 0
    rubrics_graded: int = 0  # attempts of a --skip-rubrics run whose rubrics the judge graded now
    rubrics_still_skipped: int = 0  # such attempts left on state alone: no judge configured
    # Rubric replies of the regraded verdicts the judge gave that could not be read
    # (never a yes), and in how many attempts.
    judge_errors: int = 0
    judge_error_attempts: int = 0
    # What the judge spent answering now (--rejudge-rubrics, or rubrics never answered).
    judge_usage: RoleUsage | None = None


async def grade_record(
    bench: Benchmark,
    record: AttemptRecord,
    base_dir: Path,
    store: GoldenStore,
    judge: RubricJudge | None = None,
    *,
    rejudge_rubrics: bool = False,
    skip_rubrics: bool = False,
    functions: FunctionRunner | None = None,
    trajectory: Trajectory | None = None,
    finish_reason: str | None = None,
) -> Graded:
    """Judge one attempt record (through `bench.run.grading.grade`). Rubric answers
    are taken from the record unless `rejudge_rubrics` (or none were recorded)
    and a judge is given. `skip_rubrics`: judge a rubric task on state alone.
    `functions` runs the test function of a task graded by one, on the recorded
    attempt (`trajectory`: its conversation, when the run kept it)."""
    task = bench.task(record.task_id)
    terminal = terminal_state_of(record, base_dir)
    if terminal is None and record.resource_limit is None:
        raise RegradeError(f"{record.attempt_id or record.task_id}: no terminal state recorded")
    initial = initial_state_of(record, base_dir)
    golden = await store.get(task)
    recorded = record.rubric_answers
    if recorded is None and record.verdict is not None and record.verdict.rubric_answers:
        recorded = record.verdict.rubric_answers
    try:
        graded = await grade(
            bench,
            task,
            golden,
            terminal,
            record.prefix + record.trajectory,  # every call that made the state (a prefix's too)
            initial=initial,
            final_message=record.final_message,
            domain=record.domain,
            recorded=None if rejudge_rubrics else recorded,
            judge=judge.judge if judge is not None else None,
            skip_rubrics=skip_rubrics,
            no_judge=f"{record.attempt_id or record.task_id}: no usable rubric answers recorded; "
            "pass --rejudge-rubrics and a judge model",
            resource_limit=record.resource_limit,
            functions=functions,
            trajectory=trajectory,
            attempt_id=record.attempt_id,
            finish_reason=finish_reason,  # its row's: a context_limit failure keeps its signature
        )
    except GradingError as exc:
        raise RegradeError(str(exc)) from None
    if graded.answers is not None and graded.answers is not recorded:
        record.rubric_answers = graded.answers
    return graded


def attempt_files(results: Path) -> list[Path]:
    files = {p.resolve() for p in (results / "attempts").glob("*.json")}
    files |= set(_rows_by_file(results))
    return sorted(files)


def _rows_by_file(results: Path) -> dict[Path, dict[str, Any]]:
    """results.jsonl rows by the attempt record they point at (resolved path)."""
    out = {}
    for row in _read_rows(results):
        ref = row.get("attempt_file")
        if isinstance(ref, str):
            p = Path(ref)
            out[(p if p.is_absolute() else results / p).resolve()] = row
    return out


def _read_rows(results: Path) -> list[dict[str, Any]]:
    path = results / "results.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _outcome(v: Verdict | None) -> str | None:
    return None if v is None else ("pass" if v.passed else "fail")


async def regrade(
    results: Path,
    bench: Benchmark,
    store: GoldenStore,
    judge: RubricJudge | None = None,
    *,
    rejudge_rubrics: bool = False,
    write: bool = True,
    concurrency: int = 2,
    functions: FunctionRunner | None = None,
) -> RegradeSummary:
    """`functions`: the runner of test functions (a task graded by one is an error
    without it); closed here."""
    try:
        return await _regrade(
            results,
            bench,
            store,
            judge,
            rejudge_rubrics=rejudge_rubrics,
            write=write,
            concurrency=concurrency,
            functions=functions,
        )
    finally:
        if functions is not None:
            await functions.aclose()


def _trajectory(results: Path, row: dict[str, Any]) -> Trajectory | None:
    ref = row.get("trajectory")
    if not isinstance(ref, str):
        return None
    try:
        return Trajectory.model_validate_json((results / ref).read_bytes())
    except (OSError, ValueError):
        return None


async def _regrade(
    results: Path,
    bench: Benchmark,
    store: GoldenStore,
    judge: RubricJudge | None,
    *,
    rejudge_rubrics: bool,
    write: bool,
    concurrency: int,
    functions: FunctionRunner | None,
) -> RegradeSummary:
    summary = RegradeSummary()
    files = attempt_files(results)
    rows = _rows_by_file(results)
    summary.attempts = len(files)
    verdicts: dict[Path, Verdict] = {}
    judge_spent: dict[Path, RoleUsage] = {}  # the judge's spend on answers asked now
    sem = asyncio.Semaphore(max(1, concurrency))
    signatures: Counter[str] = Counter()

    async def one(path: Path) -> None:
        async with sem:
            try:
                record = await asyncio.to_thread(read_attempt, path)
            except (OSError, ValueError) as exc:
                summary.errors.append(f"{path.name}: unreadable attempt record: {exc}")
                return
            if record.system_error:
                summary.skipped_system_errors += 1
                return
            before = _outcome(record.verdict)
            # A --skip-rubrics run's rubric task: graded now if there is a judge, else on state again.
            was_skipped = bool(rows.get(path, {}).get("rubrics_skipped")) and not record.rubric_answers
            try:
                graded = await grade_record(
                    bench,
                    record,
                    path.parent,
                    store,
                    judge,
                    rejudge_rubrics=rejudge_rubrics,
                    skip_rubrics=was_skipped and judge is None,
                    functions=functions,
                    trajectory=await asyncio.to_thread(_trajectory, results, rows.get(path, {})),
                    finish_reason=rows.get(path, {}).get("finish_reason"),
                )
            except JudgeUnavailable:
                raise
            except Exception as exc:  # one bad record is reported, the rest are regraded
                summary.errors.append(f"{path.name}: {exc.__class__.__name__}: {exc}")
                return
            verdict = graded.verdict
            spent = graded.judge_usage().get(JUDGE_ROLE)
            if spent is not None:
                judge_spent[path] = spent
                summary.judge_usage = (
                    spent if summary.judge_usage is None else summary.judge_usage.plus(spent)
                )
            summary.judge_errors += verdict.judge_errors
            summary.judge_error_attempts += verdict.judge_errors > 0
            summary.regraded += 1
            summary.passed += verdict.passed
            if was_skipped:
                if judge is None:
                    summary.rubrics_still_skipped += 1
                else:
                    summary.rubrics_graded += 1
                    rows[path]["rubrics_skipped"] = False
            counts = summary.per_task.setdefault(record.task_id, [0, 0])
            counts[0] += verdict.passed
            counts[1] += 1
            if verdict.signature:
                signatures[verdict.signature] += 1
            after = _outcome(verdict)
            assert after is not None
            if before != after:
                summary.changed.append(
                    Change(attempt=path.name, task_id=record.task_id, before=before, after=after)
                )
            verdicts[path] = verdict
            if write:
                record.verdict = verdict
                await asyncio.to_thread(write_attempt, path, record)

    await asyncio.gather(*(one(p) for p in files))
    summary.signatures = dict(sorted(signatures.items()))
    summary.changed.sort(key=lambda c: c.attempt)
    summary.errors.sort()
    summary.golden_replays = store.replays
    if write:
        _rewrite_rows(results, verdicts, rows, judge_spent)
    return summary


def _rewrite_rows(
    results: Path,
    verdicts: dict[Path, Verdict],
    graded_rows: dict[Path, dict[str, Any]],
    judge_spent: dict[Path, RoleUsage] | None = None,
) -> None:
    """Rewrite results.jsonl with the new verdicts (and the `rubrics_skipped` flags of
    `graded_rows`, the rows `regrade` read and updated). A row whose rubrics the judge
    answered now (`judge_spent`) gets that spend as its judge usage; the judge usage it
    had, for answers now replaced, moves to its `retried_usage` (spent all the same)."""
    rows = _read_rows(results)
    if not rows:
        return
    changed = False
    for row in rows:
        ref = row.get("attempt_file")
        if not isinstance(ref, str):
            continue
        p = Path(ref)
        path = (p if p.is_absolute() else results / p).resolve()
        v = verdicts.get(path)
        if v is None:
            continue
        fields = {
            "passed": v.passed,
            "strict": v.strict,
            "strict_match": v.strict,
            "differences": len(v.differences),
            "signature": v.signature,
            "rubrics_skipped": graded_rows.get(path, {}).get("rubrics_skipped"),
        }
        for key, value in fields.items():
            if key in row:
                row[key] = value
        for key in ("reward", "test_seconds", "judge_questions", "test_line", "test_message"):
            row.pop(key, None)
        row.update(test_function_fields(v))
        if "verdict" in row:
            row["verdict"] = v.model_dump(mode="json")
        if v.judge_errors or "judge_errors" in row:
            row["judge_errors"] = v.judge_errors
        spent = (judge_spent or {}).get(path)
        if spent is not None:
            _replace_judge_usage(row, spent)
        changed = True
    if changed:
        atomic_write(results / "results.jsonl", "".join(json.dumps(r) + "\n" for r in rows).encode())


def _replace_judge_usage(row: dict[str, Any], spent: RoleUsage) -> None:
    usage = row.get("usage") if isinstance(row.get("usage"), dict) else {}
    before = usage.get(JUDGE_ROLE) if isinstance(usage, dict) else None
    row["usage"] = {**(usage or {}), JUDGE_ROLE: spent.model_dump(mode="json")}
    if isinstance(before, dict):
        earlier = row.get("retried_usage") if isinstance(row.get("retried_usage"), dict) else {}
        old = RoleUsage.model_validate(before)
        if isinstance(earlier, dict) and isinstance(earlier.get(JUDGE_ROLE), dict):
            old = RoleUsage.model_validate(earlier[JUDGE_ROLE]).plus(old)
        row["retried_usage"] = {**(earlier or {}), JUDGE_ROLE: old.model_dump(mode="json")}


def format_summary(s: RegradeSummary) -> str:
    """The summary for a terminal: recorded ids and error texts escaped (bench.terminal_text)."""
    lines = [
        f"regraded {s.regraded}/{s.attempts} attempts: {s.passed} passed"
        + (f" ({s.passed / s.regraded:.1%} of those regraded)" if s.regraded else ""),
    ]
    if s.skipped_system_errors:
        lines.append(
            f"skipped {s.skipped_system_errors} attempts with system errors "
            "(failed attempts in the canonical score: tbx report)"
        )
    if s.signatures:
        lines.append("failure signatures: " + ", ".join(f"{k} {v}" for k, v in s.signatures.items()))
    if s.changed:
        lines.append(f"{len(s.changed)} verdicts changed:")
        lines += [
            printable(f"  {c.attempt} ({c.task_id}): {c.before or 'none'} -> {c.after}") for c in s.changed
        ]
    if s.rubrics_graded:
        lines.append(f"graded the rubrics of {s.rubrics_graded} attempts of a --skip-rubrics run")
    if s.rubrics_still_skipped:
        lines.append(
            f"{s.rubrics_still_skipped} attempts of a --skip-rubrics run still judged on state alone: "
            "configure a judge (--judge-model or TBX_JUDGE_MODEL) to grade their rubrics"
        )
    if s.judge_errors:
        lines.append(
            f"judge errors: {s.judge_errors} rubric replies could not be read, in {s.judge_error_attempts} "
            "attempts (each a failed rubric; the attempt pages show the replies)"
        )
    if s.judge_usage is not None:
        u = s.judge_usage
        lines.append(
            f"judge spent {u.input_tokens} input ({u.cached_tokens} cached) / {u.output_tokens} output tokens "
            f"in {(u.model_extra or {}).get('calls', 0)} requests"
        )
    if s.golden_replays:
        lines.append(f"golden states replayed: {s.golden_replays}")
    if s.errors:
        lines.append(f"{len(s.errors)} attempts could not be regraded:")
        lines += [f"  {printable(e)}" for e in s.errors]
    return "\n".join(lines)
