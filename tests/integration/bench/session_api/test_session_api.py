"""`tbx session-proxy` against real sandboxes, driven by an httpx client written
from the wire spec (specs/thinkingbox-session-proxy.md §2-§4, §9).

One module-scoped server (warm pool, --record) serves most tests; the auth,
idle-expiry and SIGTERM tests start a second, small one (no warm pool). Every
container a session used is checked gone after its destroy.
"""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import docker
import docker.errors
import pytest
from sandbox_containers import containers_gone, signal_server
from session_api_server import Served, Task, call, create, effects, serving, start, stop, traced_task, value

from bench.dataset import Benchmark, load_benchmark
from judge import state_hash

SERVERS = (
    "sandbox_external_retail",
    "sandbox_auto_insurance",
    "sandbox_consulting",
    "external_booking_v1",
    "sandbox_neobank_support_v1",
)
YESNO = {"external_booking_v1", "sandbox_neobank_support_v1"}


def labelled(dclient: docker.DockerClient, run_id: str) -> tuple[list[str], list[str]]:
    filters = {"label": f"tbx.run={run_id}"}
    return (
        [c.name for c in dclient.containers.list(all=True, filters=filters, ignore_removed=True)],
        [n.name for n in dclient.networks.list(filters=filters)],
    )


# ---- fixtures -----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def bench(dataset: Path) -> Benchmark:
    return load_benchmark(dataset, strict=False)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, dataset: Path) -> Iterator[Served]:
    tmp = tmp_path_factory.mktemp("session-api")
    with serving(tmp, dataset, "--warm", "1", "--record", str(tmp / "out")) as s:
        yield s


@pytest.fixture()
def dclient() -> docker.DockerClient:
    return docker.from_env()


# ---- transport, envelope, errors (§2, §3, §9) ----------------------------------------------
def test_transport_and_error_bodies(served: Served) -> None:
    with served.client() as c:
        r = c.get("/health")
        assert (r.status_code, r.text, r.headers["content-type"]) == (200, "OK", "text/plain; charset=utf-8")
        assert c.head("/health").status_code == 200
        # tbx's web guard: a page in the operator's browser cannot drive it (DNS rebinding, cross-origin)
        assert c.get("/health", headers={"Host": "evil.example"}).status_code == 421
        assert (
            c.post("/session_destroy_all", json={}, headers={"Origin": "http://evil.example"}).status_code
            == 403
        )
        r = c.post("/health", json={})
        assert (r.status_code, r.text) == (405, "Method Not Allowed")
        r = c.post("/nope", json={})
        assert (r.status_code, r.text) == (404, "Not Found")
        r = c.post("/session_create/", json={})
        assert r.status_code == 307 and r.headers["location"].endswith("/session_create")
        assert c.post("//session_create", json={}).status_code == 404
        # the body is JSON whatever the Content-Type says (the reference CI's curl -d '{}')
        r = c.post(
            "/session_destroy_all",
            content=b"{}",
            headers={"content-type": "application/x-www-form-urlencoded"},
        )
        assert value(r) == "Ok"
        for bad in (b"", b"not json", b"[1]"):
            assert value(c.post("/session_destroy_all", content=bad), 400) == "Invalid input"
        assert (
            value(
                c.post(
                    "/session_create",
                    json={"session_id": "x2", "server_config": {"sandbox_external_retail": {}}},
                ),
                400,
            )
            == "Invalid input"
        )
        assert (
            value(
                c.post(
                    "/session_create", json={"session_id": 123, "server_config": {}, "available_tools": []}
                ),
                400,
            )
            == "Invalid input"
        )
        msg = value(
            c.post(
                "/session_create",
                json={"session_id": "x1", "server_config": {"sandbox_retail": {}}, "available_tools": []},
            ),
            400,
        )
        assert msg.startswith("Server sandbox_retail does not exist") and all(s in msg for s in SERVERS)
        for route in ("/list_tools", "/get_effects", "/session_destroy", "/session_info"):
            assert value(c.post(route, json={"session_id": "nope"}), 400) == "Session does not exist"
        assert value(call(c, "nope", "get_order", {}), 400) == "Session does not exist"
        assert value(c.post("/garbage_collect", json={}), 400) == "Invalid input"
        assert value(c.post("/garbage_collect", json={"inactivity_minutes": 15})) == {
            "count": 0,
            "session_ids": [],
        }
        # a session with no servers: the reference allows it
        assert (
            value(
                c.post(
                    "/session_create",
                    json={"session_id": "empty", "server_config": {}, "available_tools": []},
                )
            )
            == {}
        )
        assert value(c.post("/list_tools", json={"session_id": "empty"})) == {"tools": {}}
        assert value(c.post("/get_effects", json={"session_id": "empty"})) == {}
        assert value(c.post("/session_info", json={"session_id": "empty", "update": {"attempt": 3}})) == {
            "attempt": 3
        }
        assert value(c.post("/session_info", json={"session_id": "empty", "update": {"owner": "r"}})) == {
            "attempt": 3,
            "owner": "r",
        }
        assert value(c.post("/session_destroy", json={"session_id": "empty"})) == "Ok"


# ---- golden replay, all five servers (§3.4, §3.5, §6) ------------------------------------
def _golden_session(served: Served, task: Task, dclient: docker.DockerClient) -> dict[str, Any]:
    sid = f"golden-{task.server}"
    with served.client() as c:
        r = create(c, sid, task)
        assert value(r) == {task.server: {}}
        containers = list(json.loads(r.headers["x-tbx-containers"]).values())
        tools = value(c.post("/list_tools", json={"session_id": sid}))["tools"]
        assert set(tools) == set(task.tools)
        for entry in tools.values():
            assert set(entry) == {"description", "inputSchema"}
            assert "$defs" not in json.dumps(entry["inputSchema"]) and "title" not in entry["inputSchema"]
        for golden in task.trace["calls"]:
            assert value(call(c, sid, golden["tool"], golden["parameters"])) == golden["result"]
        e = effects(c, sid, task.server)
        again = effects(c, sid, task.server)  # no side effects, repeatable
        assert value(c.post("/session_destroy", json={"session_id": sid})) == "Ok"
        assert value(c.post("/session_destroy", json={"session_id": sid}), 400) == "Session does not exist"
    assert containers_gone(dclient, containers), f"{task.server}: containers left after destroy"
    assert again["result_db_hash"] == e["result_db_hash"]
    return e


def test_golden_replay_through_the_api_all_five_servers(
    served: Served, bench: Benchmark, dclient: docker.DockerClient
) -> None:
    tasks = [traced_task(bench, s) for s in SERVERS]
    with ThreadPoolExecutor(len(tasks)) as pool:
        results = list(pool.map(lambda t: _golden_session(served, t, dclient), tasks))
    for task, e in zip(tasks, results, strict=True):
        assert e["result_db_hash"] == e["golden_db_hash"] == task.trace["golden_state_hash"], task.task_id
        assert e["diff"] == []
        assert state_hash(e["initial_db_state"]) == task.trace["initial_state_hash"]
        assert state_hash(e["golden_db_state"]) == e["golden_db_hash"]
        assert ("rubrics_yesno" in e) is (task.server in YESNO)
        if task.server in YESNO:
            assert e["rubrics"] is not None and e["rubrics_yesno"] == list(
                task.config[task.server].get("rubrics_yesno") or []
            )
        else:
            assert e["rubrics"] is None
    # --record: each session is a tbx attempt row under its benchmark task, passed by hash
    out = Path(served.log.parent / "out")
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    by_task = {r["task_id"]: r for r in rows}
    for task in tasks:
        row = by_task[task.task_id]
        assert row["passed"] is True and row["strict_match"] is True and row["system_error"] is False
        record = json.loads((out / row["attempt_file"]).read_text())
        assert [c["tool"] for c in record["trajectory"]] == [c["tool"] for c in task.trace["calls"]]


def test_session_calls_errors_and_reserved_tools(served: Served, bench: Benchmark) -> None:
    task = traced_task(bench, "sandbox_external_retail")
    sid = "5b8e0c3a-2f71-4d9b-a6e4-9c1d7f2b8a05"
    with served.client() as c:
        value(create(c, sid, task))
        assert value(create(c, sid, task), 400) == "Session already exists"
        first = task.trace["calls"][0]
        assert value(call(c, sid, "delete_customer", {}), 400) == "Tool delete_customer does not exist"
        assert (
            value(c.post("/call_tool", json={"session_id": sid, "tool_name": first["tool"]}), 400)
            == "Invalid input"
        )
        # a tool-level error is a 200 with the server's text
        text = value(call(c, sid, first["tool"], {}))
        assert json.loads(text)["error"].startswith("Tool execution failed")
        # tbx refuses every __reserved__ name, directly and through the server tool
        assert (
            value(call(c, sid, "__reserved__init", {"config": {}}), 400)
            == "Tool __reserved__init does not exist"
        )
        wrapped = {"server_name": task.server, "tool_name": "__reserved__teardown", "arguments": {}}
        assert (
            value(call(c, sid, "__reserved__server_tool", wrapped), 400)
            == f"Tool {task.server} > __reserved__teardown does not exist"
        )
        other = {"server_name": "sandbox_auto_insurance", "tool_name": "get_policy", "arguments": {}}
        assert (
            value(call(c, sid, "__reserved__server_tool", other), 400)
            == "Tool sandbox_auto_insurance > get_policy does not exist"
        )
        assert value(
            call(c, sid, "__reserved__server_tool", {"server_name": task.server}), 400
        )  # free-text validation error
        # the server tool reaches a visible tool, and __reserved__geteffects is answered host-side
        via = {"server_name": task.server, "tool_name": first["tool"], "arguments": first["parameters"]}
        assert value(call(c, sid, "__reserved__server_tool", via)) == first["result"]
        geteffects = {"server_name": task.server, "tool_name": "__reserved__geteffects", "arguments": {}}
        inner = json.loads(value(call(c, sid, "__reserved__server_tool", geteffects)))
        assert inner["result_db_hash"] == state_hash(inner["result_db_state"]) and "golden_db_hash" in inner
        value(c.post("/session_destroy", json={"session_id": sid}))


def test_flags_always_json_and_proxy_info(served: Served, bench: Benchmark) -> None:
    task = traced_task(bench, "sandbox_consulting")
    sid = "flags"
    tool = task.trace["calls"][0]["tool"]
    with served.client() as c:
        value(create(c, sid, task, always_json_output=True, geteffects_proxy_info="yes", timeout="30"))
        text = value(call(c, sid, tool, {"table": "nope", "item": {}}))
        json.loads(text)  # JSON in any case
        out = value(c.post("/get_effects", json={"session_id": sid}))
        assert list(out) == [task.server, "__reserved__proxy_info"]
        assert out["__reserved__proxy_info"] == {
            "tool_calls": [{"tool_name": tool, "arguments": {"table": "nope", "item": {}}, "response": text}]
        }
        value(c.post("/session_destroy", json={"session_id": sid}))


# ---- isolation and ordering (§4.1, §4.8) ------------------------------------------------
def test_six_concurrent_sessions_each_end_in_their_own_state(served: Served, bench: Benchmark) -> None:
    task = traced_task(bench, "sandbox_auto_insurance")

    def one(i: int) -> dict[str, Any]:
        sid = f"iso-{i}"
        with served.client() as c:
            value(create(c, sid, task))
            if i % 2 == 0:
                for g in task.trace["calls"]:
                    value(call(c, sid, g["tool"], g["parameters"]))
            e = effects(c, sid, task.server)
            value(c.post("/session_destroy", json={"session_id": sid}))
            return e

    with ThreadPoolExecutor(6) as pool:
        results = list(pool.map(one, range(6)))
    for i, e in enumerate(results):
        if i % 2 == 0:
            assert (
                e["result_db_hash"] == e["golden_db_hash"] == task.trace["golden_state_hash"]
                and e["diff"] == []
            )
        else:
            assert (
                e["result_db_hash"] == task.trace["initial_state_hash"] != e["golden_db_hash"] and e["diff"]
            )


def test_calls_of_one_session_run_one_at_a_time(served: Served, bench: Benchmark) -> None:
    task = traced_task(bench, "sandbox_consulting")
    sid = "order"
    n = 10
    with served.client() as c:
        value(create(c, sid, task))
        before = len(effects(c, sid, task.server)["result_db_state"]["zendesk_tickets"])

        def make(i: int) -> str:
            with served.client() as cc:
                item = {
                    "subject": f"ordering {i}",
                    "status": "open",
                    "type": "task",
                    "priority": "low",
                    "requester_id": "8",
                }
                return str(value(call(cc, sid, "zendesk_create_item", {"table": "tickets", "item": item})))

        with ThreadPoolExecutor(n) as pool:
            replies = list(pool.map(make, range(n)))
        # ids are count-based (str(count + 1)): overlapping calls would collide
        ids = sorted(int(json.loads(r)["item"]["id"]) for r in replies)
        assert ids == list(range(before + 1, before + n + 1)), replies
        value(c.post("/session_destroy", json={"session_id": sid}))


def test_a_queued_call_that_timed_out_is_never_executed(
    served: Served, bench: Benchmark, dclient: docker.DockerClient
) -> None:
    task = traced_task(bench, "sandbox_consulting")
    sid = "queued-timeout"
    with served.client() as c:
        r = create(c, sid, task, timeout=1.5)  # runs at most 1.5 s, waits at most 3.5 s
        value(r)
        containers = json.loads(r.headers["x-tbx-containers"])
        before = effects(c, sid, task.server)["result_db_hash"]
        signal_server(dclient, containers, signal.SIGSTOP)  # the tool server hangs (no Docker event)
        try:
            read = {"table": "tickets"}
            write = {
                "table": "tickets",
                "item": {
                    "subject": "must never exist",
                    "status": "open",
                    "type": "task",
                    "priority": "low",
                    "requester_id": "8",
                },
            }

            def send(args: tuple[str, dict[str, Any]]) -> tuple[int, str, float]:
                t0 = time.monotonic()
                with served.client() as cc:
                    resp = call(cc, sid, *args)
                return resp.status_code, resp.json()["content"]["value"], time.monotonic() - t0

            with ThreadPoolExecutor(4) as pool:
                futures = []
                for args in [("zendesk_get_items", read)] * 3 + [("zendesk_create_item", write)]:
                    futures.append(pool.submit(send, args))
                    time.sleep(0.15)  # arrival order: three reads, then the write
                answers = [f.result() for f in futures]
        finally:
            signal_server(dclient, containers, signal.SIGCONT)
        for status, message, _ in answers:
            assert (status, message) == (504, "Tool call timed out after 1.5 seconds")
        assert answers[-1][2] < 4.5  # answered at its 3.5 s wait limit, while the third read still ran
        time.sleep(2.0)  # the server resumes; anything sent to it is done by now
        after = effects(c, sid, task.server)
        assert after["result_db_hash"] == before
        assert not any(
            t.get("subject") == "must never exist" for t in after["result_db_state"]["zendesk_tickets"]
        )
        # the session stays usable
        assert json.loads(value(call(c, sid, "zendesk_get_items", read)))
        value(c.post("/session_destroy", json={"session_id": sid}))


# ---- faults ---------------------------------------------------------------------------------
def test_a_killed_container_gives_a_clear_error_and_a_system_error_row(
    served: Served, bench: Benchmark, dclient: docker.DockerClient
) -> None:
    task = traced_task(bench, "sandbox_external_retail", 1)
    sid = "killed"
    with served.client() as c:
        r = create(c, sid, task)
        value(r)
        containers = json.loads(r.headers["x-tbx-containers"])
        attempt_id = r.headers["x-tbx-attempt-id"]
        first = task.trace["calls"][0]
        value(call(c, sid, first["tool"], first["parameters"]))
        dclient.containers.get(containers["postgres"]).kill()
        # The very next call: the server answers its ordinary error object for the dead
        # database, and the API answers the loss (400), never that text as a 200 result.
        message = value(call(c, sid, first["tool"], first["parameters"]), 400)
        assert "sandbox is gone" in message and "postgres" in message, message
        message = value(c.post("/get_effects", json={"session_id": sid}), 500)  # spec §3.5
        assert "sandbox is gone" in message and "postgres" in message, message
        assert value(c.post("/session_destroy", json={"session_id": sid})) == "Ok"
        assert not _existing(dclient, containers), "spec §3.6: destroy answers after teardown"
    out = served.log.parent / "out"
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    row = next(r for r in rows if r["attempt_id"] == attempt_id)
    assert row["system_error"] is True and "postgres" in row["error"]


def _existing(dclient: docker.DockerClient, containers: dict[str, str]) -> list[str]:
    """The roles whose container still exists, asked once (no waiting)."""
    out = []
    for role, cid in containers.items():
        try:
            dclient.containers.get(cid)
            out.append(role)
        except docker.errors.NotFound:
            pass
    return out


def test_non_finite_numbers_are_tool_errors_and_effects_stay_answerable(
    served: Served, bench: Benchmark, dclient: docker.DockerClient
) -> None:
    task = traced_task(bench, "sandbox_external_retail", 2)
    sid = "non-finite"
    refused = json.dumps(
        {
            "error": "Tool execution failed: Input validation failed: amount: Input should be a finite number",
            "tool": "create_refund",
        }
    )
    with served.client() as c:
        r = create(c, sid, task)
        value(r)
        containers = json.loads(r.headers["x-tbx-containers"])
        args = {"order_id": "ORD-10000001", "customer_id": "CUS-1", "refund_reason": "order_cancelled"}
        for amount in ("NaN", "inf", "Infinity", "1e999"):
            assert value(call(c, sid, "create_refund", {**args, "amount": amount})) == refused
        # The same as JSON number tokens (what Python's json writes): they reach the tool too.
        raw = json.dumps(
            {"session_id": sid, "tool_name": "create_refund", "arguments": {**args, "amount": 0}}
        )
        for token in ("NaN", "Infinity", "1e999"):
            body = raw.replace('"amount": 0', f'"amount": {token}').encode()
            assert value(c.post("/call_tool", content=body)) == refused
        e = effects(c, sid, task.server)
        assert e["result_db_hash"] == state_hash(e["initial_db_state"])  # nothing was stored
        # /session_info refuses what it could not answer, and stays answerable.
        bad = b'{"session_id":"non-finite","update":{"x":NaN}}'
        assert value(c.post("/session_info", content=bad), 400) == "Invalid input"
        assert value(c.post("/session_info", json={"session_id": sid, "update": {"y": 1}})) == {"y": 1}
        assert value(c.post("/session_destroy", json={"session_id": sid})) == "Ok"
        assert not _existing(dclient, containers), "spec §3.6: destroy answers after teardown"


# ---- /mcp/ (§3.10) ---------------------------------------------------------------------------
def test_mcp_endpoint_relays_to_the_session(served: Served, bench: Benchmark) -> None:
    import asyncio

    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    task = traced_task(bench, "sandbox_neobank_support_v1")
    sid = "mcp-view"
    with served.client() as c:
        value(create(c, sid, task))
        golden = task.trace["calls"][0]

        async def drive() -> tuple[list[str], str, str]:
            async with (
                httpx2.AsyncClient(headers={"X-TB-Session-Id": sid}, timeout=60) as http,
                Client(streamable_http_client(served.url + "/mcp/", http_client=http), cache=None) as mcp,
            ):
                listed = [t.name for t in (await mcp.list_tools()).tools]
                result = await mcp.call_tool(golden["tool"], golden["parameters"])
                refused = await mcp.call_tool("__reserved__geteffects", {})
            text = "".join(getattr(x, "text", "") for x in result.content)
            return listed, text, "".join(getattr(x, "text", "") for x in refused.content)

        listed, text, refused = asyncio.run(drive())
        assert set(listed) == set(task.tools)
        assert text == golden["result"]
        assert "Unknown tool" in refused
        r = c.post("/mcp/", json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        assert r.json()["error"] == {"code": 0, "message": "Missing X-TB-Session-Id header"}
        r = c.post(
            "/mcp/",
            json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
            headers={"X-TB-Session-Id": "nope"},
        )
        assert r.json()["error"]["message"] == "Session not found: nope"
        assert c.post("/mcp", json={}).status_code == 307
        value(c.post("/session_destroy", json={"session_id": sid}))


def test_empty_available_tools_shows_no_tool_anywhere(served: Served, bench: Benchmark) -> None:
    """§3.2/§4.2: `available_tools: []` leaves the visible tool table empty, so neither
    the JSON routes nor `/mcp/` list or call any tool of the session's server."""
    import asyncio

    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    task = traced_task(bench, "sandbox_external_retail")
    sid = "no-tools"
    golden = task.trace["calls"][0]
    with served.client() as c:
        value(create(c, sid, task, available_tools=[]))
        assert value(c.post("/list_tools", json={"session_id": sid})) == {"tools": {}}
        assert value(call(c, sid, golden["tool"], golden["parameters"]), 400) == (
            f"Tool {golden['tool']} does not exist"
        )

        async def drive() -> tuple[list[str], bool]:
            async with (
                httpx2.AsyncClient(headers={"X-TB-Session-Id": sid}, timeout=60) as http,
                Client(streamable_http_client(served.url + "/mcp/", http_client=http), cache=None) as mcp,
            ):
                listed = [t.name for t in (await mcp.list_tools()).tools]
                result = await mcp.call_tool(golden["tool"], golden["parameters"])
            return listed, bool(result.is_error)

        listed, refused = asyncio.run(drive())
        assert listed == [] and refused
        e = effects(c, sid, task.server)  # nothing ran: the state is the initial one
        assert e["result_db_hash"] == task.trace["initial_state_hash"]
        value(c.post("/session_destroy", json={"session_id": sid}))


# ---- auth, idle expiry, SIGTERM (a second server) ---------------------------------------------
def test_auth_idle_expiry_and_sigterm_leave_nothing(
    tmp_path: Path, dataset: Path, bench: Benchmark, dclient: docker.DockerClient
) -> None:
    s = start(
        tmp_path,
        dataset,
        "--warm",
        "0",
        "--api-key-env",
        "TBX_TEST_KEY",
        "--gc-minutes",
        "0.1",
        "--gc-every",
        "1",
        env={"TBX_TEST_KEY": " sekrit \n"},
    )
    task = traced_task(bench, "sandbox_consulting")
    try:
        with s.client() as anon:
            assert anon.get("/health").status_code == 200
            for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "bearer sekrit"}):
                r = anon.post("/session_create", json={}, headers=headers)
                assert (r.status_code, r.content) == (401, b'{"success":false,"error":"Unauthorized"}')
            assert anon.post("/nope", json={}).status_code == 401  # checked before routing
        with s.client(headers={"Authorization": "Bearer sekrit"}) as c:
            r = create(c, "idle", task)
            value(r)
            idle = list(json.loads(r.headers["x-tbx-containers"]).values())
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:  # /list_tools is no activity: it does not keep it alive
                if c.post("/list_tools", json={"session_id": "idle"}).status_code == 400:
                    break
                time.sleep(0.5)
            assert value(c.post("/list_tools", json={"session_id": "idle"}), 400) == "Session does not exist"
            assert containers_gone(dclient, idle)
            # Spec §3.6: /session_destroy answers once teardown is done (no --record to wait for here).
            r = create(c, "destroyed", task)
            value(r)
            containers = json.loads(r.headers["x-tbx-containers"])
            assert value(c.post("/session_destroy", json={"session_id": "destroyed"})) == "Ok"
            assert not _existing(dclient, containers)
            r = create(c, "held", task)
            value(r)
            held = list(json.loads(r.headers["x-tbx-containers"]).values())
    finally:
        code = stop(s)
    assert code == 128 + signal.SIGTERM
    assert containers_gone(dclient, held, timeout=30)
    assert labelled(dclient, s.run_id) == ([], [])
