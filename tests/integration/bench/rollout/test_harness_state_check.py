"""`state-check` end to end: a scripted model (the real `openai` client against
a local OpenAI-compatible test server) plays a demo retail task's golden
calls but stops one step early (the ticket is never filed), in a real
sandbox through the real tool proxy (`execute_attempt` on the local
Docker provider), graded against the golden end state replayed in a sandbox
of its own.

* without the harness it ends at once and fails;
* with `state-check` it is shown the effects of its calls (against the
  initial state), sees no ticket among them, files it, confirms, and passes;
* the check is exactly the attempt's effects against its own initial state
  at that point (reconstructed from its terminal state): no golden state in it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_models import FakeModels
from harness_attempts import graded_attempt
from pg_support import DEMO_PACK

from bench.dataset import Benchmark, load_benchmark
from bench.rollout.harness.state_check import check_text
from bench.run.attempt import AttemptOutcome
from judge import GoldenState, compute_effects
from sandbox import ProxyServer, leftovers, new_id
from servers.registry import load_domain

pytestmark = pytest.mark.docker

TASK = "demo_retail.py:test_ret_expedite_headphones"
CHECK = "[tbx state check]"


class EarlyStopper(list[dict[str, Any]]):
    """The agent's script, answering from the last request it got: the golden calls
    but the last, then "done"; if then shown a state check without a ticket among
    the effects, the missing call, then "done" again."""

    def __init__(self, models: FakeModels, calls: list[tuple[str, dict[str, Any]]]):
        super().__init__()
        self.models, self.calls = models, calls

    def __len__(self) -> int:
        return 1  # never empty: FakeModels pops one reply per request

    def pop(self, index: Any = -1) -> dict[str, Any]:
        messages = self.models.requests[-1]["messages"]
        made = sum(len(m.get("tool_calls") or []) for m in messages if m["role"] == "assistant")
        last = messages[-1]
        checked = last["role"] == "user" and last["content"].startswith(CHECK)
        if made < len(self.calls) - 1 or (checked and "inserted zendesk_tickets" not in last["content"]):
            tool, args = self.calls[made]
            return {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"c{made}",
                        "type": "function",
                        "function": {"name": tool, "arguments": json.dumps(args)},
                    }
                ],
            }
        return {"role": "assistant", "content": "Your order now ships expedited. <DONE>"}


@contextlib.contextmanager
def fake_models() -> Iterator[FakeModels]:
    fake = FakeModels()
    try:
        yield fake
    finally:
        fake.close()


def golden_calls(bench: Benchmark) -> list[tuple[str, dict[str, Any]]]:
    init = bench.effective_init(bench.task(TASK))
    calls = [(c.tool, dict(c.parameters)) for c in init.golden_tool_interactions if c.tool]
    assert calls[-1][0] == "zendesk_create_item"  # the step the agent leaves out
    return calls


def attempt(
    harness: list[str], tmp_path: Path
) -> tuple[AttemptOutcome, GoldenState, bool, list[dict[str, Any]]]:
    bench = load_benchmark(DEMO_PACK)
    task = bench.task(TASK)
    run_id = new_id("run-it-check")

    async def go() -> tuple[AttemptOutcome, GoldenState, bool, list[dict[str, Any]]]:
        with fake_models() as models:
            models.scripts["agent-m"] = EarlyStopper(models, golden_calls(bench))
            with ProxyServer() as proxy:
                run = await graded_attempt(
                    bench,
                    task,
                    run_id=run_id,
                    models=models.config(),
                    harness=harness,
                    proxy=proxy,
                    golden_dir=tmp_path / "golden",
                )
            return run.outcome, run.golden, run.passed, list(models.requests)

    try:
        return asyncio.run(go())
    finally:
        assert leftovers(run_id) == ([], [])


def test_an_agent_stopping_one_step_early_passes_with_state_check_only(tmp_path: Path) -> None:
    plain, _, plain_passed, plain_requests = attempt([], tmp_path / "plain")
    assert plain.trajectory is not None and plain.trajectory.finish_reason == "done"
    assert not plain_passed
    assert [t.source for t in plain.trajectory.user_turns] == ["query"]
    assert CHECK not in json.dumps(plain_requests)

    checked, golden, passed, requests = attempt(["state-check"], tmp_path / "checked")
    traj = checked.trajectory
    assert traj is not None and traj.finish_reason == "done"
    assert passed
    (check,) = [t for t in traj.user_turns if t.source == "harness"]
    assert check.text.startswith(CHECK)
    assert "\n- updated " in check.text  # the shipping speed the agent changed
    assert "zendesk_tickets" not in check.text  # not filed yet: that is what the check showed
    assert traj.metadata["state_check"]["rows"] >= 1
    assert [c.tool for c in traj.tool_calls][-1] == "zendesk_create_item"
    assert len(traj.tool_calls) == len(plain.trajectory.tool_calls) + 1

    # the check is exactly the attempt's own effects against its own initial state at that
    # point: the terminal state without the ticket filed after it (no golden state involved)
    assert checked.initial_state is not None and checked.terminal_state is not None
    at_check_state = {**checked.terminal_state, "zendesk_tickets": checked.initial_state["zendesk_tickets"]}
    tables = load_domain("retail").tables
    assert check.text == check_text(compute_effects(tables, checked.initial_state, at_check_state))
    # the model was sent it, as the last message of a request
    assert any(r["messages"][-1].get("content") == check.text for r in requests)
    # and the golden end state differs from what the check showed (the ticket is missing from it)
    assert "zendesk_tickets" in compute_effects(tables, golden.initial_state, golden.final_state).tables
