from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from pg_support import (
    EXPORT,
    Databases,
    Patch,
    dataset_path,
    require_server,
    rolled_back,
    seed_domain,
    server_dsn,
)

from bench.dataset import DATASET_ENV, Benchmark, load_benchmark
from servers.engine.tools import Domain

REPO = Path(__file__).resolve().parents[1]

# tbx has no default benchmark: what runs without --dataset reads $TBX_DATASET, here (and
# in every tbx the tests start) the export beside the repository, unless it is set already.
os.environ.setdefault(DATASET_ENV, str(EXPORT))


@pytest.fixture(scope="session")
def dataset() -> Path:
    return dataset_path()


@pytest.fixture(scope="session")
def benchmark(dataset: Path) -> Benchmark:
    """The release (507 tasks), loaded once per session."""
    return load_benchmark(dataset)


# ---- host PostgreSQL (see tests/pg_support.py) -----------------------------------
@pytest.fixture(scope="session")
def pg_dsn() -> str:
    """The test server's DSN (no dbname); fails when it does not answer."""
    dsn = server_dsn()
    require_server(dsn)
    return dsn


@pytest.fixture(scope="module")
def make_database(pg_dsn: str) -> Iterator[Callable[[str], psycopg.Connection[Any]]]:
    """`make_database(label)`: a new, uniquely named empty database (autocommit
    connection); every one is dropped when the module's tests are done."""
    dbs = Databases(pg_dsn)
    try:
        yield dbs.create
    finally:
        dbs.close()


@pytest.fixture(scope="module")
def seeded_database(
    make_database: Callable[[str], psycopg.Connection[Any]],
) -> Callable[..., psycopg.Connection[Any]]:
    """`seeded_database(domain, patch=None)`: a new database holding the domain's
    tables with seed + `patch` loaded (dropped with the module)."""

    def make(domain: Domain, patch: Patch = None) -> psycopg.Connection[Any]:
        conn = make_database(domain.name)
        seed_domain(conn, domain, patch)
        return conn

    return make


@pytest.fixture(scope="module")
def domain_db(
    request: pytest.FixtureRequest, seeded_database: Callable[..., psycopg.Connection[Any]]
) -> psycopg.Connection[Any]:
    """A database of the test module's own holding the seed of the module's `DOMAIN`."""
    domain = getattr(request.module, "DOMAIN", None)
    if not isinstance(domain, Domain):
        pytest.fail(f"{request.module.__name__} uses domain_db but defines no DOMAIN", pytrace=False)
    return seeded_database(domain)


@pytest.fixture
def db(domain_db: psycopg.Connection[Any]) -> Iterator[psycopg.Connection[Any]]:
    """`domain_db` inside a transaction rolled back after the test, so every test
    starts from the bare seed (reload a patch with `pg_support.reload`). Not for
    `judge.canonical.dump_canonical`, which needs a transaction of its own."""
    with rolled_back(domain_db):
        yield domain_db
