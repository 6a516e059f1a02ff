"""The `TestContext` of an attempt, as the JSON the evaluator sandbox rebuilds `x`
from (spec thinkingbox-test-functions §5): the effects of each server, the last
assistant text, the tool calls with their replies, the messages.

Native domains give each server the reference's Bench effects (judge.bench_effects:
`result_db_hash`, `golden_db_hash`, `diff`, `rubrics_yesno` on the servers that carry
it), computed from tbx's states. A checkout's own servers report theirs
(`AttemptOutcome.server_effects`), passed in as `server_effects`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from bench.dataset import Benchmark, Task
from bench.rollout.trajectory import Message, Trajectory
from judge import YESNO_SERVERS, GoldenState, State, ToolCallView, effects_object

DONE = "<DONE>"


def native_effects(
    bench: Benchmark, task: Task, golden: GoldenState, initial: State | None, terminal: State | None
) -> dict[str, Any]:
    """server -> its Bench effects (one server per native task)."""
    out: dict[str, Any] = {}
    for server, cfg in bench.effective_inits(task).items():
        yesno = server in YESNO_SERVERS
        rubrics = cfg.raw.get("rubrics")
        out[server] = effects_object(
            initial if initial is not None else golden.initial_state,
            terminal,
            golden.final_state,
            rubrics={} if yesno and rubrics is None else rubrics,
            rubrics_yesno=list(cfg.rubrics_yesno) if yesno else None,
        )
    return out


def _text(role: str, content: str, **metadata: Any) -> dict[str, Any]:
    return {"T": "Text", "metadata": metadata, "role": role, "content": content}


def _call(name: str, arguments: Any, call_id: str, error: str | None = None) -> dict[str, Any]:
    args = arguments if isinstance(arguments, dict) else {}
    return {"T": "ToolCall", "metadata": {"error": error}, "name": name, "arguments": args, "id": call_id}


def _reply(name: str, content: str, call_id: str) -> dict[str, Any]:
    return {"T": "ToolResponse", "metadata": {}, "name": name, "content": content, "id": call_id}


def _arguments(raw: Any) -> tuple[dict[str, Any], str | None]:
    if isinstance(raw, dict):
        return raw, None
    try:
        parsed = json.loads(raw or "{}")
    except ValueError as exc:
        return {}, f"Error: {exc}"
    return (parsed, None) if isinstance(parsed, dict) else ({}, "Error: tool arguments must be an object")


def _messages(conversation: Sequence[Message]) -> list[dict[str, Any]]:
    """tbx's OpenAI-form conversation as the reference's typed messages (§5.6)."""
    out: list[dict[str, Any]] = []
    users = 0
    for m in conversation:
        if m.role == "user":
            meta = {"is_user_llm": True} if users else {}
            users += 1
            out.append(_text("user", m.content or "", **meta))
        elif m.role == "assistant":
            if m.content:
                meta = {"is_done": True} if m.content.rstrip().endswith(DONE) else {}
                out.append(_text("assistant", m.content, **meta))
            if m.tool_calls:
                calls = []
                for c in m.tool_calls:
                    fn = c.get("function") or {}
                    args, error = _arguments(fn.get("arguments"))
                    calls.append(_call(str(fn.get("name", "")), args, str(c.get("id") or ""), error))
                out.append({"T": "ParallelToolCall", "metadata": {}, "tool_calls": calls})
        elif m.role == "tool":
            out.append(_reply(m.name or "", m.content or "", m.tool_call_id or ""))
        elif m.role == "system":
            out.append(_text("system", m.content or ""))
    return out


def _tool_calls(trajectory: Trajectory | None, calls: Sequence[ToolCallView]) -> list[dict[str, Any]]:
    """Every call the agent made with its reply (§5.5): an end-turn tool's reply is ""."""
    if trajectory is None:
        return [
            {
                "tool_call": _call(c.tool, c.arguments, f"call_{i}"),
                "tool_response": _reply(c.tool, c.result, f"call_{i}"),
            }
            for i, c in enumerate(calls)
        ]
    out = []
    for c in trajectory.tool_calls:
        call_id = c.call_id or f"call_{c.index}"
        args, error = (c.arguments, None) if c.arguments is not None else _arguments(c.arguments_raw)
        reply = "" if c.builtin else c.result
        out.append(
            {
                "tool_call": _call(c.tool, args, call_id, error),
                "tool_response": _reply(c.tool, reply, call_id),
            }
        )
    return out


def test_context(
    *,
    effects: Mapping[str, Any],
    trajectory: Trajectory | None,
    calls: Sequence[ToolCallView] = (),
    final_message: str | None = None,
    session_id: str = "",
    init_result: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The TestContext as JSON, fields in the reference's order (§5.9). Without a
    trajectory (an old record) the messages are empty and the calls are the proxy's."""
    messages = _messages(trajectory.messages) if trajectory is not None else []
    texts = [m for m in messages if m["T"] == "Text" and m["role"] == "assistant"]
    if texts:
        response = texts[-1]["content"]
    else:
        response = (
            final_message if final_message is not None else (trajectory.final_message if trajectory else "")
        )
    return {
        "response": response or "",
        "tool_direct_responses": [],
        "effects": dict(effects),
        "tool_calls": _tool_calls(trajectory, calls),
        "messages": messages,
        "init_result": dict(init_result) if init_result is not None else {server: {} for server in effects},
        "session_id": session_id or "00000000-0000-0000-0000-000000000000",
        "metadata": {},
    }


test_context.__test__ = False  # type: ignore[attr-defined]  # not a pytest test
