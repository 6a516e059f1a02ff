"""`tbx judge regrade RESULTS`: recompute every attempt's verdict from its
recorded states and trajectory, without running any agent.

Reads RESULTS/attempts/*.json (and any RESULTS/results.jsonl row whose
`attempt_file` points at an attempt record), judges each against the task's
golden end state (from the golden cache; replayed in a fresh sandbox when
missing, unless --no-replay), rewrites the record's `verdict` (and the
`passed` / `strict` / `signature` / `verdict` keys of its results.jsonl row, where
present) and prints a summary. Rubric answers recorded with the attempt are
reused; --rejudge-rubrics asks the judge model again.

`grade_record` is the one grading path: the runner calls it too.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from bench.dataset import Benchmark, Task, default_root, load_benchmark
from bench.llm.client import LLMClient
from bench.llm.config import ModelsConfigError, judge_role_from_env
from bench.llm.judge import rubric_judge
from bench.run.golden import GoldenStore
from judge.records import AttemptRecord, RubricAnswer, Verdict, atomic_write, read_attempt, write_attempt
from judge.rubric import JudgeUnavailable, RubricJudge
from judge.verdict import decide
from servers.registry import load_domain


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


def task_rubrics(bench: Benchmark, task: Task) -> list[str]:
    return list(bench.effective_init(task).rubrics_yesno) if task.has_rubrics else []


async def grade_record(
    bench: Benchmark,
    record: AttemptRecord,
    base_dir: Path,
    store: GoldenStore,
    judge: RubricJudge | None = None,
    *,
    rejudge_rubrics: bool = False,
) -> Verdict:
    """Judge one attempt record. Rubric answers are taken from the record
    unless `rejudge_rubrics` (or none were recorded) and a judge is given."""
    task = bench.task(record.task_id)
    terminal = record.load_terminal(base_dir)
    if terminal is None:
        raise RegradeError(f"{record.attempt_id or record.task_id}: no terminal state recorded")
    initial = record.load_initial(base_dir)
    golden = await store.get(task)
    rubrics = task_rubrics(bench, task)
    answers: list[RubricAnswer] | None = None
    if rubrics:
        recorded = record.rubric_answers
        if recorded is None and record.verdict is not None and record.verdict.rubric_answers:
            recorded = record.verdict.rubric_answers
        usable = recorded is not None and [a.question for a in recorded] == rubrics
        if usable and not rejudge_rubrics:
            answers = recorded
        elif judge is not None:
            answers = await judge.judge(rubrics, record.final_message)
            record.rubric_answers = answers
        else:
            raise RegradeError(
                f"{record.attempt_id or record.task_id}: no usable rubric answers recorded; "
                "pass --rejudge-rubrics and a judge model"
            )
    tables = load_domain(record.domain or task.domain).tables
    return decide(
        task.id,
        tables,
        golden,
        terminal,
        record.trajectory,
        initial=initial,
        rubrics=rubrics,
        rubric_answers=answers,
    )


def attempt_files(results: Path) -> list[Path]:
    files = {p.resolve() for p in (results / "attempts").glob("*.json")}
    for row in _read_rows(results):
        ref = row.get("attempt_file")
        if isinstance(ref, str):
            p = Path(ref)
            files.add((p if p.is_absolute() else results / p).resolve())
    return sorted(files)


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
) -> RegradeSummary:
    summary = RegradeSummary()
    files = attempt_files(results)
    summary.attempts = len(files)
    verdicts: dict[Path, Verdict] = {}
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
            try:
                verdict = await grade_record(
                    bench, record, path.parent, store, judge, rejudge_rubrics=rejudge_rubrics
                )
            except JudgeUnavailable:
                raise
            except Exception as exc:  # one bad record is reported, the rest are regraded
                summary.errors.append(f"{path.name}: {exc.__class__.__name__}: {exc}")
                return
            summary.regraded += 1
            summary.passed += verdict.passed
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
        _rewrite_rows(results, verdicts)
    return summary


def _rewrite_rows(results: Path, verdicts: dict[Path, Verdict]) -> None:
    rows = _read_rows(results)
    if not rows:
        return
    changed = False
    for row in rows:
        ref = row.get("attempt_file")
        if not isinstance(ref, str):
            continue
        p = Path(ref)
        v = verdicts.get((p if p.is_absolute() else results / p).resolve())
        if v is None:
            continue
        for key, value in (("passed", v.passed), ("strict", v.strict), ("signature", v.signature)):
            if key in row:
                row[key] = value
        if "verdict" in row:
            row["verdict"] = v.model_dump(mode="json")
        changed = True
    if changed:
        atomic_write(results / "results.jsonl", "".join(json.dumps(r) + "\n" for r in rows).encode())


def format_summary(s: RegradeSummary) -> str:
    lines = [
        f"regraded {s.regraded}/{s.attempts} attempts: {s.passed} passed"
        + (f" ({s.passed / s.regraded:.1%})" if s.regraded else ""),
    ]
    if s.skipped_system_errors:
        lines.append(f"skipped {s.skipped_system_errors} attempts with system errors")
    if s.signatures:
        lines.append("failure signatures: " + ", ".join(f"{k} {v}" for k, v in s.signatures.items()))
    if s.changed:
        lines.append(f"{len(s.changed)} verdicts changed:")
        lines += [f"  {c.attempt} ({c.task_id}): {c.before or 'none'} -> {c.after}" for c in s.changed]
    if s.golden_replays:
        lines.append(f"golden states replayed: {s.golden_replays}")
    if s.errors:
        lines.append(f"{len(s.errors)} attempts could not be regraded:")
        lines += [f"  {e}" for e in s.errors]
    return "\n".join(lines)


def regrade_command(args: argparse.Namespace) -> int:
    results = Path(args.results)
    if not results.is_dir():
        print(f"tbx judge regrade: {results} is not a directory", file=sys.stderr)
        return 2
    bench = load_benchmark(Path(args.dataset) if args.dataset else default_root(), strict=False)
    store = GoldenStore(bench, args.golden_cache, allow_replay=not args.no_replay, runtime=args.runtime)
    client = judge = None
    if args.rejudge_rubrics or args.judge_model:
        try:
            config = judge_role_from_env(model=args.judge_model, base_url=args.judge_base_url)
        except ModelsConfigError as exc:
            print(f"tbx judge regrade: {exc}", file=sys.stderr)
            return 2
        client = LLMClient(config, role="judge")
        judge = rubric_judge(client)

    async def run() -> RegradeSummary:
        try:
            return await regrade(
                results,
                bench,
                store,
                judge,
                rejudge_rubrics=args.rejudge_rubrics,
                write=not args.dry_run,
                concurrency=args.concurrency,
            )
        finally:
            if client is not None:
                await client.aclose()

    try:
        summary = asyncio.run(run())
    except JudgeUnavailable as exc:
        print(f"tbx judge regrade: {exc}", file=sys.stderr)
        return 3
    if args.json:
        print(summary.model_dump_json(indent=2))
    else:
        print(format_summary(summary))
    return 1 if summary.errors else 0
