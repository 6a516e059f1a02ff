"""Two attempts share nothing: not a row, not a network path."""

from __future__ import annotations

import asyncio
import errno
import json
from typing import Any

import psycopg
import pytest

from bench.replay.mcp_calls import replay_calls
from judge import canonical_state, dump_canonical, state_hash
from sandbox import AttemptHandle
from sandbox.postgres import PG_PORT
from servers.registry import load_domain

pytestmark = pytest.mark.docker

TABLES = load_domain("retail").tables


def _state_hash(handle: AttemptHandle) -> str:
    with psycopg.connect(handle.pg.admin_dsn("retail")) as conn:
        return state_hash(dump_canonical(conn, TABLES))


def _count(handle: AttemptHandle, table: str) -> int:
    with psycopg.connect(handle.pg.admin_dsn("retail")) as conn:
        row = conn.execute(f'SELECT count(*) FROM "{table}"').fetchone()
    assert row is not None
    return int(row[0])


def test_writes_in_one_sandbox_are_invisible_in_the_other(
    sandbox_pair: Any, retail_rows: dict[str, list[dict[str, Any]]]
) -> None:
    a, b = sandbox_pair.a, sandbox_pair.b
    assert a.attempt_id != b.attempt_id and a.network != b.network
    assert a.pg.admin_password != b.pg.admin_password and a.pg.tool_password != b.pg.tool_password
    seeded = state_hash(canonical_state(TABLES, retail_rows))
    assert _state_hash(a) == _state_hash(b) == seeded

    # A write through A's MCP server (tool role, the agent's path) ...
    tickets = len(retail_rows["zendesk_tickets"])
    [rec] = asyncio.run(
        replay_calls(
            a.servers["retail"],
            [("zendesk_create_item", {"table": "tickets", "item": {"subject": "isolation probe"}})],
            a.server_headers,
        )
    )
    assert not rec.is_error, rec.result
    created = json.loads(rec.result)["item"]
    assert created["subject"] == "isolation probe"
    assert _count(a, "zendesk_tickets") == tickets + 1
    assert _count(b, "zendesk_tickets") == tickets

    # ... and one through A's admin DSN (the judge's path).
    victim = retail_rows["zendesk_articles"][0]["id"]
    with psycopg.connect(a.pg.admin_dsn("retail")) as conn:
        assert conn.execute("DELETE FROM zendesk_articles WHERE id = %s", (victim,)).rowcount == 1
    with psycopg.connect(b.pg.admin_dsn("retail")) as conn:
        still = conn.execute("SELECT count(*) FROM zendesk_articles WHERE id = %s", (victim,)).fetchone()
    assert still == (1,)

    # B's whole canonical state is still exactly the seed; A's is not.
    assert _state_hash(b) == seeded
    assert _state_hash(a) != seeded
    # B's server reads B's database: the ticket created in A does not exist there.
    [get] = asyncio.run(
        replay_calls(
            b.servers["retail"],
            [("zendesk_get_item", {"table": "tickets", "id": created["id"]})],
            b.server_headers,
        )
    )
    assert "isolation probe" not in get.result


def test_credentials_of_one_sandbox_do_not_open_the_other(sandbox_pair: Any) -> None:
    a, b = sandbox_pair.a, sandbox_pair.b
    wrong = b.pg.model_copy(update={"admin_password": a.pg.admin_password})
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        psycopg.connect(wrong.admin_dsn("retail")).close()


def test_sandbox_networks_cannot_reach_each_other(sandbox_pair: Any, dexec: Any) -> None:
    a, b = sandbox_pair.a, sandbox_pair.b
    for here, there in ((a, b), (b, a)):
        server = here.containers["server-retail"]
        # Positive control: the same probe reaches the attempt's own PostgreSQL ...
        assert dexec.connect_errno(server, here.pg.host, PG_PORT) == 0
        # ... but not the other attempt's PostgreSQL or MCP server.
        other = dexec.connect_errno(server, there.pg.host, PG_PORT)
        assert other != 0, f"{here.attempt_id} reached {there.attempt_id}'s postgres"
        mcp_host = there.servers["retail"].split("//")[1].split(":")[0]
        assert dexec.connect_errno(server, mcp_host, 8000) != 0
        # No service names resolve at all: peers are addressed by IP (test_sandbox_dns.py).
        code, out = dexec(server, ["getent", "hosts", "postgres"])
        assert code != 0, out


def test_dropped_packets_not_refused(sandbox_pair: Any, dexec: Any) -> None:
    """Cross-network traffic is dropped by Docker's isolation rules (the connect times out),
    not refused by the other side: nothing about the other attempt is observable."""
    a, b = sandbox_pair.a, sandbox_pair.b
    result = dexec.connect_errno(a.containers["server-retail"], b.pg.host, PG_PORT)
    assert result in (errno.EAGAIN, errno.ETIMEDOUT, errno.ENETUNREACH, errno.EHOSTUNREACH)
