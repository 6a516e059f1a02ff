"""The Session API's body limits as configured: the bodies read at once always have
room for one body of the largest size allowed (a larger --max-body must not make a
body that is under the limit unable to fit the in-flight budget)."""

from __future__ import annotations

import pytest

from bench.session_api.limits import BODIES_AT_ONCE, MIB, BodyLimits


@pytest.mark.parametrize("max_body", [1, 4 * MIB, 64 * MIB, 512 * MIB])
def test_the_in_flight_budget_follows_the_body_limit(max_body: int) -> None:
    limits = BodyLimits(max_body=max_body)
    assert limits.in_flight == BODIES_AT_ONCE * max_body >= max_body


def test_an_explicit_budget_stands() -> None:
    assert BodyLimits(max_body=4 * MIB, budget=10 * MIB).in_flight == 10 * MIB
