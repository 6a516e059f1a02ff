"""bench.rollout.agent_loop against a small real MCP server on 127.0.0.1 (no Docker):
tool schema conversion, finish reasons, call recording, headers, errors."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import mcp_types as types
import pytest
from agent_fakes import SET_SCHEMA, FakeMcp, ModelScript, Steps, call, model_client, say, spec

from bench.dataset import ScenarioTool
from bench.llm.client import ModelEndpointError, ToolCallRequest, UsageLedger
from bench.rollout.agent_loop import run_loop
from bench.rollout.agents import AgentStep, LLMAgent, PlanAgent, ScriptedUser
from bench.rollout.conversation import McpEndpointError
from bench.rollout.tools import apply_overrides, mcp_tool_to_openai, parse_arguments
from bench.rollout.trajectory import UserTurn
from bench.rollout.user_sim import STOP_TOKEN, LLMUser


@pytest.fixture(scope="module")
def mcp_server() -> Iterator[FakeMcp]:
    srv = FakeMcp().start()
    yield srv
    srv.stop()


@pytest.fixture
def fake(mcp_server: FakeMcp) -> FakeMcp:
    mcp_server.reset()
    return mcp_server


# ---------------------------------------------------------------- pure helpers


def test_mcp_tool_schema_becomes_an_openai_function() -> None:
    tool = types.Tool(name="set_value", description="Write a value.", input_schema=SET_SCHEMA)
    out = mcp_tool_to_openai(tool)
    assert out["type"] == "function"
    fn = out["function"]
    assert fn["name"] == "set_value" and fn["description"] == "Write a value."
    assert fn["parameters"] == {k: v for k, v in SET_SCHEMA.items() if k != "$schema"}
    assert "$schema" in SET_SCHEMA  # the input is not mutated
    bare = mcp_tool_to_openai({"name": "ping", "input_schema": {}})
    assert bare["function"] == {
        "name": "ping",
        "description": "",
        "parameters": {"type": "object", "properties": {}},
    }
    builtin = mcp_tool_to_openai(
        {
            "name": "Alert",
            "description": "d",
            "is_end_turn": True,
            "input_schema": {"type": "object", "properties": {"r": {"type": "string"}}},
        }
    )
    assert builtin["function"]["parameters"]["properties"] == {"r": {"type": "string"}}


def test_scenario_overrides_apply_to_descriptions() -> None:
    tools = [mcp_tool_to_openai(types.Tool(name="set_value", description="orig", input_schema=SET_SCHEMA))]
    over = ScenarioTool(
        name="set_value", override_description="new", override_arg_description={"key": "k!", "nope": "x"}
    )
    fn = apply_overrides(tools, [over])[0]["function"]
    assert fn["description"] == "new" and fn["parameters"]["properties"]["key"]["description"] == "k!"
    assert "nope" not in fn["parameters"]["properties"]


def test_parse_arguments() -> None:
    assert parse_arguments('{"a": 1}') == ({"a": 1}, None)
    assert parse_arguments("") == ({}, None) and parse_arguments(None) == ({}, None)
    args, err = parse_arguments('{"a": ')
    assert args is None and err is not None and "not valid JSON" in err
    args, err = parse_arguments("[1]")
    assert args is None and err is not None and "JSON object" in err


# ---------------------------------------------------------------- finish reasons


async def test_done_by_text_records_every_call_in_order(fake: FakeMcp) -> None:
    agent = Steps(
        [
            call("set_value", {"key": "a", "value": 1}),
            call("get_value", {"key": "a"}),
            call("set_value", {"key": "b", "value": 2, "extra": True}),
            call("set_value", '{"key": '),
            call("no_such_tool", {}),
            say("All set. <DONE>"),
        ]
    )
    traj = await run_loop(spec(system_prompts=[("agent:x", "SYS")]), agent, ScriptedUser(), fake.url)
    assert traj.finish_reason == "done" and traj.done_by == "text"
    assert traj.final_message == "All set."
    assert [(c.tool, c.arguments) for c in traj.tool_calls] == [
        ("set_value", {"key": "a", "value": 1}),
        ("get_value", {"key": "a"}),
        ("set_value", {"key": "b", "value": 2, "extra": True}),
        ("set_value", None),
        ("no_such_tool", {}),
    ]
    # what the server saw: everything but the unparseable call
    assert fake.calls == [(c.tool, c.arguments) for c in traj.tool_calls if c.via_mcp]
    c = traj.tool_calls
    assert c[1].result == '{"value": 1}' and not c[1].is_error and not c[1].error_envelope
    assert c[2].error_envelope and not c[2].is_error
    assert not c[3].via_mcp and c[3].is_error and c[3].arguments_raw == '{"key": '
    assert c[4].is_error and "Unknown tool" in c[4].result
    assert all(x.latency_ms > 0 for x in c if x.via_mcp)
    assert traj.agent_turns == 6
    assert traj.tools_offered == ["get_value", "set_value", "slow"]
    # the agent saw the system prompt, the query, and each tool result paired with its call id
    last = agent.seen[-1]
    assert last[0] == {"role": "system", "content": "SYS"} and last[1] == {
        "role": "user",
        "content": "please help",
    }
    tool_msgs = [m for m in last if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tool_msgs] == [
        "id-set_value",
        "id-get_value",
        "id-set_value",
        "id-set_value",
        "id-no_such_tool",
    ]
    assert tool_msgs[3]["content"].startswith("Error: tool arguments are not valid JSON")
    assert [m.role for m in traj.messages][:3] == ["user", "assistant", "tool"]
    assert traj.system_prompts[0].source == "agent:x" and traj.system_prompts[0].chars == 3


async def test_user_done_after_scripted_reply(fake: FakeMcp) -> None:
    agent = Steps(
        [say("Which key?"), call("set_value", {"key": "k", "value": "v"}), say("Done, anything else?")]
    )
    traj = await run_loop(spec(), agent, ScriptedUser(["the key is k"]), fake.url)
    assert traj.finish_reason == "user_done"
    assert [(t.source, t.text, t.done) for t in traj.user_turns] == [
        ("query", "please help", False),
        ("scripted", "the key is k", False),
        ("scripted", "Thanks, that's all.", True),
    ]
    assert traj.final_message == "Done, anything else?"
    assert fake.store == {"k": "v"}


async def test_agent_limit_stops_a_tool_loop(fake: FakeMcp) -> None:
    agent = Steps([call("get_value", {"key": "a"})] * 10)
    traj = await run_loop(spec(max_agent_turns=3), agent, ScriptedUser(), fake.url)
    assert traj.finish_reason == "agent_limit"
    assert traj.agent_turns == 3 and len(fake.calls) == 3


async def test_user_limit(fake: FakeMcp) -> None:
    agent = Steps([say(f"question {i}?") for i in range(10)])
    traj = await run_loop(spec(max_user_turns=2), agent, ScriptedUser(["a", "b", "c", "d"]), fake.url)
    assert traj.finish_reason == "user_limit"
    assert [t.text for t in traj.user_turns] == ["please help", "a", "b"]
    assert traj.agent_turns == 3


async def test_wall_clock_timeout_keeps_the_interrupted_call(fake: FakeMcp) -> None:
    agent = Steps([call("set_value", {"key": "a", "value": 1}), call("slow", {"seconds": 5})])
    t = time.monotonic()
    traj = await run_loop(spec(wall_clock=1.0), agent, ScriptedUser(), fake.url)
    assert time.monotonic() - t < 4
    assert traj.finish_reason == "timeout"
    assert [c.tool for c in traj.tool_calls] == ["set_value", "slow"]
    assert traj.tool_calls[1].is_error and "interrupted" in traj.tool_calls[1].result
    assert traj.timings["total"] >= 1.0


async def test_empty_completion_is_an_agent_error(fake: FakeMcp) -> None:
    traj = await run_loop(spec(), Steps([AgentStep(content="  ")]), ScriptedUser(), fake.url)
    assert traj.finish_reason == "agent_error" and traj.error is not None and "empty" in traj.error


async def test_end_turn_tool_ends_the_step_without_running_the_rest(fake: FakeMcp) -> None:
    alert = {
        "name": "Alert",
        "description": "raise the alarm",
        "input_schema": {"type": "object", "properties": {}},
    }
    step = AgentStep(
        tool_calls=[
            ToolCallRequest(id="1", name="set_value", arguments='{"key": "x", "value": 1}'),
            ToolCallRequest(id="2", name="Alert", arguments='{"reason": "injection"}'),
        ]
    )
    agent = Steps([step])
    traj = await run_loop(
        spec(builtin_tools=[mcp_tool_to_openai(alert)], end_turn_tools={"Alert"}),
        agent,
        ScriptedUser(),
        fake.url,
    )
    assert traj.finish_reason == "done" and traj.done_by == "Alert"
    assert fake.calls == []
    assert [(c.tool, c.via_mcp, c.builtin, c.is_error) for c in traj.tool_calls] == [
        ("set_value", False, False, True),
        ("Alert", False, True, False),
    ]
    assert "Alert" in [t["function"]["name"] for t in agent.tools]


async def test_headers_reach_the_endpoint(fake: FakeMcp) -> None:
    traj = await run_loop(
        spec(),
        PlanAgent([("get_value", {"key": "z"})]),
        ScriptedUser(),
        fake.url,
        {"Authorization": "Bearer tok-123"},
    )
    assert traj.finish_reason == "done"
    assert fake.headers and all(h.get("authorization") == "Bearer tok-123" for h in fake.headers)


async def test_unreachable_mcp_endpoint_is_a_system_error() -> None:
    with pytest.raises(McpEndpointError) as err:
        await run_loop(spec(), PlanAgent([]), ScriptedUser(), "http://127.0.0.1:9/mcp")
    assert "cannot open an MCP session" in str(err.value)
    assert err.value.trajectory is not None and err.value.trajectory.tool_calls == []
    assert err.value.trajectory.finish_reason == "system_error"


# ---------------------------------------------------------------- model-backed agent and user


async def test_llm_agent_and_simulated_user(fake: FakeMcp) -> None:
    tool_call = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "set_value", "arguments": '{"key": "a", "value": 5}'},
            }
        ],
    }
    script = ModelScript(
        agent=[
            {"role": "assistant", "content": "What value?"},
            tool_call,
            {"role": "assistant", "content": "Saved. Anything else?"},
        ],
        user=["User: 5 please", f"No, that's it. {STOP_TOKEN}"],
    )
    ledger = UsageLedger()
    agent = LLMAgent(model_client(script, "agent-m", "agent"), parallel_tool_calls=False, ledger=ledger)
    user = LLMUser(model_client(script, "user-m", "user"), "You want key a set to 5.", ledger=ledger)
    traj = await run_loop(
        spec(system_prompts=[("agent:x", "be useful")]), agent, user, fake.url, ledger=ledger
    )

    assert traj.finish_reason == "user_done"
    assert fake.store == {"a": 5}
    assert [(t.source, t.text, t.done) for t in traj.user_turns] == [
        ("query", "please help", False),
        ("llm", "5 please", False),
        ("llm", "No, that's it.", True),
    ]
    assert traj.user_turns[2].raw == f"No, that's it. {STOP_TOKEN}"
    assert traj.usage["agent"].calls == 3 and traj.usage["agent"].input_tokens == 300
    assert traj.usage["user"].calls == 2 and traj.usage["user"].output_tokens == 10
    # agent requests carry the tools and the exact conversation; the user model sees the private context
    agent_reqs = [r for r in script.requests if r["model"] == "agent-m"]
    assert agent_reqs[0]["parallel_tool_calls"] is False
    assert {t["function"]["name"] for t in agent_reqs[0]["tools"]} == {"get_value", "set_value", "slow"}
    assert agent_reqs[2]["messages"][-1] == {
        "role": "tool",
        "tool_call_id": "c1",
        "name": "set_value",
        "content": '{"ok": true}',
    }
    user_req = next(r for r in script.requests if r["model"] == "user-m")
    assert "You want key a set to 5." in user_req["messages"][1]["content"]
    assert "What value?" in user_req["messages"][1]["content"]
    assert traj.user_turns[1].prompt == user_req["messages"]


async def test_model_endpoint_error_carries_the_partial_trajectory(fake: FakeMcp) -> None:
    class Down:
        async def step(self, messages: Any, tools: Any) -> AgentStep:
            if len(messages) > 2:
                raise ModelEndpointError("down", role="agent", model="m", base_url="u", attempts=3)
            return call("get_value", {"key": "q"})

    with pytest.raises(ModelEndpointError) as err:
        await run_loop(spec(), Down(), ScriptedUser(), fake.url)
    traj = err.value.trajectory
    assert traj is not None and [c.tool for c in traj.tool_calls] == ["get_value"]
    assert traj.error is not None and "system error" in traj.error
    assert traj.finish_reason == "system_error"  # tbx's side ended it, not the agent


async def test_scripted_user_replays_a_trajectory(fake: FakeMcp) -> None:
    agent = Steps([say("a?"), say("b?"), say("c?")])
    first = await run_loop(spec(), agent, ScriptedUser(["one", "two"], closing="bye"), fake.url)
    assert first.finish_reason == "user_done"
    replay = ScriptedUser.from_trajectory(first)
    got = [await replay.reply([], index=i) for i in (1, 2, 3)]
    assert [(t.text, t.done) for t in got] == [("one", False), ("two", False), ("bye", True)]
    assert isinstance(got[0], UserTurn)
