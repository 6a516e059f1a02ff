"""The demo pack's golden calls in real sandboxes: one task per domain (five
sandboxes, two at a time) replayed over MCP with `bench.replay.sandboxed.replay_task`
must start from the same state as the in-process replay on the host
PostgreSQL, get the same reply to every call, and end in the same state,
different from the initial one."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import psycopg
import pytest
from pg_support import DEMO_PACK

from bench.dataset import Benchmark, Task, load_benchmark
from bench.replay.local import fresh_schema, reset_rows, seed_state
from bench.replay.sandboxed import ReplayOutcome, replay_task
from judge import State, dump_canonical, state_hash
from sandbox import leftovers, new_id, sweep
from servers.engine.store import Store
from servers.engine.tools import NOMINAL_NOW, ToolContext, run_tool
from servers.registry import load_domain

pytestmark = pytest.mark.docker

# One task per domain: together they write orders, payments, returns, claims,
# bookings, CRM profiles, hotel escalations, assets and security audits.
TASKS = {
    "retail": "demo_retail.py:test_ret_defective_speaker_refund",
    "auto_insurance": "demo_auto_insurance.py:test_ins_hail_damage_claim",
    "consulting": "demo_consulting.py:test_con_laptop_refresh",
    "travel": "demo_travel.py:test_trv_broken_air_conditioning",
    "neobank": "demo_neobank.py:test_nb_lost_phone_mfa",
}
CONCURRENCY = 2


@dataclass
class InProcess:
    initial: State
    final: State
    replies: list[str]


def replay_in_process(conn: psycopg.Connection[Any], bench: Benchmark, task: Task) -> InProcess:
    domain = load_domain(task.domain)
    init = bench.effective_init(task)
    fresh_schema(conn, domain.tables)
    reset_rows(conn, domain.tables, seed_state(domain, bench.seed(domain.module), init.data_patch))
    initial = dump_canonical(conn, domain.tables)
    store = Store(conn, domain.tables, NOMINAL_NOW)
    replies = []
    for call in init.golden_tool_interactions:
        tool = domain.tool(call.tool or "")
        assert tool is not None, f"{task.id}: {call.tool} is not served"
        replies.append(run_tool(tool, ToolContext(db=store), dict(call.parameters)))
    return InProcess(initial, dump_canonical(conn, domain.tables), replies)


@pytest.fixture(scope="module")
def pack() -> Benchmark:
    return load_benchmark(DEMO_PACK)


@pytest.fixture(scope="module")
def sandboxed(pack: Benchmark, base_images: dict[str, str]) -> Iterator[dict[str, ReplayOutcome]]:
    """The golden replay of each picked task in a fresh sandbox of its own; all
    of them gone afterwards."""
    run = new_id("run-it-demo")
    sem = asyncio.Semaphore(CONCURRENCY)

    async def one(task_id: str) -> ReplayOutcome:
        async with sem:
            return await replay_task(pack, pack.task(task_id), run_id=run)

    async def run_all() -> list[ReplayOutcome]:
        return await asyncio.gather(*(one(t) for t in TASKS.values()))

    try:
        outcomes = asyncio.run(run_all())
        assert leftovers(run) == ([], []), "a replay sandbox outlived its replay"
        yield dict(zip(TASKS, outcomes, strict=True))
    finally:
        sweep(run=run)


@pytest.mark.parametrize("domain", list(TASKS))
def test_sandbox_replay_equals_in_process_replay(
    domain: str,
    pack: Benchmark,
    sandboxed: dict[str, ReplayOutcome],
    make_database: Callable[[str], psycopg.Connection[Any]],
) -> None:
    task = pack.task(TASKS[domain])
    assert task.domain == domain
    outcome = sandboxed[domain]
    local = replay_in_process(make_database(f"demo_oracle_{domain}"), pack, task)

    assert [c.tool for c in outcome.calls] == pack.effective_init(task).golden_tools
    errors = [c for c in outcome.calls if c.is_error or c.error_envelope]
    assert not errors, errors
    assert state_hash(outcome.final_state) != state_hash(outcome.initial_state)

    assert outcome.initial_state == local.initial
    assert [c.result for c in outcome.calls] == local.replies
    assert outcome.final_state == local.final
