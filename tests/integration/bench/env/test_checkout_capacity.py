"""A checkout that gives up waiting for a sandbox, on the real Docker provider: the warm
pool's only spare is still booting when a request comes, and the provider waits at most
half a second for it (`tbx env serve` waits two boots; shortened here so that no set has
to come up). `tbx env serve`'s reset is refused with CAPACITY_REACHED and a retry_after,
nothing recorded and the repeat free again; the Session API's create with 429 and
Retry-After, the session id free again. Nothing of either run is left behind."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest
from pg_support import DEMO_PACK

from bench.dataset import load_benchmark
from bench.defaults import RETRY_AFTER
from bench.env.host import EnvHost, EnvOptions
from bench.env.protocol import EnvError, ErrorCode
from bench.env.server import EnvServer
from bench.llm.config import parse_models_config
from bench.run.golden import GoldenStore, servers_image_id
from bench.session_api.app import SessionApi, build_app
from bench.session_api.golden_cache import GoldenCache
from bench.session_api.sessions import SessionTable
from sandbox import DockerProvider, ProxyServer, leftovers, new_id

pytestmark = pytest.mark.docker

TASK = "demo_retail.py:test_ret_expedite_headphones"
WAIT = 0.5  # s a checkout waits: far below a boot


def test_env_serve_refuses_a_reset_no_sandbox_came_for(tmp_path: Path) -> None:
    bench = load_benchmark(DEMO_PACK)
    config = parse_models_config({"user": {"base_url": "http://127.0.0.1:9/v1", "model": "never-asked"}})
    host = EnvHost(
        bench,
        config,
        [bench.task(TASK)],
        EnvOptions(out=tmp_path / "out", warm=1, skip_rubrics=True, golden_cache=tmp_path / "golden"),
    )
    server = EnvServer(host)

    async def go() -> list[EnvError]:
        await host.start()
        try:
            while host.bring_up_error is not None:  # images resolved, the pool's spare booting
                assert host.fatal is None, host.fatal
                await asyncio.sleep(0.2)
            assert host.provider is not None
            host.provider.timeouts = host.provider.timeouts.model_copy(update={"checkout": WAIT})
            refused = []
            for data in ({"test_uid": TASK}, {"test_uid": TASK, "repeat": 0}):
                with pytest.raises(EnvError) as exc:
                    await server.reset(data)
                refused.append(exc.value)
            return refused
        finally:
            await host.close()

    refusals = asyncio.run(go())
    for refusal in refusals:
        assert refusal.code == ErrorCode.CAPACITY_REACHED and refusal.status == 503, refusal.message
        assert refusal.extra == {"retry_after": RETRY_AFTER}
        assert "no retail sandbox came free within 0.5 s" in refusal.message
    assert host.episodes == {}
    out = tmp_path / "out"
    for name in ("results.jsonl", "errors.jsonl"):  # no attempt recorded, no system error
        assert not (out / name).exists() or (out / name).read_text() == ""
    assert leftovers(host.run_id) == ([], [])


def test_the_session_api_refuses_a_create_no_sandbox_came_for(tmp_path: Path) -> None:
    bench = load_benchmark(DEMO_PACK)
    task = bench.task(TASK)
    run_id = new_id("sessapi-capacity")
    provider = DockerProvider(warm=1, teardown_inline=True)
    proxy = ProxyServer()
    store = GoldenStore(bench, tmp_path / "golden", image_id=servers_image_id, run_id=run_id)
    table = SessionTable(
        bench,
        provider,
        proxy,
        GoldenCache(store, provider, run_id=run_id),
        run_id=run_id,
        images=lambda: dict(provider.images),
    )
    app = build_app(SessionApi(table, lambda: asyncio.sleep(0, None)))
    server, init = next(iter(bench.effective_inits(task).items()))
    body = {
        "session_id": "s1",
        "server_config": {server: init.raw},
        "available_tools": bench.scenario_of(task).tool_names,
    }

    async def go() -> list[httpx.Response]:
        await provider.start(run_id)
        provider.timeouts = provider.timeouts.model_copy(update={"checkout": WAIT})
        proxy.start()
        try:
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1", timeout=60) as c:
                return [await c.post("/session_create", json=body) for _ in range(2)]
        finally:
            await table.aclose()
            await provider.close()
            proxy.close()
            await provider.sweep(run_id)

    answers = asyncio.run(go())
    for answer in answers:  # the second create of the same id is refused the same way: it is free
        assert answer.status_code == 429, answer.text[:500]
        assert answer.headers["retry-after"] == str(RETRY_AFTER)
        value = answer.json()["content"]["value"]
        assert value.startswith("Server at capacity: no retail sandbox within 0.5 s"), value
    assert table.sessions == {}
    assert leftovers(run_id) == ([], [])
