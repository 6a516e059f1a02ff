"""A failed golden replay never reaches the OpenEnv client with the answer in it
(issue #29, finding 1).

The real `tbx env serve` with an empty golden cache serves a copy of the
benchmark in which the task's first golden call (creating the ticket the task
asks for) names a table that does not exist. The golden replay, a real one in
a sandbox of its own, gets the server's real error reply and raises the real
GoldenReplayError, whose message quotes the call's arguments: the golden
values. Every byte a WebSocket client and an HTTP client receive in one
episode each (frames verbatim, status lines, headers, bodies) is searched for
those values; the evaluator's errors.jsonl must hold the full message.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from env_server_process import TASK, Served, UserStub, start_server, stop_server, wait_ready, write_config
from websockets.sync.client import connect

from bench.dataset import load_benchmark
from sandbox import leftovers, sweep

pytestmark = pytest.mark.docker

BROKEN_TABLE = "no_such_table_for_the_replay"


def break_first_golden_call(dataset: Path, into: Path) -> Path:
    """A copy of `dataset` whose TASK's first golden call writes to a table that does not exist."""
    copy = into / "dataset"
    shutil.copytree(dataset, copy, symlinks=True)
    task = load_benchmark(dataset).task(TASK)
    path = next((copy / "dataset" / "test_case").rglob(Path(task.file).stem + ".yaml"))
    lines = path.read_text().splitlines(keepends=True)
    start = next(i for i, line in enumerate(lines) if line.strip() == f"- uid: {task.uid}")
    first_call = next(i for i in range(start, len(lines)) if lines[i].strip().startswith("- tool:"))
    table = next(i for i in range(first_call, len(lines)) if lines[i].strip().startswith("table:"))
    lines[table] = lines[table].split("table:")[0] + f"table: {BROKEN_TABLE}\n"
    path.write_text("".join(lines))
    broken = load_benchmark(copy)
    assert broken.golden_calls(broken.task(TASK))[0][1]["table"] == BROKEN_TABLE
    return copy


def golden_values(dataset: Path) -> list[str]:
    """What must not reach a client: the broken call's argument texts (as the replay error
    quotes them, JSON-encoded) and each distinctive string value among them."""
    bench = load_benchmark(dataset)
    task = bench.task(TASK)
    query = task.query
    values: list[str] = []
    for _, args in bench.golden_calls(task):
        values.append(json.dumps(args, sort_keys=True)[:80])
        for value in args.get("item", {}).values():
            # long values only, and none the client is shown anyway (the task's own query)
            if isinstance(value, str) and len(value) >= 20 and value not in query:
                values.append(value)
    values.append(BROKEN_TABLE)
    assert len(values) >= 3, values
    return values


@pytest.fixture(scope="module")
def served(
    tmp_path_factory: pytest.TempPathFactory, dataset: Path, base_images: dict[str, str]
) -> Iterator[tuple[Served, Path]]:
    """The server over the broken copy, and that copy."""
    tmp = tmp_path_factory.mktemp("env-golden-fault")
    broken = break_first_golden_call(dataset, tmp)
    stub = UserStub()
    config = write_config(tmp / "models.json", stub.base_url)
    served = start_server(
        tmp,
        config,
        broken,
        *("--golden-cache", str(tmp / "golden-cache"), "--warm", "1", "--start-timeout", "300"),
    )
    try:
        wait_ready(served)
        yield served, broken
    finally:
        stop_server(served)
        stub.close()
        run_id = served.run_id
        left = leftovers(run_id)
        sweep(run=run_id)
        assert left == ([], []), f"the server left {left}"


def ws_episode(served: Served) -> tuple[bytes, dict[str, Any]]:
    """Reset and end one episode over a raw WebSocket: (every frame received, the terminal observation)."""
    received = b""
    url = served.url.replace("http://", "ws://") + "/ws"
    with connect(url, open_timeout=30, max_size=None) as ws:
        ws.send(json.dumps({"type": "reset", "data": {"test_uid": TASK}}))
        frame = ws.recv(timeout=300)
        received += frame.encode() if isinstance(frame, str) else frame
        assert json.loads(frame)["type"] == "observation", frame
        ws.send(json.dumps({"type": "step", "data": {"type": "submit_message", "content": "Done. <DONE>"}}))
        frame = ws.recv(timeout=300)
        received += frame.encode() if isinstance(frame, str) else frame
        ws.send(json.dumps({"type": "state"}))
        state = ws.recv(timeout=60)
        received += state.encode() if isinstance(state, str) else state
    return received, json.loads(frame)["data"]["observation"]


def http_episode(served: Served) -> tuple[bytes, dict[str, Any]]:
    received = b""

    def keep(r: httpx.Response) -> httpx.Response:
        nonlocal received
        received += f"{r.status_code} {r.reason_phrase}\r\n".encode()
        received += b"".join(k + b": " + v + b"\r\n" for k, v in r.headers.raw) + r.content
        return r

    with httpx.Client(base_url=served.url, timeout=300) as http:
        reset = keep(http.post("/reset", json={"test_uid": TASK}))
        assert reset.status_code == 200, reset.text
        episode = reset.json()["observation"]["metadata"]["episode_id"]
        action = {"type": "submit_message", "content": "Done. <DONE>"}
        final = keep(http.post("/step", json={"action": action, "episode_id": episode}))
        keep(http.get("/state", params={"episode_id": episode}))
        keep(http.get("/metadata"))
    return received, final.json()["observation"]


def test_a_failed_golden_replay_reaches_the_client_without_the_golden_calls(
    served: tuple[Served, Path],
) -> None:
    server, broken = served
    forbidden = golden_values(broken)
    for run in (ws_episode, http_episode):
        received, terminal = run(server)
        assert terminal["kind"] == "terminal" and terminal["reward_type"] == "system_error", terminal
        for value in forbidden:
            assert value.encode() not in received, (run.__name__, value)
            # also as the JSON escapes of a message (quotes, slashes, non-ASCII)
            assert json.dumps(value)[1:-1].encode() not in received, (run.__name__, value)
        assert b"golden replay of" not in received and b"returned an error reply" not in received
        # a cause and a reference instead
        text = terminal["system_error"]
        attempt_id = terminal["metadata"]["attempt_id"]
        assert text.startswith("system error (golden replay): GoldenReplayError"), text
        assert attempt_id in text and "errors.jsonl" in text
        # the evaluator side has the whole message, golden call included
        errors = [json.loads(x) for x in (server.out / "errors.jsonl").read_text().splitlines()]
        [error] = [e for e in errors if e["attempt_id"] == attempt_id]
        assert error["error"].startswith("GoldenReplayError: ") and forbidden[0] in error["error"]
