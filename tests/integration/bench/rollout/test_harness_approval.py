"""`approval` end to end: a scripted model (the real `openai` client against a
local OpenAI-compatible test server) plays the golden calls of the demo
retail refund task in a real sandbox through the real tool proxy
(`execute_attempt` on the local Docker provider); the simulated user is the
real `LLMUser` whose model is a stub answering from the test.

* with the harness, the refund (the one destructive call) is held: when the
  user is asked, the proxy has seen every earlier call and not the refund;
  approved, it goes through unchanged, the refund row is written and the
  attempt passes against the golden end state;
* refused, the model reads a tool error with the user's reason, the proxy
  never sees the call and the refunds table stays as it was;
* the read-only calls (and the other writes) pass with no question: the user
  model is asked exactly once per attempt, and never without the harness;
* no golden value reaches any model through the harness.

And the servers list the marking as MCP tool annotations, directly and
through the proxy, with names and input schemas unchanged.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from fake_models import FakeModels, tool_call_msgs
from harness_attempts import graded_attempt
from pg_support import DEMO_PACK

from bench.dataset import Benchmark, load_benchmark
from bench.prepare import sandbox_request
from bench.rollout.harness.approval import refusal
from bench.run.attempt import AttemptOutcome, task_tool_policy
from judge import GoldenState, compute_effects
from sandbox import (
    AsyncSandbox,
    ProxyServer,
    RegisterRequest,
    Registration,
    Sandbox,
    leftovers,
    new_id,
    proxy_client,
    register_request,
    sweep,
    upstream_client,
)
from servers.engine.marking import mark_tool
from servers.registry import load_domain

pytestmark = pytest.mark.docker

TASK = "demo_retail.py:test_ret_defective_speaker_refund"
REFUNDS = "external_retail_toolset_stripe_models_refunds"
REASON = "I only want the refund once the speaker is back with you."
ASKED = "The assistant asks your approval for this action:"


class WatchedProxy(ProxyServer):
    """The real proxy, keeping the tokens it hands out so the test can read its record mid-attempt."""

    def __init__(self) -> None:
        super().__init__()
        self.tokens: list[str] = []

    def register(self, request: RegisterRequest) -> Registration:
        registration = super().register(request)
        self.tokens.append(registration.token)
        return registration

    async def aregister(self, request: RegisterRequest) -> Registration:
        # the lifecycle's path: it waits for the proxy's loop without calling `register`
        registration = await super().aregister(request)
        self.tokens.append(registration.token)
        return registration


class Approver(list[dict[str, Any]]):
    """The user model's script: each request is an approval question (the agent never
    talks to the user before it ends); answers `answer` and notes what the proxy had
    seen of the attempt at that moment."""

    def __init__(self, proxy: WatchedProxy, answer: str):
        super().__init__()
        self.proxy, self.answer = proxy, answer
        self.seen_by_proxy: list[list[str]] = []

    def __len__(self) -> int:
        return 1  # never empty: FakeModels pops one reply per request

    def pop(self, index: Any = -1) -> dict[str, Any]:
        self.seen_by_proxy.append([c.tool for t in self.proxy.tokens for c in self.proxy.calls(t)])
        return {"role": "assistant", "content": self.answer}


def golden_calls(bench: Benchmark) -> list[tuple[str, dict[str, Any]]]:
    init = bench.effective_init(bench.task(TASK))
    return [(c.tool, dict(c.parameters)) for c in init.golden_tool_interactions if c.tool]


def attempt(
    harness: list[str], answer: str, tmp_path: Path
) -> tuple[AttemptOutcome, GoldenState, bool, FakeModels, Approver | None]:
    bench = load_benchmark(DEMO_PACK)
    task = bench.task(TASK)
    run_id = new_id("run-it-approval")
    models = FakeModels()

    async def go() -> tuple[AttemptOutcome, GoldenState, bool, Approver | None]:
        proxy = WatchedProxy()
        with proxy:
            approver = Approver(proxy, answer)
            models.scripts["user-m"] = approver
            run = await graded_attempt(
                bench,
                task,
                run_id=run_id,
                models=models.config(),
                harness=harness,
                proxy=proxy,
                golden_dir=tmp_path / "golden",
            )
        return run.outcome, run.golden, run.passed, approver

    models.scripts["agent-m"] = [
        *tool_call_msgs(golden_calls(bench)),
        {"role": "assistant", "content": "Your return and refund are on their way. <DONE>"},
    ]
    try:
        outcome, golden, passed, approver = asyncio.run(go())
    finally:
        models.close()
        assert leftovers(run_id) == ([], [])
    return outcome, golden, passed, models, approver


def requests_of(models: FakeModels, model: str) -> list[dict[str, Any]]:
    return [r for r in models.requests if r["model"] == model]


def golden_values(golden: GoldenState) -> set[str]:
    """The string values the golden end state writes (inserted rows, updated fields)."""
    effects = compute_effects(load_domain("retail").tables, golden.initial_state, golden.final_state)
    out: set[str] = set()
    for table in effects.tables.values():
        for row in [*table.inserted, *table.updated]:
            out |= {v for v in (row.after or {}).values() if isinstance(v, str) and len(v) > 3}
    return out


def test_approval_holds_the_refund_until_the_user_approves_and_a_refusal_leaves_it_undone(
    tmp_path: Path,
) -> None:
    bench = load_benchmark(DEMO_PACK)
    task = bench.task(TASK)
    calls = golden_calls(bench)
    assert [t for t, _ in calls].count("create_refund") == 1

    plain, golden, plain_passed, plain_models, _ = attempt([], "APPROVE", tmp_path)
    approved, _, approved_passed, models, approver = attempt(
        ["approval"], "APPROVE Yes, refund it to my card.", tmp_path
    )
    refused, _, refused_passed, refused_models, refuser = attempt(["approval"], f"REFUSE {REASON}", tmp_path)

    # without the harness nobody is asked and the refund is made
    assert plain_passed and requests_of(plain_models, "user-m") == []
    assert plain.trajectory is not None and "approval" not in plain.trajectory.metadata
    assert all(c.approval is None for c in plain.trajectory.tool_calls)

    # the plain run passes; approved: asked once, about the refund, when the proxy had
    # seen every call before it and not the refund
    assert approver is not None and approved.trajectory is not None
    before_refund = [t for t, _ in calls[: [t for t, _ in calls].index("create_refund")]]
    assert approver.seen_by_proxy == [before_refund]
    (asked,) = requests_of(models, "user-m")
    prompt = asked["messages"][1]["content"]
    assert task.user_context is not None and task.user_context in prompt  # its private context
    held = prompt.split(ASKED, 1)[1]
    assert "tool: create_refund" in held and "get_order" not in held
    recs = approved.trajectory.tool_calls
    assert [c.tool for c in recs] == [t for t, _ in calls]
    assert [c.approval is not None for c in recs] == [t == "create_refund" for t, _ in calls]
    refund = next(c for c in recs if c.tool == "create_refund")
    assert refund.approval is not None and refund.approval.approved and refund.via_mcp
    assert refund.approval.prompt == asked["messages"]
    # sent unchanged: the proxy's record and the reply are those of the plain run
    assert [(c.tool, c.arguments, c.result) for c in approved.calls] == [
        (c.tool, c.arguments, c.result) for c in plain.calls
    ]
    assert approved.terminal_state is not None and approved.terminal_state[REFUNDS] != (
        approved.initial_state or {}
    ).get(REFUNDS)
    assert approved_passed
    assert approved.trajectory.metadata["approval"] == {"asked": 1, "approved": 1, "refused": 0}
    assert approved.trajectory.usage["user"].calls == 1  # the question, in the usage and cost

    # refused: a tool error with the user's reason, never sent, the record untouched
    assert refuser is not None and refused.trajectory is not None
    assert refuser.seen_by_proxy == [before_refund]
    rec = next(c for c in refused.trajectory.tool_calls if c.tool == "create_refund")
    assert rec.approval is not None and not rec.approval.approved and rec.approval.reason == REASON
    assert (rec.via_mcp, rec.is_error, rec.result) == (False, True, refusal("create_refund", REASON))
    assert "create_refund" not in [c.tool for c in refused.calls]
    assert [c.tool for c in refused.calls] == [t for t, _ in calls if t != "create_refund"]
    assert refused.terminal_state is not None and refused.initial_state is not None
    assert refused.terminal_state[REFUNDS] == refused.initial_state[REFUNDS]
    assert not refused_passed
    agent_last = requests_of(refused_models, "agent-m")[-1]["messages"]
    assert {"role": "tool", "tool_call_id": rec.call_id, "name": "create_refund", "content": rec.result} in [
        {k: m.get(k) for k in ("role", "tool_call_id", "name", "content")} for m in agent_last
    ]

    # no golden value reaches a model through the harness: the agent models were sent no
    # golden value the plain run's agent was not, and what the user model was asked holds
    # only golden values the agent had already been sent (tool descriptions, replies) or
    # wrote into the held call, or that are in the task's own private context
    values = golden_values(golden)
    assert values
    plain_sent = json.dumps(requests_of(plain_models, "agent-m"))
    for run_models in (models, refused_models):
        sent = json.dumps(requests_of(run_models, "agent-m"))
        assert {v for v in values if v in sent} <= {v for v in values if v in plain_sent}
        (question,) = requests_of(run_models, "user-m")
        content = question["messages"][1]["content"]
        own = plain_sent + json.dumps(dict(calls)["create_refund"]) + (task.user_context or "")
        assert {v for v in values if v in content} <= {v for v in values if v in own}
        system = question["messages"][0]["content"]
        assert not {v for v in values if v in system}


def test_the_servers_publish_the_marking_as_tool_annotations() -> None:
    bench = load_benchmark(DEMO_PACK)
    task = bench.task(TASK)
    run_id = f"test-annotations-{uuid.uuid4().hex[:8]}"
    sb = Sandbox(sandbox_request(bench, task, typesense=False, run_id=run_id))
    domain = load_domain("retail")

    async def listings() -> tuple[list[types.Tool], list[types.Tool]]:
        assert sb.handle is not None
        async with upstream_client(sb.handle.servers["retail"], sb.handle.server_headers) as direct:
            served = list((await direct.list_tools()).tools)
        with ProxyServer() as proxy:
            reg = proxy.register(
                register_request(AsyncSandbox.adopt(sb), sb.attempt_id, task_tool_policy(bench, task))
            )
            async with proxy_client(reg) as client:
                relayed = list((await client.list_tools()).tools)
        return served, relayed

    try:
        sb.start()
        served, relayed = asyncio.run(listings())
    finally:
        sb.close()
        sweep(run=run_id)
    assert leftovers(run_id) == ([], [])

    # every tool the server lists carries its marking; names, order and schemas are as before
    assert [t.name for t in served] == [t.name for t in domain.tools]
    for ours, tool in zip(domain.tools, served, strict=True):
        m = mark_tool(ours)
        assert tool.annotations == types.ToolAnnotations(
            read_only_hint=m.read_only, destructive_hint=m.destructive, idempotent_hint=m.idempotent
        ), ours.name
        assert tool.input_schema == ours.input_schema and tool.description == ours.description
    by_name = {t.name: t for t in served}
    assert by_name["create_refund"].annotations is not None
    assert by_name["create_refund"].annotations.destructive_hint is True
    assert by_name["get_order"].annotations is not None
    assert by_name["get_order"].annotations.read_only_hint is True
    # the proxy relays them with the task's allow-list (and its description overrides)
    assert relayed and all(t.annotations == by_name[t.name].annotations for t in relayed)
