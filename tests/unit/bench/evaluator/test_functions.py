"""How a test function's result becomes a verdict, a reward or a system error of its cause."""

from __future__ import annotations

import pytest

from bench.evaluator.functions import TestFunctionError, with_test_function
from judge import JudgeCall, TestFunctionResult, Verdict
from sandbox.evaluator import checked_reward
from sandbox.evaluator.container import NO_JUDGE


def verdict(strict: bool = True) -> Verdict:
    return Verdict(
        task_id="f.py:t",
        passed=strict,
        strict=strict,
        terminal_hash="a",
        golden_hash="a" if strict else "b",
        initial_hash="i",
        signature=None if strict else "no_state_change",
    )


@pytest.mark.parametrize(
    ("raw", "reward", "refused"),
    [
        (None, 1.0, None),
        (True, 1.0, None),
        (False, 0.0, None),
        (0.5, 0.5, None),
        (1, 1.0, None),
        ("0.7", 0.7, None),
        (2.0, None, "the test returned 2.0: a reward must be a number in [0, 1]"),
        ("abc", None, "the test returned 'abc': a reward must be a number in [0, 1]"),
        (float("nan"), None, "the test returned nan: a reward must be a number in [0, 1]"),
        ({"unsupported": "dict"}, None, "the test returned dict: a reward must be a number in [0, 1]"),
    ],
)
def test_rewards_are_checked(raw: object, reward: float | None, refused: str | None) -> None:
    assert checked_reward(raw) == (reward, refused)


def test_a_pass_keeps_its_reward_and_a_failure_is_a_test_assert() -> None:
    passed = with_test_function("f.py:t", verdict(), TestFunctionResult(result=True, reward=0.25))
    assert (passed.passed, passed.reward, passed.signature) == (True, 0.25, None)
    fail = TestFunctionResult(result=False, reward=0.0, lineno=7, line_content="    assert x", message="m")
    failed = with_test_function("f.py:t", verdict(), fail)
    assert (failed.passed, failed.reward, failed.signature) == (False, 0.0, "test_assert")
    assert failed.summary() == "fail [test_assert]; line 7: assert x: m"
    # the state's own signature when the state differs from golden
    assert with_test_function("f.py:t", verdict(strict=False), fail).signature == "no_state_change"


def test_system_errors_say_whose_fault() -> None:
    own = TestFunctionResult(
        result=False, reward=0.0, is_system_error=True, cause="test", lineno=3, line_content="  x[1]",
        error_type="KeyError", message="'nope'",
    )  # fmt: skip
    with pytest.raises(TestFunctionError) as err:
        with_test_function("f.py:t", verdict(), own)
    assert str(err.value) == "f.py:t: the test function ended in an error at line 3: x[1]: KeyError: 'nope'"
    assert (err.value.fault.cause, err.value.fault.retryable) == ("test function", False)
    model = own.model_copy(
        update={"cause": "judge", "judge_calls": [JudgeCall(system="s", user="u", error="boom")]}
    )
    assert TestFunctionError("f.py:t", model).fault.retryable  # the endpoint may answer next time
    none = model.model_copy(
        update={"judge_calls": [JudgeCall(system="s", user="u", error=f"{NO_JUDGE} (...)")]}
    )
    assert not TestFunctionError("f.py:t", none).fault.retryable  # no judge role: it would only fail again
