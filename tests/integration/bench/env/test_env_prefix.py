"""OpenEnv episodes that start part-way (issue 37): `reset` with a `prefix` of tool calls
the client sends, and `fork_of` a live episode, against the real `tbx env serve` process,
real Docker sandboxes and openenv 0.10's real `GenericEnvClient` (in `.venv-openenv10`,
openenv_client.py) plus the HTTP routes.

The golden calls come from the dataset here, in the test: the server never offers them.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from env_server_process import TASK, Served, UserStub, start_server, stop_server, wait_ready, write_config
from test_env_server import Client

from bench.dataset import Benchmark, load_benchmark
from sandbox import leftovers, sweep

pytestmark = pytest.mark.docker

DONE = {"type": "submit_message", "content": "That is all I can do. <DONE>"}


@pytest.fixture(scope="module")
def bench(dataset: Path) -> Benchmark:
    return load_benchmark(dataset)


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, dataset: Path, base_images: dict[str, str]
) -> Iterator[Served]:
    stub = UserStub()
    tmp = tmp_path_factory.mktemp("env-prefix")
    config = write_config(tmp / "models.json", stub.base_url)
    served = start_server(
        tmp,
        config,
        dataset,
        *("--max-episodes", "6", "--warm", "2", "--idle-timeout", "120", "--start-timeout", "300"),
    )
    try:
        wait_ready(served)
        yield served
    finally:
        stop_server(served)
        stub.close()
        run_id = served.run_id
        left = leftovers(run_id)
        sweep(run=run_id)
        assert left == ([], []), f"the server left {left}"


@pytest.fixture(scope="module")
def env(server: Served) -> Iterator[Client]:
    client = Client(server.url)
    yield client
    client.exit()


def golden(bench: Benchmark) -> list[dict[str, Any]]:
    return [{"tool": t, "arguments": a} for t, a in bench.golden_calls(bench.task(TASK))]


def record_of(served: Served, attempt_id: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The results row and the attempt record of an episode."""
    for line in (served.out / "results.jsonl").read_text().splitlines():
        row = json.loads(line)
        if row["attempt_id"] == attempt_id:
            return row, json.loads((served.out / row["attempt_file"]).read_text())
    pytest.fail(f"no results row for {attempt_id}")


def finish(env: Client) -> dict[str, Any]:
    final = env.step(DONE)
    assert final["ok"] and final["done"], final
    return final


def test_the_whole_golden_prefix_then_done_gets_reward_one(
    server: Served, env: Client, bench: Benchmark
) -> None:
    calls = golden(bench)
    reset = env.reset(test_uid=TASK, prefix=calls)
    assert reset["ok"] and not reset["done"], reset
    obs = reset["observation"]
    assert obs["kind"] == "reset" and obs["steps_taken"] == 0
    # the agent is told where it starts: each replayed call and what it returned
    told = obs["metadata"]["prefix"]
    assert [(c["tool"], c["arguments"], c["tool_error"]) for c in told] == [
        (c["tool"], c["arguments"], None) for c in calls
    ]
    assert all(c["result"] for c in told)
    # never as the agent's turns or the conversation's messages
    assert obs["messages"] == [{"role": "user", "content": bench.task(TASK).query}]
    final = finish(env)
    assert final["reward"] == 1.0 and final["observation"]["reward_type"] == "pass", final
    row, record = record_of(server, final["observation"]["metadata"]["attempt_id"])
    assert row["passed"] is True and row["prefix_calls"] == len(calls)
    assert [(c["tool"], c["arguments"]) for c in record["prefix"]] == [
        (c["tool"], c["arguments"]) for c in calls
    ]
    assert record["trajectory"] == []
    traj = json.loads((server.out / row["trajectory"]).read_text())
    assert traj["tool_calls"] == []


def test_a_partial_prefix_ends_where_the_same_calls_made_live_end(
    server: Served, env: Client, bench: Benchmark
) -> None:
    first = golden(bench)[:1]
    # from a prefix, nothing more
    assert env.reset(test_uid=TASK, prefix=first)["ok"]
    prefixed = finish(env)
    # the same call made step by step by a live episode
    assert env.reset(test_uid=TASK)["ok"]
    step = env.step({"type": "call_tool", "tool_name": first[0]["tool"], "arguments": first[0]["arguments"]})
    assert step["ok"] and step["observation"]["tool_error"] is None, step
    live = finish(env)
    assert prefixed["reward"] == live["reward"] == 0.0  # the ticket is made, never solved
    _, rec_prefixed = record_of(server, prefixed["observation"]["metadata"]["attempt_id"])
    _, rec_live = record_of(server, live["observation"]["metadata"]["attempt_id"])
    assert rec_prefixed["verdict"]["terminal_hash"] == rec_live["verdict"]["terminal_hash"]
    assert rec_prefixed["verdict"]["signature"] == rec_live["verdict"]["signature"]
    assert [c["tool"] for c in rec_prefixed["prefix"]] == [first[0]["tool"]] and rec_prefixed[
        "trajectory"
    ] == []
    assert rec_live["prefix"] == [] and [c["tool"] for c in rec_live["trajectory"]] == [first[0]["tool"]]


def test_a_forbidden_prefix_tool_is_refused_before_any_boot(
    server: Served, env: Client, bench: Benchmark
) -> None:
    before = wait_ready(server)["pools"]["retail"]["checkouts"]
    bad = [*golden(bench)[:1], {"tool": "drop_all_tables", "arguments": {}}]
    refused = env.reset(test_uid=TASK, prefix=bad)
    assert not refused["ok"] and "VALIDATION_ERROR" in refused["error"], refused
    assert "allow-list" in refused["error"] and "[1] 'drop_all_tables'" in refused["error"]
    http = httpx.Client(base_url=server.url, timeout=60)
    r = http.post("/reset", json={"test_uid": TASK, "prefix": bad})
    assert r.status_code == 422 and r.json()["code"] == "VALIDATION_ERROR", r.text
    r = http.post("/reset", json={"test_uid": TASK, "prefix": [{"tool": "get_order", "arguments": "{}"}]})
    assert r.status_code == 422 and "prefix.0.arguments" in r.json()["detail"], r.text
    r = http.post("/reset", json={"test_uid": TASK, "fork_of": "ep-nobody"})
    assert r.status_code == 404 and r.json()["code"] == "SESSION_ERROR", r.text
    assert wait_ready(server)["pools"]["retail"]["checkouts"] == before  # nothing was checked out


def test_a_fork_of_four_ends_in_four_independent_states(
    server: Served, env: Client, bench: Benchmark
) -> None:
    """The parent (a WebSocket episode) makes the first golden call; four forks over HTTP
    name it (its id is the capability), each gets that call replayed in its own sandbox and
    makes a different further call; the parent's state is its own."""
    first = golden(bench)[0]
    parent = env.reset(test_uid=TASK)
    parent_id = parent["observation"]["metadata"]["episode_id"]
    step = env.step({"type": "call_tool", "tool_name": first["tool"], "arguments": first["arguments"]})
    assert step["ok"] and step["observation"]["tool_error"] is None, step
    priorities = ["low", "normal", "high", "urgent"]
    http = httpx.Client(base_url=server.url, timeout=600)
    forks: dict[str, dict[str, Any]] = {}
    errors: list[str] = []

    def fork(priority: str) -> None:
        try:
            r = http.post("/reset", json={"test_uid": TASK, "fork_of": parent_id})
            assert r.status_code == 200, r.text
            obs = r.json()["observation"]
            assert obs["metadata"]["fork_of"] == parent_id
            assert [c["tool"] for c in obs["metadata"]["prefix"]] == [first["tool"]]
            episode = obs["metadata"]["episode_id"]
            update = {"id": "6", "table": "tickets", "item": {"priority": priority}}
            call = {"type": "call_tool", "tool_name": "zendesk_update_item", "arguments": update}
            r = http.post("/step", json={"action": call, "episode_id": episode})
            assert r.status_code == 200 and r.json()["observation"]["tool_error"] is None, r.text
            r = http.post("/step", json={"action": DONE, "episode_id": episode})
            assert r.status_code == 200 and r.json()["done"], r.text
            forks[priority] = r.json()
        except BaseException as exc:  # reported by the main thread
            errors.append(f"{priority}: {exc}")

    threads = [threading.Thread(target=fork, args=(p,)) for p in priorities]
    for t in threads:
        t.start()
    for t in threads:
        t.join(900)
    assert not errors, errors
    parent_final = finish(env)
    hashes = {}
    for priority, final in forks.items():
        _, record = record_of(server, final["observation"]["metadata"]["attempt_id"])
        assert [(c["tool"], c["arguments"]) for c in record["prefix"]] == [
            (first["tool"], first["arguments"])
        ]
        assert [c["arguments"]["item"]["priority"] for c in record["trajectory"]] == [priority]
        hashes[priority] = record["verdict"]["terminal_hash"]
    _, parent_record = record_of(server, parent_final["observation"]["metadata"]["attempt_id"])
    assert parent_record["prefix"] == [] and [c["tool"] for c in parent_record["trajectory"]] == [
        first["tool"]
    ]
    assert len(set(hashes.values())) == 4, hashes  # four different end states
    assert parent_record["verdict"]["terminal_hash"] not in hashes.values()
    # the parent has ended: it forks no more
    r = http.post("/reset", json={"test_uid": TASK, "fork_of": parent_id})
    assert r.status_code == 404, r.text
