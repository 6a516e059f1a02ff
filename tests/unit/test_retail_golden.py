"""Replay every retail task's golden calls (all 98, including the 20 held-out
tasks that have no trace) in-process against the host PostgreSQL.

* no golden call may fail (every reply is a success payload, no "error" key);
* for the traced tasks, every retail reply equals the recorded reply byte for
  byte, and the 16 retail tables of the end state equal the golden canonical
  state (Zendesk tables are covered by the Zendesk toolset's own checks).

Runs in a fresh database created and dropped by this module
($TBX_TEST_PG_DSN, default the throwaway server on /tmp:55432).
"""

from __future__ import annotations

import glob
import gzip
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

from judge.canonical import dump_canonical
from servers.engine.seeding import copy_rows, create_schema, initial_rows
from servers.engine.store import TOOL_ROLE, Store
from servers.engine.tools import ToolContext, run_tool
from servers.retail.domain import DOMAIN

PG_DSN = os.environ.get("TBX_TEST_PG_DSN", "host=/tmp port=55432 user=postgres")
TABLES = DOMAIN.tables
RETAIL_TABLES = [t.name for t in TABLES if not t.name.startswith("zendesk_")]


@pytest.fixture(scope="module")
def pg() -> Iterator[psycopg.Connection[Any]]:
    name = f"tbx_test_retail_golden_{uuid.uuid4().hex[:12]}"
    try:
        admin = psycopg.connect(f"{PG_DSN} dbname=postgres", autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as exc:
        pytest.fail(f"host PostgreSQL not reachable at {PG_DSN!r} (set TBX_TEST_PG_DSN): {exc}")
    admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    conn = psycopg.connect(f"{PG_DSN} dbname={name}", autocommit=True)
    try:
        if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (TOOL_ROLE,)).fetchone() is None:
            conn.execute(sql.SQL("CREATE ROLE {}").format(sql.Identifier(TOOL_ROLE)))
        create_schema(conn, TABLES)
        yield conn
    finally:
        conn.close()
        admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
        admin.close()


@dataclass
class Replay:
    tasks: int = 0
    traced: int = 0
    calls: int = 0
    unserved: list[str] = field(default_factory=list)  # tools the domain does not (yet) serve
    failed: list[str] = field(default_factory=list)  # replies carrying an "error" key
    reply_mismatch: list[str] = field(default_factory=list)  # retail replies differing from the trace
    state_mismatch: list[str] = field(default_factory=list)  # retail tables differing from golden


@pytest.fixture(scope="module")
def replay(pg: psycopg.Connection[Any], dataset: Path) -> Replay:
    seed = json.loads((dataset / "servers" / DOMAIN.module / "seed.json").read_text())
    traces = {}
    for line in (dataset / "traces" / f"{DOMAIN.server}.jsonl").read_text().splitlines():
        tr = json.loads(line)
        traces[tr["task_id"]] = tr
    result = Replay()
    for path in sorted(glob.glob(str(dataset / "dataset/test_case" / DOMAIN.server / "*.yaml"))):
        stem = Path(path).stem
        for tc in yaml.load(Path(path).read_text(), Loader=yaml.CSafeLoader)["test_cases"]:
            task_id = f"{stem}.py:{tc['uid']}"
            init = tc["init"][DOMAIN.server]
            trace = traces.get(task_id)
            _replay_task(pg, seed, task_id, init, trace, dataset / "traces" / "canonical_states", result)
    return result


def _replay_task(
    conn: psycopg.Connection[Any],
    seed: dict[str, Any],
    task_id: str,
    init: dict[str, Any],
    trace: dict[str, Any] | None,
    canonical_dir: Path,
    out: Replay,
) -> None:
    state = initial_rows(TABLES, seed, init.get("data_patch"))
    with conn.transaction():
        for spec in TABLES:
            conn.execute(sql.SQL("DELETE FROM {}").format(sql.Identifier(spec.name)))
            copy_rows(conn, spec, state[spec.name])
    out.tasks += 1
    out.traced += trace is not None
    calls = init["golden_test_case"]["tool_interactions"]
    recorded = trace["calls"] if trace else []
    for i, call in enumerate(calls):
        out.calls += 1
        where = f"{task_id} call {i} {call['tool']}"
        t = DOMAIN.tool(call["tool"])
        if t is None:
            out.unserved.append(where)
            continue
        reply = run_tool(t, ToolContext(db=Store(conn, TABLES)), call["parameters"])
        payload = json.loads(reply)
        if isinstance(payload, dict) and "error" in payload:
            out.failed.append(f"{where}: {payload['error']}")
        if (
            not call["tool"].startswith("zendesk_")
            and i < len(recorded)
            and recorded[i]["tool"] == call["tool"]
            and recorded[i]["parameters"] == call["parameters"]
            and recorded[i]["result"] != reply
        ):
            out.reply_mismatch.append(f"{where}\n  want {recorded[i]['result']}\n  got  {reply}")
    if trace is not None:
        cs = canonical_dir / (task_id.replace(":", "__") + ".json.gz")
        golden = json.loads(gzip.decompress(cs.read_bytes()))
        ours = dump_canonical(conn, TABLES)
        for table in RETAIL_TABLES:
            if ours.get(table) != golden.get(table):
                out.state_mismatch.append(f"{task_id}: {table}")


def test_all_98_tasks_replayed(replay: Replay) -> None:
    assert replay.tasks == 98
    assert replay.traced == 78
    assert replay.calls == 435


def test_retail_golden_calls_succeed(replay: Replay) -> None:
    retail_failures = [f for f in replay.failed if " zendesk_" not in f]
    assert retail_failures == []


def test_retail_golden_replies_match_traces(replay: Replay) -> None:
    assert replay.reply_mismatch == []


def test_retail_golden_end_states_match(replay: Replay) -> None:
    assert replay.state_mismatch == []


def test_every_golden_call_is_served_and_succeeds(replay: Replay) -> None:
    """All 435 golden calls, Zendesk ones included (needs the Zendesk toolset)."""
    assert replay.unserved == []
    assert replay.failed == []
