"""Consulting golden trajectories, replayed in-process against a throwaway
database on the host PostgreSQL (TBX_TEST_PG_DSN, default the local test
server on /tmp:55432):

* the pure seed hashes to the spec's acceptance value;
* every one of the 101 tasks (traced and held out) starts from the right
  state and runs all its golden calls without a tool error;
* for the 81 traced tasks every reply is byte-identical to the trace and the
  end state hashes to the golden hash.
"""

from __future__ import annotations

import functools
import json
import os
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
import yaml
from conftest import dataset_path
from psycopg import sql

from judge.canonical import canonical_state, state_hash
from servers.consulting.domain import DOMAIN
from servers.engine.seeding import copy_rows, initial_rows, load_state
from servers.engine.store import TOOL_ROLE, Store
from servers.engine.tools import ToolContext, run_tool

PG_DSN = os.environ.get("TBX_TEST_PG_DSN", "host=/tmp port=55432 user=postgres")
SEED_HASH = "c7636b4fee260d405d9c3864ab0b1d1b0e7747a6a6e5ef64cfbf13cad7e659a4"


@pytest.fixture(scope="module")
def conn() -> Iterator[psycopg.Connection[Any]]:
    """A fresh database holding the pure seed, dropped afterwards."""
    name = f"tbx_consulting_golden_{uuid.uuid4().hex[:10]}"
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
    db = psycopg.connect(PG_DSN + f" dbname={name}", autocommit=True)
    load_state(db, DOMAIN.tables, initial_rows(DOMAIN.tables, seed(), None))
    try:
        yield db
    finally:
        db.close()
        admin.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))
        admin.close()


@functools.cache
def seed() -> dict[str, list[dict[str, Any]]]:
    data: dict[str, list[dict[str, Any]]] = json.loads(
        (dataset_path() / "servers" / DOMAIN.module / "seed.json").read_text()
    )
    return data


@functools.cache
def cases() -> dict[str, dict[str, Any]]:
    out = {}
    for path in sorted((dataset_path() / "dataset/test_case" / DOMAIN.server).glob("*.yaml")):
        for tc in yaml.load(path.read_text(), Loader=yaml.CSafeLoader)["test_cases"]:
            out[f"{path.stem}.py:{tc['uid']}"] = tc
    return out


@functools.cache
def traces() -> dict[str, dict[str, Any]]:
    lines = (dataset_path() / "traces" / f"{DOMAIN.server}.jsonl").read_text().splitlines()
    return {tr["task_id"]: tr for tr in map(json.loads, lines)}


def apply_patch(conn: psycopg.Connection[Any], patch: dict[str, list[dict[str, Any]]] | None) -> None:
    """Seed + patch, through the same code the sandbox seeds with; only the
    tables the patch touches are reloaded (the caller rolls everything back)."""
    rows = initial_rows(DOMAIN.tables, seed(), patch)
    for spec in DOMAIN.tables:
        if (patch or {}).get(spec.name):
            conn.execute(sql.SQL("TRUNCATE {}").format(sql.Identifier(spec.name)))
            copy_rows(conn, spec, rows[spec.name])


def current_hash(conn: psycopg.Connection[Any]) -> str:
    """Canonical hash of the live state (also inside an open transaction)."""
    store = Store(conn, DOMAIN.tables)
    return state_hash(canonical_state(DOMAIN.tables, {t.name: store.all(t.name) for t in DOMAIN.tables}))


def replay(conn: psycopg.Connection[Any], task_id: str) -> tuple[str, list[tuple[dict[str, Any], str]]]:
    """Run one task's golden calls; returns the initial hash and (call, reply) pairs."""
    init = cases()[task_id]["init"][DOMAIN.server]
    apply_patch(conn, init.get("data_patch"))
    start = current_hash(conn)
    out = []
    for call in init["golden_test_case"]["tool_interactions"]:
        t = DOMAIN.tool(call["tool"])
        assert t is not None, f"{task_id}: tool {call['tool']} is not served"
        out.append((call, run_tool(t, ToolContext(db=Store(conn, DOMAIN.tables)), call["parameters"])))
    return start, out


def test_pure_seed_hash(conn: psycopg.Connection[Any]) -> None:
    assert current_hash(conn) == SEED_HASH


def test_dataset_has_101_tasks_81_traced() -> None:
    assert len(cases()) == 101
    assert len(traces()) == 81 and set(traces()) <= set(cases())


def test_every_golden_call_succeeds(conn: psycopg.Connection[Any]) -> None:
    """All 101 tasks, held-out ones included: no golden call returns an error;
    traced tasks also reproduce every reply and both hashes exactly."""
    failures: list[str] = []
    calls = 0
    for task_id in cases():
        with conn.transaction() as tx:
            start, results = replay(conn, task_id)
            calls += len(results)
            for call, reply in results:
                if "error" in json.loads(reply):
                    failures.append(f"{task_id} {call['tool']}: {reply[:300]}")
            trace = traces().get(task_id)
            if trace is not None:
                if start != trace["initial_state_hash"]:
                    failures.append(f"{task_id}: initial state hash differs")
                assert len(trace["calls"]) == len(results), task_id
                for i, (want, (_, got)) in enumerate(zip(trace["calls"], results, strict=True)):
                    if got != want["result"]:
                        failures.append(
                            f"{task_id} call {i} {want['tool']}:\n want {want['result'][:300]}\n got  {got[:300]}"
                        )
                if current_hash(conn) != trace["golden_state_hash"]:
                    failures.append(f"{task_id}: golden state hash differs")
            raise psycopg.Rollback(tx)
    assert calls == 584
    assert not failures, "\n".join(failures[:20])


def test_fixture_rolls_back(conn: psycopg.Connection[Any]) -> None:
    """The replay above leaves the pure seed behind."""
    assert current_hash(conn) == SEED_HASH
