"""An attempt's PostgreSQL: its container, its connection strings, its readiness
probe, and what the host does through it (the bootstrap password replaced by
per-attempt ones, one schema per domain filled by the preparer, the write
marker a prepared state is handed over under).

The tool servers connect as `TOOL_ROLE` (row rights on their domain's tables
only); the host (seeding, the judge's dumps) as the superuser, whose password
exists only in this process.
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql
from pydantic import BaseModel

from sandbox.preparer import PreparedState, Preparer
from sandbox.services import Limits, ServiceSpec, tmpfs_mount

PG_PORT = 5432
PG_BOOTSTRAP_PASSWORD = "tbx-bootstrap"  # replaced by per-attempt passwords at seed time
# The role the servers connect as: created (NOLOGIN, with its limits) by the
# postgres image (images/postgres/init-template.sh), given a password at prepare time.
TOOL_ROLE = "tbx_tool"
PG_UID = 999  # the image runs PostgreSQL as this uid (its tmpfs mounts are owned by it)


@dataclass(frozen=True)
class PostgresProbe:
    """Ready once the image's bootstrap superuser can connect; the probe returns
    that connection (the sandbox seeds through it and then rotates the password)."""

    @contextlib.contextmanager
    def opened(self, host: str, port: int) -> Iterator[Callable[[], psycopg.Connection[Any]]]:
        dsn = psycopg.conninfo.make_conninfo(
            host=host,
            port=port,
            user="postgres",
            password=PG_BOOTSTRAP_PASSWORD,
            dbname="postgres",
            connect_timeout=2,
        )

        def probe() -> psycopg.Connection[Any]:
            # A refused TCP connect first, as for HttpProbe: libpq's failed attempt costs
            # several times more, and PostgreSQL listens only once its start is done.
            if not host.startswith("/"):  # a Unix socket directory has no TCP port
                socket.create_connection((host, port), timeout=2.0).close()
            return psycopg.connect(dsn, autocommit=True)

        yield probe


def postgres_spec(image: str, limits: Limits | None = None) -> ServiceSpec:
    limits = limits or Limits()
    return ServiceSpec(
        role="postgres",
        image=image,
        port=PG_PORT,
        ready=PostgresProbe(),
        env={
            "TBX_PG_STATEMENT_SECONDS": str(limits.pg_statement_seconds),
            "TBX_PG_IDLE_SECONDS": str(limits.pg_idle_seconds),
        },
        # A command-line setting: only a superuser could change it per session.
        command=["-c", f"temp_file_limit={limits.pg_temp_file_limit}"],
        tmpfs={
            "/var/lib/postgresql": tmpfs_mount(limits.pg_data, PG_UID),
            "/var/lib/pgwal": tmpfs_mount(limits.pg_wal, PG_UID),
            "/tmp": tmpfs_mount("16m", PG_UID),
        },
    )


def schema_name(domain: str) -> str:
    return f"tbx_{domain}"


def _dsn(host: str, port: int, user: str, password: str, domain: str) -> str:
    return psycopg.conninfo.make_conninfo(
        host=host,
        port=port,
        user=user,
        password=password,
        dbname="postgres",
        options=f"-c search_path={schema_name(domain)}",
        connect_timeout=5,
    )


class PgEndpoint(BaseModel):
    host: str
    port: int = PG_PORT
    admin_password: str
    tool_password: str

    def admin_dsn(self, domain: str) -> str:
        return _dsn(self.host, self.port, "postgres", self.admin_password, domain)

    def tool_dsn(self, domain: str) -> str:
        return _dsn(self.host, self.port, TOOL_ROLE, self.tool_password, domain)

    def psql_command(self, domain: str) -> str:
        return (
            f"PGPASSWORD='{self.admin_password}' PGOPTIONS='-c search_path={schema_name(domain)}' "
            f"psql -h {self.host} -p {self.port} -U postgres postgres"
        )


def seed(
    bootstrap: psycopg.Connection[Any], pg: PgEndpoint, domains: Sequence[str], prepare: Preparer | None
) -> None:
    """Through the probe's bootstrap connection (closed at the end): the per-attempt
    passwords, then one schema per domain, usable by the tool role, filled by `prepare`."""
    with bootstrap as conn:
        # Per-attempt secrets replace the image's bootstrap password before anything else connects.
        conn.execute(sql.SQL("ALTER ROLE postgres PASSWORD {}").format(sql.Literal(pg.admin_password)))
        conn.execute(
            sql.SQL("ALTER ROLE {} LOGIN PASSWORD {}").format(
                sql.Identifier(TOOL_ROLE), sql.Literal(pg.tool_password)
            )
        )
        for d in domains:
            schema = sql.Identifier(schema_name(d))
            conn.execute(sql.SQL("CREATE SCHEMA {}").format(schema))
            conn.execute(sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(schema, sql.Identifier(TOOL_ROLE)))
            conn.execute(sql.SQL("SET search_path TO {}").format(schema))
            if prepare is not None:
                prepare.seed(conn, d, TOOL_ROLE)


def write_marker(conn: psycopg.Connection[Any]) -> str:
    """Changes whenever a transaction has written since (any INSERT, UPDATE, DELETE or DDL
    takes a transaction id: the snapshot's xmax moves, and one in progress is listed).
    Reads take none, and autovacuum is off in tbx's PostgreSQL image."""
    row = conn.execute("SELECT pg_current_snapshot()::text").fetchone()
    assert row is not None
    return str(row[0])


def read_prepared(
    pg: PgEndpoint, domains: Sequence[str], prepare: Preparer
) -> tuple[PreparedState, psycopg.Connection[Any]] | None:
    """The preparer's snapshot of every domain, after the write marker it is valid under,
    and the marker's connection, kept open for the hand-over's check (no new login then).
    None when the preparer keeps no snapshot."""
    conn = psycopg.connect(pg.admin_dsn(domains[0]), autocommit=True)
    try:
        marker = write_marker(conn)  # before the reads: a write during them changes it too
        states: dict[str, Any] = {}
        for d in domains:
            conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema_name(d))))
            state = prepare.snapshot(conn, d)
            if state is None:
                conn.close()
                return None
            states[d] = state
    except BaseException:
        conn.close()
        raise
    return PreparedState(fingerprint=prepare.fingerprint(), marker=marker, states=states), conn


def unchanged_states(
    prepared: PreparedState | None, conn: psycopg.Connection[Any], fingerprint: str
) -> dict[str, Any] | None:
    """The prepared states if a preparer of `fingerprint` read them and no transaction
    has written since (the marker on `conn` is unchanged); else None. Closes `conn`."""
    try:
        fresh = (
            prepared is not None
            and prepared.fingerprint == fingerprint
            and write_marker(conn) == prepared.marker
        )
    except psycopg.Error:
        fresh = False
    finally:
        conn.close()
    return prepared.states if fresh and prepared is not None else None
