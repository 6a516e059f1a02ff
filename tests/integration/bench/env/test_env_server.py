"""`tbx env serve` end to end: the real server process, real Docker sandboxes from
its warm pool, and openenv 0.10's real `GenericEnvClient` over WebSocket and its
`MCPToolClient` over /mcp (run in the separate `.venv-openenv10`, `make openenv10-client`,
by openenv_client.py; one episode with openenv-core 0.3's client from `.venv-openenv`),
plus the HTTP routes with httpx and raw WebSocket frames. The simulated user is a local
OpenAI-compatible stub on 127.0.0.1 without `GET /models` (readiness proves it with a
1-token completion) that closes the chat on its first reply.

One server serves the module (2 warm retail sandboxes, up to 8 episodes); the
/ready failure cases start their own short-lived servers that boot nothing.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import docker.errors
import httpx
import pytest
from env_server_process import (
    TASK,
    Served,
    UserStub,
    start_server,
    stop_server,
    wait_failing,
    wait_ready,
    write_config,
)
from sandbox_containers import containers_gone
from server_process import free_port

from bench.dataset import Benchmark, load_benchmark
from bench.run.results import load_run
from sandbox import leftovers, sweep
from sandbox.postgres import schema_name
from servers.registry import load_domain

pytestmark = pytest.mark.docker

REPO = Path(__file__).resolve().parents[4]
CLIENT = Path(__file__).resolve().parents[2].joinpath("openenv_client.py")


def openenv_python(version: str = "0.10") -> str:
    """The interpreter of the venv holding that OpenEnv client (built by the Makefile)."""
    if version == "0.10":
        var, venv, target = "TBX_OPENENV10_PYTHON", ".venv-openenv10", "openenv10-client"
    else:
        var, venv, target = "TBX_OPENENV_PYTHON", ".venv-openenv", "openenv-client"
    path = Path(os.environ.get(var, REPO / venv / "bin" / "python"))
    if not path.exists():
        pytest.fail(f"{path} missing: `make {target}` installs the OpenEnv {version} client in {venv}")
    return str(path)


class Client:
    """An OpenEnv client in its own process (openenv_client.py): openenv 0.10's
    GenericEnvClient (`mode="generic"`) or MCPToolClient (`"mcp"`), or openenv-core 0.3's."""

    def __init__(self, url: str, mode: str = "generic", version: str = "0.10"):
        self.proc = subprocess.Popen(
            [openenv_python(version), str(CLIENT), url, mode],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()
        # importing the client alone takes ~30 s on a loaded 2-core machine
        assert self._read(240)["connected"]

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def _read(self, timeout: float) -> dict[str, Any]:
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            pytest.fail(f"client gave no answer within {timeout} s")
        if line is None:
            err = self.proc.stderr.read() if self.proc.stderr else ""
            pytest.fail(f"client exited: {err[-3000:]}")
        return dict(json.loads(line))

    def send(self, cmd: dict[str, Any], timeout: float = 300) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()
        return self._read(timeout)

    def reset(self, **data: Any) -> dict[str, Any]:
        return self.send({"op": "reset", "data": data})

    def step(self, action: dict[str, Any]) -> dict[str, Any]:
        return self.send({"op": "step", "action": action})

    def state(self) -> dict[str, Any]:
        return dict(self.send({"op": "state"})["state"])

    def exit(self) -> None:
        if self.proc.poll() is None:
            with_timeout = self.send({"op": "exit"}, timeout=60)
            assert with_timeout["closed"]
            self.proc.wait(timeout=30)

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=30)


# ---------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def bench(dataset: Path) -> Benchmark:
    return load_benchmark(dataset)


@pytest.fixture(scope="module")
def user_stub() -> Iterator[UserStub]:
    stub = UserStub()
    yield stub
    stub.close()


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, user_stub: UserStub, dataset: Path, base_images: dict[str, str]
) -> Iterator[Served]:
    tmp = tmp_path_factory.mktemp("env-server")
    config = write_config(tmp / "models.json", user_stub.base_url)
    served = start_server(
        tmp,
        config,
        dataset,
        *("--max-episodes", "8", "--warm", "2", "--idle-timeout", "60", "--start-timeout", "300"),
        *("--call-timeout", "20"),
    )
    try:
        body = wait_ready(served)
        assert all(c["ok"] for c in body["components"].values()), body
        yield served
    finally:
        stop_server(served)
        run_id = served.run_id
        left = leftovers(run_id)
        sweep(run=run_id)
        assert left == ([], []), f"the server left {left}"


def golden_actions(bench: Benchmark) -> list[dict[str, Any]]:
    """The task's golden calls as actions: the first alone, the rest as one parallel batch."""
    calls = bench.golden_calls(bench.task(TASK))
    first, *rest = calls
    actions: list[dict[str, Any]] = [
        {"type": "call_tool", "tool_name": first[0], "arguments": first[1], "call_id": "g0"}
    ]
    if rest:
        batch = [{"name": n, "arguments": a, "call_id": f"g{i + 1}"} for i, (n, a) in enumerate(rest)]
        actions.append({"type": "call_tool", "parallel_tool_calls": batch})
    return actions

    return False


def row_of(served: Served, attempt_id: str) -> dict[str, Any]:
    for line in (served.out / "results.jsonl").read_text().splitlines():
        row = json.loads(line)
        if row["attempt_id"] == attempt_id:
            return dict(row)
    pytest.fail(f"no results row for {attempt_id}")


# ---------------------------------------------------------------- episodes over WebSocket


def test_golden_agent_gets_reward_one(server: Served, bench: Benchmark, dclient: docker.DockerClient) -> None:
    env = Client(server.url)
    try:
        reset = env.reset(test_uid=TASK)
        obs = reset["observation"]
        assert reset["ok"] and not reset["done"] and reset["reward"] is None
        assert obs["kind"] == "reset" and obs["task_uid"] == TASK
        assert obs["task"] == bench.task(TASK).query
        assert obs["messages"] == [{"role": "user", "content": bench.task(TASK).query}]
        names = [t["function"]["name"] for t in obs["tools"]]
        assert names == bench.scenario_of(bench.task(TASK)).tool_names
        containers = list(env.state()["containers"].values())
        assert containers

        listed = env.step({"type": "list_tools"})["observation"]
        assert listed["kind"] == "tools" and [t["function"]["name"] for t in listed["tools"]] == names
        for action in golden_actions(bench):
            result = env.step(action)
            assert result["ok"] and not result["done"], result
            if "parallel_tool_calls" in action:
                assert result["observation"]["kind"] == "tool_batch"
                assert all(r["tool_error"] is None for r in result["observation"]["tool_results"])
            else:
                assert result["observation"]["kind"] == "tool" and result["observation"]["tool_error"] is None
        final = env.step(
            {"type": "submit_message", "content": "I opened a ticket about the delay and solved it."}
        )
        assert final["done"] is True and final["reward"] == 1.0, final
        term = final["observation"]
        assert term["kind"] == "terminal" and term["reward_type"] == "pass"
        assert (
            term["metadata"]["finish_reason"] == "user_done" and term["user_message"] == "Thanks, that's all."
        )
        assert term["test_summary"]["passed"] is True
        assert term["test_summary"]["signature"] is None and term["test_summary"]["differences"] == {}
        state = env.state()
        assert state["done"] and state["reward"] == 1.0 and state["status"] == "done"

        after = env.step({"type": "list_tools"})
        assert not after["ok"] and "has ended" in after["error"] and "SESSION_ERROR" in after["error"]
    finally:
        env.exit()
    assert containers_gone(dclient, containers, timeout=60)
    row = row_of(server, term["metadata"]["attempt_id"])
    assert row["passed"] is True and row["system_error"] is False and row["finish_reason"] == "user_done"
    assert (server.out / row["attempt_file"]).exists() and (server.out / row["trajectory"]).exists()
    traj = json.loads((server.out / row["trajectory"]).read_text())
    assert [c["tool"] for c in traj["tool_calls"]] == [n for n, _ in bench.golden_calls(bench.task(TASK))]


def test_do_nothing_agent_gets_reward_zero(server: Served) -> None:
    env = Client(server.url)
    try:
        assert env.reset(test_uid=TASK)["ok"]
        final = env.step({"type": "submit_message", "content": "Sorry, I cannot help with that. <DONE>"})
    finally:
        env.exit()
    assert final["done"] is True and final["reward"] == 0.0, final
    term = final["observation"]
    assert term["reward_type"] == "fail" and term["metadata"]["finish_reason"] == "done"
    assert term["test_summary"]["signature"] == "no_state_change"
    assert term["test_summary"]["differences"].get("missing_effect", 0) > 0
    # counts only: no golden value reaches the client
    assert "Delayed shipment" not in json.dumps(final)
    row = row_of(server, term["metadata"]["attempt_id"])
    assert row["passed"] is False and row["system_error"] is False


def test_killed_sandbox_is_a_system_error(server: Served, dclient: docker.DockerClient) -> None:
    env = Client(server.url)
    try:
        assert env.reset(test_uid=TASK)["ok"]
        containers = env.state()["containers"]
        server_container = next(cid for role, cid in containers.items() if role.startswith("server"))
        dclient.containers.get(server_container).kill()
        result = env.step(
            {"type": "call_tool", "tool_name": "get_order", "arguments": {"order_id": "ORD-70020"}}
        )
    finally:
        env.exit()
    assert result["done"] is True and result["reward"] is None, json.dumps(result)[:3000]
    term = result["observation"]
    assert term["kind"] == "terminal" and term["reward_type"] == "system_error"
    attempt_id = term["metadata"]["attempt_id"]
    # the client gets the cause and a reference (bench.run.client_errors), the evaluator the details
    assert term["system_error"].startswith("system error (container): ")
    assert attempt_id in term["system_error"] and "errors.jsonl" in term["system_error"]
    row = row_of(server, attempt_id)
    assert row["system_error"] is True and row["passed"] is False
    errors = [json.loads(x) for x in (server.out / "errors.jsonl").read_text().splitlines()]
    [error] = [e["error"] for e in errors if e["attempt_id"] == attempt_id]
    assert "stopped answering" in error or "server-retail" in error
    assert containers_gone(dclient, list(containers.values()), timeout=60)


def test_bad_input_gets_clear_errors_and_leaks_nothing(server: Served, dclient: docker.DockerClient) -> None:
    env = Client(server.url)
    try:
        early = env.step({"type": "list_tools"})
        assert not early["ok"] and "send a reset first" in early["error"]
        unknown = env.reset(test_uid="no_such_file.py:test_case_X")
        assert not unknown["ok"] and "unknown task 'no_such_file.py:test_case_X'" in unknown["error"]
        assert "VALIDATION_ERROR" in unknown["error"]
        assert env.reset(test_uid=TASK)["ok"]
        containers = list(env.state()["containers"].values())

        bad_type = env.step({"type": "teleport"})
        assert not bad_type["ok"] and "unknown action type 'teleport'" in bad_type["error"]
        no_tool = env.step({"type": "call_tool"})
        assert not no_tool["ok"] and "call_tool needs tool_name" in no_tool["error"]

        def tool(name: str, arguments: Any) -> dict[str, Any]:
            res = env.step({"type": "call_tool", "tool_name": name, "arguments": arguments})
            assert res["ok"] and res["observation"]["kind"] == "tool" and not res["done"], res
            return dict(res["observation"])

        assert tool("get_order", "{not json")["tool_error"] == "invalid_args"
        assert tool("get_order", [1, 2])["tool_error"] == "invalid_args"
        missing = tool("no_such_tool", {})
        assert missing["tool_error"] == "tool_not_found" and "Unknown tool" in missing["tool_result"]
        assert tool("get_order", {"order_id": 12, "bogus": True})["tool_error"] in (
            "invalid_args",
            "execution_error",
        )
        assert tool("get_order", {"order_id": "ORD-70020"})["tool_error"] is None
        empty = env.step({"type": "submit_message", "content": "  "})
        assert empty["ok"] and empty["observation"]["kind"] == "error" and not empty["done"]
        state = env.state()
        assert state["status"] == "active" and not state["done"]
    finally:
        env.exit()  # closing mid-episode: recorded as abandoned, sandbox torn down
    assert containers_gone(dclient, containers, timeout=60)


# ---------------------------------------------------------------- HTTP routes


def test_http_routes(server: Served, bench: Benchmark) -> None:
    http = httpx.Client(base_url=server.url, timeout=300)
    assert http.get("/health").json() == {"status": "healthy"}
    meta = http.get("/metadata").json()
    assert meta["name"] and meta["tasks"] == 1 and meta["max_episodes"] == 8
    schema = http.get("/schema").json()
    assert {"action", "observation", "state"} <= set(schema)
    assert "submit_message" in json.dumps(schema["action"])

    assert http.post("/reset", json={"test_uid": "nope"}).status_code == 400
    json_type = {"Content-Type": "application/json"}
    assert http.post("/reset", content=b"{broken", headers=json_type).status_code == 400
    assert http.post("/reset", content=b"{broken").status_code == 415  # bench.web_guard: JSON only
    assert http.post("/step", json={"action": {"type": "list_tools"}}).status_code == 400
    assert (
        http.post("/step", json={"action": {"type": "list_tools"}, "episode_id": "ep-x"}).status_code == 404
    )

    reset = http.post("/reset", json={"test_uid": TASK})
    assert reset.status_code == 200, reset.text
    body = reset.json()
    assert set(body) == {"observation", "reward", "done", "metadata"}
    assert body["observation"]["kind"] == "reset"
    episode = body["observation"]["metadata"]["episode_id"]
    bad = http.post("/step", json={"action": {"type": "teleport"}, "episode_id": episode})
    assert bad.status_code == 422 and "unknown action type" in bad.json()["detail"]
    for action in golden_actions(bench):
        r = http.post("/step", json={"action": action, "episode_id": episode})
        assert r.status_code == 200 and not r.json()["done"], r.text
    final = http.post(
        "/step",
        json={"action": {"type": "submit_message", "content": "Done, ticket solved."}, "episode_id": episode},
    ).json()
    assert final["done"] is True and final["reward"] == 1.0, final
    state = http.get("/state", params={"episode_id": episode}).json()
    assert state["episode_id"] == episode and state["done"] and state["reward_type"] == "pass"
    after = http.post("/step", json={"action": {"type": "list_tools"}, "episode_id": episode})
    assert after.status_code == 409 and "has ended" in after.json()["detail"]


# ---------------------------------------------------------------- concurrency


def test_eight_episodes_at_once_each_its_own_sandbox(
    server: Served, bench: Benchmark, dclient: docker.DockerClient
) -> None:
    """A group of 8 resets of one task: 8 sandboxes (no shared rows), each episode
    driven to its terminal step and graded on its own. Even episodes play the golden
    calls (reward 1.0: its update names the ticket id a fresh table gives the new
    ticket, so a shared table would fail it); odd ones write a stray ticket of their
    own (reward 0.0). Every episode then lists the tickets and sees only its writes."""
    golden_subject = bench.golden_calls(bench.task(TASK))[0][1]["item"]["subject"]
    clients: list[Client] = []
    starters = [threading.Thread(target=lambda: clients.append(Client(server.url))) for _ in range(8)]
    for t in starters:
        t.start()
    for t in starters:
        t.join(timeout=300)
    assert len(clients) == 8
    results: dict[int, Any] = {}
    seen_containers: list[str] = []

    def call(env: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        step = env.step({"type": "call_tool", "tool_name": tool, "arguments": arguments})
        assert step["ok"] and step["observation"]["tool_error"] is None, step
        return step

    def play(i: int) -> None:
        env = clients[i]
        try:
            assert env.reset(test_uid=TASK)["ok"]
            seen_containers.extend(env.state()["containers"].values())
            if i % 2 == 0:
                for action in golden_actions(bench):
                    assert env.step(action)["ok"]
                closing = "I opened a ticket about the delay and solved it."
            else:
                item = {
                    "subject": f"isolation-{i}",
                    "description": "x",
                    "requester_id": "10003",
                    "status": "open",
                }
                call(env, "zendesk_create_item", {"table": "tickets", "item": item})
                closing = "Sorry, I cannot help with that. <DONE>"
            text = call(env, "zendesk_get_items", {"table": "tickets", "$top": 1000})["observation"][
                "tool_result"
            ]
            strays = sorted(s for s in (f"isolation-{j}" for j in range(8)) if f'"{s}"' in text)
            final = env.step({"type": "submit_message", "content": closing})
            assert final["done"] is True, final
            results[i] = (strays, text.count(f'"{golden_subject}"'), final)
            if i == 7:
                env.kill()  # a client that disappears without closing
            else:
                env.exit()
        except BaseException as exc:
            results[i] = exc

    threads = [threading.Thread(target=play, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    for c in clients:
        if c.proc.poll() is None:
            c.kill()
    assert all(isinstance(results.get(i), tuple) for i in range(8)), results
    assert all(results[i][0] == ([] if i % 2 == 0 else [f"isolation-{i}"]) for i in range(8)), results
    golden_counts = {results[i][1] for i in range(0, 8, 2)}
    stray_counts = {results[i][1] for i in range(1, 8, 2)}
    assert len(golden_counts) == len(stray_counts) == 1 and golden_counts == {next(iter(stray_counts)) + 1}
    rewards = [results[i][2]["reward"] for i in range(8)]
    assert rewards == [1.0, 0.0] * 4, rewards
    attempts = [results[i][2]["observation"]["metadata"]["attempt_id"] for i in range(8)]
    assert len(set(attempts)) == 8
    rows = [row_of(server, a) for a in attempts]
    assert [r["passed"] for r in rows] == [True, False] * 4 and not any(r["system_error"] for r in rows)
    assert len(set(seen_containers)) == len(seen_containers) >= 8 * 3
    assert containers_gone(dclient, seen_containers, timeout=120)
    # the capacity bound is back to all free once every episode ended
    assert server.ready().json()["episodes"]["active"] == 0


# ---------------------------------------------------------------- openenv 0.10's MCP path, 0.3's client


def test_mcp_client_plays_the_golden_calls_over_mcp(server: Served, bench: Benchmark) -> None:
    """MCPToolClient: session over POST /mcp, reset over /ws?session_id=, tools over /mcp."""
    env = Client(server.url, mode="mcp")
    try:
        reset = env.reset(test_uid=TASK)
        # MCPToolClient reads an observation holding `tools` as a tool listing: the reset's
        assert reset["ok"] and len(reset["observation"]["tools"]) == len(
            bench.scenario_of(bench.task(TASK)).tool_names
        )
        listed = env.send({"op": "list_tools"})
        assert listed["ok"], listed
        names = [t["name"] for t in listed["tools"]]
        assert names == bench.scenario_of(bench.task(TASK)).tool_names
        assert all(t["input_schema"].get("type") == "object" for t in listed["tools"])
        for name, arguments in bench.golden_calls(bench.task(TASK)):
            called = env.send({"op": "call_tool", "name": name, "arguments": arguments})
            assert called["ok"] and isinstance(called["result"], str), called
            assert "error" not in called["result"][:20].lower(), called
        reserved = env.send({"op": "call_tool", "name": "reset", "arguments": {}})
        assert not reserved["ok"] and "reserved" in reserved["error"]
        final = env.step({"type": "submit_message", "content": "Ticket opened and solved."})
        assert final["ok"] and final["done"] is True and final["reward"] == 1.0, final
        assert env.state()["episode_id"]
    finally:
        env.exit()


def test_openenv_core_03_client_still_plays(server: Served, bench: Benchmark) -> None:
    env = Client(server.url, version="0.3")
    try:
        assert env.reset(test_uid=TASK)["ok"]
        for action in golden_actions(bench):
            assert env.step(action)["ok"]
        final = env.step({"type": "submit_message", "content": "Done."})
    finally:
        env.exit()
    assert final["done"] is True and final["reward"] == 1.0, final


# ---------------------------------------------------------------- hostile input (#29 findings 2, 5, 7)


def test_malformed_frames_keep_the_socket_and_the_episode(server: Served) -> None:
    from websockets.sync.client import connect

    ws_url = server.url.replace("http://", "ws://") + "/ws"
    with connect(ws_url, max_size=2**24, open_timeout=30) as ws:

        def ask(frame: str | bytes) -> dict[str, Any]:
            ws.send(frame)
            return dict(json.loads(ws.recv(timeout=300)))

        reset = ask(json.dumps({"type": "reset", "data": {"test_uid": TASK}}))
        assert reset["type"] == "observation", reset
        for frame in (
            b"\x00\x01binary",
            "[" * 5000 + "]" * 5000,
            '{"type": "step", "data": ' + "9" * 5000 + "}",
            '{"type": "step", "data": {"type": "call_tool", "tool_name": "get_order", "arguments": '
            + '{"a": ' * 3000
            + "1"
            + "}" * 3000
            + "}}",
            "{not json",
        ):
            answer = ask(frame)
            assert answer["type"] == "error" and answer["data"]["code"] == "INVALID_JSON", answer
        assert ask('"just a string"')["data"]["code"] == "VALIDATION_ERROR"
        assert ask('{"type": "warp"}')["data"]["code"] == "UNKNOWN_TYPE"
        state = ask('{"type": "state"}')
        assert state["type"] == "state" and state["data"]["status"] == "active", state
        tools = ask('{"type": "step", "data": {"type": "list_tools"}}')
        assert tools["type"] == "observation" and tools["data"]["observation"]["kind"] == "tools"
        rpc = ask('{"type": "mcp", "data": {"jsonrpc": "2.0", "id": 7, "method": "tools/list"}}')
        assert rpc["type"] == "mcp" and rpc["data"]["id"] == 7 and rpc["data"]["result"]["tools"]


def test_malformed_http_bodies_are_400_invalid_json(server: Served) -> None:
    http = httpx.Client(base_url=server.url, timeout=60)
    bodies = [
        b"\xff\xfe{}",
        b"[" * 5000 + b"]" * 5000,
        b'{"test_uid": "x", "repeat": ' + b"9" * 5000 + b"}",
    ]
    for route in ("/reset", "/step", "/sandbox/tasks".replace("sandbox", "tbx-thinkingbox")):
        for body in bodies:
            r = http.post(route, content=body, headers={"Content-Type": "application/json"})
            assert r.status_code == 400 and r.json()["code"] == "INVALID_JSON", (route, r.text)
    rpc = http.post("/mcp", content=b"\xff{", headers={"Content-Type": "application/json"})
    assert rpc.status_code == 400 and rpc.json()["error"]["code"] == -32700
    assert http.get("/health").json() == {"status": "healthy"}


def test_a_live_episode_id_cannot_be_taken_twice(server: Served) -> None:
    """#29 finding 2: concurrent resets naming one id start one episode; the count is of sandboxes."""
    http = httpx.Client(base_url=server.url, timeout=300)

    def reset() -> httpx.Response:
        return http.post("/reset", json={"test_uid": TASK, "episode_id": "dup"})

    answers: list[httpx.Response] = []
    threads = [threading.Thread(target=lambda: answers.append(reset())) for _ in range(3)]
    for t in threads:
        t.start()
    ws = Client(server.url)
    try:
        over_ws = ws.reset(test_uid=TASK, episode_id="dup")
        for t in threads:
            t.join(timeout=300)
        codes = sorted(r.status_code for r in answers)
        assert codes == [200, 409, 409], [r.text for r in answers]
        assert not over_ws["ok"] and "SESSION_ERROR" in over_ws["error"], over_ws
        assert http.get("/metadata").json()["active_episodes"] == 1
        assert http.get("/state", params={"episode_id": "dup"}).json()["status"] == "active"
        ended = http.post(
            "/step",
            json={"action": {"type": "submit_message", "content": "Bye. <DONE>"}, "episode_id": "dup"},
        ).json()
        assert ended["done"] is True
    finally:
        ws.exit()
    assert http.post("/reset", json={"test_uid": TASK, "episode_id": "dup"}).status_code == 409


def test_repeat_is_bounded_and_never_reused(server: Served) -> None:
    """#29 finding 5: a huge repeat is refused up front; a recorded one is never run again."""
    http = httpx.Client(base_url=server.url, timeout=300)
    huge = http.post("/reset", json={"test_uid": TASK, "repeat": 10**250})
    assert huge.status_code == 422 and "repeat" in huge.json()["detail"]
    first = http.post("/reset", json={"test_uid": TASK, "repeat": 999_000})
    assert first.status_code == 200, first.text
    episode = first.json()["observation"]["metadata"]["episode_id"]
    running = http.post("/reset", json={"test_uid": TASK, "repeat": 999_000})
    assert running.status_code == 409 and "running already" in running.json()["detail"]
    step = {"action": {"type": "submit_message", "content": "Bye. <DONE>"}, "episode_id": episode}
    assert http.post("/step", json=step).json()["done"] is True
    again = http.post("/reset", json={"test_uid": TASK, "repeat": 999_000})
    assert again.status_code == 409 and "recorded" in again.json()["detail"]
    rows = [json.loads(x) for x in (server.out / "results.jsonl").read_text().splitlines()]
    assert sum(1 for r in rows if r["repeat"] == 999_000) == 1


def test_task_api_and_mcp_routes(server: Served) -> None:
    http = httpx.Client(base_url=server.url, timeout=60)
    assert http.get("/list_environments").json() == ["tbx-thinkingbox"]
    assert http.get("/tbx-thinkingbox/splits").json() == [{"name": "test", "type": "test"}]
    tasks = http.post("/tbx-thinkingbox/tasks", json={"split": "test"}).json()["tasks"]
    assert [t["test_uid"] for t in tasks] == [TASK]
    assert http.post("/tbx-thinkingbox/num_tasks", json={"split": "test"}).json() == {"num_tasks": 1}
    assert http.post("/tbx-thinkingbox/task", json={"split": "test", "index": 0}).json()["task"]["index"] == 0
    assert http.post("/tbx-thinkingbox/task", json={"split": "test", "index": 3}).status_code == 400
    assert http.post("/tbx-thinkingbox/task_range", json={"split": "test", "start": 0}).json()["tasks"]
    assert http.get("/other/splits").status_code == 404
    assert http.post("/tbx-thinkingbox/tasks", json={"split": "train"}).status_code == 404
    meta = http.get("/metadata").json()
    assert "/" not in json.dumps({k: meta[k] for k in ("dataset",)}) and "out" not in meta

    def rpc(method: str, **params: Any) -> dict[str, Any]:
        return dict(
            http.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).json()
        )

    sid = rpc("openenv/session/create")["result"]["session_id"]
    assert rpc("tools/list", session_id=sid)["error"]["code"] == -32600  # no episode yet
    assert rpc("tools/list", session_id="nope")["error"]["code"] == -32602
    assert rpc("tools/call", session_id=sid)["error"]["code"] == -32602  # no name
    assert rpc("no/such")["error"]["code"] == -32601
    assert rpc("openenv/session/close", session_id=sid)["result"] == {"session_id": sid, "closed": True}
    assert rpc("openenv/session/close", session_id=sid)["error"]["code"] == -32602
    from websockets.sync.client import connect

    with connect(server.url.replace("http://", "ws://") + "/ws?session_id=nope", open_timeout=30) as ws:
        refused = json.loads(ws.recv(timeout=30))
    assert refused["type"] == "error" and refused["data"]["code"] == "SESSION_ERROR"


def test_the_request_guard_refuses_foreign_pages(server: Served) -> None:
    """#29 finding 3, through bench.web_guard: a page the operator visits cannot drive the server."""
    from websockets.exceptions import InvalidStatus
    from websockets.sync.client import connect

    http = httpx.Client(base_url=server.url, timeout=60)
    form = http.post("/reset", content=b'{"test_uid": "x"}', headers={"Content-Type": "text/plain"})
    assert form.status_code == 415
    foreign = http.post("/reset", json={"test_uid": TASK}, headers={"Origin": "http://evil.example"})
    assert foreign.status_code == 403
    rebound = http.get("/metadata", headers={"Host": "evil.example"})
    assert rebound.status_code == 421
    with pytest.raises(InvalidStatus) as refused:
        connect(
            server.url.replace("http://", "ws://") + "/ws",
            additional_headers={"Origin": "http://evil.example"},
            open_timeout=30,
        )
    assert refused.value.response.status_code == 403
    assert http.get("/metadata").json()["active_episodes"] == 0


# ---------------------------------------------------------------- #38 findings 3 and 12


def _psql(pg: Any, query: str) -> str:
    """`query` as the container's own superuser over its local socket (peer auth)."""
    code, out = pg.exec_run(["psql", "-h", "/tmp", "-U", "postgres", "-d", "postgres", "-qAtX", "-c", query])
    assert code == 0, out
    return str(out.decode()).strip()


def test_postgres_killed_during_the_final_dump_is_a_container_loss(
    server: Served, dclient: docker.DockerClient
) -> None:
    """#38 finding 12: the terminal dump meets a PostgreSQL killed under it: the episode's
    system error names the container that died (cause `container`), never the dump's own
    OperationalError. A lock the dump's first read waits behind holds the dump open, so the
    kill lands while it runs, whatever the machine's speed."""
    http = httpx.Client(base_url=server.url, timeout=300)
    reset = http.post("/reset", json={"test_uid": TASK})
    assert reset.status_code == 200, reset.text
    episode = reset.json()["observation"]["metadata"]["episode_id"]
    containers = http.get("/state", params={"episode_id": episode}).json()["containers"]
    pg = dclient.containers.get(containers["postgres"])
    table = f"{schema_name('retail')}.{load_domain('retail').tables[0].name}"
    pg.exec_run(
        [
            "psql",
            "-h",
            "/tmp",
            "-U",
            "postgres",
            "-d",
            "postgres",
            "-c",
            f"BEGIN; LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE; SELECT pg_sleep(600);",
        ],
        detach=True,
    )
    held = "SELECT count(*) FROM pg_locks WHERE mode = 'AccessExclusiveLock' AND granted AND relation IS NOT NULL"
    waiting = "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"

    def until(query: str) -> None:
        deadline = time.monotonic() + 60
        while _psql(pg, query) == "0":
            assert time.monotonic() < deadline, query
            time.sleep(0.2)

    until(held)
    answers: list[dict[str, Any]] = []
    step = {"action": {"type": "submit_message", "content": "Bye. <DONE>"}, "episode_id": episode}
    ender = threading.Thread(
        target=lambda: answers.append(httpx.post(server.url + "/step", json=step, timeout=300).json())
    )
    ender.start()
    until(waiting)  # the terminal dump waits for the lock
    pg.kill()
    ender.join(timeout=300)
    [final] = answers
    term = final["observation"]
    assert final["done"] is True and term["reward_type"] == "system_error", final
    assert term["system_error"].startswith("system error (container): SandboxLost"), term["system_error"]
    errors = [json.loads(x) for x in (server.out / "errors.jsonl").read_text().splitlines()]
    [error] = [e["error"] for e in errors if e["attempt_id"] == term["metadata"]["attempt_id"]]
    assert "its postgres container" in error and "exited with code 137 (killed: SIGKILL)" in error, error
    assert containers_gone(dclient, list(containers.values()), timeout=60)


def _rpc(http: httpx.Client, method: str, **params: Any) -> dict[str, Any]:
    return dict(
        http.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).json()
    )


def test_empty_mcp_sessions_block_no_ws_episode(server: Served) -> None:
    """#38 finding 3: a client that fills its share of MCP sessions without an episode (the
    whole table before: 64 + 8 x --max-episodes) is refused more, and a new /ws episode of
    openenv's client still plays."""
    http = httpx.Client(base_url=server.url, timeout=60)
    sids: list[str] = []
    try:
        for _ in range(64 + 8 * 8 + 1):
            answer = _rpc(http, "openenv/session/create")
            if "error" in answer:
                break
            sids.append(answer["result"]["session_id"])
        error = answer["error"]
        assert error["code"] == -32000 and error["data"]["code"] == "CAPACITY_REACHED", error
        # the per-client cap's default for --max-episodes 8 (earlier tests' sessions are closed)
        assert error["data"]["scope"] == "client" and error["data"]["max_client_sessions"] == 64 + 8 * 8
        assert error["data"]["client_sessions"] == 64 + 8 * 8 and len(sids) >= 80
        env = Client(server.url)
        try:
            assert env.reset(test_uid=TASK)["ok"]
            final = env.step({"type": "submit_message", "content": "Sorry, I cannot help with that. <DONE>"})
            assert final["done"] is True and final["reward"] == 0.0, final
        finally:
            env.exit()
    finally:
        for sid in sids:
            _rpc(http, "openenv/session/close", session_id=sid)


@pytest.fixture(scope="module")
def bare_server(
    tmp_path_factory: pytest.TempPathFactory, dataset: Path, user_stub: UserStub
) -> Iterator[Served]:
    """A server that boots no sandbox (no Docker daemon at DOCKER_HOST): its MCP sessions
    without an episode, with a short --idle-timeout and a small per-client cap."""
    tmp = tmp_path_factory.mktemp("bare-server")
    config = write_config(tmp / "models.json", user_stub.base_url)
    served = start_server(
        tmp,
        config,
        dataset,
        *("--idle-timeout", "2", "--sessions-per-client", "3"),
        env={"DOCKER_HOST": f"unix://{tmp}/no-docker.sock"},
    )
    try:
        yield served
    finally:
        stop_server(served)


def test_a_client_past_its_session_cap_is_refused_and_others_are_not(bare_server: Served) -> None:
    from websockets.sync.client import connect

    http = httpx.Client(base_url=bare_server.url, timeout=60)
    sids = [_rpc(http, "openenv/session/create")["result"]["session_id"] for _ in range(3)]
    refused = _rpc(http, "openenv/session/create")["error"]
    assert refused["code"] == -32000 and "Too many sessions without an episode" in refused["message"]
    assert (
        refused["data"]
        == {
            "code": "CAPACITY_REACHED",
            "scope": "client",
            "client_sessions": 3,
            "max_client_sessions": 3,
            "retry_after": refused["data"]["retry_after"],
        }
        and 0 <= refused["data"]["retry_after"] <= 2
    )
    ws_url = bare_server.url.replace("http://", "ws://")
    with connect(ws_url + "/mcp", open_timeout=30) as ws:  # the same client over WS /mcp
        ws.send(json.dumps({"jsonrpc": "2.0", "id": 2, "method": "openenv/session/create"}))
        assert json.loads(ws.recv(timeout=30))["error"]["data"]["scope"] == "client"
    with connect(ws_url + "/ws", open_timeout=30) as ws:  # a socket's own session is never refused
        ws.send('{"type": "state"}')
        assert json.loads(ws.recv(timeout=30))["type"] == "state"
    assert _rpc(http, "openenv/session/close", session_id=sids[0])["result"]["closed"]
    sids[0] = _rpc(http, "openenv/session/create")["result"]["session_id"]
    for sid in sids:
        _rpc(http, "openenv/session/close", session_id=sid)


def test_tools_list_alone_does_not_keep_an_mcp_session(bare_server: Served) -> None:
    """Liveness is episode activity: a session without an episode is closed --idle-timeout
    (2 s) after it was made, however often it is asked for its tools."""
    http = httpx.Client(base_url=bare_server.url, timeout=60)
    made = time.monotonic()
    sid = _rpc(http, "openenv/session/create")["result"]["session_id"]
    while True:
        answer = _rpc(http, "tools/list", session_id=sid)["error"]
        if answer["code"] != -32600:  # "no episode yet": the session is still there
            break
        assert time.monotonic() - made < 30, "never closed"
        time.sleep(0.2)
    assert time.monotonic() - made >= 2
    assert answer["code"] == -32602 and "Unknown session_id" in answer["message"], answer


# ---------------------------------------------------------------- /ready failures


def test_ready_names_docker_a_rejected_key_and_a_dead_endpoint(tmp_path: Path, dataset: Path) -> None:
    dead = free_port()  # nothing listens there
    rejecting = UserStub(auth_status=401)
    key = "sk-test-never-shown-4711"
    config = tmp_path / "models.json"
    config.write_text(
        json.dumps(
            {
                "defaults": {"max_retries": 0},
                "user": {
                    "model": "user-m",
                    "base_url": rejecting.base_url,
                    "api_key_env": "TBX_TEST_USER_KEY",
                },
                "judge": {"model": "judge-m", "base_url": f"http://127.0.0.1:{dead}/v1", "api_key": "k"},
            }
        )
    )
    env = {"DOCKER_HOST": f"unix://{tmp_path}/no-docker.sock", "TBX_TEST_USER_KEY": key}
    served = start_server(tmp_path, config, dataset, env=env)
    try:
        body = wait_failing(served, {"docker", "user", "judge"})
        assert {"images", "pool"} <= set(body["failing"])
        assert "Docker daemon" in body["components"]["docker"]["detail"]
        user = body["components"]["user"]["detail"]
        assert user.startswith("user:") and "authentication" in user and "TBX_TEST_USER_KEY" in user
        assert f"cannot reach 127.0.0.1:{dead}" in body["components"]["judge"]["detail"]
        assert key not in json.dumps(body)
        for ok in ("dataset", "config", "proxy"):
            assert body["components"][ok]["ok"], body
        assert served.ready().status_code == 503
        assert httpx.post(served.url + "/reset", json={"test_uid": TASK}).status_code == 503
    finally:
        stop_server(served)
        rejecting.close()
    assert key not in served.log.read_text()


def test_each_listed_task_is_reset_from_a_sandbox_prepared_for_it(
    tmp_path: Path, dataset: Path, user_stub: UserStub, base_images: dict[str, str]
) -> None:
    """`--tasks A,B`: the pool prepares its spares round-robin over the list, so a reset
    of B (out of list order) and then of A are both hand-overs (the pool's counters on
    /ready, not wall time)."""
    other = "sandbox_external_retail_group1.py:test_case_ST002_003"
    config = write_config(tmp_path / "models.json", user_stub.base_url)
    served = start_server(
        tmp_path,
        config,
        dataset,
        *("--tasks", f"{TASK},{other}", "--warm", "2", "--max-episodes", "2", "--start-timeout", "300"),
    )

    def pool(until: Any) -> dict[str, Any]:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            counts = served.ready().json().get("pools", {}).get("retail", {})
            if until(counts):
                return dict(counts)
            time.sleep(1)
        pytest.fail(f"the retail pool never got there: {counts}")

    try:
        wait_ready(served)
        pool(lambda c: c.get("booted") == 2)  # both spares booted and seeded, one per task
        http = httpx.Client(base_url=served.url, timeout=300)
        for uid in (other, TASK):
            reset = http.post("/reset", json={"test_uid": uid})
            assert reset.status_code == 200, reset.text
            episode = reset.json()["observation"]["metadata"]["episode_id"]
            action = {"type": "submit_message", "content": "Sorry, I cannot help with that. <DONE>"}
            final = http.post("/step", json={"action": action, "episode_id": episode}).json()
            assert final["done"] is True, final
        counts = pool(lambda c: c.get("checkouts") == 2)
        assert counts["handovers"] == 2, counts
    finally:
        stop_server(served)
        sweep(run=served.run_id)


def test_a_missing_image_ends_the_server_at_start(tmp_path: Path, dataset: Path, user_stub: UserStub) -> None:
    """Waiting cannot build an image: the server says so and exits, not 503 forever (#27 item 3)."""
    # A checkout whose typesense image inputs differ: its content-hash tag was never
    # built, exactly what a stale or never-built image looks like (no image is removed).
    tree = tmp_path / "tree"
    for name in ("bench", "sandbox", "servers", "judge", "images"):
        shutil.copytree(REPO / name, tree / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "constraints.txt", tree / "constraints.txt")  # an input of the servers image
    (tree / "images" / "typesense" / "UNBUILT").write_text("changes the tag\n")
    config = write_config(tmp_path / "models.json", user_stub.base_url)
    served = start_server(
        tmp_path, config, dataset, env={"PYTHONPATH": str(tree)}, cwd=tree, wait_listen=False
    )
    try:
        assert served.proc.wait(timeout=120) == 2
        log = served.log.read_text()
        assert "cannot serve: image tbx/typesense:" in log and "is missing" in log, log[-2000:]
    finally:
        stop_server(served)


def test_report_reads_the_output(server: Served, tbx: str) -> None:
    """After the episodes above: the output directory is a tbx run directory."""
    run = load_run(server.out)
    assert run.manifest["agent"] == "openenv" and run.rows
    assert any(r.passed for r in run.rows) and any(r.system_error for r in run.rows)
    out = subprocess.run(
        [tbx, "report", str(server.out), "--json"], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)
