"""`tbx up --pg-seed FILE.json --no-typesense --json` end to end, as a user runs it."""

from __future__ import annotations

import asyncio
import json
import signal
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from bench.replay.mcp_calls import replay_calls
from sandbox import AttemptHandle, leftovers

pytestmark = pytest.mark.docker


def _read_json(proc: Any, timeout: float) -> dict[str, Any]:
    """The endpoints document `--json` prints (one line)."""
    line = proc.wait_line(lambda line: line.lstrip().startswith("{"), timeout)
    doc: dict[str, Any] = json.loads(line)
    return doc


def test_tbx_up_serves_the_seed_until_ctrl_c(
    base_images: Any, retail_seed_file: Path, spawn: Any, tbx: str
) -> None:
    seed = json.loads(retail_seed_file.read_text())
    proc = spawn([tbx, "up", "--pg-seed", str(retail_seed_file), "--no-typesense", "--json"])
    doc = _read_json(proc, timeout=90)
    handle = AttemptHandle.model_validate(doc["handle"])
    run = handle.run_id
    assert doc["run_id"] == run and doc["servers"] == handle.servers
    assert list(handle.servers) == ["retail"] and handle.typesense_url is None
    assert len(leftovers(run)[0]) == 2

    # What the printed `psql` line does: admin login, the domain's schema on the search path.
    assert (
        f"PGPASSWORD='{handle.pg.admin_password}'" in doc["psql"] and f"-h {handle.pg.host} " in doc["psql"]
    )
    conninfo = psycopg.conninfo.make_conninfo(
        host=handle.pg.host,
        port=handle.pg.port,
        user="postgres",
        password=handle.pg.admin_password,
        dbname="postgres",
        options="-c search_path=tbx_retail",
    )
    with psycopg.connect(conninfo) as conn:
        for table, rows in seed.items():
            count = conn.execute(f'SELECT count(*) FROM "{table}"').fetchone()
            assert count == (len(rows),), table

    # The printed MCP endpoints (the proxy's, token in the path, and the server's own) answer
    # with the seeded data.
    ticket = seed["zendesk_tickets"][0]
    call = ("zendesk_get_item", {"table": "tickets", "id": str(ticket["id"])})
    assert doc["server_headers"] == handle.server_headers and handle.upstream_secret
    for url, headers in ((doc["url_with_token"], None), (handle.servers["retail"], doc["server_headers"])):
        [rec] = asyncio.run(replay_calls(url, [call], headers))
        assert not rec.is_error and json.loads(rec.result)["item"]["subject"] == ticket["subject"], url
    # the server's own endpoint answers nothing without the attempt's secret
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    for wrong in ({}, {"X-Tbx-Upstream-Secret": "guess"}):
        r = httpx.post(handle.servers["retail"], json=body, headers=wrong, timeout=10)
        assert r.status_code == 401, r.text

    proc.send(signal.SIGINT)
    assert proc.finish(30) == 128 + signal.SIGINT, proc.err  # Ctrl-C, after a clean teardown
    assert "tearing down" in proc.err and "Traceback" not in proc.err
    assert leftovers(run) == ([], [])
