"""Every tool of every domain, called through the real tool proxy on a real
sandbox (PostgreSQL, Typesense, the domain's server) with arguments generated
from the tool's own input schema: valid ones (hypothesis-jsonschema) and
near-valid ones (a field of the wrong type, a required field missing, an extra
field, huge strings, deep nesting, unicode edge cases, SQL and OData fragments).

What must hold for every call:
- the reply is an MCP tool result the agent can read (a result or an error
  result), never a transport error, an HTTP 5xx or a hang;
- a call rejected by input validation leaves the database exactly as it was;
and for each domain afterwards: no table or column was dropped or changed, and
the server still answers its health check and a plain read.

Lone UTF-16 surrogates cannot be sent through an MCP client at all (it must
encode the request as UTF-8); the proxy's handling of them in raw requests is
tested with the proxy itself. `TBX_FUZZ_CASES` sets the examples per tool
(default 5: the CI-sized run; the generation is derandomised, so a failure
reproduces).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import os
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import mcp_types as types
import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis_jsonschema import from_schema
from psycopg import sql

from bench.dataset import Benchmark, Task, load_benchmark
from bench.prepare import sandbox_request
from sandbox import (
    AsyncSandbox,
    ProxyServer,
    Registration,
    Sandbox,
    ToolPolicy,
    leftovers,
    proxy_client,
    register_request,
    sweep,
)
from sandbox.postgres import schema_name

pytestmark = pytest.mark.docker

CASES = int(os.environ.get("TBX_FUZZ_CASES", "5"))
CALL_TIMEOUT = 30.0
VALIDATION_FAILED = "Input validation failed"

# Strings an agent (or an attacker steering it) might put into any string argument.
NASTY_STRINGS = [
    "' OR '1'='1",
    "'; DROP TABLE orders; --",
    '") OR ("1"="1',
    "1; SELECT pg_sleep(30)",
    "$(reboot)",
    "id eq 1 or 1 eq 1",
    "substringof('a', subject) eq true and priority eq 'urgent' or",
    "status eq 'open')) or ((1 eq 1",
    "%s%s%s%n",
    "{{7*7}}${7*7}",
    "../../../../etc/passwd",
    "\\",
    "\x00",
    "nul\x00inside",
    "\u202eevil\u202c",
    "\ufeff\u200b\u200d",
    "e\u0301\u0301\u0301",
    "\U0001f600" * 64,
    "\uffff\ufffe",
    "a" * 100_000,
    "9" * 400,
    "",
    " ",
    "null",
    "NaN",
]
DEEP = functools.reduce(lambda acc, _: [acc], range(200), "deep")
JUNK = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=3),
    st.just(DEEP),
    st.just({"a": DEEP}),
    st.sampled_from(NASTY_STRINGS),
    st.text(max_size=40),
)


def _mutations(schema: dict[str, Any], value: Any) -> st.SearchStrategy[Any]:
    """Near-valid variants of one valid argument object."""
    if not isinstance(value, dict):
        return st.just({})
    props = list((schema.get("properties") or {}).keys())
    required = list(schema.get("required") or [])
    options: list[st.SearchStrategy[Any]] = [
        st.just({}),
        st.just({**value, "unexpected_field": "x"}),
    ]
    if props:
        options.append(st.sampled_from(props).flatmap(lambda k: JUNK.map(lambda j: {**value, k: j})))
    if required:
        options.append(st.sampled_from(required).map(lambda k: {a: b for a, b in value.items() if a != k}))
    return st.one_of(options)


def arguments_for(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    valid = from_schema(schema)
    return st.one_of(valid, valid.flatmap(functools.partial(_mutations, schema)))


class ToolCaller:
    """One MCP session through the proxy, driven from synchronous hypothesis code:
    the session lives in a task of a private event loop (its cancel scopes must
    be entered and left by the same task), calls reach it through a queue."""

    def __init__(self, registration: Registration):
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.queue: asyncio.Queue[Any] = asyncio.Queue()
        opened: concurrent.futures.Future[list[types.Tool]] = concurrent.futures.Future()
        self.session = asyncio.run_coroutine_threadsafe(self._serve(registration, opened), self.loop)
        self.tools = opened.result(timeout=60)

    async def _serve(self, reg: Registration, opened: concurrent.futures.Future[list[types.Tool]]) -> None:
        try:
            async with proxy_client(reg) as client:
                opened.set_result(list((await client.list_tools()).tools))
                while (item := await self.queue.get()) is not None:
                    name, args, fut = item
                    try:
                        fut.set_result(await asyncio.wait_for(client.call_tool(name, args), CALL_TIMEOUT))
                    except BaseException as exc:
                        fut.set_exception(exc)
        except BaseException as exc:
            if not opened.done():
                opened.set_exception(exc)
            raise

    def call(self, name: str, args: Any) -> types.CallToolResult:
        fut: concurrent.futures.Future[types.CallToolResult] = concurrent.futures.Future()
        self.loop.call_soon_threadsafe(self.queue.put_nowait, (name, args, fut))
        return fut.result(timeout=CALL_TIMEOUT + 5)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.queue.put_nowait, None)
        try:
            self.session.result(timeout=30)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(timeout=10)


def _text(result: types.CallToolResult) -> str:
    return "".join(c.text for c in result.content if isinstance(c, types.TextContent))


class Fingerprint:
    """A digest of every table's rows over one kept admin connection: a cheap
    "did anything change?" (a canonical dump per call would dominate the run)."""

    def __init__(self, dsn: str, domain: str):
        self.conn = psycopg.connect(dsn, autocommit=True)
        schema = schema_name(domain)
        tables = [
            str(r[0])
            for r in self.conn.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = %s ORDER BY 1",
                (schema,),
            )
        ]
        self.query = sql.SQL(" UNION ALL ").join(
            sql.SQL(
                "SELECT {name}, md5(coalesce(string_agg(x::text, '|' ORDER BY x::text), '')) FROM {t} x"
            ).format(name=sql.Literal(t), t=sql.Identifier(schema, t))
            for t in tables
        )

    def __call__(self) -> dict[str, str]:
        return {str(t): str(h) for t, h in self.conn.execute(self.query)}

    def close(self) -> None:
        self.conn.close()


def _columns(dsn: str, domain: str) -> set[tuple[str, str, str]]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT table_name, column_name, data_type FROM information_schema.columns WHERE table_schema = %s",
            (schema_name(domain),),
        ).fetchall()
    return {(str(t), str(c), str(d)) for t, c, d in rows}


def fuzz_tool(caller: ToolCaller, state: Fingerprint, tool: types.Tool) -> int:
    """CASES generated calls of one tool; returns how many were made (hypothesis
    shrinks a failing example and raises it)."""
    schema = dict(tool.input_schema or {"type": "object"})
    made = 0

    @settings(
        max_examples=CASES,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(args=arguments_for(schema))
    def one(args: Any) -> None:
        nonlocal made
        before = state()
        try:
            result = caller.call(tool.name, args)
        except Exception as exc:  # transport error, 5xx, hang: the server's fault, not the agent's
            raise AssertionError(f"no tool result ({exc!r}) for arguments {args!r:.300}") from exc
        made += 1
        text = _text(result)
        assert isinstance(result, types.CallToolResult) and result.content, "empty reply"
        if VALIDATION_FAILED in text:
            assert result.is_error or text.startswith('{"error": '), text[:200]
            assert state() == before, "rejected arguments changed the database"

    one()
    return made


@pytest.fixture(scope="module")
def bench(dataset: Path) -> Benchmark:
    return load_benchmark(dataset, strict=False)


@pytest.fixture(scope="module")
def proxy() -> Iterator[ProxyServer]:
    with ProxyServer() as p:
        yield p


def _first_task(bench: Benchmark, domain: str) -> Task:
    return next(t for t in bench.tasks if t.domain == domain)


@pytest.mark.parametrize("domain", ["retail", "auto_insurance", "consulting", "travel", "neobank"])
def test_every_tool_survives_generated_arguments(domain: str, bench: Benchmark, proxy: ProxyServer) -> None:
    task = _first_task(bench, domain)
    run_id = f"test-fuzz-{uuid.uuid4().hex[:8]}"
    failures: list[str] = []
    calls = 0
    try:
        with Sandbox(sandbox_request(bench, task, run_id=run_id)) as sb:
            assert sb.handle is not None
            handle = sb.handle
            columns_before = _columns(handle.pg.admin_dsn(domain), domain)
            # Every tool the server lists (no allow-list): the fuzz covers more than one scenario shows.
            reg = proxy.register(register_request(AsyncSandbox.adopt(sb), handle.attempt_id, ToolPolicy()))
            caller = ToolCaller(reg)
            state = Fingerprint(handle.pg.admin_dsn(domain), domain)
            try:
                assert caller.tools, f"{domain}: the proxy listed no tools"
                for tool in caller.tools:
                    try:
                        calls += fuzz_tool(caller, state, tool)
                    except Exception as exc:
                        failures.append(f"{tool.name}: {str(exc)[:1500]}")
                # The server is still whole: a plain call answers, its health check answers.
                sb_ok = caller.call(caller.tools[0].name, {})
                assert isinstance(sb_ok, types.CallToolResult)
            finally:
                state.close()
                caller.close()
                proxy.unregister(reg.token)
            health = handle.servers[domain].rsplit("/mcp", 1)[0] + "/healthz"
            healthy = httpx.get(health, headers=handle.server_headers, timeout=5).status_code
            assert healthy == 200, f"{domain} server no longer healthy"
            assert _columns(handle.pg.admin_dsn(domain), domain) == columns_before, (
                f"{domain}: a table or column was dropped or altered"
            )
    finally:
        sweep(run=run_id)
    assert leftovers(run_id) == ([], [])
    assert not failures, f"{domain}: {len(failures)} tool(s) misbehaved after {calls} calls:\n" + "\n".join(
        failures
    )
    assert calls >= CASES, f"{domain}: only {calls} calls were made"
