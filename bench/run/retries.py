"""How often, and after how long, a run tries an attempt again after a system error.

A system error (a container killed, the daemon restarting, the model endpoint
out of retries) says nothing about the agent, so the run tries that
(task, repeat) again in a fresh sandbox, with exponential waits so a flapping
dependency gets time to come back. Two budgets: `max_retries` counts the tries
that reached the agent's turns; a try lost before them (its golden replay, the
checkout of its sandbox: a boot killed, a set lost while handed over) is
charged to `max_setup_retries` instead, so a machine slow enough that kills land
on boots does not eat the attempt's retries, and a boot that always fails still
ends. Errors a new try cannot change are written at once: a golden replay that
fails, rubrics without a judge; the error's class says which (`Fault.retryable`,
read by bench.run.causes.fault_of), never its name or its words.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from bench.defaults import MAX_RETRIES, MAX_SETUP_RETRIES
from sandbox import backoff_delay, exponential_backoff

__all__ = ["BEFORE_THE_AGENT", "RetryPolicy", "TriesSpent"]

# Where a failed try stood (bench.run.attempt.TryPhase) when the agent had not had a
# turn yet: such a try says nothing about the attempt and costs none of --max-retries.
BEFORE_THE_AGENT: frozenset[str] = frozenset({"golden", "checkout"})


class TriesSpent(BaseModel):
    """The failed tries of one (task, repeat) so far, by the budget they were charged to
    (a try the daemon's outage failed is in neither: bench.run.daemon)."""

    model_config = ConfigDict(frozen=True)

    charged: int = 0  # reached the agent's turns (or where it failed is not known)
    uncharged: int = 0  # lost before the agent's first turn

    @property
    def total(self) -> int:
        return self.charged + self.uncharged

    def plus(self, phase: str | None) -> TriesSpent:
        """These tries and one more that failed at `phase` (None: not known, charged)."""
        if phase in BEFORE_THE_AGENT:
            return TriesSpent(charged=self.charged, uncharged=self.uncharged + 1)
        return TriesSpent(charged=self.charged + 1, uncharged=self.uncharged)


class RetryPolicy(BaseModel):
    """`tbx run --max-retries N`: tries that reached the agent, `--max-setup-retries M`: tries
    lost before it (defaults: bench.defaults); waits `wait_first` · 2^(n-1) s, at most `wait_max`."""

    max_retries: int = Field(default=MAX_RETRIES, ge=0)
    max_setup_retries: int = Field(default=MAX_SETUP_RETRIES, ge=0)
    wait_first: float = Field(default=1.0, ge=0)
    wait_max: float = Field(default=30.0, ge=0)

    def again(self, spent: TriesSpent) -> bool:
        """After the failed tries `spent` (the last one included), may there be another?"""
        return spent.charged <= self.max_retries and spent.uncharged <= self.max_setup_retries

    def wait(self, tries: int) -> float:
        """Seconds before the try after `tries` failed ones (sandbox.backoff)."""
        return backoff_delay(exponential_backoff(self.wait_first, self.wait_max), tries)
