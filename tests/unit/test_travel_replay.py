"""Replay the golden calls of all 104 travel tasks of the release list
in-process against the host PostgreSQL (held-out tasks included: their golden
calls come from the dataset's test-case files).

* no golden call may come back as an error (the reference answers them all);
* for the 83 traced tasks, every reply must equal the traced reply byte for
  byte and the end state must hash to the golden hash.

The replay runs once per module; each test asserts one aspect of it."""

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
from judge.canonical import canonical_state, state_hash
from servers.engine.seeding import copy_rows, initial_rows, load_state
from servers.engine.store import Store
from servers.engine.tools import NOMINAL_NOW, ToolContext, run_tool
from servers.registry import load_domain

PG = os.environ.get("TBX_TEST_PG", "host=/tmp port=55432 user=postgres")
DOMAIN = load_domain("travel")


@dataclass
class Replay:
    tasks: list[str] = field(default_factory=list)
    traced: int = 0
    golden_calls: int = 0
    calls: int = 0
    missing_tools: set[str] = field(default_factory=set)
    errors: list[str] = field(default_factory=list)
    reply_mismatches: list[str] = field(default_factory=list)
    hash_mismatches: list[str] = field(default_factory=list)


def _release_tasks(dataset: Path) -> list[str]:
    listed = yaml.safe_load((dataset / "releases" / "testlist_thinkingbox_bench_v1.yaml").read_text())
    return [t for t in listed if t.startswith(f"{DOMAIN.server}_")]


@pytest.fixture(scope="module")
def replay(dataset: Path) -> Iterator[Replay]:
    seed = json.loads((dataset / "servers" / DOMAIN.module / "seed.json").read_text())
    cases = load_cases(dataset, DOMAIN.server)
    traces = {
        tr["task_id"]: tr
        for tr in map(json.loads, (dataset / "traces" / f"{DOMAIN.server}.jsonl").read_text().splitlines())
    }
    name = f"tbx_travel_replay_{uuid.uuid4().hex[:12]}"
    try:
        admin = psycopg.connect(f"{PG} dbname=postgres", autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as exc:
        pytest.fail(f"host PostgreSQL is not reachable at {PG!r} (start it, or set TBX_TEST_PG): {exc}")
    admin.execute(f'CREATE DATABASE "{name}"')
    conn = psycopg.connect(f"{PG} dbname={name}", autocommit=True)
    try:
        load_state(conn, DOMAIN.tables, initial_rows(DOMAIN.tables, seed, None, NOMINAL_NOW))
        yield _run(conn, seed, cases, traces, _release_tasks(dataset))
    finally:
        conn.close()
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()


def _run(
    conn: psycopg.Connection[Any],
    seed: dict[str, Any],
    cases: dict[str, Any],
    traces: dict[str, Any],
    tasks: list[str],
) -> Replay:
    out = Replay(tasks=tasks)
    store = Store(conn, DOMAIN.tables, NOMINAL_NOW)
    with conn.transaction(force_rollback=True):
        for task_id in tasks:
            conn.execute("SAVEPOINT task")
            init = cases[task_id]["init"][DOMAIN.server]
            patch = init.get("data_patch") or {}
            # Seed + patch through the real seeding code; only patched tables are reloaded.
            rows = initial_rows(DOMAIN.tables, seed, patch, NOMINAL_NOW)
            for spec in DOMAIN.tables:
                if patch.get(spec.name):
                    conn.execute(sql.SQL("DELETE FROM {}").format(sql.Identifier(spec.name)))
                    copy_rows(conn, spec, rows[spec.name])
            trace = traces.get(task_id)
            out.traced += trace is not None
            calls = init["golden_test_case"]["tool_interactions"]
            out.golden_calls += len(calls)
            for i, call in enumerate(calls):
                t = DOMAIN.tool(call["tool"])
                if t is None:
                    out.missing_tools.add(call["tool"])
                    continue
                out.calls += 1
                reply = run_tool(t, ToolContext(db=store), call.get("parameters") or {})
                body = json.loads(reply)
                if isinstance(body, dict) and "error" in body:
                    out.errors.append(f"{task_id} call {i} {call['tool']}: {body['error']}")
                if trace is not None:
                    want = trace["calls"][i]
                    assert want["tool"] == call["tool"], (
                        f"{task_id}: trace and test case disagree at call {i}"
                    )
                    if reply != want["result"]:
                        out.reply_mismatches.append(
                            f"{task_id} call {i} {call['tool']}\n  want {want['result'][:400]}\n  got  {reply[:400]}"
                        )
            if trace is not None and not (out.missing_tools & {c["tool"] for c in calls}):
                state = canonical_state(
                    DOMAIN.tables, {spec.name: store.all(spec.name) for spec in DOMAIN.tables}
                )
                if state_hash(state) != trace["golden_state_hash"]:
                    out.hash_mismatches.append(task_id)
            conn.execute("ROLLBACK TO SAVEPOINT task")
    return out


def test_release_list_has_the_104_travel_tasks(replay: Replay) -> None:
    assert len(replay.tasks) == 104
    assert replay.traced == 83
    assert replay.golden_calls == 917


def test_every_golden_call_names_a_served_tool(replay: Replay) -> None:
    assert replay.missing_tools == set(), f"tools not served: {sorted(replay.missing_tools)}"


def test_no_golden_call_of_a_release_task_fails(replay: Replay) -> None:
    assert replay.calls > 0
    assert replay.errors == [], "\n".join(replay.errors[:20])


def test_traced_replies_are_byte_identical(replay: Replay) -> None:
    assert replay.reply_mismatches == [], "\n".join(replay.reply_mismatches[:10])


def test_traced_end_states_hash_to_the_golden_hashes(replay: Replay) -> None:
    assert replay.hash_mismatches == [], f"{len(replay.hash_mismatches)} tasks: {replay.hash_mismatches[:20]}"
