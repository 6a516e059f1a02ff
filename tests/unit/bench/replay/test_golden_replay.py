"""Every task of the release list, per domain, replayed in-process against the
host PostgreSQL through the same core as `python -m bench.replay.local`:
seed + data_patch, then every golden call through `run_tool`.

* no golden call may fail (unserved tool or error envelope), held-out tasks included;
* for traced tasks the initial canonical hash, every reply (byte for byte) and
  the final hash equal the trace's.

One database per domain; the rows are reloaded between tasks."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import psycopg
import pytest

from bench.dataset import Benchmark
from bench.replay.local import DomainReplay, replay_domain
from judge import dump_canonical, state_hash
from servers.registry import load_domain


class Expected(NamedTuple):
    tasks: int  # release tasks of the domain
    traced: int  # of which have a trace
    calls: int  # golden calls of those tasks
    seed_hash: str | None  # canonical hash of the bare seed, where the spec gives one


EXPECTED = {
    "retail": Expected(98, 78, 435, None),
    "auto_insurance": Expected(
        100, 80, 465, "881557317a8cc116f09b9ed6fab6eed1cf4cae3c02b49d1e9629d37e4a0d7d7b"
    ),
    "consulting": Expected(101, 81, 584, "c7636b4fee260d405d9c3864ab0b1d1b0e7747a6a6e5ef64cfbf13cad7e659a4"),
    "travel": Expected(104, 83, 917, None),
    "neobank": Expected(104, 83, 701, None),
}


@pytest.fixture(scope="module", params=list(EXPECTED))
def replay(
    request: pytest.FixtureRequest,
    benchmark: Benchmark,
    make_database: Callable[[str], psycopg.Connection[Any]],
) -> DomainReplay:
    domain: str = request.param
    return replay_domain(make_database(f"golden_{domain}"), benchmark, domain)


def test_task_trace_and_call_counts(replay: DomainReplay) -> None:
    expected = EXPECTED[replay.domain]
    assert (len(replay.tasks), replay.traced, replay.calls) == expected[:3]


def test_every_golden_call_succeeds(replay: DomainReplay) -> None:
    failures = [f"{t.task_id} {e}" for t in replay.tasks for e in t.errors]
    assert not failures, f"{len(failures)} failing golden calls:\n" + "\n".join(failures[:30])


def test_traced_replies_and_hashes_match(replay: DomainReplay) -> None:
    problems = [f"{t.task_id}: {m}" for t in replay.tasks for m in t.mismatches]
    assert not problems, f"{len(problems)} differences from the traces:\n" + "\n".join(problems[:30])


@pytest.mark.parametrize("name", [d for d, e in EXPECTED.items() if e.seed_hash])
def test_bare_seed_hash(name: str, seeded_database: Callable[..., psycopg.Connection[Any]]) -> None:
    domain = load_domain(name)
    conn = seeded_database(domain)
    assert state_hash(dump_canonical(conn, domain.tables)) == EXPECTED[name].seed_hash


def test_the_table_covers_the_whole_release(benchmark: Benchmark) -> None:
    by_domain = {name: len(tasks) for name, tasks in benchmark.by_domain().items()}
    assert by_domain == {name: e.tasks for name, e in EXPECTED.items()}
    assert sum(by_domain.values()) == len(benchmark.tasks) == 507
