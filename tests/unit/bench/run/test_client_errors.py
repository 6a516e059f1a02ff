"""bench.run.client_errors: what a client sees of a system error is its cause, its
kind and the attempt id, never a word of the message (issue #29, finding 1)."""

from __future__ import annotations

import pytest

from bench.run.client_errors import client_error_text, error_kind
from bench.run.golden import GoldenReplayError, check_golden_calls
from judge import ToolCallView

SECRET_ARGS = {"order_id": "ORD-SECRET-1", "amount": 123.45, "refund_reason": "the golden reason"}


def golden_replay_error() -> GoldenReplayError:
    """The real error of a golden call answered with an error envelope."""
    call = ToolCallView.from_reply("create_refund", SECRET_ARGS, '{"error": "refund window closed"}', False)
    with pytest.raises(GoldenReplayError) as failed:
        check_golden_calls("t1", [call])
    assert "ORD-SECRET-1" in str(failed.value)  # the evaluator's message does quote the call
    return failed.value


def test_a_golden_replay_error_reaches_the_client_as_cause_kind_and_reference() -> None:
    text = client_error_text(golden_replay_error(), "t1-r0-abc")
    assert text == (
        "system error (golden replay): GoldenReplayError in attempt t1-r0-abc; "
        "the full message is in the evaluator's errors.jsonl"
    )
    for secret in ("ORD-SECRET-1", "123.45", "golden reason", "refund window", "create_refund"):
        assert secret not in text


@pytest.mark.parametrize(
    ("error", "cause", "kind"),
    [
        (
            "SandboxGoneError: attempt a: its server container x exited with code 137",
            "container",
            "SandboxGoneError",
        ),
        ("SandboxGoneError: sandbox state unknown: cannot ask the Docker daemon", "node", "SandboxGoneError"),
        (
            "ModelEndpointError: user endpoint failed: private context 'my PIN is 1234'",
            "model endpoint",
            "ModelEndpointError",
        ),
        ("the rubric said: Did the agent refund 42?", "other", "Error"),
        ("", "other", "Error"),
    ],
)
def test_recorded_messages_give_only_their_cause_and_kind(error: str, cause: str, kind: str) -> None:
    text = client_error_text(error, "att-1")
    assert text.startswith(f"system error ({cause}): {kind} in attempt att-1;")
    rest = error.split(":", 1)[-1].strip()
    assert not rest or rest not in text


def test_an_exception_without_an_attempt_points_at_the_server_log() -> None:
    text = client_error_text(KeyError("golden value 7"), None)
    assert text == "system error (other): KeyError; the full message is in the server's log"
    assert error_kind(ValueError("x")) == "ValueError"
