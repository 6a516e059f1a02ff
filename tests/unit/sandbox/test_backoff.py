"""sandbox.backoff: the one exponential backoff every retry loop waits by."""

from __future__ import annotations

import random

import pytest
from tenacity import Retrying, retry_if_exception_type, stop_after_attempt

from bench.run.retries import RetryPolicy
from sandbox import backoff_delay, exponential_backoff


def test_the_steps_double_from_first_up_to_most() -> None:
    wait = exponential_backoff(1.0, 30.0)
    assert [backoff_delay(wait, n) for n in range(1, 8)] == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]
    assert backoff_delay(wait, 0) == 1.0  # before any failure counts as after the first


def test_jitter_draws_from_the_upper_half_of_each_step() -> None:
    wait = exponential_backoff(0.5, 7.0, jitter=random.Random(1))
    for n, step in ((1, 0.5), (2, 1.0), (3, 2.0), (5, 7.0)):
        for _ in range(50):
            assert step / 2 <= backoff_delay(wait, n) <= step


def test_a_tenacity_loop_sleeps_the_same_steps() -> None:
    slept: list[float] = []
    retrying = Retrying(
        wait=exponential_backoff(0.25, 1.0),
        stop=stop_after_attempt(5),
        retry=retry_if_exception_type(OSError),
        sleep=slept.append,
        reraise=True,
    )
    with pytest.raises(OSError):
        retrying(lambda: (_ for _ in ()).throw(OSError("down")))
    assert slept == [0.25, 0.5, 1.0, 1.0]


def test_a_runs_retry_waits_are_the_shared_backoff() -> None:
    policy = RetryPolicy(wait_first=1.0, wait_max=30.0)
    assert [policy.wait(n) for n in (1, 2, 3, 6)] == [1.0, 2.0, 4.0, 30.0]
