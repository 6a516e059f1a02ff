"""What a warm pool does ahead of a checkout, against real Docker: the initial state
read when the spare was prepared is what a dump at the hand-over reads (nothing
touches a spare before it), a spare written to meanwhile is dumped again, a state
read for another task's preparer is never handed over, and the servers' tool
listing taken at prepare is what the proxy serves (the registration asks the
server nothing)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from bench.dataset import Benchmark
from bench.prepare import task_preparation
from bench.run import lifecycle
from bench.run.attempt import AttemptOutcome, AttemptSpec, attempt_spec
from bench.run.lifecycle import open_attempt
from judge import dump_dsn
from sandbox import (
    DockerProvider,
    ProxyServer,
    SandboxLease,
    SandboxPool,
    SandboxRequest,
    Upcoming,
    leftovers,
    new_id,
    proxy_client,
    sweep,
)
from sandbox.proxy.clients import tool_json

pytestmark = pytest.mark.docker


@pytest.fixture
def run() -> Iterator[str]:
    run_id = new_id("run-it-prepared")
    yield run_id
    sweep(run_id)
    assert leftovers(run_id) == ([], [])


def _specs(bench: Benchmark, run_id: str, n: int) -> list[AttemptSpec]:
    tasks = [t for t in bench.tasks if t.domain == "retail"][:n]
    return [
        attempt_spec(bench, t, 0, run_id=run_id, attempt_id=new_id("att"), agent="oracle", brief=False)
        for t in tasks
    ]


class Touching(DockerProvider):
    """A provider whose checkouts write to the database before the attempt reads it
    (what a spare touched between prepare and hand-over would look like)."""

    async def checkout(self, request: SandboxRequest) -> SandboxLease:
        session = await super().checkout(request)

        def touch() -> None:
            with psycopg.connect(session.admin_dsn("retail"), autocommit=True) as conn:
                tables = conn.execute(
                    "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() "
                    "ORDER BY table_name"
                ).fetchall()
                for (table,) in tables:  # the first table with rows loses them
                    if conn.execute(f'DELETE FROM "{table}"').rowcount:
                        return
                raise AssertionError("no seeded rows to delete")

        await asyncio.to_thread(touch)
        return session


def _counting_dumps(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    dumped: list[str] = []

    def counting(dsn: str, domain: str) -> Any:
        dumped.append(domain)
        return dump_dsn(dsn, domain)

    monkeypatch.setattr(lifecycle, "dump_dsn", counting)
    return dumped


async def _attempt(spec: AttemptSpec, provider: DockerProvider, proxy: ProxyServer) -> dict[str, Any]:
    """Open `spec`'s attempt; what it recorded and what the sandbox holds at that moment."""
    outcome = AttemptOutcome.of(spec)
    seen: dict[str, Any] = {}
    async with open_attempt(spec, provider, proxy, outcome=outcome) as live:
        seen["dump_at_checkout"] = await asyncio.to_thread(dump_dsn, live.lease.admin_dsn("retail"), "retail")
        seen["listing"] = live.registration.listing
        async with proxy_client(live.registration) as client:
            seen["answered"] = [tool_json(t) for t in (await client.list_tools()).tools]
        seen["prepared_tools"] = dict(live.lease.tools)
    seen["initial"] = outcome.initial_state
    return seen


def _provider(cls: type[DockerProvider], specs: list[AttemptSpec]) -> DockerProvider:
    provider = cls(warm=len(specs))
    upcoming = [Upcoming(["retail"], lambda s=s: s.sandbox_request().prepare) for s in specs]  # type: ignore[misc]
    provider.plan({"retail": len(specs)}, upcoming)
    return provider


async def _ahead(provider: DockerProvider, run_id: str, n: int) -> SandboxPool:
    await provider.start(run_id)
    pool = await provider.warm_up(SandboxRequest(domains=["retail"], run_id=run_id))
    while pool.booted < n:  # every spare prepared: the checkouts are hand-overs
        await asyncio.sleep(0.2)
    return pool


def test_a_hand_over_records_the_state_read_at_prepare_which_a_dump_at_checkout_equals(
    demo_bench: Benchmark, run: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    specs = _specs(demo_bench, run, 2)

    async def go() -> list[dict[str, Any]]:
        provider = _provider(DockerProvider, specs)
        try:
            pool = await _ahead(provider, run, len(specs))
            with ProxyServer() as proxy:
                dumped = _counting_dumps(monkeypatch)
                seen = [await _attempt(s, provider, proxy) for s in reversed(specs)]  # out of plan order
                assert (pool.checkouts, pool.handovers) == (2, 2)
                assert dumped == ["retail"] * 2  # the terminal dumps only: no initial dump at checkout
            return seen
        finally:
            await provider.close()

    for seen in asyncio.run(go()):
        assert seen["initial"] == seen["dump_at_checkout"]  # the whole state, not only its hash
        assert seen["initial"] and any(seen["initial"].values())
        assert seen["prepared_tools"]["retail"]  # listed at prepare...
        assert seen["listing"] == seen["answered"]  # ...and what the proxy's tools/list answers


def test_a_spare_written_to_before_its_hand_over_is_dumped_again(
    demo_bench: Benchmark, run: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    specs = _specs(demo_bench, run, 1)

    async def go() -> dict[str, Any]:
        provider = _provider(Touching, specs)
        try:
            await _ahead(provider, run, 1)
            with ProxyServer() as proxy:
                dumped = _counting_dumps(monkeypatch)
                seen = await _attempt(specs[0], provider, proxy)
                assert dumped == ["retail"] * 2  # the initial state was dumped, the stale one dropped
            return seen
        finally:
            await provider.close()

    seen = asyncio.run(go())
    assert seen["initial"] == seen["dump_at_checkout"]
    seeded = task_preparation(demo_bench, demo_bench.task(specs[0].task_id)).rows["retail"]
    assert sum(map(len, seen["initial"].values())) < sum(map(len, seeded.values()))  # the rows it lost


def test_a_state_read_for_one_preparer_is_handed_to_no_other(demo_bench: Benchmark, run: str) -> None:
    a, b = (s.sandbox_request().prepare for s in _specs(demo_bench, run, 2))
    assert a is not None and b is not None and a.fingerprint() != b.fingerprint()

    async def go() -> None:
        pool = SandboxPool(["retail"], size=1, typesense=False, run_id=run)
        pool.plan([lambda: a])
        async with pool:
            sb = await pool.acquire(b)  # nobody planned b: its own sandbox, prepared for it at checkout
            try:
                own = sb.sandbox.prepared_states(b.fingerprint())
                assert own is not None
                assert own["retail"] == await asyncio.to_thread(
                    dump_dsn, sb.handle.pg.admin_dsn("retail"), "retail"
                )
                assert sb.sandbox.prepared_states(b.fingerprint()) is None  # one use
            finally:
                await sb.__aexit__(None, None, None)
            spare = await pool.acquire(a)
            try:
                assert spare.sandbox.prepared_states(b.fingerprint()) is None  # a's state, asked for b's
            finally:
                await spare.__aexit__(None, None, None)

    asyncio.run(go())
