"""Grading a task on its checkout's own servers (golden None): the test function alone
decides, on the servers' effects; no golden hashes or differences are claimed; without
a test function or an evaluator the attempt is NoVerdictSource (a system error), and an
attempt whose own load hit a limit fails `resource_limit` without running the test."""

from __future__ import annotations

from typing import Any

import pytest

from bench.dataset.models import CHECK_CUSTOM, Task
from bench.run.errors import NoVerdictSource
from bench.run.grading import grade
from judge import TestFunctionResult

EFFECTS = {"airline_tau_bench": {"reservations": {"R1": {"cabin": "economy"}}}}


def _task(test_code: str | None = "def test_x(x, judge):\n    assert True\n") -> Task:
    return Task(
        id="airline.py:test_x",
        file="airline.py",
        uid="test_x",
        source="airline.py",
        scenario="s",
        domain="airline_tau_bench",
        query="q",
        checks=[CHECK_CUSTOM] if test_code else [],
        test_code=test_code,
    )


class Runner:
    """Stands in for the evaluator sandbox: answers `result`, keeps what it was given."""

    def __init__(self, result: TestFunctionResult):
        self.result = result
        self.contexts: list[dict[str, Any]] = []

    async def run(self, task: Task, context: dict[str, Any]) -> TestFunctionResult:
        self.contexts.append(context)
        return self.result


async def _grade(task: Task, runner: Any, **kw: Any) -> Any:
    return await grade(
        None,  # type: ignore[arg-type]  # the benchmark is not read on this path
        task,
        None,
        None,
        [],
        initial=None,
        final_message="done",
        functions=runner,
        server_effects=EFFECTS,
        init_results={"airline_tau_bench": {}},
        **kw,
    )


async def test_a_failing_test_is_test_assert_with_its_line_and_no_golden_claims() -> None:
    runner = Runner(
        TestFunctionResult(result=False, reward=0.0, lineno=12, line_content="assert x", message="no")
    )
    verdict = (await _grade(_task(), runner)).verdict
    assert not verdict.passed and verdict.signature == "test_assert" and verdict.reward == 0.0
    assert verdict.golden_hash == "" and verdict.differences == [] and not verdict.strict
    assert "line 12: assert x: no" in verdict.summary()
    assert runner.contexts[0]["effects"] == EFFECTS


async def test_a_passing_test_gives_its_reward() -> None:
    verdict = (await _grade(_task(), Runner(TestFunctionResult(result=True, reward=0.5)))).verdict
    assert verdict.passed and verdict.signature is None and verdict.reward == 0.5


async def test_a_limit_fails_resource_limit_without_running_the_test() -> None:
    runner = Runner(TestFunctionResult(result=True, reward=1.0))
    verdict = (await _grade(_task(), runner, resource_limit="memory")).verdict
    assert not verdict.passed and verdict.signature == "resource_limit" and runner.contexts == []


async def test_no_test_function_or_no_evaluator_is_no_verdict_source() -> None:
    with pytest.raises(NoVerdictSource, match="no test function"):
        await _grade(_task(None), Runner(TestFunctionResult(result=True, reward=1.0)))
    with pytest.raises(NoVerdictSource, match="runs none"):
        await _grade(_task(), None)
