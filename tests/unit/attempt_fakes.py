"""The attempt unit's fakes without Docker: a "sandbox" that is a fresh database on the
host test PostgreSQL with the domain's real MCP server in process on 127.0.0.1
(`FakeProvider`, `InProcessSession`), the demo pack's task they run, and the golden
end state by the servers' own pipeline (`golden_in_process`)."""

from __future__ import annotations

import asyncio
import secrets
import threading
import time
from collections.abc import Mapping
from typing import Any

import psycopg
import uvicorn
from pg_support import DEMO_PACK, Databases

from bench.dataset import Benchmark, Task
from bench.prepare import TaskPreparation
from bench.replay.local import fresh_schema, reset_rows
from bench.run.attempt import attempt_spec
from judge import GoldenState, ToolCallView, dump_canonical, state_hash
from sandbox import ContainerStartError, SandboxLease, SandboxProvider, SandboxRequest
from sandbox.mcp_server import UPSTREAM_SECRET_HEADER
from servers.engine.app import DomainRuntime, build_app
from servers.engine.store import Store
from servers.engine.tools import NOMINAL_NOW, ToolContext, run_tool
from servers.registry import load_domain

PACK = DEMO_PACK
TASK = "demo_retail.py:test_ret_expedite_headphones"


class InProcessSession:
    """A domain's MCP server in a thread on 127.0.0.1, over one database."""

    def __init__(self, domain: str, dsn: str, attempt_id: str):
        self.dsn = dsn
        self.attempt_id = attempt_id
        self.secret = secrets.token_urlsafe(16)
        runtime = DomainRuntime(load_domain(domain), dsn, services={})
        config = uvicorn.Config(
            build_app(runtime, self.secret),
            host="127.0.0.1",
            port=0,
            log_level="warning",
            timeout_graceful_shutdown=1,
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            assert self.thread.is_alive() and time.monotonic() < deadline, "in-process server did not start"
            time.sleep(0.01)
        port = self.server.servers[0].sockets[0].getsockname()[1]
        self._servers = {domain: f"http://127.0.0.1:{port}/mcp"}
        self.closed = False

    @property
    def servers(self) -> Mapping[str, str]:
        return self._servers

    @property
    def timings(self) -> Mapping[str, float]:
        return {}

    def admin_dsn(self, domain: str) -> str:
        return self.dsn

    @property
    def server_headers(self) -> Mapping[str, str]:
        return {UPSTREAM_SECRET_HEADER: self.secret}

    # Nothing runs in containers: no device, no container, no network to watch.
    interface = None
    containers: Mapping[str, str] = {}
    network = None
    tools: Mapping[str, list[dict[str, Any]]] = {}  # not listed ahead: the registration lists

    async def prepared_states(self, fingerprint: str) -> Mapping[str, Any] | None:
        return None  # nothing read ahead: the lifecycle dumps

    async def close(self) -> None:
        self.server.should_exit = True
        await asyncio.to_thread(self.thread.join, 10)
        self.closed = True


class FakeProvider(SandboxProvider):
    """Sandboxes as fresh databases on the test PostgreSQL plus an in-process server."""

    def __init__(self, pg_dsn: str, fail_boots: int = 0):
        super().__init__()
        self.dbs = Databases(pg_dsn)
        self.pg_dsn = pg_dsn
        self.fail_boots = fail_boots  # the first N boots fail as a dead container would
        self.requests: list[SandboxRequest] = []
        self.sessions: list[InProcessSession] = []
        self.images = {"servers": "in-process"}

    async def boot(self, request: SandboxRequest) -> psycopg.Connection[Any]:
        if self.fail_boots > 0:
            self.fail_boots -= 1
            raise ContainerStartError("server-retail container exited during start (exit code 1)")
        return await asyncio.to_thread(self.dbs.create, request.domains[0])

    async def prepare(self, booted: psycopg.Connection[Any], request: SandboxRequest) -> SandboxLease:
        self.requests.append(request)
        domain = request.domains[0]
        tables = load_domain(domain).tables

        def seed() -> None:
            fresh_schema(booted, tables)
            assert isinstance(request.prepare, TaskPreparation)
            reset_rows(booted, tables, request.prepare.rows[domain])

        await asyncio.to_thread(seed)
        session = InProcessSession(domain, f"{self.pg_dsn} dbname={booted.info.dbname}", request.attempt_id)
        self.sessions.append(session)
        return session


def golden_in_process(
    make_database: Any, bench: Benchmark, task: Task, key: str = "in-process"
) -> GoldenState:
    """The golden end state by the servers' own pipeline, no sandbox (the judge's reference)."""
    domain = load_domain(task.domain)
    conn = make_database("golden")
    rows = attempt_spec(bench, task, 0, run_id="r", attempt_id="a", agent="oracle").seed
    fresh_schema(conn, domain.tables)
    reset_rows(conn, domain.tables, rows)
    initial = dump_canonical(conn, domain.tables)
    store = Store(conn, domain.tables, NOMINAL_NOW)
    calls = []
    for tool_name, params in bench.golden_calls(task):
        tool = domain.tool(tool_name)
        assert tool is not None
        reply = run_tool(tool, ToolContext(db=store), params)
        calls.append(ToolCallView.from_reply(tool_name, params, reply, False))
    final = dump_canonical(conn, domain.tables)
    assert state_hash(final) != state_hash(initial), "the task must change the state"
    return GoldenState(
        task_id=task.id,
        key=key,
        initial_state=initial,
        final_state=final,
        initial_hash=state_hash(initial),
        golden_hash=state_hash(final),
        calls=calls,
    )
