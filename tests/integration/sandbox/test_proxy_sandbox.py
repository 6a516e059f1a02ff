"""The tool proxy in front of real sandboxes (Docker): two attempts of
different domains behind one proxy, tokens, allow-list, overrides, size cap,
and `tbx up --json` driven by an external MCP client. Three sandboxes in all
(two shared by the module, one inside the `tbx up` subprocess)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import mcp_types as types
import pytest

from bench.dataset import Benchmark, Task, load_benchmark
from bench.prepare import TaskPreparation, sandbox_request
from bench.run.attempt import task_tool_policy
from judge import dump_dsn
from sandbox import (
    AsyncSandbox,
    ProxyServer,
    Registration,
    Sandbox,
    SandboxGoneError,
    ToolPolicy,
    docker_client,
    leftovers,
    proxy_client,
    register_request,
    sweep,
    upstream_client,
)

pytestmark = pytest.mark.docker

REPO = Path(__file__).resolve().parents[3]
RETAIL = "sandbox_external_retail_group1.py:test_case_ST002_001"
TRAVEL = "external_booking_v1_group1.py:test_bmd_001"
ORDERS = "external_retail_toolset_oms_models_orders"
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2026-07-28"}


def _text(result: types.CallToolResult) -> str:
    return "".join(c.text for c in result.content if isinstance(c, types.TextContent))


@pytest.fixture(scope="module")
def bench(dataset: Path) -> Benchmark:
    return load_benchmark(dataset, strict=False)


@pytest.fixture(scope="module")
def sandboxes(bench: Benchmark) -> Iterator[dict[str, tuple[Task, Sandbox]]]:
    run_id = f"test-proxy-{uuid.uuid4().hex[:8]}"
    tasks = {"retail": bench.task(RETAIL), "travel": bench.task(TRAVEL)}
    boxes = {
        name: Sandbox(sandbox_request(bench, task, typesense=False, run_id=run_id))
        for name, task in tasks.items()
    }
    try:
        with ThreadPoolExecutor(2) as pool:
            list(pool.map(lambda sb: sb.start(), boxes.values()))
        yield {name: (tasks[name], sb) for name, sb in boxes.items()}
    finally:
        for sb in boxes.values():
            sb.close()
        sweep(run=run_id)
    assert leftovers(run_id) == ([], [])


@pytest.fixture(scope="module")
def proxy() -> Iterator[ProxyServer]:
    with ProxyServer(max_request_bytes=32 * 1024) as p:
        yield p


def _register(proxy: ProxyServer, bench: Benchmark, task: Task, sb: Sandbox, **kw: Any) -> Registration:
    assert sb.handle is not None
    policy = task_tool_policy(bench, task).model_copy(update=kw)
    return proxy.register(register_request(AsyncSandbox.adopt(sb), sb.attempt_id, policy))


def _rows(sb: Sandbox, domain: str, table: str) -> list[dict[str, Any]]:
    prepare = sb.request.prepare
    assert isinstance(prepare, TaskPreparation)
    return prepare.rows[domain][table]


async def test_tokens_isolate_attempts(
    proxy: ProxyServer, bench: Benchmark, sandboxes: dict[str, tuple[Task, Sandbox]]
) -> None:
    (r_task, r_sb), (t_task, t_sb) = sandboxes["retail"], sandboxes["travel"]
    reg_r = _register(proxy, bench, r_task, r_sb)
    reg_t = _register(proxy, bench, t_task, t_sb)
    try:
        async with proxy_client(reg_r) as r, proxy_client(reg_t) as t:
            r_tools = [x.name for x in (await r.list_tools()).tools]
            t_tools = [x.name for x in (await t.list_tools()).tools]
            assert r_tools == bench.scenario_of(r_task).tool_names
            assert t_tools == bench.scenario_of(t_task).tool_names
            assert "get_order" in r_tools and "get_order" not in t_tools

            # the same tool name reads each attempt's own database
            r_text = _text(await r.call_tool("zendesk_get_items", {"table": "tickets"}))
            t_text = _text(await t.call_tool("zendesk_get_items", {"table": "tickets"}))
            r_subjects = {x["subject"] for x in _rows(r_sb, "retail", "zendesk_tickets")}
            t_subjects = {x["subject"] for x in _rows(t_sb, "travel", "zendesk_tickets")}
            assert r_subjects.isdisjoint(t_subjects)
            assert all(x in r_text for x in r_subjects) and not any(x in r_text for x in t_subjects)
            assert all(x in t_text for x in t_subjects) and not any(x in t_text for x in r_subjects)

            # a write through one token is invisible through the other
            ticket = str(_rows(r_sb, "retail", "zendesk_tickets")[0]["id"])
            upd = await r.call_tool(
                "zendesk_update_item",
                {"table": "tickets", "id": ticket, "item": {"subject": "changed via A"}},
            )
            assert not upd.is_error, _text(upd)
            assert "changed via A" in _text(await r.call_tool("zendesk_get_items", {"table": "tickets"}))
            assert _text(await t.call_tool("zendesk_get_items", {"table": "tickets"})) == t_text

            # a tool of the other attempt's domain is refused, not forwarded anywhere
            order_id = _rows(r_sb, "retail", ORDERS)[0]["id"]
            ok = await r.call_tool("get_order", {"order_id": order_id})
            assert not ok.is_error and order_id in _text(ok)
            refused = await t.call_tool("get_order", {"order_id": order_id})
            assert refused.is_error and _text(refused) == "Unknown tool: 'get_order'"
        r_calls, t_calls = proxy.calls(reg_r.token), proxy.calls(reg_t.token)
        assert [c.tool for c in r_calls] == [
            "zendesk_get_items",
            "zendesk_update_item",
            "zendesk_get_items",
            "get_order",
        ]
        assert {c.domain for c in r_calls} == {"retail"} and {c.attempt_id for c in r_calls} == {
            reg_r.attempt_id
        }
        assert [(c.tool, c.outcome) for c in t_calls][-1] == ("get_order", "refused")
        assert all(c.domain in ("travel", None) for c in t_calls)
    finally:
        proxy.unregister(reg_r.token)
        proxy.unregister(reg_t.token)


async def test_refusals_and_overrides(
    proxy: ProxyServer, bench: Benchmark, sandboxes: dict[str, tuple[Task, Sandbox]]
) -> None:
    task, sb = sandboxes["retail"]
    assert sb.handle is not None
    reg = _register(
        proxy,
        bench,
        task,
        sb,
        allowed_tools=["get_order", "zendesk_get_tables"],
        overrides={"get_order": "Look an order up (scenario override)."},
        arg_overrides={"get_order": {"order_id": "The order's id (scenario override)."}},
    )
    order_id = _rows(sb, "retail", ORDERS)[0]["id"]
    before = dump_dsn(sb.handle.pg.admin_dsn("retail"), "retail")
    try:
        async with proxy_client(reg) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            assert list(tools) == ["get_order", "zendesk_get_tables"]
            assert tools["get_order"].description == "Look an order up (scenario override)."
            schema = tools["get_order"].input_schema
            assert schema["properties"]["order_id"]["description"] == "The order's id (scenario override)."
            # the server itself offers cancel_order; through the proxy it does not exist
            for name in ("cancel_order", "__reserved__init", "__reserved__effects"):
                res = await client.call_tool(name, {"order_id": order_id, "cancellation_reason": "x"})
                assert res.is_error and _text(res) == f"Unknown tool: '{name}'"
            # oversize request: refused before reaching anything
            with pytest.raises(Exception):  # noqa: B017 - the SDK surfaces the 413 as an error
                await client.call_tool("get_order", {"order_id": "x" * (40 * 1024)})
            ok = await client.call_tool("get_order", {"order_id": order_id})
            assert not ok.is_error
        # nothing refused reached the server: the database is exactly as before
        assert dump_dsn(sb.handle.pg.admin_dsn("retail"), "retail") == before
        async with httpx.AsyncClient(timeout=10) as http:
            body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
            for headers in ({}, {"Authorization": "Bearer " + "A" * 43}, {"Authorization": reg.token}):
                r = await http.post(reg.url, json=body, headers={**MCP_HEADERS, **headers})
                assert r.status_code == 401
            # the same raw requests with the token go through (a 2025-era session here)
            init = {
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {},
                    "clientInfo": {"name": "t", "version": "0"},
                },
            }
            headers = {"Accept": MCP_HEADERS["Accept"], **reg.headers}
            r = await http.post(reg.url, json=init, headers=headers)
            assert r.status_code == 200, r.text
            session = {"mcp-session-id": r.headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"}
            r = await http.post(reg.url, json=body, headers={**headers, **session})
            assert r.status_code == 200 and [t["name"] for t in r.json()["result"]["tools"]] == list(tools)
        calls = proxy.calls(reg.token)
        assert [(c.tool, c.outcome) for c in calls] == [
            ("cancel_order", "refused"),
            ("__reserved__init", "refused"),
            ("__reserved__effects", "refused"),
            ("get_order", "ok"),
        ]
    finally:
        proxy.unregister(reg.token)


async def test_tbx_up_json_drives_one_sandbox(dataset: Path, bench: Benchmark) -> None:
    env = {**os.environ, "TBX_DATASET": str(dataset), "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench.cli", "up", RETAIL, "--json", "--no-typesense"],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    info: dict[str, Any] = {}
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        assert line, f"tbx up printed nothing; stderr:\n{proc.stderr.read() if proc.stderr else ''}"
        info = json.loads(line)
        assert {"mcp_url", "token", "psql", "servers", "run_id"} <= set(info)
        assert info["mcp_url"].startswith("http://127.0.0.1:")
        assert "psql -h" in info["psql"] and "retail" in info["servers"]
        order_id = "ORD-10000001"
        async with upstream_client(info["mcp_url"], {"Authorization": f"Bearer {info['token']}"}) as client:
            names = [t.name for t in (await client.list_tools()).tools]
            assert names == bench.scenario_of(bench.task(RETAIL)).tool_names
            res = await client.call_tool("get_order", {"order_id": order_id})
            assert not res.is_error and order_id in _text(res)
        # the direct endpoint answers too (no allow-list there), with the attempt's secret only
        assert set(info["server_headers"]) == {"X-Tbx-Upstream-Secret"}
        async with upstream_client(info["servers"]["retail"], info["server_headers"]) as direct:
            assert not (await direct.call_tool("get_order", {"order_id": order_id})).is_error
        async with httpx.AsyncClient(timeout=10) as http:
            body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
            for wrong in ({}, {"X-Tbx-Upstream-Secret": info["token"]}):
                r = await http.post(info["servers"]["retail"], json=body, headers={**MCP_HEADERS, **wrong})
                assert r.status_code == 401, r.text
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            code = proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
        if info.get("run_id"):
            remaining = leftovers(info["run_id"])
            sweep(run=info["run_id"])
            assert remaining == ([], [])
    assert code == 128 + signal.SIGINT  # stopped by Ctrl-C, after a clean teardown
    with pytest.raises(httpx.ConnectError):
        httpx.post(info["mcp_url"], headers={"Authorization": f"Bearer {info['token']}"}, timeout=2)


def _remove_containers(container_ids: list[str]) -> None:
    """Remove a live sandbox's containers under its owner (what a `tbx gc` from another shell did)."""
    client = docker_client()
    for cid in container_ids:
        client.containers.get(cid).remove(force=True)


async def test_a_vanished_sandbox_is_refused_and_nothing_relayed(bench: Benchmark) -> None:
    """Its containers removed under a live registration: the proxy notices, names
    the cause, and refuses the next call without connecting anywhere."""
    task = bench.task(RETAIL)
    run_id = f"test-proxy-gone-{uuid.uuid4().hex[:8]}"
    try:
        with (
            Sandbox(sandbox_request(bench, task, typesense=False, run_id=run_id)) as sb,
            ProxyServer() as proxy,
        ):
            assert sb.handle is not None
            reg = proxy.register(
                register_request(AsyncSandbox.adopt(sb), sb.attempt_id, task_tool_policy(bench, task))
            )
            order_id = _rows(sb, "retail", ORDERS)[0]["id"]
            async with proxy_client(reg) as client:
                assert not (await client.call_tool("get_order", {"order_id": order_id})).is_error
            recorded = len(proxy.calls(reg.token))
            _remove_containers(list(sb.handle.containers.values()))
            deadline = time.monotonic() + 10
            while proxy.gone(reg.token) is None:
                assert time.monotonic() < deadline, "the proxy did not notice the sandbox vanish"
                time.sleep(0.05)
            cause = proxy.gone(reg.token)
            assert cause is not None and cause.startswith("sandbox gone:"), cause
            body = {"jsonrpc": "2.0", "id": 2, "method": "tools/call"}
            body["params"] = {"name": "get_order", "arguments": {"order_id": order_id}}
            async with httpx.AsyncClient(timeout=10) as http:
                r = await http.post(reg.url, json=body, headers={**MCP_HEADERS, **reg.headers})
            assert r.status_code == 503 and "sandbox gone" in r.json()["error"]["message"], r.text
            assert len(proxy.calls(reg.token)) == recorded  # nothing relayed, nothing recorded
            # a registration against a sandbox that is gone is refused outright
            with pytest.raises(SandboxGoneError, match="no longer exists"):
                proxy.register(register_request(AsyncSandbox.adopt(sb), sb.attempt_id, ToolPolicy()))
            proxy.unregister(reg.token)
    finally:
        sweep(run=run_id)
    assert leftovers(run_id) == ([], [])


def test_tbx_up_exits_when_its_sandbox_vanishes(dataset: Path) -> None:
    env = {**os.environ, "TBX_DATASET": str(dataset), "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench.cli", "up", RETAIL, "--json", "--no-typesense"],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    info: dict[str, Any] = {}
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        assert line, f"tbx up printed nothing; stderr:\n{proc.stderr.read() if proc.stderr else ''}"
        info = json.loads(line)
        _remove_containers([info["handle"]["containers"]["server-retail"]])
        code = proc.wait(timeout=60)
        err = proc.stderr.read() if proc.stderr else ""
    finally:
        if proc.poll() is None:
            proc.kill()
        if info.get("run_id"):
            sweep(run=info["run_id"])
    assert code == 1, err
    assert "tbx up: sandbox gone: its server-retail container" in err and "Traceback" not in err
    assert leftovers(info["run_id"]) == ([], [])


async def test_a_set_booted_under_the_watch_registers_without_asking_docker(
    bench: Benchmark, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A proxy follows Docker's events from its start: a set it saw boot is registered
    without a Docker call; one that left its network before registering is refused (the
    stream saw it leave, so the daemon is asked and names the cause)."""
    from sandbox.proxy import registry

    asked: list[dict[str, str]] = []
    real_check = registry.check_alive

    def counted(containers: dict[str, str], network: str | None) -> None:
        asked.append(dict(containers))
        real_check(containers, network)

    monkeypatch.setattr(registry, "check_alive", counted)
    task = bench.task(RETAIL)
    run_id = f"test-proxy-seen-{uuid.uuid4().hex[:8]}"
    try:
        with ProxyServer() as proxy:
            deadline = time.monotonic() + 10
            while not proxy.registry.watch().following:
                assert time.monotonic() < deadline, "the proxy's watch did not open Docker's event stream"
                time.sleep(0.05)
            with Sandbox(sandbox_request(bench, task, typesense=False, run_id=run_id)) as sb:
                assert sb.handle is not None and sb.handle.network is not None
                request = register_request(
                    AsyncSandbox.adopt(sb), sb.attempt_id, task_tool_policy(bench, task)
                )
                deadline = time.monotonic() + 10  # the stream's events arrive a little after the boot
                while not proxy.registry.watch().known_alive(request.containers, request.network):
                    assert time.monotonic() < deadline, "the watch did not see the set boot"
                    time.sleep(0.05)
                reg = proxy.register(request)
                assert asked == []
                order_id = _rows(sb, "retail", ORDERS)[0]["id"]
                async with proxy_client(reg) as client:
                    call = await client.call_tool("get_order", {"order_id": order_id})
                assert not call.is_error, _text(call)
                proxy.unregister(reg.token)

                server = sb.handle.containers["server-retail"]
                docker_client().networks.get(sb.handle.network).disconnect(server)
                deadline = time.monotonic() + 10
                while proxy.registry.watch().known_alive(request.containers, request.network):
                    assert time.monotonic() < deadline, "the watch did not see the container leave"
                    time.sleep(0.05)
                with pytest.raises(SandboxGoneError, match="left network"):
                    proxy.register(request)
                assert asked == [request.containers]
    finally:
        sweep(run=run_id)
    assert leftovers(run_id) == ([], [])
