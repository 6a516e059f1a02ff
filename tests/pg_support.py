"""Throwaway databases on the host PostgreSQL, shared by every test that runs
domain tools in-process (fixtures in conftest.py: `pg_dsn`, `make_database`,
`seeded_database`).

The server: $TBX_TEST_PG_DSN (older name: $TBX_TEST_PG), default the one
`scripts/test-postgres.sh start` runs on /tmp:55432. When it does not answer,
tests fail (never skip) and say how to start it.
"""

from __future__ import annotations

import functools
import json
import os
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from bench.dataset import load_seed
from bench.replay.local import ensure_tool_role, fresh_schema, reset_rows, seed_state
from servers.engine.rows import to_state_row
from servers.engine.store import Store
from servers.engine.tools import ERROR_PREFIX, NOMINAL_NOW, Domain, ToolContext, run_tool

DEFAULT_DSN = "host=/tmp port=55432 user=postgres"
START_HINT = "run `scripts/test-postgres.sh start` (or point TBX_TEST_PG_DSN at a PostgreSQL server)"

Rows = dict[str, list[dict[str, Any]]]
Patch = Mapping[str, list[dict[str, Any]]] | None


def server_dsn() -> str:
    """Libpq keywords of the test server, without `dbname`."""
    return os.environ.get("TBX_TEST_PG_DSN") or os.environ.get("TBX_TEST_PG") or DEFAULT_DSN


def require_server(dsn: str) -> None:
    """Fail the calling test (never skip) when the server does not answer."""
    try:
        psycopg.connect(f"{dsn} dbname=postgres", connect_timeout=5).close()
        return
    except psycopg.OperationalError as exc:
        reason = str(exc).strip()
    pytest.fail(f"the test PostgreSQL at {dsn!r} does not answer: {START_HINT}.\n{reason}", pytrace=False)


class Databases:
    """Uniquely named databases on one server, all dropped by `close()`; the
    `tbx_tool` role the domain schemas grant to is created when missing."""

    def __init__(self, dsn: str):
        self.dsn = dsn
        self._admin: psycopg.Connection[Any] | None = None
        self._made: list[tuple[str, psycopg.Connection[Any]]] = []

    def create(self, label: str) -> psycopg.Connection[Any]:
        """A new empty database; an autocommit connection to it."""
        if self._admin is None:
            self._admin = psycopg.connect(f"{self.dsn} dbname=postgres", autocommit=True, connect_timeout=5)
            ensure_tool_role(self._admin)
        name = f"tbx_test_{label}_{uuid.uuid4().hex[:10]}"
        self._admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        conn = psycopg.connect(f"{self.dsn} dbname={name}", autocommit=True)
        self._made.append((name, conn))
        return conn

    def close(self) -> None:
        for name, conn in reversed(self._made):
            conn.close()
            assert self._admin is not None
            self._admin.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )
        self._made.clear()
        if self._admin is not None:
            self._admin.close()
            self._admin = None


REPO = Path(__file__).resolve().parents[1]
EXPORT = REPO.parent / "shared/benchmarks/thinkingbox-bench-v1"  # the suite's default benchmark
DEMO_PACK = REPO / "bench" / "packs" / "demo"  # the embedded demo pack (make bench's)


def dataset_path() -> Path:
    """The ThinkingBox-Bench export: $TBX_DATASET, else ../shared beside the repo.
    Tests that need it fail (not skip) when it is missing: CI always has it."""
    path = Path(os.environ.get("TBX_DATASET", EXPORT))
    if not (path / "releases").is_dir():
        pytest.fail(f"benchmark export not found at {path} (set TBX_DATASET)")
    return path


# ---- domain state -------------------------------------------------------------
@functools.cache
def domain_seed(module: str) -> Rows:
    """The export's `servers/<module>/seed.json` (shared: do not mutate)."""
    return load_seed(dataset_path(), module)


def seed_rows(domain: Domain, patch: Patch = None) -> Rows:
    """The domain's seed + `patch`, through the seeding code an attempt starts with."""
    return seed_state(domain, domain_seed(domain.module), patch)


def seed_domain(conn: psycopg.Connection[Any], domain: Domain, patch: Patch = None) -> None:
    """Recreate the domain's tables on `conn` and load seed + `patch`."""
    fresh_schema(conn, domain.tables)
    reset_rows(conn, domain.tables, seed_rows(domain, patch))


def reload(
    conn: psycopg.Connection[Any], domain: Domain, patch: Patch = None, *, only_patched: bool = False
) -> None:
    """Reset the rows to seed + `patch` (every table, or only those `patch` names)."""
    reset_rows(conn, domain.tables, seed_rows(domain, patch), list(patch or {}) if only_patched else None)


@contextmanager
def rolled_back(conn: psycopg.Connection[Any]) -> Iterator[psycopg.Connection[Any]]:
    """`conn` inside a transaction that is always rolled back."""
    with conn.transaction(force_rollback=True):
        yield conn


class DomainTools:
    """One domain's tools and rows on a connection, through the server's pipeline
    (`run_tool`, a Store at the nominal now)."""

    def __init__(self, domain: Domain):
        self.domain = domain
        self.specs = {t.name: t for t in domain.tables}

    def store(self, conn: psycopg.Connection[Any]) -> Store:
        return Store(conn, self.domain.tables, NOMINAL_NOW)

    def call(self, conn: psycopg.Connection[Any], tool: str, /, **params: Any) -> str:
        """The reply text of one call."""
        t = self.domain.tool(tool)
        assert t is not None, f"{tool} is not served"
        return run_tool(t, ToolContext(db=self.store(conn)), params)

    def rows(self, conn: psycopg.Connection[Any], table: str) -> list[dict[str, Any]]:
        """The table's rows in storage order, as Python values."""
        return self.store(conn).all(table)

    def state(self, conn: psycopg.Connection[Any], table: str) -> list[dict[str, Any]]:
        """The table's rows in storage order, in state (dump) form."""
        return [to_state_row(self.specs[table], r) for r in self.rows(conn, table)]

    def put(self, conn: psycopg.Connection[Any], table: str, *rows: dict[str, Any]) -> None:
        """Upsert rows the way a data_patch does (replace in place, else append)."""
        store = self.store(conn)
        for row in rows:
            store.upsert(table, row)


def ok(payload: Any) -> str:
    """A success reply's text (the servers render with `json.dumps` defaults)."""
    return json.dumps(payload)


def err(tool: str, message: str) -> str:
    """A tool's error envelope, as the servers render it."""
    return json.dumps({"error": ERROR_PREFIX + message, "tool": tool})
