"""The domain servers' uvicorn server (servers.engine.serving): it serves, keeps a
Date header, wakes about once a second while idle (not ten times), and stops on
request within about a second."""

from __future__ import annotations

import asyncio
import socket
import time
from typing import Any

import httpx
import uvicorn

from servers.engine.serving import SecondTickServer


async def _app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    assert scope["type"] == "http"
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": b"ok"})


def test_it_serves_ticks_once_a_second_and_stops_within_one() -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        _app, log_level="warning", access_log=False, loop="asyncio", http="h11", ws="none"
    )
    server = SecondTickServer(config)
    ticks: list[float] = []
    on_tick = server.on_tick

    async def counted(counter: int) -> bool:
        ticks.append(time.monotonic())
        return await on_tick(counter)

    server.on_tick = counted  # type: ignore[method-assign]

    async def go() -> tuple[httpx.Response, float]:
        task = asyncio.create_task(server.serve(sockets=[sock]))
        while not server.started:
            await asyncio.sleep(0.01)
        async with httpx.AsyncClient() as client:
            reply = await client.get(f"http://127.0.0.1:{port}/")
        await asyncio.sleep(2.5)
        server.should_exit = True
        t = time.monotonic()
        await asyncio.wait_for(task, timeout=5)
        return reply, time.monotonic() - t

    reply, stop = asyncio.run(go())
    assert reply.status_code == 200 and reply.text == "ok" and reply.headers.get("date")
    span = ticks[-1] - ticks[0]
    assert 2 <= len(ticks) <= 5, ticks  # ~3 s served: ten a second would be ~30
    assert span >= 1.5
    assert stop < 2.5
