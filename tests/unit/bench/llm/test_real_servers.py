"""tbx against stub endpoints on 127.0.0.1 that behave as real OpenAI-compatible servers do
(tests/unit/llama_like.py; issue 43): no key where none is needed, tool_choice, content "",
validation refusals versus transient 500s, context overflow, busy versus down, the wall
clock that stops while the endpoint works, per-role concurrency."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from agent_fakes import FakeMcp, spec
from llama_like import MODEL_PATH, LlamaLike

from bench.env.endpoint_probe import ProbeCache, probe
from bench.llm.client import INCOMPATIBLE, ContextLimitExceeded, LLMClient, ModelEndpointError
from bench.llm.config import RoleConfig
from bench.rollout.agent_loop import run_loop
from bench.rollout.agents import LLMAgent, ScriptedUser
from bench.run.causes import fault_of

TOOL = {
    "type": "function",
    "function": {
        "name": "get_value",
        "parameters": {"type": "object", "properties": {"key": {"type": "string"}}},
    },
}
CALL = {"id": "call_1", "type": "function", "function": {"name": "get_value", "arguments": '{"key": "a"}'}}


@pytest.fixture
def server() -> Iterator[LlamaLike]:
    srv = LlamaLike().start()
    srv.tool_call = CALL
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def mcp_server() -> Iterator[FakeMcp]:
    srv = FakeMcp().start()
    yield srv
    srv.stop()


def role(url: str, **kw: Any) -> RoleConfig:
    base: dict[str, Any] = {
        "base_url": url,
        "model": "agent-model",
        "api_key_env": "TBX_TEST_UNSET_KEY",
        "backoff_initial": 0.01,
        "backoff_max": 0.02,
        "max_retries": 3,
    }
    return RoleConfig(**{**base, **kw})


async def working_on(server: LlamaLike, n: int) -> None:
    """Until the server holds its `n`th completion (its one slot taken)."""
    while len(server.requests) < n:
        await asyncio.sleep(0.02)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_local_server_gets_no_authorization_header_tool_choice_and_empty_content(
    server: LlamaLike, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TBX_TEST_UNSET_KEY", raising=False)
    async with LLMClient(role(server.url)) as client:
        first = await client.chat([{"role": "user", "content": "hi"}], tools=[TOOL])
        assert [tc.name for tc in first.tool_calls] == ["get_value"]  # honoured: tool_choice was sent
        messages = [
            {"role": "user", "content": "hi"},
            first.assistant_message(),
            {"role": "tool", "tool_call_id": "call_1", "content": "1"},
        ]
        second = await client.chat(messages, tools=[TOOL])  # refused with 500 if content were null
    assert second.content == "I can help with that."
    assert all("authorization" not in h for h in server.headers)
    assert [r["tool_choice"] for r in server.requests] == ["auto", "auto"]
    assert server.requests[1]["messages"][1]["content"] == ""


async def test_tool_choice_omit_sends_none_and_such_a_server_ignores_the_tools(server: LlamaLike) -> None:
    async with LLMClient(role(server.url, tool_choice="omit")) as client:
        result = await client.chat([{"role": "user", "content": "hi"}], tools=[TOOL])
    assert "tool_choice" not in server.requests[0] and result.tool_calls == []
    async with LLMClient(role(server.url, tool_choice="required")) as client:
        await client.chat([{"role": "user", "content": "hi"}], tools=[TOOL])
        await client.chat([{"role": "user", "content": "no tools"}])
    assert server.requests[1]["tool_choice"] == "required" and "tool_choice" not in server.requests[2]


async def test_a_validation_refusal_is_an_incompatibility_at_once_not_retried(server: LlamaLike) -> None:
    async with LLMClient(role(server.url)) as client:
        with pytest.raises(ModelEndpointError) as err:
            await client.chat([{"role": "user", "content": "hi"}, {"role": "assistant", "content": None}])
    assert len(server.requests) == 1 and err.value.attempts == 1
    assert fault_of(err.value) == INCOMPATIBLE and not INCOMPATIBLE.retryable
    assert INCOMPATIBLE.cause == "model endpoint incompatible"
    assert "Input should be a valid string" in str(err.value) and "HTTP 500" in str(err.value)


async def test_a_transient_500_is_still_retried(server: LlamaLike) -> None:
    server.fail_500 = ["CUDA out of memory", "internal error"]
    async with LLMClient(role(server.url)) as client:
        result = await client.chat([{"role": "user", "content": "hi"}])
    assert result.content and result.usage.attempts == 3
    server.fail_500 = ["overloaded"] * 4
    async with LLMClient(role(server.url)) as client:
        with pytest.raises(ModelEndpointError) as err:
            await client.chat([{"role": "user", "content": "hi"}])
    assert err.value.attempts == 4 and fault_of(err.value).cause == "model endpoint"
    assert fault_of(err.value).retryable


async def test_context_overflow_is_the_agents_context_limit(server: LlamaLike, mcp_server: FakeMcp) -> None:
    server.context_chars = 3000  # the query fits; the conversation after a few tool calls does not
    mcp_server.reset()
    async with LLMClient(role(server.url)) as client:
        with pytest.raises(ContextLimitExceeded):
            await client.chat([{"role": "user", "content": "x" * 4000}])
        before = len(server.requests)
        traj = await run_loop(spec(), LLMAgent(client), ScriptedUser(["again"] * 20), mcp_server.url)
    assert traj.finish_reason == "context_limit"
    assert traj.error is not None and "maximum context length" in traj.error
    assert len(server.requests) - before == traj.agent_turns + 1  # the refused request was not retried
    assert traj.tool_calls  # what the agent did before is kept


async def test_the_wall_clock_stops_while_the_endpoint_works(server: LlamaLike, mcp_server: FakeMcp) -> None:
    server.slow = 0.8  # two completions take longer than the whole wall clock
    server.tool_call = None
    mcp_server.reset()
    async with LLMClient(role(server.url)) as client:
        traj = await run_loop(
            spec(wall_clock=1.2, max_agent_turns=2),
            LLMAgent(client),
            ScriptedUser(["more"] * 5),
            mcp_server.url,
        )
    assert traj.finish_reason == "agent_limit"  # not timeout: the time was the endpoint's
    assert traj.timings["model_wait"] >= 2 * 0.8 and traj.timings["total"] >= traj.timings["model_wait"]


async def test_max_concurrency_queues_requests_outside_the_agents_clock(server: LlamaLike) -> None:
    server.slow = 0.2
    in_flight = 0
    most = 0
    lock = threading.Lock()
    original = server.answer

    def counting(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        nonlocal in_flight, most
        with lock:
            in_flight += 1
            most = max(most, in_flight)
        try:
            return original(body)
        finally:
            with lock:
                in_flight -= 1

    server.answer = counting  # type: ignore[method-assign]
    async with LLMClient(role(server.url, max_concurrency=1)) as client:
        results = await asyncio.gather(
            *(client.chat([{"role": "user", "content": str(i)}]) for i in range(3))
        )
    assert most == 1 and all(r.content for r in results)
    # latency is the endpoint's own time, not the time queued for a slot (queued: 200, 400, 600 ms)
    latencies = [r.usage.latency_ms for r in results]
    assert max(latencies) < 2 * min(latencies)


async def test_a_busy_server_is_busy_not_unreachable_and_a_closed_port_is_down(server: LlamaLike) -> None:
    server.slow = 1.5
    cfg = role(server.url, model=MODEL_PATH)
    client = LLMClient(cfg)
    working = asyncio.create_task(client.chat([{"role": "user", "content": "long job"}]))
    await working_on(server, 1)
    t = time.monotonic()
    waited = await probe("agent", cfg)  # waits as long as the role's timeout: answered after the job
    assert waited.ok and time.monotonic() - t >= 1.0
    assert waited.server == {"models": [{"id": MODEL_PATH, "owned_by": "me"}], "server": "uvicorn"}
    await working
    server.slow = 3.0
    working = asyncio.create_task(client.chat([{"role": "user", "content": "long job"}]))
    await working_on(server, 2)
    short = await probe("agent", role(server.url, model=MODEL_PATH, timeout=0.5))
    assert short.state == "busy" and not short.ok and "accepted the connection" in short.detail
    cache = ProbeCache()
    ready = await cache.check("user", cfg, 1.0)  # /ready's view while the job runs
    assert ready.ok and ready.state == "busy" and "busy" in ready.detail
    await working
    proven = await cache.check("user", cfg, 10)  # the same probe, answered once the job is done
    assert proven.ok and proven.state == "ok"
    await client.aclose()
    down = await probe("agent", role(f"http://127.0.0.1:{free_port()}/v1"))
    assert down.state == "down" and "cannot reach" in down.detail


async def test_a_model_the_list_does_not_name_is_proven_by_a_completion(server: LlamaLike) -> None:
    result = await probe("user", role(server.url))  # llama-cpp-python lists its file path only
    assert result.ok and "1-token completion worked" in result.detail and result.server is not None


async def test_a_key_the_endpoint_wants_is_named_when_refused(
    server: LlamaLike, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TBX_TEST_UNSET_KEY", raising=False)
    server.key = "s3cret"
    result = await probe("judge", role(server.url))
    assert result.state == "key" and "TBX_TEST_UNSET_KEY (api_key_env) is not set" in result.detail
    async with LLMClient(role(server.url)) as client:
        with pytest.raises(ModelEndpointError, match="TBX_TEST_UNSET_KEY"):
            await client.chat([{"role": "user", "content": "hi"}])
    monkeypatch.setenv("TBX_TEST_UNSET_KEY", "s3cret")
    assert (await probe("judge", role(server.url))).ok
    assert server.headers[-1]["authorization"] == "Bearer s3cret"


async def test_one_system_message_holds_the_agent_prompt_and_the_instructions(
    server: LlamaLike, mcp_server: FakeMcp
) -> None:
    mcp_server.reset()
    prompts = [("agent:x", "You are an agent."), ("scenario:s", "Follow the policy."), ("task", "")]
    async with LLMClient(role(server.url)) as client:
        traj = await run_loop(
            spec(system_prompts=prompts, max_agent_turns=1), LLMAgent(client), ScriptedUser(), mcp_server.url
        )
    sent = [m for m in server.requests[0]["messages"] if m["role"] == "system"]
    assert sent == [{"role": "system", "content": "You are an agent.\n\nFollow the policy."}]
    assert [p.source for p in traj.system_prompts] == ["agent:x", "scenario:s"]  # the record keeps both


async def test_an_empty_simulated_user_reply_is_marked_as_tbxs_stand_in(server: LlamaLike) -> None:
    from bench.rollout.user_sim import NO_ANSWER, LLMUser
    from bench.view.pages import conversation

    server.answer = lambda body: (  # type: ignore[method-assign]
        200,
        {
            "id": "c",
            "object": "chat.completion",
            "created": 0,
            "model": MODEL_PATH,
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": ""}, "finish_reason": "stop"}
            ],
        },
    )
    async with LLMClient(role(server.url), role="user") as client:
        turn = await LLMUser(client, "ctx").reply([("assistant", "Which order?")], index=1)
    assert turn.text == NO_ANSWER and turn.stand_in
    from bench.rollout.trajectory import Message, Trajectory, UserTurn

    traj = Trajectory(
        task_id="t",
        agent="llm",
        finish_reason="user_limit",
        messages=[Message(role="user", content="hi"), Message(role="user", content=turn.text)],
        user_turns=[UserTurn(index=0, source="query", text="hi"), turn],
    )
    html = "".join(conversation(traj))
    assert "tbx, standing in for an empty simulated-user reply" in html


def test_a_model_run_is_named_after_its_model_and_the_manifest_records_the_server(tmp_path: Any) -> None:
    from bench.dataset import load_benchmark
    from bench.llm.config import parse_models_config
    from bench.run.output import bundle_hash, default_run_name, write_manifest

    cfg = parse_models_config({"agent": {"base_url": "http://127.0.0.1:9/v1", "model": "gemma-3-270m"}})
    assert default_run_name("llm", cfg) == "llm gemma-3-270m" and default_run_name("oracle", cfg) == "oracle"
    bench = load_benchmark(__import__("pathlib").Path(__file__).resolve().parents[4] / "bench/packs/demo")
    server = {"agent": {"models": [{"id": MODEL_PATH, "owned_by": "me"}], "server": "uvicorn"}}
    kw: dict[str, Any] = {
        "agent": "llm",
        "repeats": 1,
        "run_name": None,
        "images": {},
        "digests": {},
        "config": cfg,
    }
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with_server = write_manifest(tmp_path / "a", bench, model_servers=server, data_hash="h", **kw)
    plain = write_manifest(tmp_path / "b", bench, data_hash="h", **kw)
    assert with_server["model_servers"] == server and "model_servers" not in plain
    assert with_server["run_name"] == "llm gemma-3-270m"
    assert bundle_hash(with_server) == bundle_hash(plain)  # outside the bundle
    # settings added by issue 43 leave a plain config's public form (and an old run's bundle) as it was
    assert {"tool_choice", "max_concurrency"}.isdisjoint(cfg.public_dict()["agent"])
    tuned = parse_models_config({"agent": {"base_url": "http://x/v1", "model": "m", "max_concurrency": 2}})
    assert tuned.public_dict()["agent"]["max_concurrency"] == 2


async def test_a_slow_answer_is_not_called_unreachable(server: LlamaLike) -> None:
    server.slow = 0.6
    async with LLMClient(role(server.url, timeout=0.2, max_retries=1)) as client:
        with pytest.raises(ModelEndpointError) as err:
            await client.chat([{"role": "user", "content": "hi"}])
    assert "did not answer within 0.2 s (the role's timeout), 2 times" in str(err.value)
    assert "unreachable" not in str(err.value) and fault_of(err.value).retryable
