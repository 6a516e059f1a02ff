"""The judge end to end on real sandboxes: golden end states replayed over MCP
in their own sandbox, attempts replayed in others, verdicts for mutations of
a real retail task's golden calls, and a task whose golden changes nothing.

Eight sandboxes in all (two at a time): retail golden, five retail attempts
(unchanged, last write dropped, a written value altered, an extra create, an
invalid call), neobank golden and one neobank attempt. The retail "no calls"
attempt is the state a fresh attempt sandbox holds before its first call.
"""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from bench.dataset import Benchmark, load_benchmark
from bench.replay.sandboxed import ReplayOutcome, replay_task
from bench.run.golden import GoldenStore
from judge import GoldenState, State, ToolCallView, Verdict, decide
from sandbox import leftovers, new_id, sweep
from servers.registry import load_domain

pytestmark = pytest.mark.docker

Call = tuple[str, dict[str, Any]]


def traces(dataset: Path, server: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (dataset / "traces" / f"{server}.jsonl").read_text().splitlines()]


def pick_retail_task(dataset: Path) -> tuple[dict[str, Any], int]:
    """The first retail task (test-list order) whose golden makes at least three
    state-changing calls (the trace's per-call flag) and whose last write is its
    only Zendesk write, a ticket update that sets `status`: dropping that write
    must leave a required update missing, and altering the status must give a
    wrong value. Returns the trace and the index of that last write."""
    for tr in traces(dataset, "sandbox_external_retail"):
        writes = [i for i, c in enumerate(tr["calls"]) if c["state_changed"]]
        zendesk = [i for i in writes if tr["calls"][i]["tool"].startswith("zendesk_")]
        if len(writes) < 3 or zendesk != [writes[-1]]:
            continue
        last = tr["calls"][writes[-1]]
        if last["tool"] == "zendesk_update_item" and last["parameters"]["item"].get("status"):
            return tr, writes[-1]
    raise AssertionError("no retail task fits")


def view(outcome: ReplayOutcome) -> list[ToolCallView]:
    return [
        ToolCallView.from_reply(c.tool, c.parameters, c.result, c.is_error, c.latency_ms)
        for c in outcome.calls
    ]


@dataclass
class World:
    task_id: str
    golden: GoldenState
    golden_trace_hash: str
    last_write: Call
    altered: tuple[str, str, str]  # (ticket id, golden status, altered status)
    initial_status: str
    extra_ticket_id: str
    verdicts: dict[str, Verdict] = field(default_factory=dict)
    outcomes: dict[str, ReplayOutcome] = field(default_factory=dict)
    noop_task: str = ""
    noop_golden: GoldenState | None = None


@pytest.fixture(scope="module")
def world(dataset: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    bench = load_benchmark(dataset, strict=False)
    run_id = new_id("judgetest")
    try:
        yield asyncio.run(build_world(bench, dataset, tmp_path_factory.mktemp("golden"), run_id))
    finally:
        sweep(run=run_id)
    assert leftovers(run_id) == ([], [])


async def build_world(bench: Benchmark, dataset: Path, cache: Path, run_id: str) -> World:
    tr, last_idx = pick_retail_task(dataset)
    task = bench.task(tr["task_id"])
    tables = load_domain(task.domain).tables
    store = GoldenStore(bench, cache, run_id=run_id)
    golden = await store.get(task)
    assert store.replays == 1

    calls: list[Call] = bench.golden_calls(task)
    assert [c for c, _ in calls] == [c["tool"] for c in tr["calls"]]
    last_tool, last_params = calls[last_idx]
    ticket_id = str(last_params["id"])
    tickets = next(t for t in tables if t.name == "zendesk_tickets")
    initial_ticket = next(r for r in golden.initial_state["zendesk_tickets"] if r["id"] == ticket_id)
    golden_status = last_params["item"]["status"]
    other = next(
        s for s in tickets.field("status").enum_values if s not in (golden_status, initial_ticket["status"])
    )
    altered = copy.deepcopy(calls)
    altered[last_idx][1]["item"]["status"] = other
    extra_ticket = {
        "subject": "judge test: an unrequested ticket",
        "description": "created by the mutation test",
        "status": "open",
        "priority": "low",
        "requester_id": initial_ticket["requester_id"],
    }
    first_write = calls[next(i for i, c in enumerate(tr["calls"]) if c["state_changed"])]
    attempts: dict[str, list[Call]] = {
        "unchanged": calls,
        "minus_last_write": calls[:last_idx] + calls[last_idx + 1 :],
        "altered": altered,
        "extra_create": [*calls, ("zendesk_create_item", {"table": "tickets", "item": extra_ticket})],
        "invalid_then_stop": [(first_write[0], {"no_such_argument": True})],
    }

    noop = next(
        t
        for s in ("sandbox_external_retail", "sandbox_neobank_support_v1")
        for t in traces(dataset, s)
        if not t["golden_delta"]
    )
    noop_task = bench.task(noop["task_id"])

    sem = asyncio.Semaphore(2)

    async def attempt(name: str, t: Any, c: list[Call]) -> tuple[str, ReplayOutcome]:
        async with sem:
            return name, await replay_task(bench, t, calls=c, run_id=run_id)

    async def noop_golden() -> GoldenState:
        async with sem:
            return await store.get(noop_task)

    outcomes, noop_state = await asyncio.gather(
        asyncio.gather(
            *(attempt(n, task, c) for n, c in attempts.items()), attempt("noop_no_calls", noop_task, [])
        ),
        noop_golden(),
    )
    world = World(
        task_id=task.id,
        golden=golden,
        golden_trace_hash=tr["golden_state_hash"],
        last_write=(last_tool, last_params),
        altered=(ticket_id, golden_status, other),
        initial_status=initial_ticket["status"],
        extra_ticket_id=str(len(golden.final_state["zendesk_tickets"]) + 1),
        noop_task=noop_task.id,
        noop_golden=noop_state,
        outcomes=dict(outcomes),
    )
    for name, outcome in world.outcomes.items():
        t, g = (noop_task, world.noop_golden) if name == "noop_no_calls" else (task, golden)
        assert g is not None
        world.verdicts[name] = decide(
            t.id,
            load_domain(t.domain).tables,
            g,
            outcome.final_state,
            view(outcome),
            initial=outcome.initial_state,
        )
    # No calls at all: the state of a fresh attempt sandbox before its first call.
    fresh: State = world.outcomes["invalid_then_stop"].initial_state
    world.verdicts["no_calls"] = decide(task.id, tables, golden, fresh, [], initial=fresh)
    return world


def test_golden_matches_the_reference(world: World) -> None:
    assert world.golden.golden_hash == world.golden_trace_hash
    assert all(not c.failed for c in world.golden.calls)


def test_unchanged_golden_calls_pass(world: World) -> None:
    v = world.verdicts["unchanged"]
    assert v.passed and v.strict and v.differences == [] and v.signature is None
    assert not v.effects.empty


def test_dropping_the_last_write_misses_an_effect(world: World) -> None:
    v = world.verdicts["minus_last_write"]
    ticket_id = world.altered[0]
    assert not v.passed and not v.strict
    assert v.signature == "incomplete_resolution"
    assert {(d.kind, d.op, d.table, d.key) for d in v.differences} == {
        ("missing_effect", "update", "zendesk_tickets", ticket_id)
    }
    status = next(d for d in v.differences if d.field == "status")
    assert (status.expected, status.actual) == (world.altered[1], world.initial_status)


def test_an_altered_value_is_a_wrong_value(world: World) -> None:
    v = world.verdicts["altered"]
    ticket_id, golden_status, other = world.altered
    assert not v.passed and v.signature == "wrong_state_update"
    assert [(d.kind, d.table, d.key, d.field, d.expected, d.actual) for d in v.differences] == [
        ("wrong_value", "zendesk_tickets", ticket_id, "status", golden_status, other)
    ]
    assert f"zendesk_tickets[{ticket_id}].status" in v.summary()


def test_an_extra_create_is_an_extra_effect(world: World) -> None:
    v = world.verdicts["extra_create"]
    assert not v.passed and v.signature == "wrong_state_update"
    assert [(d.kind, d.op, d.table, d.key) for d in v.differences] == [
        ("extra_effect", "insert", "zendesk_tickets", world.extra_ticket_id)
    ]
    assert (
        v.differences[0].actual["priority"] == "low" and "subject" not in v.differences[0].actual
    )  # unstable


def test_no_calls_is_no_state_change(world: World) -> None:
    v = world.verdicts["no_calls"]
    assert not v.passed and v.signature == "no_state_change" and v.effects.empty
    assert v.differences and all(d.kind == "missing_effect" for d in v.differences)


def test_an_invalid_call_then_stopping_is_tool_use(world: World) -> None:
    outcome = world.outcomes["invalid_then_stop"]
    assert outcome.calls[0].error_envelope and "Input validation failed" in outcome.calls[0].result
    v = world.verdicts["invalid_then_stop"]
    assert not v.passed and v.signature == "tool_use" and v.effects.empty


def test_a_golden_that_changes_nothing_passes_with_no_calls(world: World) -> None:
    assert world.noop_golden is not None
    assert world.noop_golden.golden_hash == world.noop_golden.initial_hash
    v = world.verdicts["noop_no_calls"]
    assert v.task_id == world.noop_task and v.passed and v.strict and v.effects.empty
