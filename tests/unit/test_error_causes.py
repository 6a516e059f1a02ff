"""A system error's recorded message says which part of the system failed (bench.run.causes)."""

from __future__ import annotations

import pytest

from bench.run.causes import CAUSES, cause_of, causes_text, count_causes

MESSAGES = [
    (
        "ModelEndpointError: agent model endpoint http://x/v1 (model m) still failing after 7 attempts",
        "model endpoint",
    ),
    (
        "SandboxGoneError: attempt a: sandbox gone: its postgres container tbx-1 (abc) exited with code 137",
        "container",
    ),
    (
        "ContainerStartError: sandbox start failed: its typesense container t (abc) was OOM-killed",
        "container",
    ),
    ("SandboxGoneError: attempt a: sandbox state unknown: cannot ask the Docker daemon (refused)", "node"),
    ("NetworkPoolExhaustedError: no free /27 subnet left in tbx's address range 10.213.0.0/16", "node"),
    ("DockerUnavailableError: cannot reach the Docker daemon", "node"),
    ("GoldenReplayError: golden replay of t failed", "golden replay"),
    ("JudgeUnavailable: judge endpoint down", "judge"),
    ("OperationalError: connection refused", "other"),
    ("no colon at all", "other"),
]


@pytest.mark.parametrize(("message", "cause"), MESSAGES)
def test_cause_of_a_recorded_message(message: str, cause: str) -> None:
    assert cause_of(message) == cause


def test_counts_come_in_a_fixed_order_and_leave_out_causes_with_none() -> None:
    counts = count_causes(m for m, _ in MESSAGES)
    assert list(counts) == [c for c in CAUSES if c in counts]
    assert counts == {
        "model endpoint": 1,
        "container": 2,
        "node": 3,
        "golden replay": 1,
        "judge": 1,
        "other": 2,
    }
    assert causes_text({"container": 2, "model endpoint": 1}) == "model endpoint 1, container 2"
    assert causes_text({}) == ""
