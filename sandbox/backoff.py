"""The one exponential backoff of tbx, built on tenacity: every retry loop waits
`first` · 2^(n-1) seconds before the try after n failed ones, at most `most`.

    AsyncRetrying(wait=exponential_backoff(0.25, 2.0), ...)  # a tenacity loop
    wait = exponential_backoff(1.0, 30.0)
    await asyncio.sleep(backoff_delay(wait, n))  # a loop of its own

Model endpoints, Docker removals, the wait for a restarted daemon and a run's
retries of a system error all wait this way (bench.llm.client, sandbox.
docker_client, bench.run.daemon, bench.run.retries). `jitter` draws each wait
from the upper half of its step, so clients that failed together do not come
back together.
"""

from __future__ import annotations

import random

from tenacity import RetryCallState, wait_exponential
from tenacity.wait import wait_base

__all__ = ["backoff_delay", "exponential_backoff"]


class _UpperHalf(wait_base):
    """`wait`'s step times a factor drawn from [0.5, 1)."""

    def __init__(self, wait: wait_base, rng: random.Random):
        self.wait, self.rng = wait, rng

    def __call__(self, retry_state: RetryCallState) -> float:
        return self.wait(retry_state) * (0.5 + 0.5 * self.rng.random())


def exponential_backoff(first: float, most: float, *, jitter: random.Random | None = None) -> wait_base:
    """tenacity's wait of `first` · 2^(n-1) s after n failed tries, at most `most`;
    `jitter`: drawn from the upper half of that, with this generator."""
    wait: wait_base = wait_exponential(multiplier=first, max=most)
    return wait if jitter is None else _UpperHalf(wait, jitter)


def backoff_delay(wait: wait_base, tries: int) -> float:
    """The seconds `wait` gives before the try after `tries` failed ones (at least 1),
    for a loop that is not tenacity's own."""
    state = RetryCallState(None, None, (), {})  # type: ignore[arg-type]  # no retrying object: only the count is read
    state.attempt_number = max(1, tries)
    return float(wait(state))
