"""Each ServiceSpec's readiness probe (`ready`), against real listeners: a
local HTTP server standing in for a tool server / Typesense, and the test
PostgreSQL for the bootstrap connection."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import psycopg
import pytest

from sandbox import PgEndpoint
from sandbox.mcp_server import (
    SERVER_PORT,
    UPSTREAM_SECRET_ENV,
    UPSTREAM_SECRET_HEADER,
    mcp_url,
    server_env,
    server_spec,
)
from sandbox.postgres import PostgresProbe, postgres_spec
from sandbox.services import HttpProbe
from sandbox.typesense import TYPESENSE_PORT, typesense_endpoint, typesense_spec

SECRET = "s3cret"


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.path == "/health" or (
            self.path == "/healthz" and self.headers.get(UPSTREAM_SECRET_HEADER) == SECRET
        ):
            status = 200
        else:
            status = 401 if self.path == "/healthz" else 404
        self.send_response(status)
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def http_port() -> Iterator[int]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_each_service_has_its_probe() -> None:
    server = server_spec("img", "retail", {UPSTREAM_SECRET_ENV: SECRET})
    assert (server.port, server.ready) == (
        SERVER_PORT,
        HttpProbe("/healthz", {UPSTREAM_SECRET_HEADER: SECRET}),
    )
    typesense = typesense_spec("img", "key")
    assert (typesense.port, typesense.ready) == (TYPESENSE_PORT, HttpProbe("/health"))
    assert isinstance(postgres_spec("img").ready, PostgresProbe)


def test_a_server_is_told_its_peers_by_address_and_the_secret() -> None:
    pg = PgEndpoint(host="10.213.0.2", admin_password="adm", tool_password="tool")
    dsn = psycopg.conninfo.conninfo_to_dict(pg.tool_dsn("retail"))
    assert dsn == {
        "host": "10.213.0.2",
        "port": "5432",
        "user": "tbx_tool",
        "password": "tool",
        "dbname": "postgres",
        "options": "-c search_path=tbx_retail",
        "connect_timeout": "5",
    }
    assert psycopg.conninfo.conninfo_to_dict(pg.admin_dsn("retail"))["user"] == "postgres"
    typesense = typesense_endpoint("10.213.0.3", "key")
    assert server_env(pg.tool_dsn("retail"), typesense, SECRET) == {
        "TBX_PG_DSN": pg.tool_dsn("retail"),
        "TBX_TYPESENSE_URL": "http://10.213.0.3:8108",
        "TBX_TYPESENSE_API_KEY": "key",
        "TBX_TYPESENSE_COLLECTION": "policies",
        UPSTREAM_SECRET_ENV: SECRET,
    }
    # without Typesense the server is told nothing of it (search reports itself unavailable)
    assert server_env(pg.tool_dsn("retail"), None, SECRET) == {
        "TBX_PG_DSN": pg.tool_dsn("retail"),
        "TBX_TYPESENSE_URL": "",
        "TBX_TYPESENSE_API_KEY": "",
        "TBX_TYPESENSE_COLLECTION": "",
        UPSTREAM_SECRET_ENV: SECRET,
    }
    assert mcp_url("10.213.0.4") == "http://10.213.0.4:8000/mcp"


def test_server_probe_passes_only_with_the_attempt_secret(http_port: int) -> None:
    with server_spec("img", "retail", {UPSTREAM_SECRET_ENV: SECRET}).ready.opened(
        "127.0.0.1", http_port
    ) as probe:
        probe()  # answers 200 with the secret
    with (
        server_spec("img", "retail", {UPSTREAM_SECRET_ENV: "other"}).ready.opened(
            "127.0.0.1", http_port
        ) as probe,
        pytest.raises(httpx.HTTPStatusError, match="401"),
    ):
        probe()


def test_http_probe_fails_while_nothing_listens() -> None:
    with (
        HttpProbe("/health").opened("127.0.0.1", _free_port()) as probe,
        pytest.raises(ConnectionRefusedError),
    ):
        probe()


def test_postgres_probe_returns_the_bootstrap_connection(pg_dsn: str) -> None:
    params = psycopg.conninfo.conninfo_to_dict(pg_dsn)
    host, port = str(params.get("host", "/tmp")), int(params.get("port", 5432))
    with PostgresProbe().opened(host, port) as probe:
        conn = probe()
    with conn:
        assert conn.autocommit
        assert conn.execute("SELECT current_user").fetchone() == ("postgres",)
    # nothing listens: the TCP connect before libpq's is refused
    with PostgresProbe().opened("127.0.0.1", _free_port()) as probe, pytest.raises(OSError):
        probe()
