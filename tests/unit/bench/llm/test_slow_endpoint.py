"""The bound on an attempt's model wait (the wall clock stops while tbx waits on a model
endpoint; issue 43's follow-up), the request in flight when it passes, and the tokens of
the start-up endpoint check: against stub endpoints on 127.0.0.1 (tests/unit/llama_like.py)
that answer slowly and report usage."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from agent_fakes import FakeMcp, spec
from llama_like import MODEL_PATH, LlamaLike

from bench.defaults import MODEL_WAIT_FACTOR
from bench.env.endpoint_probe import check_roles, manifest_servers
from bench.llm.client import MODEL_WAIT, LLMClient, ModelWait, ModelWaitExceeded, UsageLedger
from bench.llm.config import RoleConfig, parse_models_config
from bench.rollout.agent_loop import run_loop
from bench.rollout.agents import LLMAgent, ScriptedUser
from bench.rollout.trajectory import SYSTEM_ERROR
from bench.run.causes import fault_of


@pytest.fixture
def server() -> Iterator[LlamaLike]:
    srv = LlamaLike().start()
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def mcp_server() -> Iterator[FakeMcp]:
    srv = FakeMcp().start()
    yield srv
    srv.stop()


def role(url: str, **kw: Any) -> RoleConfig:
    return RoleConfig(**{"base_url": url, "model": "agent-model", "api_key_env": "TBX_TEST_UNSET_KEY", **kw})


def counted(server: LlamaLike) -> tuple[int, int]:
    """The (input, output) tokens the stub counted over the completions it answered."""
    prompts = [
        sum(len(json.dumps(m)) for m in body["messages"]) + len(json.dumps(body.get("tools", [])))
        for body in server.requests
    ]
    return sum(p // 4 for p in prompts), 5 * len(prompts)


async def test_a_slow_endpoint_is_bounded_a_system_error_and_every_request_spent_is_recorded(
    server: LlamaLike, mcp_server: FakeMcp
) -> None:
    server.slow = 0.4
    wall, factor = 0.4, 2.0  # model wait bound: `factor` wall clocks
    limit = wall * factor
    mcp_server.reset()
    t = time.monotonic()
    ledger = UsageLedger()  # the attempt's, as run_agent makes it
    async with LLMClient(role(server.url)) as client:
        with pytest.raises(ModelWaitExceeded) as err:
            await run_loop(
                spec(wall_clock=wall, model_wait_factor=factor, max_agent_turns=100),
                LLMAgent(client, ledger=ledger),
                ScriptedUser(["more"] * 100),
                mcp_server.url,
                ledger=ledger,
            )
    took = time.monotonic() - t
    # bounded: past the limit by at most the request in flight (the endpoint's 0.4 s)
    assert limit <= took < limit + server.slow + 1.0
    # the endpoint's slowness: a system error of cause `model endpoint`, tried again
    fault = fault_of(err.value)
    assert fault.cause == "model endpoint" and fault.retryable
    assert "past its bound" in str(err.value)
    traj = err.value.trajectory
    assert traj.finish_reason == SYSTEM_ERROR
    assert limit <= traj.timings["model_wait"] < limit + server.slow + 0.5
    # the request in flight when the bound passed was let finish: every completion the
    # server counted is in the trajectory's spend, tokens included
    spent = traj.usage["agent"]
    assert spent.calls == len(server.requests) >= 2
    assert (spent.input_tokens, spent.output_tokens) == counted(server)


async def test_a_request_queued_past_the_bound_is_never_sent(server: LlamaLike) -> None:
    server.slow = 1.5
    async with LLMClient(role(server.url, max_concurrency=1)) as client:
        holder = asyncio.create_task(client.chat([{"role": "user", "content": "long job"}]))
        while not server.requests:
            await asyncio.sleep(0.02)
        waited = ModelWait(limit=0.3)
        token = MODEL_WAIT.set(waited)
        try:
            t = time.monotonic()
            with pytest.raises(ModelWaitExceeded) as err:
                await client.chat([{"role": "user", "content": "queued"}])
            assert time.monotonic() - t < 1.0  # the queue ended at the bound, not the slot's release
        finally:
            MODEL_WAIT.reset(token)
        assert err.value.attempts == 0 and 0.3 <= waited.seconds < 1.0
        await holder
    assert [b["messages"][0]["content"] for b in server.requests] == ["long job"]  # never sent
    assert client.ledger.calls and len(client.ledger.calls) == 1


async def test_the_start_up_checks_tokens_are_in_the_manifest_once_per_endpoint(server: LlamaLike) -> None:
    cfg = role(server.url)  # not the listed model file: a 1-token completion decides
    probes = await check_roles({"agent": cfg, "user": cfg, "judge": role(server.url, model=MODEL_PATH)})
    servers = manifest_servers(probes)
    assert len(server.requests) == 1  # agent and user share a probe; the judge's model is listed
    prompt, output = counted(server)
    assert servers["agent"]["probe_usage"] == {
        "role": "agent",
        "calls": 1,
        "input_tokens": prompt,
        "cached_tokens": 0,
        "output_tokens": output,
    }
    assert "probe_usage" not in servers["user"] and "probe_usage" not in servers["judge"]
    assert servers["judge"]["models"] == [{"id": MODEL_PATH, "owned_by": "me"}]


def test_the_bound_is_the_models_configs_else_the_default_and_in_the_bundle_only_when_set() -> None:
    role_ = {"base_url": "http://127.0.0.1:1/v1", "model": "m"}
    plain = parse_models_config({"agent": role_})
    assert plain.model_wait_factor is None and "model_wait_factor" not in plain.public_dict()
    assert MODEL_WAIT_FACTOR == 4.0 and spec().model_wait_factor == MODEL_WAIT_FACTOR
    set_ = parse_models_config({"agent": role_, "model_wait_factor": 1.5})
    assert set_.public_dict()["model_wait_factor"] == 1.5
    with pytest.raises(ValueError, match="model_wait_factor"):
        parse_models_config({"agent": role_, "model_wait_factor": 0})


async def test_env_serves_simulated_user_waits_have_the_same_bound(server: LlamaLike) -> None:
    from types import SimpleNamespace

    from bench.env.episode import Episode
    from bench.rollout.conversation import Conversation
    from bench.rollout.trajectory import UserTurn
    from bench.rollout.user_sim import LLMUser

    server.slow = 0.2
    ledger = UsageLedger()
    async with LLMClient(role(server.url), role="user") as client:
        run = Conversation(
            spec(wall_clock=0.5, model_wait_factor=2.0, max_user_turns=50),
            None,
            LLMUser(client, "ctx", ledger=ledger),
            ledger,
        )
        run.add_user(UserTurn(index=0, source="query", text="hi"))
        episode = SimpleNamespace(_deadline=100.0)  # the episode's state _user_reply moves
        with pytest.raises(ModelWaitExceeded):
            for _ in range(40):
                run.add_assistant("Which order?")
                await Episode._user_reply(episode, run)  # type: ignore[arg-type]
    waited = run.timings["model_wait"]
    assert 1.0 <= waited < 1.0 + server.slow + 0.5  # the bound (1 s) plus the request in flight
    assert episode._deadline == pytest.approx(100.0 + waited)  # the wall clock stopped meanwhile
    assert ledger.by_role()["user"].calls == len(server.requests) >= 2  # each one recorded
