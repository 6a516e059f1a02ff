"""The evaluator sandbox: a task's test function run in a container of its own, its
judge questions relayed to the rubric model by tbx (docs/test-functions.md)."""

from sandbox.evaluator.container import (
    EvaluatorContainer,
    EvaluatorPool,
    EvaluatorUnavailable,
    checked_reward,
    run_test_function,
)
from sandbox.evaluator.models import EvaluatorLimits, JudgeCall, TestFunctionResult

__all__ = [
    "EvaluatorContainer",
    "EvaluatorLimits",
    "EvaluatorPool",
    "EvaluatorUnavailable",
    "JudgeCall",
    "TestFunctionResult",
    "checked_reward",
    "run_test_function",
]
