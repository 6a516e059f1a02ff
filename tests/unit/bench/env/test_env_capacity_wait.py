"""A reset at capacity waits at most `capacity_wait` for a slot (bench.env.server), then the
host's CAPACITY_REACHED; it never hangs. The host here is a stand-in holding the two
things the wait reads (the live episodes and max_episodes)."""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace

from bench.env.server import EnvServer


def _server(live: int, max_episodes: int, wait: float) -> EnvServer:
    host = SimpleNamespace(
        episodes={f"ep{i}": object() for i in range(live)},
        opts=SimpleNamespace(max_episodes=max_episodes, idle_timeout=300.0, sessions_per_client=None),
        tasks={},
    )
    return EnvServer(host, capacity_wait=wait)  # type: ignore[arg-type]


async def test_no_wait_answers_at_once() -> None:
    server = _server(live=2, max_episodes=2, wait=0.0)
    t = time.monotonic()
    await server._wait_for_slot()
    assert time.monotonic() - t < 0.05


async def test_a_slot_freed_during_the_wait_is_taken_then() -> None:
    server = _server(live=2, max_episodes=2, wait=5.0)

    async def end_one() -> None:
        await asyncio.sleep(0.3)
        server.host.episodes.pop("ep0")

    t = time.monotonic()
    await asyncio.gather(server._wait_for_slot(), end_one())
    assert 0.25 < time.monotonic() - t < 1.5
    assert len(server.host.episodes) < server.host.opts.max_episodes


async def test_the_wait_is_bounded_when_no_slot_frees() -> None:
    server = _server(live=2, max_episodes=2, wait=0.4)
    t = time.monotonic()
    await server._wait_for_slot()
    assert 0.35 < time.monotonic() - t < 1.5
    assert len(server.host.episodes) == 2  # still full: the caller's check answers CAPACITY_REACHED
