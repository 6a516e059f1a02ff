"""The warm pool's bookkeeping (what `tbx env serve`'s /ready reads): the count of
booted sandboxes, the latest boot error, and a boot error that a failing
clean-up must not hide. The container set is replaced by a fake; the pool's
own logic runs as is."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any, ClassVar

import pytest

import sandbox.pool as pool_mod
from sandbox import ContainerLostError, SandboxPool
from sandbox.container_fate import Fate


class FakeSandbox:
    fail_boot: bool = False
    fail_close: bool = False
    closed = 0

    def __init__(self, request: Any):
        self.request = request
        self.handle: Any = None

    def boot(self) -> None:
        if FakeSandbox.fail_boot:
            raise RuntimeError("boot failed: no such image")

    def close(self) -> None:
        FakeSandbox.closed += 1
        if FakeSandbox.fail_close:
            raise OSError("clean-up failed too")

    def prepare(self) -> Any:
        return SimpleNamespace(containers={})


@pytest.fixture(autouse=True)
def fake_sandbox(monkeypatch: pytest.MonkeyPatch) -> None:
    FakeSandbox.fail_boot = FakeSandbox.fail_close = False
    FakeSandbox.closed = 0
    monkeypatch.setattr(pool_mod, "Sandbox", FakeSandbox)


async def _settle(pool: SandboxPool) -> None:
    while pool._booting:
        await asyncio.sleep(0.01)


def test_booted_counts_sandboxes_waiting_for_an_attempt() -> None:
    async def go() -> None:
        async with SandboxPool(["retail"], size=2, images={"servers": "x"}, fail_fast=False) as pool:
            await _settle(pool)
            assert pool.booted == 2 and pool.last_error is None
            await pool.acquire()
            assert pool.booted == 1  # the replacement is still booting
            await _settle(pool)
            assert pool.booted == 2
        assert pool.booted == 0  # closing tears the spares down

    asyncio.run(go())


def test_a_failing_clean_up_does_not_swallow_the_boot_error() -> None:
    FakeSandbox.fail_boot = FakeSandbox.fail_close = True

    async def go() -> None:
        async with SandboxPool(["retail"], size=1, images={"servers": "x"}, fail_fast=False) as pool:
            await _settle(pool)
            assert pool.booted == 0
            assert isinstance(pool.last_error, RuntimeError)
            FakeSandbox.fail_boot = FakeSandbox.fail_close = False  # the replacement boots fine
            with pytest.raises(RuntimeError, match="no such image"):
                await asyncio.wait_for(pool.acquire(), 5)
            await _settle(pool)
            assert pool.booted == 1 and pool.last_error is None  # a good boot clears it

    asyncio.run(go())
    assert FakeSandbox.closed >= 1  # the failed boot's clean-up was attempted


class FakePreparer:
    def __init__(self, name: str):
        self.name = name

    def check(self, domains: Any) -> None: ...

    def seed(self, conn: Any, domain: str, tool_role: str) -> None: ...

    def index(self, typesense: Any) -> bool:
        return False

    def fingerprint(self) -> str:
        return self.name

    def snapshot(self, conn: Any, domain: str) -> None:
        return None


def test_a_planned_checkout_gets_the_sandbox_prepared_for_its_preparer() -> None:
    a, b = FakePreparer("a"), FakePreparer("b")

    async def go() -> None:
        pool = SandboxPool(["retail"], size=2, images={"servers": "x"}, fail_fast=False)
        pool.plan([lambda: a, lambda: b, lambda: a])
        async with pool:
            await _settle(pool)
            assert pool.booted == 2 and pool.spare == 2
            # An equal preparer (another object, same fingerprint) gets the one prepared for "b".
            got_b = await pool.acquire(FakePreparer("b"))
            assert got_b.sandbox.request.prepare is b
            await _settle(pool)  # the plan's third entry was booted as the replacement
            assert pool.spare == 2
            got_a = [await pool.acquire(a), await pool.acquire(a)]
            assert all(s.sandbox.request.prepare is a for s in got_a)
            assert got_a[0].sandbox is not got_a[1].sandbox
            assert pool.spare == 0  # the plan is used up: nothing more is booted ahead
            # Nobody planned "c": it gets a boot of its own, prepared with its preparer.
            c = FakePreparer("c")
            got_c = await asyncio.wait_for(pool.acquire(c), 5)
            assert got_c.sandbox.request.prepare is c
            assert (pool.checkouts, pool.handovers) == (4, 3)  # "c" was no hand-over


def test_a_plan_again_keeps_a_prepared_spare_for_each_task_being_reset() -> None:
    """`tbx env serve`'s plan: its tasks round-robin, and `again`: a group of resets of
    one task, then resets of the other, are all hand-overs of sandboxes prepared for them."""
    a, b = FakePreparer("a"), FakePreparer("b")

    async def go() -> None:
        pool = SandboxPool(["retail"], size=2, images={"servers": "x"}, fail_fast=False)
        pool.plan([lambda: a, lambda: b] * 100, again=True)
        async with pool:
            for wanted, planned in [("a", a)] * 4 + [("b", b)] * 3 + [("a", a)]:
                await _settle(pool)
                got = await asyncio.wait_for(pool.acquire(FakePreparer(wanted)), 5)
                # the planned preparer object: a hand-over, not a boot of its own at checkout
                assert got.sandbox.request.prepare is planned, wanted
            await _settle(pool)
            assert pool.spare == 2 and pool.checkouts == pool.handovers == 8

    asyncio.run(go())


def test_a_retry_beyond_the_budget_still_gets_a_sandbox() -> None:
    """The budget is the planned attempts; a retried one asks for one more, which must
    boot rather than leave that acquire waiting for ever."""

    async def go() -> None:
        async with SandboxPool(
            ["retail"], size=1, images={"servers": "x"}, budget=2, fail_fast=False
        ) as pool:
            for _ in range(3):  # two planned attempts and one retry
                await asyncio.wait_for(pool.acquire(), timeout=5)
            await _settle(pool)
            assert pool.spare == 0  # and nothing booted beyond what was asked for

    asyncio.run(go())


def test_a_failed_planned_boot_reaches_the_checkout_it_was_for() -> None:
    FakeSandbox.fail_boot = True
    a = FakePreparer("a")

    async def go() -> None:
        pool = SandboxPool(["retail"], size=1, images={"servers": "x"}, fail_fast=False)
        pool.plan([lambda: a])
        async with pool:
            await _settle(pool)
            with pytest.raises(RuntimeError, match="no such image"):
                await asyncio.wait_for(pool.acquire(a), 5)
            FakeSandbox.fail_boot = False
            again = await asyncio.wait_for(pool.acquire(a), 5)  # its retry boots its own
            assert again.sandbox.request.prepare is a


def test_flush_discards_what_waits_and_boots_replacements() -> None:
    """After a daemon restart the waiting sandboxes are stopped and the boots during
    it failed: flush closes the one, drops the other, and boots as many anew."""

    async def go() -> None:
        async with SandboxPool(["retail"], size=2, images={"servers": "x"}, fail_fast=False) as pool:
            await _settle(pool)
            FakeSandbox.fail_boot = True
            await pool.acquire()  # its replacement's boot fails (the daemon away)
            await _settle(pool)
            assert pool.booted == 1 and pool.last_error is not None
            FakeSandbox.fail_boot = False
            closed = FakeSandbox.closed
            assert await pool.flush() == 2
            assert FakeSandbox.closed == closed + 1 and pool.last_error is None
            await _settle(pool)
            assert pool.booted == 2
            await asyncio.wait_for(pool.acquire(), timeout=5)  # a good one, not the failure

    asyncio.run(go())


def test_a_replacement_boots_refill_delay_after_a_hand_over_and_a_checkout_without_spare_at_once() -> None:
    async def go() -> None:
        pool = SandboxPool(["retail"], size=2, images={"servers": "x"}, fail_fast=False, refill_delay=0.3)
        async with pool:
            await _settle(pool)
            assert pool.booted == 2
            await pool.acquire()
            await pool.acquire()  # a burst: one timer for both replacements
            assert pool.spare == 0 and not pool._booting  # nothing boots during the burst
            third = asyncio.ensure_future(pool.acquire())  # no spare: boots its own at once
            await asyncio.wait_for(third, 5)
            await asyncio.sleep(0.4)
            await _settle(pool)
            assert pool.booted == 2  # the replacements came after the delay

    asyncio.run(go())


def _lost(outside: bool) -> ContainerLostError:
    how = "exited with code 137 (killed: SIGKILL)" if outside else "exited with code 1"
    fate = Fate("server-retail", f"its server-retail container x {how}", outside=outside)
    return ContainerLostError(f"sandbox start failed: {fate.text}", fate)


def test_a_spare_killed_from_outside_while_it_booted_is_passed_over(monkeypatch: pytest.MonkeyPatch) -> None:
    """A kill of a spare booting ahead costs the checkout that draws it nothing: the next
    spare is taken. A container that ended on its own (a crash) still surfaces."""

    class Killed(FakeSandbox):
        boots: ClassVar[list[ContainerLostError]] = []

        def boot(self) -> None:
            if Killed.boots:
                raise Killed.boots.pop(0)

    async def go(first: ContainerLostError) -> None:
        Killed.boots = [first]
        async with SandboxPool(["retail"], size=1, images={"servers": "x"}, fail_fast=False) as pool:
            await _settle(pool)  # the one spare's boot failed
            await asyncio.wait_for(pool.acquire(), 5)  # a boot of its own instead
            assert pool.checkouts == 1

    monkeypatch.setattr(pool_mod, "Sandbox", Killed)
    asyncio.run(go(_lost(outside=True)))
    assert FakeSandbox.closed >= 1  # the killed boot's set was cleaned up
    with pytest.raises(ContainerLostError, match="code 1"):
        asyncio.run(go(_lost(outside=False)))
