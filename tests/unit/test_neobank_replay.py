"""Every neobank task of the release list (104, held-out ones included) replayed
in-process on the host PostgreSQL: each golden call must succeed; where a
trace exists (83 tasks) every reply must be byte-identical and the initial and
final canonical hashes must equal the reference's. Each task runs on the seed + its
data_patch inside a transaction that is rolled back afterwards."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import pytest
import yaml
from psycopg import sql

from bench.replay_local import load_cases
from judge.canonical import State, canonical_state, state_hash
from servers.engine.seeding import copy_rows, create_schema, initial_rows
from servers.engine.store import TOOL_ROLE, Store
from servers.engine.tools import ToolContext, run_tool
from servers.neobank.domain import DOMAIN

PG_DSN = os.environ.get("TBX_TEST_PG_DSN", "host=/tmp port=55432 user=postgres")
GROUP1 = "sandbox_neobank_support_v1_group1.py"


@pytest.fixture(scope="module")
def pg() -> Iterator[psycopg.Connection[Any]]:
    """A fresh database (empty neobank schema) for this module, dropped afterwards."""
    name = f"tbx_neobank_replay_{uuid.uuid4().hex[:10]}"
    try:
        admin = psycopg.connect(PG_DSN + " dbname=postgres", autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as exc:
        pytest.fail(f"host PostgreSQL not reachable at {PG_DSN!r} (set TBX_TEST_PG_DSN): {exc}")
    admin.execute(
        sql.SQL(
            "DO $$BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = {}) THEN CREATE ROLE {}; END IF; END$$"
        ).format(sql.Literal(TOOL_ROLE), sql.Identifier(TOOL_ROLE))
    )
    admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    conn = psycopg.connect(PG_DSN + f" dbname={name}", autocommit=True)
    try:
        with conn.transaction():
            create_schema(conn, DOMAIN.tables)
        yield conn
    finally:
        conn.close()
        admin.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))
        admin.close()


@dataclass
class Run:
    task_id: str
    calls: list[dict[str, Any]]
    replies: list[str] = field(default_factory=list)
    initial: State = field(default_factory=dict)
    final: State = field(default_factory=dict)


def _canonical(conn: psycopg.Connection[Any]) -> State:
    store = Store(conn, DOMAIN.tables)
    return canonical_state(DOMAIN.tables, {spec.name: store.all(spec.name) for spec in DOMAIN.tables})


@pytest.fixture(scope="module")
def release_ids(dataset: Path) -> list[str]:
    listed = yaml.safe_load((dataset / "releases/testlist_thinkingbox_bench_v1.yaml").read_text())
    ids = [t for t in _flatten(listed) if t.startswith("sandbox_neobank_support_v1_")]
    assert len(ids) == 104
    return ids


def _flatten(node: Any) -> list[str]:
    if isinstance(node, str):
        return [node]
    if isinstance(node, dict):
        return [s for v in node.values() for s in _flatten(v)]
    if isinstance(node, list):
        return [s for v in node for s in _flatten(v)]
    return []


@pytest.fixture(scope="module")
def cases(dataset: Path) -> dict[str, dict[str, Any]]:
    return load_cases(dataset, DOMAIN.server)


@pytest.fixture(scope="module")
def runs(
    pg: psycopg.Connection[Any], dataset: Path, release_ids: list[str], cases: dict[str, dict[str, Any]]
) -> dict[str, Run]:
    seed = json.loads((dataset / "servers" / DOMAIN.module / "seed.json").read_text())
    out: dict[str, Run] = {}
    for task_id in release_ids:
        init = cases[task_id]["init"][DOMAIN.server]
        rows = initial_rows(DOMAIN.tables, seed, init.get("data_patch"))
        run = Run(task_id, init["golden_test_case"]["tool_interactions"])
        with pg.transaction(force_rollback=True):
            for spec in DOMAIN.tables:
                copy_rows(pg, spec, rows[spec.name])
            run.initial = _canonical(pg)
            for call in run.calls:
                t = DOMAIN.tool(call["tool"])
                if t is None:
                    run.replies.append(json.dumps({"error": f"tool {call['tool']} is not served"}))
                    continue
                run.replies.append(run_tool(t, ToolContext(db=Store(pg, DOMAIN.tables)), call["parameters"]))
            run.final = _canonical(pg)
        out[task_id] = run
    return out


@pytest.fixture(scope="module")
def traces(dataset: Path) -> dict[str, dict[str, Any]]:
    lines = (dataset / "traces" / f"{DOMAIN.server}.jsonl").read_text().splitlines()
    return {tr["task_id"]: tr for tr in map(json.loads, lines)}


def test_every_release_task_runs_its_golden_calls_without_error(runs: dict[str, Run]) -> None:
    failures = []
    for run in runs.values():
        for call, reply in zip(run.calls, run.replies, strict=True):
            decoded = json.loads(reply)
            if isinstance(decoded, dict) and "error" in decoded:
                failures.append(f"{run.task_id} {call['tool']}: {reply[:300]}")
    assert sum(len(r.calls) for r in runs.values()) > 700
    assert not failures, "\n".join(failures)


def test_traced_tasks_reproduce_replies_and_hashes(
    runs: dict[str, Run], traces: dict[str, dict[str, Any]]
) -> None:
    problems = []
    compared = 0
    for task_id, run in runs.items():
        trace = traces.get(task_id)
        if trace is None:  # held out
            continue
        compared += 1
        if state_hash(run.initial) != trace["initial_state_hash"]:
            problems.append(f"{task_id}: initial hash differs")
        for i, (call, reply) in enumerate(zip(trace["calls"], run.replies, strict=True)):
            if reply != call["result"]:
                problems.append(
                    f"{task_id} call {i} {call['tool']}:\n  want {call['result'][:400]}\n  got  {reply[:400]}"
                )
        if state_hash(run.final) != trace["golden_state_hash"]:
            problems.append(f"{task_id}: golden end-state hash differs")
    assert compared == len(traces) == 83
    assert not problems, "\n".join(problems)


def test_held_out_ie_001_worked_example(runs: dict[str, Run]) -> None:
    """spec §5.2: the SEV1 incident access grant and its two notifications."""
    final = runs[f"{GROUP1}:test_ie_001"].final
    access = {r["id"]: r for r in final["sandbox_neobank_support_main_models_okta_app_access"]}
    assert access["OAA-00000012"] == {
        "id": "OAA-00000012",
        "employee_id": "WD-637182",
        "app_name": "Production database",
        "access_level": "read_only",
        "granted_at": None,
        "granted_by": "system",
        "is_active": True,
        "revoked_at": None,
        "is_temporary": True,
        "expires_at": "2025-10-02T13:00:00Z",
    }
    notes = {r["id"]: r for r in final["sandbox_neobank_support_main_models_email_notifications"]}
    expected = {
        "NTF-00000007": ("post_facto_manager_alert", "WD-681453"),
        "NTF-00000008": ("incident_access_granted", "WD-753918"),
    }
    for note_id, (kind, recipient) in expected.items():
        note = notes[note_id]
        assert (note["notification_type"], note["recipient_id"]) == (kind, recipient)
        assert note["priority"] == "urgent" and note["ticket_id"] == "6" and note["cc_emails"] is None
        assert note["sent_at"] is None and note["delivery_status"] == "queued" and note["sent_by"] == "system"
    # The patch replaced a seed employee in place (store order kept).
    employees = runs[f"{GROUP1}:test_ie_001"].initial["sandbox_neobank_support_main_models_employees"]
    sarah = next(e for e in employees if e["id"] == "WD-681453")
    assert (sarah["role"], sarah["manager_id"]) == ("VP of Engineering", "WD-524893")
