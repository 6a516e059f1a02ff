"""`tbx env serve` end to end: the real server process, real Docker sandboxes from
its warm pool, and openenv-core's real `GenericEnvClient` over WebSocket (run in
the separate `.venv-openenv`, `make openenv-client`, by openenv_client.py), plus
the HTTP routes with httpx. The simulated user is a local OpenAI-compatible stub
on 127.0.0.1 that closes the chat on its first reply.

One server serves the module (2 warm retail sandboxes, up to 8 episodes); the
/ready failure cases start their own short-lived servers that boot nothing.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import docker
import docker.errors
import httpx
import pytest

from bench.dataset import Benchmark, load_benchmark
from bench.run.results import load_run
from sandbox.sweeper import leftovers, sweep

pytestmark = pytest.mark.docker

REPO = Path(__file__).resolve().parents[2]
CLIENT = Path(__file__).with_name("openenv_client.py")
TASK = "sandbox_external_retail_group1.py:test_case_ST002_001"  # 2 golden calls: create + update a ticket
CLOSING = "Thanks, that's all. ###STOP###"


def openenv_python() -> str:
    path = Path(os.environ.get("TBX_OPENENV_PYTHON", REPO / ".venv-openenv" / "bin" / "python"))
    if not path.exists():
        pytest.fail(f"{path} missing: `make openenv-client` installs openenv-core in .venv-openenv")
    return str(path)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class UserStub:
    """An OpenAI-compatible endpoint on 127.0.0.1: GET /models, and chat completions
    that answer every customer turn with `reply`."""

    def __init__(self, reply: str = CLOSING):
        self.reply = reply
        self.requests: list[dict[str, Any]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self._send(200, {"object": "list", "data": [{"id": "user-m", "object": "model"}]})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append(body)
                message = {"role": "assistant", "content": outer.reply}
                self._send(
                    200,
                    {
                        "id": f"c{len(outer.requests)}",
                        "object": "chat.completion",
                        "created": 0,
                        "model": body["model"],
                        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                        "usage": {"prompt_tokens": 50, "completion_tokens": 8, "total_tokens": 58},
                    },
                )

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def write_config(path: Path, base_url: str) -> Path:
    path.write_text(
        json.dumps(
            {
                "defaults": {"base_url": base_url, "api_key": "k", "max_retries": 0},
                "user": {"model": "user-m"},
            }
        )
    )
    return path


@dataclass
class Served:
    url: str
    out: Path
    proc: subprocess.Popen[str]
    log: Path

    @property
    def run_id(self) -> str:
        return str(json.loads((self.out / "manifest.json").read_text())["run_id"])

    def ready(self) -> httpx.Response:
        return httpx.get(self.url + "/ready", timeout=15)


def start_server(
    tmp: Path,
    config: Path,
    dataset: Path,
    *extra: str,
    env: dict[str, str] | None = None,
    cwd: Path = REPO,
) -> Served:
    port = free_port()
    out = tmp / "out"
    log = tmp / "server.log"
    args = [
        sys.executable,
        "-m",
        "bench.cli",
        "env",
        "serve",
        "--dataset",
        str(dataset),
        "--config",
        str(config),
        "--port",
        str(port),
        "--tasks",
        TASK,
        "--out",
        str(out),
        *extra,
    ]
    proc = subprocess.Popen(
        args,
        cwd=cwd,
        env={**os.environ, "TESTCONTAINERS_RYUK_DISABLED": "true", **(env or {})},
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        text=True,
    )
    served = Served(f"http://127.0.0.1:{port}", out, proc, log)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"server exited: {log.read_text()[-3000:]}"
        try:
            httpx.get(served.url + "/health", timeout=2)
            return served
        except httpx.HTTPError:
            time.sleep(0.5)
    stop_server(served)
    pytest.fail(f"server did not listen within 90 s: {log.read_text()[-3000:]}")


def stop_server(served: Served) -> None:
    if served.proc.poll() is None:
        served.proc.send_signal(signal.SIGTERM)
        try:
            served.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            served.proc.kill()
            served.proc.wait()


def wait_ready(served: Served, timeout: float = 300) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    body: dict[str, Any] = {}
    while time.monotonic() < deadline:
        r = served.ready()
        body = r.json()
        if r.status_code == 200:
            return body
        assert r.status_code == 503, r.text
        time.sleep(1)
    pytest.fail(f"/ready still 503 after {timeout} s: {body}")


def wait_failing(served: Served, names: set[str], timeout: float = 60) -> dict[str, Any]:
    """The /ready body once every component in `names` is named failing (503)."""
    deadline = time.monotonic() + timeout
    body: dict[str, Any] = {}
    while time.monotonic() < deadline:
        r = served.ready()
        body = r.json()
        assert r.status_code == 503, body
        if names <= set(body["failing"]):
            return body
        time.sleep(0.5)
    pytest.fail(f"/ready never named {names} failing: {body}")


class Client:
    """openenv-core's GenericEnvClient in its own process (openenv_client.py)."""

    def __init__(self, url: str):
        self.proc = subprocess.Popen(
            [openenv_python(), str(CLIENT), url],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()
        assert self._read(60)["connected"]

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


def containers_gone(dclient: docker.DockerClient, ids: list[str], timeout: float = 60) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        alive = []
        for cid in ids:
            try:
                dclient.containers.get(cid)
                alive.append(cid)
            except docker.errors.NotFound:
                pass
        if not alive:
            return True
        time.sleep(0.5)
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
        assert term["finish_reason"] == "user_done" and term["user_message"] == "Thanks, that's all."
        assert term["metadata"]["signature"] is None and term["metadata"]["differences"] == {}
        state = env.state()
        assert state["done"] and state["reward"] == 1.0 and state["phase"] == "done"

        after = env.step({"type": "list_tools"})
        assert not after["ok"] and "has ended" in after["error"] and "SESSION_ERROR" in after["error"]
    finally:
        env.exit()
    assert containers_gone(dclient, containers)
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
    assert term["reward_type"] == "fail" and term["finish_reason"] == "done"
    assert term["metadata"]["signature"] == "no_state_change"
    assert term["metadata"]["differences"].get("missing_effect", 0) > 0
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
    assert containers_gone(dclient, list(containers.values()))


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
        assert state["phase"] == "running" and not state["done"]
    finally:
        env.exit()  # closing mid-episode: recorded as abandoned, sandbox torn down
    assert containers_gone(dclient, containers)


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
    assert set(body) == {"observation", "reward", "done"} and body["observation"]["kind"] == "reset"
    episode = body["observation"]["episode_id"]
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


def test_eight_episodes_at_once_each_its_own_sandbox(server: Served, dclient: docker.DockerClient) -> None:
    clients = [Client(server.url) for _ in range(8)]
    results: dict[int, Any] = {}
    seen_containers: list[str] = []

    def play(i: int) -> None:
        env = clients[i]
        try:
            assert env.reset(test_uid=TASK)["ok"]
            seen_containers.extend(env.state()["containers"].values())
            item = {
                "subject": f"isolation-{i}",
                "description": "x",
                "requester_id": "10003",
                "status": "open",
            }
            created = env.step(
                {
                    "type": "call_tool",
                    "tool_name": "zendesk_create_item",
                    "arguments": {"table": "tickets", "item": item},
                }
            )
            assert created["observation"]["tool_error"] is None, created
            listed = env.step(
                {
                    "type": "call_tool",
                    "tool_name": "zendesk_get_items",
                    "arguments": {"table": "tickets", "$top": 1000},
                }
            )
            text = listed["observation"]["tool_result"]
            results[i] = sorted(s for s in (f"isolation-{j}" for j in range(8)) if f'"{s}"' in text)
            if i == 7:
                env.kill()  # a client that disappears mid-episode
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
    assert all(results.get(i) == [f"isolation-{i}"] for i in range(8)), results
    assert len(set(seen_containers)) == len(seen_containers) >= 8 * 3
    assert containers_gone(dclient, seen_containers, timeout=120)
    # the capacity bound is back to all free once every episode ended
    assert server.ready().json()["episodes"]["active"] == 0


# ---------------------------------------------------------------- /ready failures


def test_ready_names_docker_and_user_when_down(tmp_path: Path, dataset: Path) -> None:
    dead = free_port()  # nothing listens there
    config = write_config(tmp_path / "models.json", f"http://127.0.0.1:{dead}/v1")
    served = start_server(tmp_path, config, dataset, env={"DOCKER_HOST": f"unix://{tmp_path}/no-docker.sock"})
    try:
        body = wait_failing(served, {"docker", "user"})
        assert {"images", "pool"} <= set(body["failing"])
        assert "Docker daemon" in body["components"]["docker"]["detail"]
        assert "unreachable" in body["components"]["user"]["detail"]
        for ok in ("dataset", "config", "proxy"):
            assert body["components"][ok]["ok"], body
        assert served.ready().status_code == 503
        assert httpx.post(served.url + "/reset", json={"test_uid": TASK}).status_code == 503
    finally:
        stop_server(served)


def test_ready_names_images_when_missing(tmp_path: Path, dataset: Path, user_stub: UserStub) -> None:
    # A checkout whose typesense image inputs differ: its content-hash tag was never
    # built, exactly what a stale or never-built image looks like (no image is removed).
    tree = tmp_path / "tree"
    for name in ("bench", "sandbox", "servers", "judge", "images"):
        shutil.copytree(REPO / name, tree / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "constraints.txt", tree / "constraints.txt")  # an input of the servers image
    (tree / "images" / "typesense" / "UNBUILT").write_text("changes the tag\n")
    config = write_config(tmp_path / "models.json", user_stub.base_url)
    served = start_server(tmp_path, config, dataset, env={"PYTHONPATH": str(tree)}, cwd=tree)
    try:
        body = wait_failing(served, {"images"})
        assert "missing" in body["components"]["images"]["detail"]
        assert "typesense" in body["components"]["images"]["detail"]
        assert "pool" in body["failing"]
        for ok in ("dataset", "config", "docker", "proxy", "user"):
            assert body["components"][ok]["ok"], body
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
