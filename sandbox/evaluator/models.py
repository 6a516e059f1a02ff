"""The limits a test function runs under in the evaluator sandbox (how it ended:
judge.test_function, where verdicts live)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from judge import ErrorCause, JudgeCall, Limit, TestFunctionResult

__all__ = ["ErrorCause", "EvaluatorLimits", "JudgeCall", "Limit", "TestFunctionResult"]


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
