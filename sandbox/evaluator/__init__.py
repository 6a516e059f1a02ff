"""The evaluator sandbox: a task's test function run in a container of its own, its
judge questions relayed to the rubric model by tbx (docs/test-functions.md)."""

from sandbox.evaluator.container import IMAGE as EVALUATOR_IMAGE
from sandbox.evaluator.container import (
    NO_JUDGE,
    EvaluatorContainer,
    EvaluatorPool,
    EvaluatorUnavailable,
    checked_reward,
    run_test_function,
)
from sandbox.evaluator.models import EvaluatorLimits, JudgeCall, TestFunctionResult

__all__ = [
    "EVALUATOR_IMAGE",
    "NO_JUDGE",
    "EvaluatorContainer",
    "EvaluatorLimits",
    "EvaluatorPool",
    "EvaluatorUnavailable",
    "JudgeCall",
    "TestFunctionResult",
    "checked_reward",
    "run_test_function",
]
