"""The OpenEnv wire format of `tbx env serve` (bench.env.protocol): action parsing and
its error messages, the step-result envelope, the schemas."""

from __future__ import annotations

import pytest

from bench.env.episode import _tool_error
from bench.env.protocol import (
    CallToolAction,
    EnvError,
    ErrorCode,
    ListToolsAction,
    Observation,
    ResetRequest,
    SubmitMessageAction,
    parse_action,
    schemas,
)
from bench.rollout.trajectory import ToolCall


def test_actions_parse_by_type() -> None:
    assert isinstance(parse_action({"type": "list_tools"}), ListToolsAction)
    one = parse_action({"type": "call_tool", "tool_name": "get_order", "arguments": {"order_id": "1"}})
    assert isinstance(one, CallToolAction)
    assert [(c.name, c.arguments) for c in one.calls()] == [("get_order", {"order_id": "1"})]
    batch = parse_action(
        {
            "type": "call_tool",
            "parallel_tool_calls": [{"name": "a", "call_id": "x"}, {"name": "b", "arguments": "{}"}],
        }
    )
    assert isinstance(batch, CallToolAction) and [c.name for c in batch.calls()] == ["a", "b"]
    msg = parse_action({"type": "submit_message", "content": "hi", "terminal_tool_calls": [{"name": "done"}]})
    assert isinstance(msg, SubmitMessageAction) and msg.terminal_tool_calls[0].name == "done"


@pytest.mark.parametrize(
    ("data", "code", "text"),
    [
        ({"type": "teleport"}, ErrorCode.UNKNOWN_TYPE, "unknown action type 'teleport'"),
        ({}, ErrorCode.UNKNOWN_TYPE, "unknown action type None"),
        ([1], ErrorCode.VALIDATION_ERROR, "an action is a JSON object, got list"),
        ({"type": "call_tool"}, ErrorCode.VALIDATION_ERROR, "call_tool needs tool_name"),
        (
            {"type": "call_tool", "tool_name": "a", "parallel_tool_calls": [{"name": "b"}]},
            ErrorCode.VALIDATION_ERROR,
            "not both",
        ),
        ({"type": "call_tool", "parallel_tool_calls": []}, ErrorCode.VALIDATION_ERROR, "is empty"),
        ({"type": "list_tools", "surprise": 1}, ErrorCode.VALIDATION_ERROR, "surprise"),
        ({"type": "submit_message", "content": 5}, ErrorCode.VALIDATION_ERROR, "content"),
    ],
)
def test_bad_actions_say_what_is_wrong(data: object, code: ErrorCode, text: str) -> None:
    with pytest.raises(EnvError) as err:
        parse_action(data)
    assert err.value.code == code
    assert text in err.value.message
    assert err.value.payload()["code"] == code.value


def test_reset_request_validates() -> None:
    assert ResetRequest.model_validate({"test_uid": " t1 ", "seed": 3}).test_uid == "t1"
    for bad in ({}, {"test_uid": ""}, {"test_uid": "t", "repeat": -1}, {"test_uid": "t", "extra": 1}):
        with pytest.raises(ValueError):
            ResetRequest.model_validate(bad)


def test_envelope_is_openenv_step_result() -> None:
    obs = Observation(
        kind="terminal", done=True, reward=1.0, reward_type="pass", metadata={"signature": None}
    )
    env = obs.envelope()
    assert set(env) == {"observation", "reward", "done"}
    assert env["reward"] == 1.0 and env["done"] is True
    assert "reward" not in env["observation"] and env["observation"]["metadata"] == {"signature": None}


def test_schemas_cover_every_action() -> None:
    s = schemas()
    text = str(s["action"])
    assert all(t in text for t in ("list_tools", "call_tool", "submit_message"))
    assert "reward_type" in s["observation"]["properties"]


def test_tool_error_kinds() -> None:
    def rec(**kw: object) -> ToolCall:
        return ToolCall(index=0, tool="t", **kw)  # type: ignore[arg-type]

    assert _tool_error(rec(via_mcp=False, is_error=True), []) == "invalid_args"
    assert _tool_error(rec(is_error=False, result="{}"), []) is None
    assert (
        _tool_error(rec(is_error=True, result="Input validation error: 'x' is required"), [])
        == "invalid_args"
    )
    assert _tool_error(rec(is_error=True, result="boom"), []) == "execution_error"
    assert _tool_error(rec(error_envelope=True, result='{"error": "no such order"}'), []) == "execution_error"
