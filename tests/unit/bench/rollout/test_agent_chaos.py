"""Built-in agents: oracle plan, chaos perturbations (seeded, reproducible), noop,
and the argument checks of run_attempt_agent."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bench.dataset import Benchmark, Task, load_benchmark
from bench.llm.config import ModelsConfigError
from bench.rollout.agent_loop import run_attempt_agent
from bench.rollout.agents import PlanAgent, chaos_plan, noop_agent, oracle_agent, perturb
from bench.rollout.agents.chaos import BROKEN_JSON, UNKNOWN_ARG, looks_like_read, write_classifier

CALLS: list[tuple[str, dict[str, Any]]] = [
    ("get_order", {"order_id": "ORD-1"}),
    ("create_refund", {"order_id": "ORD-1", "amount": 12.5, "items": [{"sku": "A", "qty": 2}]}),
    ("zendesk_update_item", {"table": "tickets", "id": "7", "item": {"status": "solved", "urgent": False}}),
    ("get_shipment_tracking", {"order_id": "ORD-1"}),
    ("cancel_order", {"order_id": "ORD-2", "reason": "customer"}),
    ("get_customer_profile", {"customer_id": "C-9"}),
]


@pytest.fixture(scope="module")
def bench(dataset: Path) -> Benchmark:
    return load_benchmark(dataset)


@pytest.fixture(scope="module")
def task(bench: Benchmark) -> Task:
    # a retail task with several golden calls, reads and writes
    return bench.task("sandbox_external_retail_group1.py:test_case_ST002_003")


def test_same_seed_same_perturbations_different_seed_different() -> None:
    a = perturb(CALLS, seed=1, rate=0.7)
    b = perturb(CALLS, seed=1, rate=0.7)
    assert a == b and a.perturbations  # something happened, identically
    others = [perturb(CALLS, seed=s, rate=0.7) for s in (2, 3)]
    assert all(o.calls != a.calls or o.perturbations != a.perturbations for o in others)
    assert perturb(CALLS, seed="x", rate=0.0).calls == CALLS
    assert perturb(CALLS, seed="x", rate=0.0).perturbations == []


def test_the_input_calls_are_not_mutated() -> None:
    before = repr(CALLS)
    for s in range(20):
        perturb(CALLS, seed=s, rate=1.0, kinds=("alter_value",))
    assert repr(CALLS) == before


def test_each_kind_does_what_it_says() -> None:
    is_write = lambda tool: not looks_like_read(tool)  # noqa: E731
    for seed in range(10):
        drop = perturb(CALLS, seed=seed, rate=1.0, kinds=("drop_write",), is_write=is_write)
        # only the writes (create_refund, zendesk_update_item, cancel_order) are dropped
        assert [t for t, _ in drop.calls] == ["get_order", "get_shipment_tracking", "get_customer_profile"]
        assert {p.tool for p in drop.perturbations} == {
            "create_refund",
            "zendesk_update_item",
            "cancel_order",
        }

        extra = perturb(CALLS, seed=seed, rate=1.0, kinds=("extra_call",))
        assert extra.calls == [c for c in CALLS for _ in (0, 1)]

        alter = perturb(CALLS, seed=seed, rate=1.0, kinds=("alter_value",))
        assert len(alter.calls) == len(CALLS)
        assert all(new != old for new, old in zip(alter.calls, CALLS, strict=True))
        assert all(new[0] == old[0] for new, old in zip(alter.calls, CALLS, strict=True))

        invalid = perturb(CALLS, seed=seed, rate=1.0, kinds=("invalid_args",))
        for (tool, args), (gtool, gargs) in zip(invalid.calls, CALLS, strict=True):
            assert tool == gtool
            assert args == BROKEN_JSON or (isinstance(args, dict) and args == {**gargs, UNKNOWN_ARG: True})

        stop = perturb(CALLS, seed=seed, rate=1.0, kinds=("stop_early",))
        assert stop.calls == [] and [p.kind for p in stop.perturbations] == ["stop_early"]


def test_stop_early_truncates_at_the_drawn_call() -> None:
    hits = [perturb(CALLS, seed=s, rate=0.3, kinds=("stop_early",)) for s in range(30)]
    cut = [h for h in hits if h.perturbations]
    assert cut, "no seed stopped early at rate 0.3"
    for h in cut:
        assert h.calls == CALLS[: h.perturbations[0].index]


def test_bad_chaos_settings_are_rejected() -> None:
    with pytest.raises(ValueError, match="rate"):
        perturb(CALLS, seed=0, rate=1.5)
    with pytest.raises(ValueError, match="kinds"):
        perturb(CALLS, seed=0, kinds=("explode",))  # type: ignore[arg-type]


def test_oracle_plays_the_golden_calls(bench: Benchmark, task: Task) -> None:
    golden = [(c.tool, c.parameters) for c in bench.effective_init(task).golden_tool_interactions]
    assert bench.golden_calls(task) == golden and len(golden) == 8
    agent = oracle_agent(bench, task)
    assert isinstance(agent, PlanAgent) and agent.calls == golden
    assert noop_agent().calls == []


async def test_plan_agent_steps_then_done() -> None:
    agent = PlanAgent([("a", {"x": 1}), ("b", "{broken")], final="ok")
    s1, s2, s3 = [await agent.step([], []) for _ in range(3)]
    assert [(c.name, c.arguments) for c in s1.tool_calls] == [("a", '{"x": 1}')]
    assert [(c.name, c.arguments) for c in s2.tool_calls] == [("b", "{broken")]
    assert s3.tool_calls == [] and s3.content == "ok <DONE>"


def test_chaos_plan_uses_task_and_seed(bench: Benchmark, task: Task) -> None:
    a = chaos_plan(bench, task, seed=4, rate=0.6)
    assert a == chaos_plan(bench, task, seed=4, rate=0.6)
    assert a != chaos_plan(bench, task, seed=5, rate=0.6)
    other = bench.task("sandbox_external_retail_group1.py:test_case_ST003_004")
    assert chaos_plan(bench, other, seed=4, rate=0.6).seed != a.seed
    # the export's writes_state: get_order is a read, create_refund a write
    is_write = write_classifier(bench, task)
    assert not is_write("get_order") and is_write("create_refund") and is_write("zendesk_update_item")


async def test_run_attempt_agent_rejects_bad_agent_names(bench: Benchmark, task: Task) -> None:
    url = "http://127.0.0.1:9/mcp"  # never reached: the checks come first
    with pytest.raises(ValueError, match="unknown agent 'gpt'"):
        await run_attempt_agent("gpt", task, bench, url)
    with pytest.raises(ValueError, match="chaos rate"):
        await run_attempt_agent("chaos:lots", task, bench, url)
    with pytest.raises(ModelsConfigError, match="'agent' role"):
        await run_attempt_agent("think", task, bench, url)
    with pytest.raises(ValueError, match="unknown user"):
        await run_attempt_agent("noop", task, bench, url, user="alice")
