"""How a task's test function ended (the reference's TestResult, spec
thinkingbox-test-functions §4, plus tbx's fields): what the evaluator sandbox
answers, what a verdict and an attempt record keep."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

# Why a test function's run is a system error: the test itself (an exception other than
# AssertionError, a limit it hit, a bad reward: a retry cannot cure it), the judge model
# (an endpoint failure: a retry may), or the evaluator sandbox (it could not be run).
ErrorCause = Literal["test", "judge", "evaluator"]
Limit = Literal["wall clock", "memory", "prints", "judge calls", "judge text", "protocol"]


class JudgeCall(BaseModel):
    """One question the test asked through the relay, and the model's text."""

    system: str
    user: str
    text: str | None = None
    error: str | None = None
    seconds: float = 0.0


class TestFunctionResult(BaseModel):
    """How one test function ended. `result`/`reward`/`is_system_error`/`tb`/`prints`/
    `lineno`/`line_content`/`metadata`: the reference's TestResult (spec §4); `reward`
    checked to be a number in [0, 1]. tbx's additions: `cause` and `limit` of a system
    error, `message` (the exception's text, an assert's message), `judge_calls`, `seconds`."""

    __test__ = False  # not a pytest test class
    model_config = ConfigDict(extra="ignore")

    result: bool
    reward: float
    is_system_error: bool = False
    tb: str = ""
    prints: str = ""
    lineno: int = -1
    line_content: str = ""
    metadata: dict[str, Any] = Field(default_factory=dict)
    cause: ErrorCause | None = None
    limit: Limit | None = None
    error_type: str | None = None
    message: str | None = None
    judge_calls: list[JudgeCall] = Field(default_factory=list)
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        return self.result and not self.is_system_error
