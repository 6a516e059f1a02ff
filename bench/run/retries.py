"""How often, and after how long, a run tries an attempt again after a system error.

A system error (a container killed, the daemon restarting, the model endpoint
out of retries) says nothing about the agent, so the run tries that
(task, repeat) again in a fresh sandbox, up to `max_retries` more times, with
exponential waits so a flapping dependency gets time to come back. Errors a
new try cannot change are written at once: a golden replay that fails, rubrics
without a judge; the error's class says which (`Fault.retryable`, read by
bench.run.causes.fault_of), never its name or its words.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from sandbox import backoff_delay, exponential_backoff

__all__ = ["RetryPolicy"]


class RetryPolicy(BaseModel):
    """`tbx run --max-retries N` (default 2); waits `wait_first` · 2^(n-1) s, at most `wait_max`."""

    max_retries: int = Field(default=2, ge=0)
    wait_first: float = Field(default=1.0, ge=0)
    wait_max: float = Field(default=30.0, ge=0)

    def again(self, tries: int) -> bool:
        """After `tries` tries in all, may there be another?"""
        return tries <= self.max_retries

    def wait(self, tries: int) -> float:
        """Seconds before the try after `tries` failed ones (sandbox.backoff)."""
        return backoff_delay(exponential_backoff(self.wait_first, self.wait_max), tries)
