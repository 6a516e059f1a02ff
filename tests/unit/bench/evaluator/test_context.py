"""The TestContext of an attempt (spec thinkingbox-test-functions §5) from tbx's trajectory."""

from __future__ import annotations

from bench.evaluator.context import test_context as context_of
from bench.rollout.trajectory import Message, ToolCall, Trajectory
from judge import ToolCallView


def trajectory() -> Trajectory:
    call = {"id": "c1", "type": "function", "function": {"name": "cancel", "arguments": '{"id": "Z7"}'}}
    bad = {"id": "c2", "type": "function", "function": {"name": "cancel", "arguments": "{not json"}}
    return Trajectory(
        task_id="f.py:t",
        agent="llm",
        finish_reason="done",
        messages=[
            Message(role="user", content="cancel Z7"),
            Message(role="assistant", content="Checking.", tool_calls=[call, bad]),
            Message(role="tool", content='{"ok": true}', tool_call_id="c1", name="cancel"),
            Message(role="user", content="thanks"),
            Message(role="assistant", content="Cancelled. <DONE>"),
            Message(
                role="assistant",
                content=None,
                tool_calls=[
                    {"id": "c3", "type": "function", "function": {"name": "transfer", "arguments": "{}"}}
                ],
            ),
        ],
        tool_calls=[
            ToolCall(index=0, call_id="c1", tool="cancel", arguments={"id": "Z7"}, result='{"ok": true}'),
            ToolCall(
                index=1,
                call_id="c2",
                tool="cancel",
                arguments_raw="{not json",
                result="Error: bad",
                via_mcp=False,
            ),
            ToolCall(
                index=2, call_id="c3", tool="transfer", arguments={}, result="Transferred.", builtin=True
            ),
        ],
        final_message="Cancelled.",
    )


def test_the_context_keeps_what_the_reference_gives_a_test() -> None:
    ctx = context_of(effects={"srv": {"result_db_hash": "a"}}, trajectory=trajectory(), session_id="att-1")
    assert list(ctx) == [
        "response", "tool_direct_responses", "effects", "tool_calls", "messages", "init_result", "session_id", "metadata"
    ]  # fmt: skip
    # the last assistant text, <DONE> kept; an end-turn call after it does not replace it
    assert ctx["response"] == "Cancelled. <DONE>"
    calls = ctx["tool_calls"]
    assert [c["tool_call"]["name"] for c in calls] == ["cancel", "cancel", "transfer"]
    assert (
        calls[0]["tool_call"]["arguments"] == {"id": "Z7"}
        and calls[0]["tool_response"]["content"] == '{"ok": true}'
    )
    assert calls[1]["tool_call"]["arguments"] == {} and calls[1]["tool_call"]["metadata"]["error"].startswith(
        "Error: "
    )
    assert calls[2]["tool_response"]["content"] == ""  # an end-turn tool's reply is empty
    kinds = [(m["T"], m.get("role")) for m in ctx["messages"]]
    assert kinds == [
        ("Text", "user"), ("Text", "assistant"), ("ParallelToolCall", None), ("ToolResponse", None),
        ("Text", "user"), ("Text", "assistant"), ("ParallelToolCall", None),
    ]  # fmt: skip
    assert ctx["messages"][4]["metadata"] == {"is_user_llm": True}
    assert ctx["messages"][5]["metadata"] == {"is_done": True}
    assert ctx["init_result"] == {"srv": {}} and ctx["session_id"] == "att-1" and ctx["metadata"] == {}


def test_without_a_trajectory_the_proxys_calls_and_the_final_message() -> None:
    view = ToolCallView(tool="get", arguments={"k": 1}, result="v")
    ctx = context_of(effects={}, trajectory=None, calls=[view], final_message="bye")
    assert ctx["response"] == "bye" and ctx["messages"] == []
    assert ctx["tool_calls"][0]["tool_call"]["arguments"] == {"k": 1}
    assert ctx["tool_calls"][0]["tool_response"]["content"] == "v"
