"""Session API sessions that start part-way (issue 37): `/session_create` with a `prefix`
of tool calls the client sends, and `fork_of` a live session of the caller, against the
real `tbx session-proxy` process (warm pool, --record) and real sandboxes, with an httpx
client written from the wire spec. The golden calls come from the dataset's trace here,
in the test: the server never offers them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from session_api_server import Served, call, create, effects, serving, traced_task, value

from bench.dataset import Benchmark, load_benchmark

pytestmark = pytest.mark.docker

SERVER = "sandbox_external_retail"


@pytest.fixture(scope="module")
def bench(dataset: Path) -> Benchmark:
    return load_benchmark(dataset, strict=False)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, dataset: Path) -> Iterator[Served]:
    tmp = tmp_path_factory.mktemp("session-api-prefix")
    with serving(tmp, dataset, "--warm", "1", "--record", str(tmp / "out")) as s:
        yield s


def records(served: Served) -> dict[str, dict[str, Any]]:
    """Attempt id -> its record, of every session recorded so far."""
    out = served.log.parent / "out"
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    return {
        r["attempt_id"]: json.loads((out / r["attempt_file"]).read_text())
        for r in rows
        if "attempt_file" in r
    }


def test_a_create_with_the_golden_prefix_holds_its_effects_and_records_it_as_prefix(
    served: Served, bench: Benchmark
) -> None:
    task = traced_task(bench, SERVER)
    golden = task.trace["calls"]
    prefix = [{"tool": c["tool"], "arguments": c["parameters"]} for c in golden]
    with served.client() as c:
        r = create(c, "pre-1", task, prefix=prefix)
        told = value(r)[SERVER]["prefix"]
        attempt = r.headers["x-tbx-attempt-id"]
        assert [(t["tool"], t["result"], t["tool_error"]) for t in told] == [
            (g["tool"], g["result"], None) for g in golden
        ]
        e = effects(c, "pre-1", SERVER)
        assert e["result_db_hash"] == e["golden_db_hash"] and e["diff"] == []
        assert value(c.post("/session_destroy", json={"session_id": "pre-1"})) == "Ok"
    record = records(served)[attempt]
    assert [(x["tool"], x["arguments"]) for x in record["prefix"]] == [
        (p["tool"], p["arguments"]) for p in prefix
    ]
    assert record["trajectory"] == [] and record["verdict"]["passed"] is True


def test_a_forbidden_or_malformed_prefix_is_refused_before_any_sandbox(
    served: Served, bench: Benchmark
) -> None:
    task = traced_task(bench, SERVER)
    with served.client() as c:
        bad = [{"tool": task.tools[0], "arguments": {}}, {"tool": "delete_customer", "arguments": {}}]
        r = create(c, "pre-bad", task, prefix=bad)
        message = value(r, 400)
        assert "allow-list" in message and "[1] 'delete_customer'" in message, message
        assert "x-tbx-attempt-id" not in r.headers
        assert value(create(c, "pre-bad", task, prefix="calls"), 400).startswith("Invalid input: prefix")
        assert "prefix.0.arguments" in value(
            create(c, "pre-bad", task, prefix=[{"tool": "x", "arguments": 1}]), 400
        )
        assert "no live session" in value(create(c, "pre-bad", task, fork_of="nobody"), 400)
        # nothing of them stayed: the id is free
        assert (
            value(c.post("/session_destroy", json={"session_id": "pre-bad"}), 400) == "Session does not exist"
        )


def test_a_fork_replays_the_parents_calls_so_far_and_goes_its_own_way(
    served: Served, bench: Benchmark
) -> None:
    task = traced_task(bench, SERVER)
    first, *rest = task.trace["calls"]
    assert rest, "the traced task needs two calls or more"
    with served.client() as c:
        parent = create(c, "parent", task)
        value(parent)
        assert value(call(c, "parent", first["tool"], first["parameters"])) == first["result"]
        after_first = effects(c, "parent", SERVER)["result_db_hash"]
        # a fork plays its parent's server_config and tools
        other_tools = [t for t in task.tools if t != first["tool"]]
        assert "a fork plays its parent's" in value(
            create(c, "fork", task, fork_of="parent", available_tools=other_tools), 400
        )
        r = create(c, "fork", task, fork_of="parent")
        told = value(r)[SERVER]["prefix"]
        fork_attempt = r.headers["x-tbx-attempt-id"]
        assert [(t["tool"], t["result"]) for t in told] == [(first["tool"], first["result"])]
        assert effects(c, "fork", SERVER)["result_db_hash"] == after_first
        for g in rest:
            assert value(call(c, "fork", g["tool"], g["parameters"])) == g["result"]
        fork_end = effects(c, "fork", SERVER)
        assert fork_end["result_db_hash"] == fork_end["golden_db_hash"]
        assert effects(c, "parent", SERVER)["result_db_hash"] == after_first  # the parent's is its own
        parent_attempt = parent.headers["x-tbx-attempt-id"]
        for sid in ("fork", "parent"):
            assert value(c.post("/session_destroy", json={"session_id": sid})) == "Ok"
    recorded = records(served)
    fork_record, parent_record = recorded[fork_attempt], recorded[parent_attempt]
    assert [x["tool"] for x in fork_record["prefix"]] == [first["tool"]]
    assert [x["tool"] for x in fork_record["trajectory"]] == [g["tool"] for g in rest]
    assert parent_record["prefix"] == [] and [x["tool"] for x in parent_record["trajectory"]] == [
        first["tool"]
    ]
