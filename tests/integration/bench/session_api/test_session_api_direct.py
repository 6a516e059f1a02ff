"""The Session API's tool calls on the proxy's direct path, against real sandboxes:
the app, the session table, tbx's proxy and the Docker provider in this process
(as `tbx session-proxy` holds them, driven over ASGI), so the proxy's records
can be read beside the answers. A call through `/call_tool` is recorded once by
the proxy (outcome, arguments, result), and what the attempt's record keeps is
exactly that; refused and reserved names never reach the sandbox's server (it
is frozen while they are answered, and its state is unchanged); a killed
container gives the documented error and nothing more is relayed."""

from __future__ import annotations

import asyncio
import json
import signal
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import docker
import httpx
import pytest
from sandbox_containers import containers_gone, signal_server
from session_api_server import traced_task

from bench.dataset import Benchmark, load_benchmark
from bench.run.golden import GoldenStore, servers_image_id
from bench.session_api.admission import UNMEASURED, SessionAdmission
from bench.session_api.app import SessionApi, build_app
from bench.session_api.golden_cache import GoldenCache
from bench.session_api.health import DaemonProbe
from bench.session_api.server import TIMEOUTS
from bench.session_api.sessions import SessionTable
from sandbox import DockerProvider, ProxyServer, UpstreamPool, leftovers, new_id

pytestmark = pytest.mark.docker

WRITE = {
    "table": "tickets",
    "item": {
        "subject": "must never exist",
        "status": "open",
        "type": "task",
        "priority": "low",
        "requester_id": "8",
    },
}

Body = Callable[[httpx.AsyncClient, SessionTable, ProxyServer], Awaitable[None]]


def serve(
    dataset: Path, tmp: Path, body: Body, admission: Callable[..., SessionAdmission] | None = None
) -> None:
    """The Session API's parts in this process around `body`; nothing of the run left after.
    `admission(provider, golden)`: the table's admission (none by default)."""
    bench = load_benchmark(dataset, strict=False)
    run_id = new_id("sessapi-direct")
    provider = DockerProvider(warm=0)
    proxy = ProxyServer(call_timeout=TIMEOUTS.call)
    store = GoldenStore(bench, tmp / "golden", image_id=servers_image_id, run_id=run_id)
    golden = GoldenCache(store, provider, run_id=run_id)
    admitted = admission(provider, golden) if admission is not None else None
    table = SessionTable(
        bench,
        provider,
        proxy,
        golden,
        run_id=run_id,
        images=lambda: dict(provider.images),
        admission=admitted,
    )
    app = build_app(SessionApi(table, DaemonProbe().problem))

    async def go() -> None:
        await provider.start(run_id)
        if admitted is not None:
            admitted.start()
        proxy.start()
        try:
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1", timeout=600) as c:
                await body(c, table, proxy)
        finally:
            await table.aclose()
            await provider.close()
            proxy.close()
            await provider.sweep(run_id)

    asyncio.run(go())
    assert leftovers(run_id) == ([], [])


async def _value(r: Awaitable[httpx.Response], status: int = 200) -> Any:
    resp = await r
    assert resp.status_code == status, resp.text[:1000]
    return resp.json()["content"]["value"]


def _create(
    c: httpx.AsyncClient, sid: str, config: dict[str, Any], tools: list[str]
) -> Awaitable[httpx.Response]:
    body = {"session_id": sid, "server_config": config, "available_tools": tools, "timeout": 270.0}
    return c.post("/session_create", json=body)


def _call(c: httpx.AsyncClient, sid: str, tool: str, arguments: Any) -> Awaitable[httpx.Response]:
    return c.post("/call_tool", json={"session_id": sid, "tool_name": tool, "arguments": arguments})


@pytest.fixture(scope="module")
def bench(dataset: Path) -> Benchmark:
    return load_benchmark(dataset, strict=False)


def test_calls_are_recorded_once_and_refusals_never_reach_the_server(
    dataset: Path, bench: Benchmark, tmp_path: Path
) -> None:
    task = traced_task(bench, "sandbox_consulting")
    golden = task.trace["calls"]
    dclient = docker.from_env()

    async def body(c: httpx.AsyncClient, table: SessionTable, proxy: ProxyServer) -> None:
        # every golden call through /call_tool: answered as traced, recorded once each by the proxy
        await _value(_create(c, "direct", task.config, task.tools))
        session = table.get("direct")
        assert session.live is not None
        token = session.live.token
        for g in golden:
            assert await _value(_call(c, "direct", g["tool"], g["parameters"])) == g["result"]
        recorded = proxy.calls(token)
        assert [(r.tool, r.arguments, r.result, r.outcome, r.domain) for r in recorded] == [
            (g["tool"], g["parameters"], g["result"], "ok", "consulting") for g in golden
        ]
        assert set(session.pools) == set(session.live.lease.servers.values())  # the direct path's own
        effects = await _value(c.post("/get_effects", json={"session_id": "direct"}))
        assert effects[task.server]["result_db_hash"] == task.trace["golden_state_hash"]
        await _value(c.post("/session_destroy", json={"session_id": "direct"}))
        # what the attempt keeps (the lifecycle's calls, --record's trajectory) is the proxy's record
        assert session.outcome is not None and session.error is None
        assert [(v.tool, v.arguments, v.result, v.is_error) for v in session.outcome.calls] == [
            (r.tool, r.arguments, r.result, r.is_error) for r in recorded
        ]

        # a session that may only read: writes and reserved names are refused, the server frozen
        await _value(_create(c, "reader", task.config, ["zendesk_get_items"]))
        reader = table.get("reader")
        assert reader.live is not None
        before = (await _value(c.post("/get_effects", json={"session_id": "reader"})))[task.server]
        containers = dict(reader.live.lease.containers)
        signal_server(dclient, containers, signal.SIGSTOP)
        try:
            t0 = time.monotonic()
            message = await _value(_call(c, "reader", "zendesk_create_item", WRITE), 400)
            assert message == "Tool zendesk_create_item does not exist"
            message = await _value(_call(c, "reader", "__reserved__init", {"config": {}}), 400)
            assert message == "Tool __reserved__init does not exist"
            # below the Session API's own check: the proxy refuses them by the attempt's allow-list
            pools: dict[str, UpstreamPool] = {}
            for name, args in (("zendesk_create_item", WRITE), ("__reserved__init", {"config": {}})):
                reply = await proxy.acall(reader.live.token, name, args, pools)
                assert reply.message is not None and reply.message["result"]["isError"] is True
            assert pools == {}  # no connection to the server was even opened
            assert time.monotonic() - t0 < 5  # answered while the server could answer nothing
        finally:
            signal_server(dclient, containers, signal.SIGCONT)
        assert [(r.tool, r.outcome, r.domain) for r in proxy.calls(reader.live.token)] == [
            ("zendesk_create_item", "refused", None),
            ("__reserved__init", "refused", None),
        ]
        assert json.loads(await _value(_call(c, "reader", "zendesk_get_items", {"table": "tickets"})))
        after = (await _value(c.post("/get_effects", json={"session_id": "reader"})))[task.server]
        assert after["result_db_hash"] == before["result_db_hash"]
        await _value(c.post("/session_destroy", json={"session_id": "reader"}))
        assert containers_gone(dclient, list(containers.values()))

    serve(dataset, tmp_path, body)


def test_a_killed_container_gives_the_documented_error_and_relays_nothing(
    dataset: Path, bench: Benchmark, tmp_path: Path
) -> None:
    task = traced_task(bench, "sandbox_external_retail")
    first = task.trace["calls"][0]
    dclient = docker.from_env()

    async def body(c: httpx.AsyncClient, table: SessionTable, proxy: ProxyServer) -> None:
        await _value(_create(c, "killed", task.config, task.tools))
        session = table.get("killed")
        assert session.live is not None
        token, containers = session.live.token, dict(session.live.lease.containers)
        assert await _value(_call(c, "killed", first["tool"], first["parameters"])) == first["result"]
        server = next(role for role in containers if role not in ("postgres", "typesense"))
        dclient.containers.get(containers[server]).kill()
        deadline = time.monotonic() + 30
        while True:  # until the watch has seen it (a call racing it is refused by the lost-container check)
            resp = await _call(c, "killed", first["tool"], first["parameters"])
            if proxy.gone(token) is not None or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.5)
        assert proxy.gone(token) is not None
        recorded = len(proxy.calls(token))
        message = await _value(_call(c, "killed", first["tool"], first["parameters"]), 400)
        assert message.startswith("the session's sandbox is gone (") and server in message, message
        assert message.endswith("destroy the session and create a new one")
        assert resp.status_code == 400 and "sandbox is gone" in resp.json()["content"]["value"]
        assert len(proxy.calls(token)) == recorded  # refused before anything was relayed or recorded
        await _value(c.post("/session_destroy", json={"session_id": "killed"}))
        assert session.error is not None and server in str(session.error)  # a system error, not the agent's
        assert containers_gone(dclient, list(containers.values()))

    serve(dataset, tmp_path, body)


def test_the_first_session_of_an_unmeasured_domain_is_measured(
    dataset: Path, bench: Benchmark, tmp_path: Path
) -> None:
    """Admission charges a domain nobody measured UNMEASURED per set, then what its first
    live set holds (#38 finding 7): measured from that session's own containers."""
    task = traced_task(bench, "sandbox_consulting")

    def admission(provider: DockerProvider, golden: GoldenCache) -> SessionAdmission:
        return SessionAdmission(
            4,
            warm=0,
            domains=["consulting"],
            images=lambda: dict(provider.images),
            golden_key=golden.key,
            golden_stored=lambda key: golden.store.path(key).exists(),
            budget_bytes=64 * UNMEASURED,
        )

    async def body(c: httpx.AsyncClient, table: SessionTable, proxy: ProxyServer) -> None:
        admitted = table.admission
        assert admitted is not None
        admitted.need.pop("consulting", None)  # as on a machine `tbx run` never measured
        await _value(_create(c, "measured", task.config, task.tools))
        deadline = time.monotonic() + 60
        while "consulting" not in admitted.need and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
        need = admitted.need["consulting"]
        assert 32 * 2**20 < need < UNMEASURED, need
        assert admitted.held() == need  # the session's set; its golden replay is over
        await _value(c.post("/session_destroy", json={"session_id": "measured"}))
        assert admitted.held() == 0

    serve(dataset, tmp_path, body, admission)
