"""One grading path: for v1.0 tasks whose test bodies are only `validate_database(x)` /
`validate_rubrics_yesno(x, judge)`, the native judge stands in for running the function.
This checks that both give the same verdict: a sample of every v1.0 domain of the
checkout (both rubric files included) and the demo pack's 15 tasks, each graded on an
oracle outcome (terminal = golden end state) and a do-nothing outcome (terminal =
initial state), natively and by running a v1.0 test function in the evaluator
container (the task's own; a demo task, written in YAML, runs the code of a checkout
test of its scenario with the same checks, which no retail rubric task has), with a
judge stand-in answering Yes and one answering No.

The golden states come from the in-process replay (bench.replay.local) on the test
PostgreSQL; the test functions run in the real evaluator image."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest
from pg_support import DEMO_PACK

from bench.dataset import Benchmark, Task, load_benchmark
from bench.evaluator.context import native_effects, test_context
from bench.replay.local import fresh_schema, replay_task, seed_state
from bench.run.grading import judged
from judge import GoldenState, RubricAnswer, state_hash
from sandbox import labels as lbl
from sandbox import require_image
from sandbox.evaluator import EvaluatorPool, run_test_function
from servers.registry import load_domain

pytestmark = [pytest.mark.docker, pytest.mark.postgres]

REPO = Path(__file__).resolve().parents[3]
CHECKOUT = Path(os.environ.get("TBX_CHECKOUT") or REPO.parent / "shared/benchmarks/thinkingbox-data")
PER_FILE = 2  # tasks sampled from each v1.0 test file (spread over the file)
FINAL = "All done. <DONE>"


def sample(bench: Benchmark) -> list[Task]:
    by_file: dict[str, list[Task]] = {}
    for task in bench.tasks:
        by_file.setdefault(task.file, []).append(task)
    picked = []
    for tasks in by_file.values():
        step = max(len(tasks) // PER_FILE, 1)
        picked += tasks[::step][:PER_FILE]
    return picked


@pytest.fixture(scope="module")
def checkout() -> Benchmark:
    return load_benchmark(
        CHECKOUT, release="releases/thinkingbox_bench_v1/testlist_thinkingbox_bench_v1.yaml"
    )


@pytest.fixture(scope="module")
def demo() -> Benchmark:
    return load_benchmark(DEMO_PACK)


def cases_of(checkout: Benchmark, demo: Benchmark) -> list[tuple[Benchmark, Task, str]]:
    """(benchmark, task, the code string that grades it)."""
    out = [(checkout, t, t.test_code or "") for t in sample(checkout)]
    for task in demo.tasks:
        same = [t for t in checkout.tasks if t.scenario == task.scenario and t.checks == task.checks]
        if same:  # none for a retail rubric task: the reference's retail server has no rubrics_yesno
            out.append((demo, task, same[0].test_code or ""))
    return out


@pytest.fixture(scope="module")
def goldens(
    checkout: Benchmark, demo: Benchmark, make_database: Callable[[str], psycopg.Connection[Any]]
) -> dict[str, GoldenState]:
    out: dict[str, GoldenState] = {}
    conns: dict[str, psycopg.Connection[Any]] = {}
    for bench, task, _ in cases_of(checkout, demo):
        domain = load_domain(task.domain)
        if task.domain not in conns:
            conns[task.domain] = make_database(f"fidelity_{task.domain}")
            fresh_schema(conns[task.domain], domain.tables)
        init = bench.effective_init(task, domain.server)
        calls = [(c.tool or "", c.parameters) for c in init.golden_tool_interactions]
        rows = seed_state(domain, bench.seed(domain.module), init.data_patch)
        run = replay_task(conns[task.domain], domain, rows, calls, task_id=task.id, keep_states=True)
        assert not run.errors and run.initial is not None and run.final is not None
        out[task.id] = GoldenState(
            task_id=task.id,
            key="fidelity",
            initial_state=run.initial,
            final_state=run.final,
            initial_hash=state_hash(run.initial),
            golden_hash=state_hash(run.final),
        )
    return out


def native(bench: Benchmark, task: Task, golden: GoldenState, terminal: Any, yes: bool) -> bool:
    rubrics = list(bench.effective_init(task).rubrics_yesno) if task.has_rubrics else []
    answers = [RubricAnswer(question=q, answer="yes" if yes else "no") for q in rubrics]
    graded = judged(
        bench,
        task,
        golden,
        terminal,
        [],
        initial=golden.initial_state,
        rubrics=rubrics,
        answers=answers or None,
    )
    return graded.verdict.passed


def test_the_function_path_gives_the_native_verdict(
    checkout: Benchmark, demo: Benchmark, goldens: dict[str, GoldenState]
) -> None:
    graded = cases_of(checkout, demo)
    tasks = [t for b, t, _ in graded if b is checkout]
    assert {t.domain for t in tasks} == {"retail", "auto_insurance", "consulting", "travel", "neobank"}
    assert len({t.file for t in tasks}) == 7 and sum(t.has_rubrics for t in tasks) == 2 * PER_FILE
    assert not any(t.runs_function for t in tasks)  # v1.0 bodies are only the recognised calls
    demo_rubric_retail = [t for t in demo.tasks if t.domain == "retail" and t.has_rubrics]
    assert len(graded) - len(tasks) == 15 - len(demo_rubric_retail) >= 13  # the demo pack
    run = lbl.new_id("fidelity")
    cases = [
        (bench, task, code, outcome, yes)
        for bench, task, code in graded
        for outcome in ("oracle", "noop")
        for yes in ((True, False) if task.has_rubrics else (True,))
    ]

    async def function_path() -> list[bool]:
        labels = lbl.labels_for(run, lbl.new_id("pool"), "evaluator", os.getpid())
        pool = EvaluatorPool(require_image("evaluator"), labels, size=4)

        async def one(bench: Benchmark, task: Task, code: str, outcome: str, yes: bool) -> bool:
            golden = goldens[task.id]
            terminal = golden.final_state if outcome == "oracle" else golden.initial_state
            ctx = test_context(
                effects=native_effects(bench, task, golden, golden.initial_state, terminal),
                trajectory=None,
                final_message=FINAL,
            )

            async def ask(system: str, user: str) -> str:
                assert FINAL.replace("<", "&lt;").replace(">", "&gt;") in user
                return "Yes" if yes else "No"

            result = await run_test_function(code, ctx, ask=ask, labels=labels, pool=pool)
            assert not result.is_system_error, f"{task.id}: {result.tb}"
            return result.passed

        try:
            return list(await asyncio.gather(*(one(*c) for c in cases)))
        finally:
            await pool.close()

    by_function = asyncio.run(function_path())
    by_native = [
        native(
            b,
            t,
            goldens[t.id],
            goldens[t.id].final_state if o == "oracle" else goldens[t.id].initial_state,
            y,
        )
        for b, t, _, o, y in cases
    ]
    table = [(t.id, o, y, f, n) for (_, t, _, o, y), f, n in zip(cases, by_function, by_native, strict=True)]
    assert [row for row in table if row[3] != row[4]] == [], "function path and native judge disagree"
    # Oracle passes with a yes judge, fails with a no judge on rubric tasks; do-nothing fails
    # but on tasks whose golden calls change nothing.
    assert all(f for (_, o, y, f, _) in table if o == "oracle" and y)
    assert not any(f for (_, _, y, f, _) in table if not y)
    noop_passes = sum(f for (_, o, _, f, _) in table if o == "noop")
    print(
        f"fidelity: {len(table)} verdicts of {len(graded)} tasks, all equal; do-nothing passes {noop_passes}"
    )
