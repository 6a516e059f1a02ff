"""The embedded demo pack (bench/packs/demo): it loads cleanly in the export
layout, covers the five domains with original content, and every task's golden
calls replay in-process on the host PostgreSQL without an error reply and
change the domain's state."""

from __future__ import annotations

import io
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import psycopg
import pytest
from pg_support import DEMO_PACK

from bench.cli.tasks import validate_command
from bench.dataset import Benchmark, Task
from bench.dataset.models import CHECK_DATABASE, CHECK_RUBRICS
from bench.replay.local import fresh_schema, is_error_reply, reset_rows, seed_state
from judge import State, dump_canonical, state_hash
from servers.engine.seeding import initial_rows
from servers.engine.store import Store
from servers.engine.tools import NOMINAL_NOW, ToolContext, run_tool
from servers.registry import load_domain

PACK = DEMO_PACK
DOMAINS = ("retail", "auto_insurance", "consulting", "travel", "neobank")
TASKS_PER_DOMAIN = 3
MAX_SEED_ROWS = 12  # per module: the seeds stay small on purpose
SHINGLE = 8  # words: a shared run this long means copied text


# ---- layout and contents ------------------------------------------------------
def test_validate_command_reports_no_problem() -> None:
    out = io.StringIO()
    assert validate_command(PACK, out=out) == 0
    # no warning either: what tbx runs of the one release, then the summary
    release, summary = out.getvalue().splitlines()
    assert release == "release releases/testlist_demo.yaml (checked): 15 tasks, tbx runs 15"
    assert summary.startswith("15 tasks in release list, 15 test cases, 5 scenarios")
    assert summary.endswith(": OK")


def test_tasks_list_prints_the_release_in_order(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from bench.cli.main import main

    assert main(["tasks", "list", str(PACK), "--domain", "travel", "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["domain"] for r in rows] == ["travel"] * TASKS_PER_DOMAIN
    assert [r["rubrics"] for r in rows] == [False, False, True]
    assert all(r["id"].startswith("demo_travel.py:") and r["golden_calls"] >= 1 for r in rows)


def test_release_lists_three_tasks_per_domain(pack: Benchmark) -> None:
    assert pack.layout == "export"
    assert pack.release == "releases/testlist_demo.yaml"
    assert [t.id for t in pack.tasks] == pack.release_ids
    assert {d: len(ts) for d, ts in pack.by_domain().items()} == dict.fromkeys(DOMAINS, TASKS_PER_DOMAIN)
    for task in pack.tasks:
        domain = load_domain(task.domain)
        # `<file>.py:<uid>` ids naming YAML files, as in the export
        assert task.id == f"demo_{task.domain}.py:{task.uid}"
        assert task.source == f"dataset/test_case/{domain.server}/demo_{task.domain}.yaml"
        assert task.scenario == task.server == domain.server


def test_scenarios_allow_every_tool_and_carry_policies(pack: Benchmark) -> None:
    assert sorted(pack.scenarios) == sorted(load_domain(d).server for d in DOMAINS)
    for name in DOMAINS:
        domain = load_domain(name)
        scenario = pack.scenarios[domain.server]
        assert scenario.servers == [domain.server]
        assert scenario.tool_names == [t.name for t in domain.tools]
        sources = scenario.sources[domain.server]
        assert 2 <= len(sources) <= 3
        assert all(s.snippets and all(len(x) > 200 for x in s.snippets) for s in sources)
        assert scenario.bot_instructions and "Today is" in scenario.bot_instructions


def test_every_task_is_complete(pack: Benchmark) -> None:
    for task in pack.tasks:
        domain = load_domain(task.domain)
        init = pack.effective_init(task)
        assert task.query.strip() and (task.user_context or "").strip(), task.id
        assert CHECK_DATABASE in task.checks, task.id
        assert init.data_patch, task.id
        golden = [c.tool for c in init.golden_tool_interactions]
        assert golden and all(domain.tool(t or "") is not None for t in golden), task.id
        # the golden replay runs without Typesense: no policy search in it
        assert domain.policy_tool not in golden, task.id
        assert any(t in ("zendesk_create_item", "zendesk_update_item") for t in golden), task.id
        assert (CHECK_RUBRICS in task.checks) == bool(task.rubrics), task.id


def test_some_tasks_have_yes_no_rubrics(pack: Benchmark) -> None:
    with_rubrics = [t for t in pack.tasks if t.has_rubrics]
    assert {t.domain for t in with_rubrics} == {"retail", "travel"}
    assert all(len(t.rubrics) >= 2 and all(r.endswith("?") for r in t.rubrics) for t in with_rubrics)


def test_agent_prompt_has_the_export_shape(pack: Benchmark) -> None:
    agent = pack.agents["demo"]
    assert agent.parallel_tool_calls is False
    assert len(agent.system_instructions) > 500
    (tool,) = agent.builtin_tools
    assert tool["is_end_turn"] is True
    assert tool["input_schema"]["required"] == ["reason"]


@pytest.mark.parametrize("name", DOMAINS)
def test_seeds_are_small_and_valid(pack: Benchmark, name: str) -> None:
    domain = load_domain(name)
    seed = pack.seed(domain.module)
    assert set(seed) <= {t.name for t in domain.tables}
    assert sum(len(rows) for rows in seed.values()) <= MAX_SEED_ROWS
    initial_rows(domain.tables, seed, None, NOMINAL_NOW)  # raises on a row the models reject


# ---- originality ----------------------------------------------------------------
def _texts(bench: Benchmark, tasks: Iterable[Task]) -> list[str]:
    out: list[str] = []
    for t in tasks:
        out += [t.query, t.user_context or "", *t.rubrics]
    for scenario in bench.scenarios.values():
        out.append(scenario.bot_instructions or "")
        out += [snip for sources in scenario.sources.values() for s in sources for snip in s.snippets]
    for agent in bench.agents.values():
        out.append(agent.system_instructions)
        out += [str(t.get("description", "")) for t in agent.builtin_tools]
    return out


def _shingles(texts: Iterable[str]) -> set[tuple[str, ...]]:
    out: set[tuple[str, ...]] = set()
    for text in texts:
        words = re.findall(r"[a-z0-9$%.']+", text.lower())
        out.update(tuple(words[i : i + SHINGLE]) for i in range(len(words) - SHINGLE + 1))
    return out


def test_no_text_is_shared_with_the_benchmark_export(pack: Benchmark, benchmark: Benchmark) -> None:
    ours = _shingles(_texts(pack, pack.tasks))
    theirs = _shingles(_texts(benchmark, benchmark.test_cases.values()))
    assert len(ours) > 1000  # the comparison covers the pack's text
    shared = sorted(" ".join(s) for s in ours & theirs)
    assert not shared, f"{len(shared)} runs of {SHINGLE} words also in the export, e.g. {shared[:5]}"


# ---- golden replay, in-process ---------------------------------------------------
@dataclass
class Replayed:
    task_id: str
    initial: State
    final: State
    errors: list[str]


def replay_in_process(conn: psycopg.Connection[Any], bench: Benchmark, task: Task) -> Replayed:
    """Seed + data_patch (the sandbox's seeding code), then every golden call through
    the servers' call pipeline; the domain's tables must exist on `conn`."""
    domain = load_domain(task.domain)
    init = bench.effective_init(task)
    reset_rows(conn, domain.tables, seed_state(domain, bench.seed(domain.module), init.data_patch))
    initial = dump_canonical(conn, domain.tables)
    store = Store(conn, domain.tables, NOMINAL_NOW)
    errors = []
    for i, call in enumerate(init.golden_tool_interactions):
        tool = domain.tool(call.tool or "")
        assert tool is not None, f"{task.id}: {call.tool} is not served"
        reply = run_tool(tool, ToolContext(db=store), dict(call.parameters))
        if is_error_reply(reply):
            errors.append(f"call {i} {call.tool}: {reply[:300]}")
    return Replayed(task.id, initial, dump_canonical(conn, domain.tables), errors)


@pytest.fixture(scope="module")
def demo_db(make_database: Callable[[str], psycopg.Connection[Any]]) -> psycopg.Connection[Any]:
    return make_database("demo_pack")


@pytest.fixture(scope="module", params=DOMAINS)
def replayed(
    request: pytest.FixtureRequest, pack: Benchmark, demo_db: psycopg.Connection[Any]
) -> list[Replayed]:
    """Every task of one domain, replayed on the module's database (schema recreated
    for the domain, rows reloaded for each task)."""
    name: str = request.param
    fresh_schema(demo_db, load_domain(name).tables)
    return [replay_in_process(demo_db, pack, t) for t in pack.by_domain()[name]]


def test_golden_calls_get_no_error_reply(replayed: list[Replayed]) -> None:
    assert len(replayed) == TASKS_PER_DOMAIN
    failures = [f"{r.task_id} {e}" for r in replayed for e in r.errors]
    assert not failures, "\n".join(failures)


def test_golden_calls_change_the_domain_state(replayed: list[Replayed]) -> None:
    for r in replayed:
        assert state_hash(r.final) != state_hash(r.initial), r.task_id
        changed = {t for t in r.final if r.final[t] != r.initial[t]}
        # a domain record changes, not only the help-desk ticket
        assert any(not t.startswith("zendesk_") for t in changed), f"{r.task_id}: only {changed}"
