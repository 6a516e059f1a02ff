"""The agent loop end to end on a real retail sandbox (one for the whole module,
reseeded between attempts): the real `openai` client against a local
OpenAI-compatible test server that scripts a model playing a task's golden
calls, and the built-in oracle / noop / chaos agents. The canonical state hash
after each conversation is compared with the trace's golden and initial hashes.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from fake_models import FakeModels, tool_call_msgs
from psycopg import sql

from bench.dataset import Benchmark, Task, load_benchmark
from bench.prepare import initial_state, sandbox_request
from bench.rollout.agent_loop import run_attempt_agent
from bench.rollout.user_sim import STOP_TOKEN
from judge import dump_dsn, state_hash
from sandbox import AttemptHandle, Sandbox, leftovers, new_id, sweep
from servers.engine.seeding import copy_rows
from servers.registry import load_domain

pytestmark = pytest.mark.docker

LLM_TASK = "sandbox_external_retail_group1.py:test_case_ST002_003"  # 8 golden calls, 3 writes
ORACLE_TASKS = [
    "sandbox_external_retail_group1.py:test_case_ST002_001",
    "sandbox_external_retail_group1.py:test_case_ST003_004",
    "sandbox_external_retail_group1.py:test_case_ST004_001",
]


# ---------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def bench(dataset: Path) -> Benchmark:
    return load_benchmark(dataset)


@pytest.fixture(scope="module")
def traces(dataset: Path) -> dict[str, dict[str, Any]]:
    lines = (dataset / "traces" / "sandbox_external_retail.jsonl").read_text().splitlines()
    return {t["task_id"]: t for t in map(json.loads, lines)}


@pytest.fixture(scope="module")
def box(bench: Benchmark, base_images: dict[str, str]) -> Iterator[AttemptHandle]:
    run = new_id("run-it-agent")
    request = sandbox_request(bench, bench.task(LLM_TASK), typesense=False, run_id=run)
    try:
        with Sandbox(request) as sb:
            assert sb.handle is not None
            yield sb.handle
    finally:
        left = leftovers(run)
        sweep(run=run)
        assert left == ([], []), f"sandbox teardown left {left}"


def reseed(handle: AttemptHandle, bench: Benchmark, task: Task) -> str:
    """Put the task's initial rows in the running sandbox; returns the state hash."""
    domain = load_domain("retail")
    rows = initial_state(bench, task)
    with psycopg.connect(handle.pg.admin_dsn("retail"), autocommit=True) as conn, conn.transaction():
        names = sql.SQL(", ").join(sql.Identifier(t.name) for t in domain.tables)
        conn.execute(sql.SQL("TRUNCATE {} RESTART IDENTITY").format(names))
        for spec in domain.tables:
            copy_rows(conn, spec, rows.get(spec.name, []))
    return current_hash(handle)


def current_hash(handle: AttemptHandle) -> str:
    return state_hash(dump_dsn(handle.pg.admin_dsn("retail"), "retail"))


@pytest.fixture
def models() -> Iterator[FakeModels]:
    fake = FakeModels()
    yield fake
    fake.close()


def golden(bench: Benchmark, task: Task) -> list[tuple[str, dict[str, Any]]]:
    return [
        (c.tool, dict(c.parameters)) for c in bench.effective_init(task).golden_tool_interactions if c.tool
    ]


# ---------------------------------------------------------------- tests


async def test_llm_agent_playing_the_golden_calls_reaches_the_golden_hash(
    bench: Benchmark, traces: dict[str, dict[str, Any]], box: AttemptHandle, models: FakeModels
) -> None:
    task = bench.task(LLM_TASK)
    trace = traces[LLM_TASK]
    assert reseed(box, bench, task) == trace["initial_state_hash"]
    calls = golden(bench, task)
    models.scripts["agent-m"] = [
        *tool_call_msgs(calls),
        {"role": "assistant", "content": "Your refund is on its way. Is there anything else?"},
    ]
    models.scripts["user-m"] = [
        {"role": "assistant", "content": f"No, that's everything, thanks. {STOP_TOKEN}"}
    ]
    config = models.config()

    traj = await run_attempt_agent(
        "think", task, bench, box.servers["retail"], box.server_headers, config=config, seed=2
    )

    assert traj.finish_reason == "user_done"
    assert current_hash(box) == trace["golden_state_hash"]
    assert [(c.tool, c.arguments) for c in traj.tool_calls] == calls
    # the agent saw exactly what the reference servers answered
    assert [c.result for c in traj.tool_calls] == [c["result"] for c in trace["calls"]]
    assert [t.source for t in traj.user_turns] == ["query", "llm"]

    agent_reqs = [r for r in models.requests if r["model"] == "agent-m"]
    assert len(agent_reqs) == len(calls) + 1
    first = agent_reqs[0]
    prompt = bench.agents["think"]
    # one system message: the agent's prompt, then the scenario's instructions (texts whole)
    system = f"{prompt.system_instructions}\n\n{bench.scenario_of(task).bot_instructions}"
    assert first["messages"][0] == {"role": "system", "content": system}
    assert first["messages"][1] == {"role": "user", "content": task.query}
    assert first["tool_choice"] == "auto"
    assert first["seed"] == 102 and first["parallel_tool_calls"] is False
    offered = {t["function"]["name"] for t in first["tools"]}
    assert {t for t, _ in calls} <= offered and "InjectionAttackInToolResponse" in offered
    user_req = next(r for r in models.requests if r["model"] == "user-m")
    assert task.user_context is not None and task.user_context.strip() in user_req["messages"][1]["content"]

    assert traj.usage["agent"].calls == len(calls) + 1 and traj.usage["user"].calls == 1
    per_call = (600 * 1.0 + 400 * 0.1 + 20 * 4.0) / 1e6
    assert traj.cost_usd["agent"] == pytest.approx(per_call * (len(calls) + 1))
    assert traj.cost_usd["user"] is None  # no price for user-m


async def test_scripted_wrong_calls_miss_the_golden_hash(
    bench: Benchmark, traces: dict[str, dict[str, Any]], box: AttemptHandle, models: FakeModels
) -> None:
    task = bench.task(LLM_TASK)
    trace = traces[LLM_TASK]
    reseed(box, bench, task)
    calls = golden(bench, task)
    refund = next(i for i, (tool, _) in enumerate(calls) if tool == "create_refund")
    wrong = [*calls[:refund], *calls[refund + 1 :]]  # the refund is never made
    models.scripts["agent-m"] = [*tool_call_msgs(wrong), {"role": "assistant", "content": "Done. <DONE>"}]

    traj = await run_attempt_agent(
        "think", task, bench, box.servers["retail"], box.server_headers, config=models.config()
    )

    assert traj.finish_reason == "done" and traj.final_message == "Done."
    assert len(traj.tool_calls) == len(calls) - 1
    final = current_hash(box)
    assert final != trace["golden_state_hash"] and final != trace["initial_state_hash"]


async def test_oracle_reaches_the_golden_hash(
    bench: Benchmark, traces: dict[str, dict[str, Any]], box: AttemptHandle
) -> None:
    for task_id in ORACLE_TASKS:
        task = bench.task(task_id)
        trace = traces[task_id]
        assert reseed(box, bench, task) == trace["initial_state_hash"]
        traj = await run_attempt_agent("oracle", task, bench, box.servers["retail"], box.server_headers)
        assert traj.finish_reason == "done" and traj.done_by == "text", task_id
        assert [c.result for c in traj.tool_calls] == [c["result"] for c in trace["calls"]], task_id
        assert current_hash(box) == trace["golden_state_hash"], task_id
        assert traj.usage == {}


async def test_noop_leaves_the_initial_state(
    bench: Benchmark, traces: dict[str, dict[str, Any]], box: AttemptHandle
) -> None:
    task = bench.task(ORACLE_TASKS[1])
    initial = reseed(box, bench, task)
    traj = await run_attempt_agent("noop", task, bench, box.servers["retail"], box.server_headers)
    assert traj.finish_reason == "done" and traj.tool_calls == [] and traj.agent_turns == 1
    assert current_hash(box) == initial == traces[task.id]["initial_state_hash"]


async def test_chaos_is_reproducible_on_a_real_server(bench: Benchmark, box: AttemptHandle) -> None:
    task = bench.task(LLM_TASK)
    runs = []
    for _ in range(2):
        reseed(box, bench, task)
        traj = await run_attempt_agent(
            "chaos:0.5", task, bench, box.servers["retail"], box.server_headers, seed=11
        )
        runs.append(
            (
                traj.metadata["chaos"],
                [(c.tool, c.arguments, c.result) for c in traj.tool_calls],
                current_hash(box),
            )
        )
    assert runs[0] == runs[1]
    assert runs[0][0]["perturbations"], "seed 11 at rate 0.5 perturbed nothing"
