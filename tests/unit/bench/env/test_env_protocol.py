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
    assert set(env) == {"observation", "reward", "done", "metadata"}
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


# ---- what #27 item 2 lists, and malformed input (#29 finding 7) --------------------

PUBLISHED_OBSERVATION_FIELDS = {
    "kind",
    "task_uid",
    "task",
    "system_instructions",
    "bot_instructions",
    "tools",
    "messages",
    "tool_result",
    "tool_error",
    "tool_results",
    "user_message",
    "reward_type",
    "system_error",
    "test_summary",
    "steps_taken",
}


def test_observation_carries_the_published_fields_and_the_rest_in_metadata() -> None:
    obs = Observation.build(
        "tool", episode_id="ep-1", call_id="c1", tool_name="get_order", tool_result="{}", steps_taken=2
    )
    body = obs.envelope()["observation"]
    assert set(body) == PUBLISHED_OBSERVATION_FIELDS - {"tools"} | {"metadata"}
    assert body["metadata"] == {"episode_id": "ep-1", "call_id": "c1", "tool_name": "get_order"}
    assert body["tool_result"] == "{}" and body["steps_taken"] == 2
    assert obs.envelope()["metadata"] == body["metadata"]


def test_state_status_values() -> None:
    from typing import get_args

    from bench.env.protocol import EpisodeState, EpisodeStatus

    assert set(get_args(EpisodeStatus)) == {"idle", "active", "finalizing", "done", "closed", "error"}
    assert EpisodeState().status == "idle"


def test_reset_takes_the_published_fields_and_bounds_repeat() -> None:
    from bench.env.protocol import MAX_REPEAT

    req = ResetRequest.model_validate(
        {"test_uid": "t", "dataset": "d", "agent": "a", "config": {"x": 1}, "seed": -5}
    )
    assert (req.dataset, req.agent, req.seed, req.repeat) == ("d", "a", -5, None)
    for repeat in (MAX_REPEAT, 10**250, -1, "1"):
        with pytest.raises(ValueError):
            ResetRequest.model_validate({"test_uid": "t", "repeat": repeat})
    assert ResetRequest.model_validate({"test_uid": "t", "repeat": MAX_REPEAT - 1}).repeat == MAX_REPEAT - 1


@pytest.mark.parametrize(
    ("raw", "text"),
    [
        (b"\xff\xfe{}", "not UTF-8"),
        ("[" * 5000 + "]" * 5000, "nested deeper than"),
        ('{"a": ' * 2000 + "1" + "}" * 2000, "nested deeper than"),
        ('{"repeat": ' + "9" * 5000 + "}", "Invalid JSON"),
        ("{oops", "Invalid JSON"),
    ],
)
def test_malformed_json_is_invalid_json(raw: bytes | str, text: str) -> None:
    from bench.env.protocol import parse_json

    with pytest.raises(EnvError) as err:
        parse_json(raw)
    assert err.value.code == ErrorCode.INVALID_JSON and text in err.value.message


def test_brackets_inside_strings_are_not_nesting() -> None:
    from bench.env.protocol import parse_json

    text = '{"content": "' + "[{" * 500 + '", "n": [[1]]}'
    assert parse_json(text)["n"] == [[1]]
    assert parse_json(b'{"q": "a \\" [[[["}') == {"q": 'a " [[[['}


def test_parallel_calls_take_parse_error() -> None:
    batch = parse_action(
        {"type": "call_tool", "parallel_tool_calls": [{"name": "a", "arguments": "{", "parse_error": "bad"}]}
    )
    assert isinstance(batch, CallToolAction) and batch.calls()[0].parse_error == "bad"
