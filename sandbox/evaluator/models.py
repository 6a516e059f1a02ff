"""What crosses the evaluator sandbox's boundary: the limits a test function runs
under, and how it ended (the reference's TestResult plus tbx's fields)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

# Why a test function's run is a system error: the test itself (an exception other than
# AssertionError, a limit it hit, a bad reward: a retry cannot cure it), the judge model
# (an endpoint failure: a retry may), or the evaluator sandbox (it could not be run).
ErrorCause = Literal["test", "judge", "evaluator"]
Limit = Literal["wall clock", "memory", "prints", "judge calls", "judge text", "protocol"]


class EvaluatorLimits(BaseModel):
    """One test function's bounds (the container's and the relay's)."""

    model_config = ConfigDict(frozen=True)

    start_seconds: float = 60.0  # from `docker run` to the worker's first line (else: the container's fault)
    wall_seconds: float = 30.0  # the test's own time; waiting on the judge model is not counted
    memory_bytes: int = 512 << 20  # the test process's address space (MemoryError past it)
    container_memory: str = "768m"  # the container's cgroup, a backstop above it
    cpus: float = 1.0
    pids: int = 32
    tmp_bytes: int = 16 << 20  # /tmp, the one writable place
    prints: int = 1 << 20  # characters of print/stdout/stderr output
    judge_calls: int = 32  # judge questions per test
    judge_text: int = 256 << 10  # characters of one judge question (system + user)
    line_bytes: int = 8 << 20  # one protocol line from the worker


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
