"""What the bench unit tests share: the demo pack, a tool proxy, the fake provider
(attempt_fakes: a database on the test PostgreSQL, the domain's real server in process)
and the upstream pools a test's direct calls open. A module may define its own."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
from attempt_fakes import PACK, FakeProvider

from bench.dataset import Benchmark, load_benchmark
from sandbox import ProxyServer, UpstreamPool


@pytest.fixture(scope="module")
def pack() -> Benchmark:
    return load_benchmark(PACK)


@pytest.fixture(scope="module")
def proxy() -> Iterator[ProxyServer]:
    with ProxyServer() as server:
        yield server


@pytest.fixture
def provider(pg_dsn: str) -> Iterator[FakeProvider]:
    p = FakeProvider(pg_dsn)
    yield p
    p.dbs.close()


@pytest.fixture
async def pools() -> AsyncIterator[dict[str, UpstreamPool]]:
    made: dict[str, UpstreamPool] = {}
    yield made
    for pool in made.values():
        await pool.aclose()
