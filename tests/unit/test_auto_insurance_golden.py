"""Replays every golden tool call of the 100 auto-insurance tasks (80 traced +
20 held out) in-process against a throwaway database on the host PostgreSQL:
no call may fail; for traced tasks every reply must equal the recorded text and
the initial and final canonical hashes must equal the reference's."""

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

from judge.canonical import dump_canonical, state_hash
from servers.auto_insurance.domain import DOMAIN
from servers.engine.seeding import copy_rows, initial_rows, load_state
from servers.engine.store import TOOL_ROLE, Store
from servers.engine.tools import ToolContext, run_tool

PG_DSN = os.environ.get("TBX_TEST_PG_DSN", "host=/tmp port=55432 user=postgres")
SEED_ONLY_HASH = "881557317a8cc116f09b9ed6fab6eed1cf4cae3c02b49d1e9629d37e4a0d7d7b"


@pytest.fixture(scope="module")
def conn() -> Iterator[psycopg.Connection[Any]]:
    """A fresh database for this module, dropped afterwards."""
    name = f"tbx_ai_golden_{uuid.uuid4().hex[:10]}"
    try:
        admin = psycopg.connect(PG_DSN + " dbname=postgres", autocommit=True)
    except psycopg.OperationalError as exc:
        pytest.fail(f"host PostgreSQL not reachable at {PG_DSN!r} (set TBX_TEST_PG_DSN): {exc}")
    admin.execute(
        sql.SQL(
            "DO $$BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = {}) THEN CREATE ROLE {}; END IF; END$$"
        ).format(sql.Literal(TOOL_ROLE), sql.Identifier(TOOL_ROLE))
    )
    admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    db = psycopg.connect(PG_DSN + f" dbname={name}", autocommit=True)
    load_state(db, DOMAIN.tables, {})
    try:
        yield db
    finally:
        db.close()
        admin.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))
        admin.close()


def reset(conn: psycopg.Connection[Any], rows: dict[str, list[dict[str, Any]]]) -> None:
    with conn.transaction():
        names = sql.SQL(", ").join(sql.Identifier(t.name) for t in DOMAIN.tables)
        conn.execute(sql.SQL("TRUNCATE {} RESTART IDENTITY").format(names))
        for spec in DOMAIN.tables:
            copy_rows(conn, spec, rows[spec.name])


@dataclass
class Replay:
    tasks: int = 0
    calls: int = 0
    traced: int = 0
    seed_only_hash: str = ""
    errors: list[str] = field(default_factory=list)
    reply_mismatches: list[str] = field(default_factory=list)
    hash_mismatches: list[str] = field(default_factory=list)


@pytest.fixture(scope="module")
def replay(conn: psycopg.Connection[Any], dataset: Path) -> Replay:
    seed = json.loads((dataset / "servers" / DOMAIN.module / "seed.json").read_text())
    traces = {}
    for line in (dataset / "traces" / f"{DOMAIN.server}.jsonl").read_text().splitlines():
        tr = json.loads(line)
        traces[tr["task_id"].split(":", 1)[1]] = tr
    out = Replay()
    reset(conn, initial_rows(DOMAIN.tables, seed, None))
    out.seed_only_hash = state_hash(dump_canonical(conn, DOMAIN.tables))
    for path in sorted((dataset / "dataset/test_case" / DOMAIN.server).glob("*.yaml")):
        for tc in yaml.load(path.read_text(), Loader=yaml.CSafeLoader)["test_cases"]:
            out.tasks += 1
            uid = tc["uid"]
            init = tc["init"][DOMAIN.server]
            reset(conn, initial_rows(DOMAIN.tables, seed, init.get("data_patch")))
            trace = traces.get(uid)
            if trace is not None:
                out.traced += 1
                if state_hash(dump_canonical(conn, DOMAIN.tables)) != trace["initial_state_hash"]:
                    out.hash_mismatches.append(f"{uid}: initial state")
            for i, c in enumerate(init["golden_test_case"]["tool_interactions"]):
                out.calls += 1
                t = DOMAIN.tool(c["tool"])
                if t is None:
                    out.errors.append(f"{uid} call {i}: {c['tool']} is not served")
                    continue
                reply = run_tool(t, ToolContext(db=Store(conn, DOMAIN.tables)), c["parameters"])
                body = json.loads(reply)
                if isinstance(body, dict) and "error" in body:
                    out.errors.append(f"{uid} call {i} {c['tool']}: {body['error'][:300]}")
                if trace is not None:
                    recorded = trace["calls"][i]
                    assert recorded["tool"] == c["tool"]
                    if reply != recorded["result"]:
                        out.reply_mismatches.append(
                            f"{uid} call {i} {c['tool']}:\n  want {recorded['result'][:400]}\n  got  {reply[:400]}"
                        )
            if (
                trace is not None
                and state_hash(dump_canonical(conn, DOMAIN.tables)) != trace["golden_state_hash"]
            ):
                out.hash_mismatches.append(f"{uid}: golden end state")
    return out


def test_seed_only_state_hash(replay: Replay) -> None:
    assert replay.seed_only_hash == SEED_ONLY_HASH


def test_every_golden_call_of_all_100_tasks_succeeds(replay: Replay) -> None:
    assert (replay.tasks, replay.calls) == (100, 465)
    assert not replay.errors, f"{len(replay.errors)} failing golden calls:\n" + "\n".join(replay.errors[:40])


def test_traced_replies_are_byte_identical(replay: Replay) -> None:
    assert replay.traced == 80
    assert not replay.reply_mismatches, f"{len(replay.reply_mismatches)} replies differ:\n" + "\n".join(
        replay.reply_mismatches[:20]
    )


def test_traced_initial_and_golden_state_hashes(replay: Replay) -> None:
    assert not replay.hash_mismatches, f"{len(replay.hash_mismatches)} hash mismatches:\n" + "\n".join(
        replay.hash_mismatches[:40]
    )
