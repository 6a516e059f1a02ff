"""A warm pool: container sets booted ahead of demand, each handed out once.

Booting (network, containers, services answering) is most of an attempt's
start-up and involves nothing task-specific, so the pool does it in the
background; `acquire(prepare)` then only seeds PostgreSQL and indexes
documents (through the caller's `sandbox.preparer.Preparer`).

When the caller knows what is coming (`plan(upcoming)`: the preparers of the
next checkouts, in order, as `tbx run`'s coordinator does), the pool also
*prepares* each sandbox ahead, for one specific upcoming checkout, and
`acquire(prepare)` is only a hand-over of the sandbox prepared with an equal
preparer (equal `fingerprint()`: the same rows, documents and settings, so the
same canonical state). A checkout nobody planned for, or one whose planned
sandbox failed, boots its own as before.

A plan may also say `again=True` (`tbx env serve`: the order of resets is the
client's, and a group of resets of one task is the common case): the
replacement of a sandbox handed over for a planned preparer is prepared for
that preparer again before the rest of the plan, so a task being reset keeps a
spare while the plan's round over the other tasks keeps theirs.

A replacement may wait `refill_delay` seconds after a hand-over (`tbx env serve`:
a group of resets arrives at once, and the replacements' boots, started at once,
took as much of the host process's CPU as the resets they followed); a
checkout that finds no spare still boots its own at once.

A spare that something outside killed before its hand-over (a container killed
while it booted, or while it waited, prepared, in the pool) is a casualty of that
kill, not of the checkout that draws it: `acquire` discards it and takes the next
spare, or boots one of its own (issue 38, faults). What the acquirer's own boot
gives stands: `sandbox.checkout` replaces a set lost from outside a bounded number
of times.

A pooled sandbox is never reused: after its attempt it is torn down like any
other, so isolation is exactly that of a cold start. Boots run through a
`sandbox.boots.BootGate` (a bound on boots in flight; queued, never timed out
while waiting).

    async with SandboxPool(["retail"], size=2) as pool:
        pool.plan([lambda: preparer_a, lambda: preparer_b])   # optional
        async with await pool.acquire(preparer_a) as sb:
            ...
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Callable, Iterable

from sandbox.boots import BootGate
from sandbox.checkout_server import CheckoutServer
from sandbox.container_fate import Fate, ended_fate
from sandbox.errors import ContainerLostError, SandboxError
from sandbox.labels import new_id
from sandbox.preparer import Preparer, fingerprint
from sandbox.sandbox import AsyncSandbox, Sandbox, SandboxRequest, resolve_images
from sandbox.services import Limits
from sandbox.timeouts import SANDBOX_TIMEOUTS

log = logging.getLogger(__name__)

Key = str | None  # a preparer's fingerprint; None: booted only, prepared at checkout


class SandboxPool:
    def __init__(
        self,
        domains: list[str],
        size: int = 2,
        *,
        checkout_servers: list[CheckoutServer] | None = None,
        typesense: bool = True,
        limits: Limits | None = None,
        run_id: str | None = None,
        images: dict[str, str] | None = None,
        start_timeout: float = SANDBOX_TIMEOUTS.boot,
        budget: int | None = None,
        fail_fast: bool = True,
        boots: BootGate | None = None,
        refill_delay: float = 0.0,
    ):
        self.domains = list(domains)
        self.checkout_servers = list(checkout_servers or [])
        self.refill_delay = refill_delay  # seconds from a hand-over to its replacement's boot
        self._refill_timer: asyncio.TimerHandle | None = None
        self.size = max(1, size)
        self.typesense = typesense
        self.limits = limits or Limits()
        self.run_id = run_id or new_id("run")
        self.images = images
        self.start_timeout = start_timeout
        # How many sandboxes will ever be acquired (None: unbounded). Booting
        # stops there, so the tail of a run leaves no spare sandboxes to tear down.
        self.budget = budget
        self._spawned = 0
        # fail_fast: one failed boot fails every later acquire (conformance: a
        # broken image should stop the run). Otherwise only the acquire that
        # receives the failure raises, and booting goes on (a long benchmark run
        # should lose one attempt to a transient Docker error, not a domain).
        self.fail_fast = fail_fast
        self._failed: BaseException | None = None
        # Shared by the pools of one provider (one bound for the machine); else the pool's own.
        self._own_gate = boots is None
        self.boots = boots or BootGate()
        # Per key, the results of boots not yet claimed by an acquire, and how many
        # boots are owed to nobody yet (spawned for the key, not claimed).
        self._ready: dict[Key, asyncio.Queue[Sandbox | BaseException]] = {}
        self._owed: dict[Key, int] = {}
        # The preparers of the checkouts to come, not booted for yet (None: no plan).
        self._plan: deque[Callable[[], Preparer]] | None = None
        self._again = False  # a hand-over's replacement is planned for its preparer again
        self._factories: dict[Key, Callable[[], Preparer]] = {}  # planned key -> its plan entry
        self._booting: set[asyncio.Task[None]] = set()
        self._resolving: set[asyncio.Future[None]] = set()  # planned boots whose key is being computed
        self._closed = False
        self._entered = False
        self._booted = 0  # booted sandboxes waiting in _ready (failures excluded)
        self.last_error: BaseException | None = None  # the latest boot failure, None after a good boot
        # Checkouts served, and of those the hand-overs of a sandbox prepared ahead for them
        # (the rest waited for a seeding, or a boot, of their own): what /ready reports.
        self.checkouts = 0
        self.handovers = 0

    async def __aenter__(self) -> SandboxPool:
        if self.images is None:
            self.images = await asyncio.to_thread(resolve_images, self.typesense)
        self._entered = True
        self._fill()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ---- what is booted ahead
    def plan(self, upcoming: Iterable[Callable[[], Preparer]], *, again: bool = False) -> None:
        """The preparers of the next checkouts, in the order they will come (each a
        zero-argument callable, called in a worker thread when its boot is spawned).
        Spare sandboxes are then booted *and prepared* for them (call it before
        `__aenter__`, or spares booted until then are plain ones). `again`: each
        checkout of a planned preparer puts it first in the plan once more."""
        self._plan = deque(upcoming)
        self._again = again
        if self._entered:
            self._fill()

    def _fill(self) -> None:
        """Keep `size` sandboxes ahead (within the budget and the plan)."""
        while not self._closed and self.spare < self.size and self._spawn_next():
            pass

    def _refill(self) -> None:
        """`_fill` after a hand-over: `refill_delay` s later (one timer for a burst of them)."""
        if self.refill_delay <= 0:
            self._fill()
        elif self._refill_timer is None:
            self._refill_timer = asyncio.get_running_loop().call_later(self.refill_delay, self._refill_now)

    def _refill_now(self) -> None:
        self._refill_timer = None
        self._fill()

    def _spawn_next(self) -> bool:
        if self._plan is None:
            return self._spawn(None, None)
        if not self._plan:
            return False
        self._spawn_planned(self._plan.popleft())
        return True

    def _spawn(self, key: Key, prepare: Preparer | None, *, beyond_budget: bool = False) -> bool:
        """Boot one sandbox for `key`: None booted only, else prepared with `prepare`."""
        over = self.budget is not None and self._spawned >= self.budget
        if self._closed or (over and prepare is None and not beyond_budget):
            return False
        self._spawned += 1
        self._owe(key)
        self._track(asyncio.create_task(self._boot_one(key, prepare)))
        return True

    def _spawn_planned(self, factory: Callable[[], Preparer]) -> None:
        """Boot one sandbox for the next planned checkout: its preparer (and so its key)
        is built off the event loop first; an acquire meanwhile waits for it (`_resolving`)."""
        self._spawned += 1
        resolved = asyncio.get_running_loop().create_future()
        self._resolving.add(resolved)

        async def go() -> None:
            try:
                preparer, key = await asyncio.to_thread(lambda: (p := factory(), fingerprint(p)))
            except Exception as exc:
                # Nobody waits on a plan entry whose key was never known: its checkout
                # boots its own (and meets the same error there, as a system error).
                log.warning("preparing a sandbox ahead failed (its checkout boots its own): %s", exc)
                return
            finally:
                self._resolving.discard(resolved)
                resolved.set_result(None)
            self._factories.setdefault(key, factory)
            self._owe(key)
            await self._boot_one(key, preparer)

        self._track(asyncio.create_task(go()))

    def _track(self, task: asyncio.Task[None]) -> None:
        self._booting.add(task)
        task.add_done_callback(self._booting.discard)

    def _owe(self, key: Key) -> None:
        self._owed[key] = self._owed.get(key, 0) + 1
        self._ready.setdefault(key, asyncio.Queue())

    async def _boot_one(self, key: Key, prepare: Preparer | None) -> None:
        request = SandboxRequest(
            domains=self.domains,
            checkout_servers=self.checkout_servers,
            typesense=self.typesense,
            run_id=self.run_id,
            limits=self.limits,
            images=self.images,
            start_timeout=self.start_timeout,
            prepare=prepare,
        )
        sb = Sandbox(request)

        def boot() -> None:
            sb.boot()
            if prepare is not None:
                sb.handle = sb.prepare()

        try:
            await self.boots.run(boot)
        except BaseException as exc:
            # A failing clean-up must not swallow the boot error: an acquirer waits for it.
            with contextlib.suppress(Exception):
                await asyncio.shield(asyncio.to_thread(sb.close))
            # The error surfaces to whoever acquires next, instead of vanishing in a task.
            self.last_error = exc
            await self._ready[key].put(exc)
            return
        if self._closed:
            await asyncio.to_thread(sb.close)
            return
        self.last_error = None
        self._booted += 1
        await self._ready[key].put(sb)

    # ---- hand-over
    async def acquire(self, prepare: Preparer | None = None) -> AsyncSandbox:
        """A booted sandbox, prepared for this attempt by `prepare` (None: empty
        schemas, no documents): one prepared ahead with an equal preparer if there
        is one (a hand-over), else a booted one prepared now. A replacement starts
        booting at once."""
        if self._failed is not None:
            raise self._failed
        key = fingerprint(prepare) if prepare is not None and self._plan is not None else None
        while key is not None and self._owed.get(key, 0) == 0 and self._resolving:
            await asyncio.wait(set(self._resolving))  # a planned boot for it may be about to say so
        while True:
            # No spare left for it: this acquire waits for a boot of its own (for a key,
            # prepared in the boot: nobody planned this checkout).
            # (Beyond the budget: a retried attempt asks for one more than the run planned.)
            own = self._owed.get(key, 0) == 0
            ahead = key is not None and not own
            if own and not self._spawn(key, prepare if key is not None else None, beyond_budget=True):
                raise SandboxError("the pool is closed")
            self._owed[key] -= 1
            item = await self._ready[key].get()
            # A spare booted ahead that something outside killed is a casualty of that
            # kill, not this checkout's: discarded, and the next spare (or a boot of its
            # own) taken instead. What its own boot gives stands (sandbox.checkout).
            lost = None if own else await self._casualty(item)
            if lost is None:
                break
            log.warning(
                "a warm %s sandbox was lost while it %s (%s); taking another",
                ",".join([*self.domains, *(s.name for s in self.checkout_servers)]),
                "booted" if isinstance(item, BaseException) else "waited",
                lost.text,
            )
        if isinstance(item, BaseException):
            if self.fail_fast:
                # Every waiter sees the failure (each puts it back), and no more boots start.
                self._failed = item
                self._closed = True
                for queue in self._ready.values():
                    queue.put_nowait(item)
            else:
                self._fill()
            raise item
        self._booted -= 1
        self.checkouts += 1
        self.handovers += ahead
        if self._again and self._plan is not None and key in self._factories:
            self._plan.appendleft(self._factories[key])  # the likeliest next checkout: this one again
        self._refill()
        sb = item
        if key is None:
            sb.request = sb.request.model_copy(update={"prepare": prepare})
            try:
                sb.handle = await asyncio.to_thread(sb.prepare)
            except BaseException:
                await asyncio.shield(asyncio.to_thread(sb.close))
                raise
        return AsyncSandbox.adopt(sb)

    async def _casualty(self, item: Sandbox | BaseException) -> Fate | None:
        """What ended a spare of the queue before its hand-over, if it is no use: a boot a
        container of which something outside killed (`ContainerLostError`, `Fate.outside`),
        or a prepared spare with a container ended since (its cgroup, then the daemon),
        which is closed here. None: hand it over (any other boot error surfaces)."""
        if isinstance(item, ContainerLostError):
            return item.fate if item.fate.outside else None
        if isinstance(item, BaseException) or item.handle is None:
            return None
        fate = await asyncio.to_thread(ended_fate, item.handle.containers)
        if fate is not None:
            self._booted -= 1
            with contextlib.suppress(Exception):  # what stays is labelled: the run's sweep takes it
                await asyncio.shield(asyncio.to_thread(item.close))
        return fate

    @property
    def spare(self) -> int:
        """Sandboxes booting or booted that no attempt holds yet."""
        return sum(self._owed.values()) + len(self._resolving)

    @property
    def booted(self) -> int:
        """Booted sandboxes waiting for an attempt (what a readiness check needs)."""
        return self._booted

    async def flush(self) -> int:
        """Discard what waits in the pool and boot replacements: after the daemon was
        restarted, sandboxes booted before are stopped and boots during it failed.
        Returns how many were discarded. (A failed boot prepared for a planned checkout
        stays: its checkout gets the error and its retry boots its own.)"""
        stale: list[tuple[Key, Sandbox | BaseException]] = []
        for key, queue in self._ready.items():
            while not queue.empty():
                stale.append((key, queue.get_nowait()))
        for _, item in stale:
            if isinstance(item, Sandbox):
                self._booted -= 1
                with contextlib.suppress(Exception):  # what stays is labelled: the run's sweep takes it
                    await asyncio.to_thread(item.close)
        self.last_error = None
        discarded = 0
        for key, item in stale:
            prepare = item.request.prepare if isinstance(item, Sandbox) else None
            if key is not None and prepare is None:
                self._ready[key].put_nowait(item)
                continue
            discarded += 1
            self._owed[key] -= 1  # the replacement is owed instead
            self._spawn(key, prepare, beyond_budget=True)
        return discarded

    async def close(self) -> None:
        self._closed = True
        if self._refill_timer is not None:
            self._refill_timer.cancel()
            self._refill_timer = None
        for task in list(self._booting):
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(*self._booting, return_exceptions=True)
        for queue in self._ready.values():
            while not queue.empty():
                item = queue.get_nowait()
                if isinstance(item, Sandbox):
                    self._booted -= 1
                    await asyncio.to_thread(item.close)
        if self._own_gate:
            self.boots.close()
