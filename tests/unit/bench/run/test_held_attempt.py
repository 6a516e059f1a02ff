"""`bench.run.held.HeldAttempt`, the attempt an OpenEnv episode and a Session API
session hold open between requests: opened in a task of its own, closed cleanly
or with a reason, its opening cancelled with its opener, and a lost sandbox
noticed per call by one rule (the infrastructure's loss is `SandboxLost`, the
attempt's own limit is not). Against the fake provider of attempt_fakes (a
database on the test PostgreSQL and the domain's real server in process) behind
the real tool proxy; losses are told to the proxy as its watch tells them."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import pickle
import time
from typing import Any

import pytest
from attempt_fakes import TASK, FakeProvider

import bench.run.lifecycle
from bench.dataset import Benchmark
from bench.run.attempt import AttemptSpec, attempt_spec
from bench.run.held import AttemptClosed, HeldAttempt, SandboxLost
from sandbox import ContainerStartError, ProxyServer, SandboxGoneError, SandboxRequest, UpstreamPool
from sandbox.container_fate import Fate

LOOKUP = ("get_order", {"order_id": "ORD-30000011"})  # a read of the demo task's order


def _spec(pack: Benchmark, attempt_id: str) -> AttemptSpec:
    return attempt_spec(pack, pack.task(TASK), 0, run_id="run-held", attempt_id=attempt_id, agent="oracle")


def _tell_loss(proxy: ProxyServer, token: str, cause: str, fate: Fate | None = None) -> None:
    """What the proxy's watch does when it sees a container of the set go."""
    loop = proxy._host._loop
    assert loop is not None
    proxy.registry.watch_callback(loop)(hashlib.sha256(token.encode()).hexdigest(), cause, fate)


async def _told(proxy: ProxyServer, token: str) -> None:
    deadline = time.monotonic() + 5
    while proxy.gone(token) is None:
        assert time.monotonic() < deadline, "the proxy was not told"
        await asyncio.sleep(0.01)


async def _call(
    held: HeldAttempt, proxy: ProxyServer, pools: dict[str, UpstreamPool], name: str, args: Any
) -> Any:
    """One call as the Session API makes it, then the held attempt's check of its records."""
    mark = held.recorded()
    with contextlib.suppress(SandboxGoneError):  # relayed nothing once told: the check says why
        await proxy.acall(held.live.token, name, args, pools)
    return await held.check_call(name, mark)


async def test_a_clean_close_dumps_the_end_state_and_tears_down(
    pack: Benchmark, provider: FakeProvider, proxy: ProxyServer, pools: dict[str, UpstreamPool]
) -> None:
    held = HeldAttempt(_spec(pack, "held-clean"), provider, proxy)
    live = await held.open()
    assert provider.alive == 1 and proxy.registry.lookup(live.token) is not None
    records = await _call(held, proxy, pools, *LOOKUP)
    assert [(c.tool, c.outcome) for c in records] == [("get_order", "ok")]
    # An error reply (here the reference's error object) with every container running is
    # the agent's to read: the check asks and nothing is raised.
    records = await _call(held, proxy, pools, "get_order", {"order_id": 7})
    assert [c.outcome for c in records] == ["ok"] and records[0].result.startswith('{"error": ')
    assert await held.close() is None and held.error is None and held.ended
    assert held.outcome.terminal_state is not None and held.outcome.initial_state is not None
    assert [c.tool for c in held.outcome.calls] == ["get_order", "get_order"]
    assert provider.alive == 0 and provider.sessions[0].closed
    assert live.token not in proxy.attempts()
    assert await held.close() is None  # a second close waits for nothing


async def test_a_close_with_a_reason_ends_the_attempt_as_that_reason(
    pack: Benchmark, provider: FakeProvider, proxy: ProxyServer
) -> None:
    held = HeldAttempt(_spec(pack, "held-reason"), provider, proxy)
    await held.open()
    reason = RuntimeError("the client went away")
    with pytest.raises(RuntimeError, match="the client went away"):
        await held.end(reason)
    assert held.error is reason
    assert held.outcome.terminal_state is None  # no end state an agent chose: none is dumped
    assert provider.alive == 0 and provider.sessions[0].closed


async def test_an_opening_failure_is_raised_by_open(pack: Benchmark, pg_dsn: str, proxy: ProxyServer) -> None:
    failing = FakeProvider(pg_dsn, fail_boots=1)
    try:
        held = HeldAttempt(_spec(pack, "held-boot"), failing, proxy)
        with pytest.raises(ContainerStartError):
            await held.open()
        assert isinstance(held.error, ContainerStartError) and held.ended and failing.alive == 0
        assert await held.close() is held.error
    finally:
        failing.dbs.close()


async def test_the_infrastructures_loss_is_sandbox_lost_and_ends_the_attempt(
    pack: Benchmark, provider: FakeProvider, proxy: ProxyServer, pools: dict[str, UpstreamPool]
) -> None:
    held = HeldAttempt(_spec(pack, "held-lost"), provider, proxy)
    live = await held.open()
    await _call(held, proxy, pools, *LOOKUP)
    _tell_loss(proxy, live.token, "sandbox gone: its postgres container was killed")
    await _told(proxy, live.token)
    with pytest.raises(SandboxLost, match="tool call get_order: sandbox gone: its postgres") as raised:
        await _call(held, proxy, pools, *LOOKUP)
    lost = raised.value
    assert isinstance(lost, SandboxGoneError)  # the lifecycle's type: a system error, retried
    assert lost.loss == "sandbox gone: its postgres container was killed"
    with pytest.raises(SandboxLost):
        held.check_alive()  # before the next call: cheap, and the same answer
    with pytest.raises(SandboxGoneError, match="attempt held-lost: sandbox gone: its postgres"):
        await held.end()
    assert held.outcome.terminal_state is None and provider.alive == 0


async def test_a_loss_the_attempts_own_calls_caused_is_not_sandbox_lost(
    pack: Benchmark, provider: FakeProvider, proxy: ProxyServer, pools: dict[str, UpstreamPool]
) -> None:
    held = HeldAttempt(_spec(pack, "held-limit"), provider, proxy)
    live = await held.open()
    await _call(held, proxy, pools, *LOOKUP)
    # Its own container's memory limit, hit as its call was answered: the attempt's doing.
    fate = Fate(
        role="postgres",
        text="postgres was OOM-killed at its 64 MiB limit",
        own_memory_limit=True,
        ended_at=time.time(),
    )
    _tell_loss(proxy, live.token, f"sandbox gone: {fate.text}", fate)
    await _told(proxy, live.token)
    held.check_alive()
    records = await _call(held, proxy, pools, *LOOKUP)  # refused by the proxy with the limit's words
    assert [c.outcome for c in records] == ["refused"] and "resource limit" in records[0].result
    assert await held.close() is None
    assert held.outcome.resource_limit == f"sandbox gone: {fate.text}"
    assert held.outcome.terminal_state is not None  # the database still answered


async def test_a_server_that_stops_answering_is_sandbox_lost(
    pack: Benchmark,
    provider: FakeProvider,
    proxy: ProxyServer,
    pools: dict[str, UpstreamPool],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(bench.run.lifecycle, "LOSS_WAIT", 0.2)  # no watch will tell: do not wait 5 s
    held = HeldAttempt(_spec(pack, "held-silent"), provider, proxy)
    await held.open()
    server = provider.sessions[0]
    server.server.should_exit = True  # its containers (none here) run; the server answers no more
    await asyncio.to_thread(server.thread.join, 10)
    with pytest.raises(SandboxLost, match="tool call get_order: the sandbox's tool server stopped answering"):
        await _call(held, proxy, pools, *LOOKUP)
    # Nothing else would make it a system error: the loss raised to the call is how it ends.
    with pytest.raises(SandboxLost, match="stopped answering"):
        await held.end()
    assert provider.alive == 0


class BlockedProvider(FakeProvider):
    """A provider whose boots wait until released (a cold start in progress)."""

    def __init__(self, pg_dsn: str):
        super().__init__(pg_dsn)
        self.booting = asyncio.Event()
        self.release = asyncio.Event()

    async def boot(self, request: SandboxRequest) -> Any:
        self.booting.set()
        await self.release.wait()
        return await super().boot(request)


async def test_a_cancelled_opener_cancels_the_opening(
    pack: Benchmark, pg_dsn: str, proxy: ProxyServer
) -> None:
    blocked = BlockedProvider(pg_dsn)
    try:
        held = HeldAttempt(_spec(pack, "held-cancel"), blocked, proxy)
        opener = asyncio.create_task(held.open())
        await blocked.booting.wait()
        opener.cancel()
        with pytest.raises(asyncio.CancelledError):
            await opener
        assert held.ended and isinstance(held.error, asyncio.CancelledError)
        assert blocked.alive == 0 and blocked.sessions == []  # the boot never went on
        assert await held.close() is held.error
    finally:
        blocked.dbs.close()


async def test_a_close_while_opening_tells_the_opener(
    pack: Benchmark, pg_dsn: str, proxy: ProxyServer
) -> None:
    blocked = BlockedProvider(pg_dsn)
    try:
        held = HeldAttempt(_spec(pack, "held-destroyed"), blocked, proxy)
        opener = asyncio.create_task(held.open())
        await blocked.booting.wait()
        await held.close()  # e.g. a Session API destroy while its create still boots
        with pytest.raises(AttemptClosed):
            await opener
        assert blocked.alive == 0 and held.ended
    finally:
        blocked.dbs.close()


def test_sandbox_lost_survives_pickling() -> None:
    lost = pickle.loads(pickle.dumps(SandboxLost("tool call x: sandbox gone: y", "sandbox gone: y")))
    assert (
        isinstance(lost, SandboxLost)
        and lost.loss == "sandbox gone: y"
        and str(lost).startswith("tool call x")
    )
