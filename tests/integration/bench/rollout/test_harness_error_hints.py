"""`error-hints` end to end: a scripted model (the real `openai` client against
a local OpenAI-compatible test server) makes failing and succeeding calls in
a real retail sandbox of the demo pack through the real tool proxy
(`execute_attempt` on the local Docker provider).

* without the harness the model reads exactly the recorded replies;
* with the harness on, each error reply the model reads carries its category
  after the reply; the recorded reply (the trajectory's and the proxy's) is
  byte-identical to what the server sent, and the category is recorded beside it;
* a successful call's reply reaches the model unchanged;
* no golden value (a value the task's golden end state writes) reaches the
  model through the harness.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_models import FakeModels, tool_call_msgs
from harness_attempts import graded_attempt
from pg_support import DEMO_PACK

from bench.dataset import load_benchmark
from bench.run.attempt import AttemptOutcome
from judge import GoldenState, compute_effects
from sandbox import ProxyServer, leftovers, new_id
from servers.registry import load_domain

pytestmark = pytest.mark.docker

TASK = "demo_retail.py:test_ret_expedite_headphones"
ORDER = "ORD-30000011"
CALLS: list[tuple[str, dict[str, Any]]] = [
    ("get_order", {"order_id": "ORD-99999999"}),  # no such order
    ("get_order", {}),  # the required argument missing
    ("get_order", {"order_id": ORDER}),  # fine
]


@contextlib.contextmanager
def fake_models() -> Iterator[FakeModels]:
    fake = FakeModels()
    try:
        yield fake
    finally:
        fake.close()


def run_attempt(models: FakeModels, harness: list[str], tmp_path: Path) -> tuple[AttemptOutcome, GoldenState]:
    bench = load_benchmark(DEMO_PACK)
    task = bench.task(TASK)
    models.scripts["agent-m"] = [
        *tool_call_msgs(CALLS),
        {"role": "assistant", "content": "I looked the order up. <DONE>"},
    ]
    run_id = new_id("run-it-hints")

    async def go() -> tuple[AttemptOutcome, GoldenState]:
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
        return run.outcome, run.golden

    try:
        return asyncio.run(go())
    finally:
        assert leftovers(run_id) == ([], [])


def tool_messages(models: FakeModels) -> list[str]:
    """The tool message contents of the model's last request (it holds the whole conversation)."""
    last = [r for r in models.requests if r["model"] == "agent-m"][-1]
    return [m["content"] for m in last["messages"] if m["role"] == "tool"]


def golden_values(golden: GoldenState) -> set[str]:
    """The string values the golden end state writes (inserted rows, updated fields)."""
    effects = compute_effects(load_domain("retail").tables, golden.initial_state, golden.final_state)
    out: set[str] = set()
    for table in effects.tables.values():
        for row in [*table.inserted, *table.updated]:
            out |= {v for v in (row.after or {}).values() if isinstance(v, str) and len(v) > 3}
    return out


def test_error_hints_categorize_errors_and_keep_the_replies(tmp_path: Path) -> None:
    with fake_models() as plain_models:
        plain, _ = run_attempt(plain_models, [], tmp_path / "plain")
        plain_sent = json.dumps(plain_models.requests)
        plain_seen = tool_messages(plain_models)
    with fake_models() as models:
        outcome, golden = run_attempt(models, ["error-hints"], tmp_path / "hints")
        sent = json.dumps(models.requests)
        seen = tool_messages(models)

    # without the harness the model reads exactly the recorded replies
    assert plain.system_error is None, plain.system_error
    assert plain.trajectory is not None
    assert plain_seen == [c.result for c in plain.trajectory.tool_calls] == [v.result for v in plain.calls]
    assert all(c.hint is None for c in plain.trajectory.tool_calls)

    assert outcome.system_error is None, outcome.system_error
    traj = outcome.trajectory
    assert traj is not None and traj.finish_reason == "done"
    calls = traj.tool_calls
    assert [c.tool for c in calls] == ["get_order"] * 3
    missing, invalid, fine = calls
    assert missing.is_error or missing.error_envelope
    assert invalid.is_error or invalid.error_envelope
    assert not (fine.is_error or fine.error_envelope) and ORDER in fine.result
    assert (missing.hint, invalid.hint, fine.hint) == ("not_found", "invalid_arguments", None)
    # the recorded replies are the proxy's record of what the server sent, byte for byte,
    # and the same as without the harness
    assert [c.result for c in calls] == [v.result for v in outcome.calls] == plain_seen
    assert seen[0].startswith(missing.result) and seen[0] != missing.result
    assert "[tbx error hint] not found:" in seen[0][len(missing.result) :]
    assert "[tbx error hint] invalid arguments:" in seen[1][len(invalid.result) :]
    assert seen[2] == fine.result
    # what the trajectory says the model saw is what it was sent
    assert [m.content for m in traj.messages if m.role == "tool"] == seen

    # no golden value reaches the model through the harness: what it added holds none,
    # and every golden value the model was sent it was also sent without the harness
    values = golden_values(golden)
    assert values
    added = "".join(s[len(c.result) :] for s, c in zip(seen, calls, strict=True))
    assert not {v for v in values if v in added}
    assert {v for v in values if v in sent} <= {v for v in values if v in plain_sent}
