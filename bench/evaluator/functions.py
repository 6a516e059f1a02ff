"""Grade an attempt by running its task's test function (Task.runs_function) in the
evaluator sandbox, and fold how it ended into the verdict.

The test decides: a pass (a returned reward in [0, 1] kept beside it), a failure at
its assert's line, or a system error (`TestFunctionError`) of the test's own making
(cause `test function`: an exception, a limit, a bad reward; never retried) or of the
judge model's (cause `judge`: retried as any judge failure).
"""

from __future__ import annotations

import os
from typing import Any

from bench.dataset import Task
from bench.evaluator.relay import JudgeRelay
from bench.llm.config import RoleConfig
from judge import TestFunctionResult, Verdict
from sandbox import Fault, labels_for, new_id, require_image
from sandbox.evaluator import EVALUATOR_IMAGE, NO_JUDGE, EvaluatorLimits, EvaluatorPool, run_test_function

TEST_FAULT = Fault("test function", retryable=False)
JUDGE_FAULT = Fault("judge")


class TestFunctionError(RuntimeError):
    """The test function ended as a system error: `result` says how, `fault` whose."""

    __test__ = False  # not a pytest test class

    def __init__(self, task_id: str, result: TestFunctionResult):
        where = f" at line {result.lineno}: {result.line_content.strip()}" if result.lineno > 0 else ""
        what = result.message or (result.tb.strip().splitlines() or ["no result"])[-1]
        kind = f"{result.error_type}: " if result.error_type and result.error_type not in what else ""
        super().__init__(f"{task_id}: the test function ended in an error{where}: {kind}{what}"[:4000])
        self.result = result
        no_judge = any((c.error or "").startswith(NO_JUDGE) for c in result.judge_calls)
        if result.cause != "judge":
            self.fault = TEST_FAULT
        else:  # a run without a judge role would only fail again
            self.fault = Fault("judge", retryable=False) if no_judge else JUDGE_FAULT


class FunctionRunner:
    """Runs test functions for one run (or one regrade): its judge relay, its labels."""

    def __init__(
        self,
        run_id: str,
        judge_role: RoleConfig | None,
        *,
        limits: EvaluatorLimits | None = None,
        judge_type: str = "legacy",
        concurrency: int = 16,
    ):
        self.run_id = run_id
        self.concurrency = concurrency
        self._pool: EvaluatorPool | None = None
        self.relay = JudgeRelay(judge_role) if judge_role is not None else None
        self.limits = limits or EvaluatorLimits()
        self.judge_type = judge_type
        self._image: str | None = None

    @property
    def image(self) -> str:
        """The evaluator image's tag (ImageMissingError, a clear error, when it is not built)."""
        if self._image is None:
            self._image = require_image(EVALUATOR_IMAGE)
        return self._image

    @property
    def pool(self) -> EvaluatorPool:
        """Warm evaluator containers, one per test running at once (a clean slate between tests)."""
        if self._pool is None:
            labels = labels_for(self.run_id, new_id("evaluators"), "evaluator", os.getpid())
            self._pool = EvaluatorPool(self.image, labels, size=self.concurrency, limits=self.limits)
        return self._pool

    async def run(self, task: Task, context: dict[str, Any]) -> TestFunctionResult:
        assert task.test_code is not None
        return await run_test_function(
            task.test_code,
            context,
            ask=self.relay,
            labels=self.pool.labels,
            judge_type=self.judge_type,
            uid=task.id,
            pool=self.pool,
        )

    async def aclose(self) -> None:
        try:
            if self._pool is not None:
                await self._pool.close()
        finally:
            if self.relay is not None:
                await self.relay.aclose()


def with_test_function(task_id: str, verdict: Verdict, result: TestFunctionResult) -> Verdict:
    """The verdict the test function gives, the state's facts (differences, effects)
    kept beside it; a system error raises TestFunctionError."""
    if result.is_system_error:
        raise TestFunctionError(task_id, result)
    passed = result.result
    signature = None
    if not passed:
        signature = verdict.signature if not verdict.strict and verdict.signature else "test_assert"
    return verdict.model_copy(
        update={
            "passed": passed,
            "signature": signature,
            "test_function": result,
            "reward": result.reward if passed else 0.0,
        }
    )
