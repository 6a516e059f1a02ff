"""Failure signatures: the precedence table, recovery from tool errors, and
the verdict that assigns them."""

from __future__ import annotations

from typing import Any

import pytest

from judge import (
    Difference,
    Effects,
    GoldenState,
    InitialStateMismatch,
    RowEffect,
    RubricAnswer,
    State,
    StateShapeError,
    TableEffects,
    ToolCallView,
    decide,
    failure_signature,
    state_hash,
    unrecovered_errors,
)
from servers.engine.schema import f, table

OK = ToolCallView(tool="get_order", arguments={"id": "1"}, result='{"id": "1"}')
ENVELOPE = ToolCallView.from_reply(
    "create_refund",
    {"amount": "x"},
    '{"error": "Tool execution failed: bad", "tool": "create_refund"}',
    False,
)
MCP_ERROR = ToolCallView.from_reply("no_such_tool", {}, "Unknown tool: 'no_such_tool'", True)
REFUND_OK = ToolCallView.from_reply("create_refund", {"amount": "5"}, '{"refund_id": "RFD-1"}', False)

MISSING = Difference(kind="missing_effect", op="insert", table="t", key="1")
WRONG = Difference(kind="wrong_value", table="t", key="1", field="x", expected=1, actual=2)
EXTRA = Difference(kind="extra_effect", op="insert", table="t", key="2")
ORDER = Difference(kind="row_order", table="t", expected=["a", "b"], actual=["b", "a"])
CHANGED = Effects(tables={"t": TableEffects(inserted=[RowEffect(key="2", after={"id": "2"})])})
NONE = Effects()


def test_error_flags() -> None:
    assert ENVELOPE.error_envelope and not ENVELOPE.is_error and ENVELOPE.failed
    assert MCP_ERROR.is_error and not MCP_ERROR.error_envelope
    assert not ToolCallView.from_reply("t", {}, '{"error_rate": 1, "x": 2}', False).error_envelope
    assert not ToolCallView.from_reply("t", {}, "not json", False).failed


def test_recovery_is_a_later_success_of_the_same_tool() -> None:
    assert unrecovered_errors([ENVELOPE, OK]) == [0]
    assert unrecovered_errors([ENVELOPE, REFUND_OK]) == []
    assert unrecovered_errors([REFUND_OK, ENVELOPE]) == [1]
    assert unrecovered_errors([MCP_ERROR, ENVELOPE, OK, REFUND_OK]) == [0]
    assert unrecovered_errors([OK]) == []


# (differences, trajectory, effects) -> signature; one row per precedence rule and boundary.
PRECEDENCE: list[tuple[str, list[Difference], list[ToolCallView], Effects, str]] = [
    ("unrecovered error, nothing done", [MISSING], [ENVELOPE], NONE, "tool_use"),
    ("unrecovered error beats incomplete", [MISSING], [OK, ENVELOPE], CHANGED, "tool_use"),
    ("unrecovered error, state fine, rubric no", [], [MCP_ERROR], NONE, "tool_use"),
    ("wrong value beats tool error", [WRONG, MISSING], [ENVELOPE], CHANGED, "wrong_state_update"),
    ("extra effect", [EXTRA], [OK], CHANGED, "wrong_state_update"),
    ("extra beats missing", [EXTRA, MISSING], [REFUND_OK], CHANGED, "wrong_state_update"),
    ("row order", [ORDER], [OK], CHANGED, "wrong_state_update"),
    ("recovered error, nothing written", [MISSING], [ENVELOPE, REFUND_OK], NONE, "no_state_change"),
    ("no calls", [MISSING], [], NONE, "no_state_change"),
    ("some effects, some missing", [MISSING], [REFUND_OK], CHANGED, "incomplete_resolution"),
    ("state matched, rubric no", [], [OK], CHANGED, "rubric_failed"),
]


@pytest.mark.parametrize(
    ("name", "diffs", "trajectory", "effects", "want"), PRECEDENCE, ids=[r[0] for r in PRECEDENCE]
)
def test_precedence(
    name: str, diffs: list[Difference], trajectory: list[ToolCallView], effects: Effects, want: str
) -> None:
    assert failure_signature(diffs, trajectory, effects) == want


TABLES = [table("t", "id", [f("id", "str"), f("v", "int")])]


def golden_of(initial: State, final: State) -> GoldenState:
    return GoldenState(
        task_id="x", key="k", initial_state=initial, final_state=final,
        initial_hash=state_hash(initial), golden_hash=state_hash(final),
    )  # fmt: skip


INIT: State = {"t": [{"id": "1", "v": 1}]}
GOLD: State = {"t": [{"id": "1", "v": 2}]}


def yes(q: str) -> RubricAnswer:
    return RubricAnswer(question=q, answer="yes")


def test_verdict_pass_and_fail() -> None:
    g = golden_of(INIT, GOLD)
    v = decide("x", TABLES, g, GOLD, [OK], initial=INIT)
    assert v.passed and v.strict and v.signature is None and v.differences == []
    assert v.terminal_hash == v.golden_hash == state_hash(GOLD)
    assert v.effects.counts() == {"t": {"inserted": 0, "updated": 1, "deleted": 0}}
    v = decide("x", TABLES, g, INIT, [])
    assert not v.passed and not v.strict and v.signature == "no_state_change"
    assert [(d.kind, d.op, d.key, d.field) for d in v.differences] == [("missing_effect", "update", "1", "v")]
    assert v.summary().startswith("fail [no_state_change]; missing update t[1].v")


def test_verdict_rubrics() -> None:
    g = golden_of(INIT, GOLD)
    qs = ["q1", "q2"]
    v = decide("x", TABLES, g, GOLD, [OK], rubrics=qs, rubric_answers=[yes("q1"), yes("q2")])
    assert v.passed and v.rubrics_passed is True
    no = RubricAnswer(question="q2", answer="no", reason="r")
    v = decide("x", TABLES, g, GOLD, [OK], rubrics=qs, rubric_answers=[yes("q1"), no])
    assert not v.passed and v.strict and v.rubrics_passed is False and v.signature == "rubric_failed"
    broken = RubricAnswer(question="q2", answer=None, error="judge error: not JSON")
    v = decide("x", TABLES, g, GOLD, [OK], rubrics=qs, rubric_answers=[yes("q1"), broken])
    assert not v.passed and v.judge_errors == 1
    # State failure and rubric pass still fails.
    v = decide("x", TABLES, g, INIT, [OK], rubrics=qs, rubric_answers=[yes("q1"), yes("q2")])
    assert not v.passed and v.rubrics_passed is True
    with pytest.raises(ValueError, match="no answers"):
        decide("x", TABLES, g, GOLD, [OK], rubrics=qs)
    with pytest.raises(ValueError, match="do not match"):
        decide("x", TABLES, g, GOLD, [OK], rubrics=qs, rubric_answers=[yes("q2"), yes("q1")])


def test_verdict_rejects_foreign_states() -> None:
    g = golden_of(INIT, GOLD)
    with pytest.raises(InitialStateMismatch):
        decide("x", TABLES, g, GOLD, [], initial={"t": []})
    bad: dict[str, Any] = {"t": GOLD["t"], "u": []}
    with pytest.raises(StateShapeError):
        decide("x", TABLES, g, bad, [])
