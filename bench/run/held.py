"""One attempt held open while requests in other tasks drive it: the OpenEnv
episode's (`bench.env.episode`) and the Session API session's
(`bench.session_api.sessions`).

    held = HeldAttempt(spec, provider, proxy)
    live = await held.open()           # checked out, seeded, registered (bench.run.lifecycle)
    mark = held.recorded()
    ...                                # one tool call through the proxy
    await held.check_call(name, mark)  # SandboxLost when the infrastructure lost the sandbox
    await held.close(error)            # unregistered, terminal dump (unless `error`), torn down
    held.error                         # how it ended: None, or the lifecycle's last word

`open_attempt` is an async context that must be entered and left by one task
(anyio's cancel scopes), while each request that drives a held attempt runs in
a task of its own: a task of the held attempt enters the context, hands the
open attempt over and leaves the context when `close` says so. A closing error
is raised inside the context, so the lifecycle judges it as it judges any
body's failure (a dead container is the cause; the attempt's own limit is its
outcome, `ResourceLimitHit`). A close before the attempt is open (its opener
was cancelled, the client went away) cancels the opening.

A lost sandbox is noticed per call by one rule on the proxy's record of the
call (`check_call`): a call that did not come back as a clean answer (no
record of a sent call, a timeout, no answer from the server, an error reply
or error object: a server whose database was killed mid-call answers its
ordinary error) is followed by asking whose loss, if any, the sandbox's is
(`LiveAttempt.loss`). The infrastructure's is `SandboxLost`, and so is a
server that stopped answering with every container running (the agent did
nothing to deserve it); a loss the attempt's own calls caused is theirs: the
reply stands, the lifecycle grades it. Once raised, the loss is also how the
attempt ends unless its closer names another error.
"""

from __future__ import annotations

import asyncio
from typing import Any

from bench.run.attempt import AttemptOutcome, AttemptSpec
from bench.run.lifecycle import LiveAttempt, open_attempt
from judge import ToolCallView
from sandbox import CONTAINER_FAULT, Fault, ProxyCall, ProxyServer, SandboxGoneError, SandboxProvider

__all__ = ["AttemptClosed", "HeldAttempt", "SandboxLost"]


class AttemptClosed(RuntimeError):
    """The held attempt was closed before it was open (its driver ended it meanwhile)."""


class SandboxLost(SandboxGoneError):
    """The infrastructure lost a held attempt's sandbox while it was driven (a container
    or its network vanished, a server stopped answering): a system error, never the
    agent's outcome, which a new attempt in a fresh sandbox may cure. `loss`: what was
    lost, in words (the message adds what noticed it); `fault`: the loss's (a container's,
    the node's when the daemon could not be asked: `Loss.fault`)."""

    def __init__(self, message: str, loss: str, *, fault: Fault = CONTAINER_FAULT):
        super().__init__(message, fault=fault)
        self.loss = loss

    def __reduce__(self) -> tuple[Any, ...]:
        return _sandbox_lost, (str(self), self.loss, self.fault)


def _sandbox_lost(message: str, loss: str, fault: Fault) -> SandboxLost:
    return SandboxLost(message, loss, fault=fault)


def _unclean(call: ProxyCall) -> bool:
    """A record whose reply may be a dead container's doing: anything but an answer or the
    proxy's own refusal (the cheap substring test spares parsing every JSON reply)."""
    if call.outcome == "refused":
        return False
    return call.is_error or ('"error"' in call.result and ToolCallView.envelope(call.result))


def _retrieve(fut: asyncio.Future[LiveAttempt]) -> None:
    if not fut.cancelled():
        fut.exception()


class HeldAttempt:
    """`spec`'s attempt, held open by a task of its own (see the module doc)."""

    def __init__(
        self,
        spec: AttemptSpec,
        provider: SandboxProvider,
        proxy: ProxyServer,
        *,
        outcome: AttemptOutcome | None = None,
    ):
        self.spec = spec
        # Filled as the lifecycle goes: a caller keeps the timings and the initial state
        # even when the opening fails half way.
        self.outcome = outcome if outcome is not None else AttemptOutcome.of(spec)
        self.error: BaseException | None = None  # how the attempt ended, when not cleanly
        self._provider = provider
        self._proxy = proxy
        self._live: LiveAttempt | None = None
        self._lost: SandboxLost | None = None
        self._ending: BaseException | None = None
        self._release = asyncio.Event()
        self._ready: asyncio.Future[LiveAttempt] | None = None
        self._holder: asyncio.Task[None] | None = None

    @property
    def live(self) -> LiveAttempt:
        """The open attempt (after `open` returned)."""
        assert self._live is not None, "the held attempt is not open"
        return self._live

    @property
    def ended(self) -> bool:
        return self._holder is not None and self._holder.done()

    # ---- open and close ----------------------------------------------------------------
    async def open(self) -> LiveAttempt:
        """Open the attempt in the held task; its opening error is raised here. A cancelled
        opener cancels the opening (and waits for its cleanup)."""
        assert self._holder is None, "a held attempt opens once"
        self._ready = asyncio.get_running_loop().create_future()
        self._ready.add_done_callback(_retrieve)  # an opener that was cancelled reads it no more
        self._holder = asyncio.create_task(self._hold(self._ready))
        try:
            self._live = await asyncio.shield(self._ready)
        except asyncio.CancelledError:
            await asyncio.shield(self.close())
            raise
        return self._live

    async def close(self, error: BaseException | None = None) -> BaseException | None:
        """End the attempt and wait for its end; how it ended (`error`). `error`: why it
        ends abnormally (no terminal state is dumped then), else the loss this attempt
        raised, if any. The first close decides; later ones wait."""
        holder, ready = self._holder, self._ready
        if holder is None or ready is None:
            return None
        if not self._release.is_set():
            self._ending = error if error is not None else self._lost
            self._release.set()
            if not ready.done():
                holder.cancel()  # nobody will drive it: stop the opening
        # The held task's end is read from `error`; a cancelled closer leaves it running to its end.
        await asyncio.wait([holder])
        return self.error

    async def end(self, error: BaseException | None = None) -> None:
        """`close`, raising how the attempt ended (`error` itself, the lost container, the
        attempt's own limit) unless it ended cleanly."""
        ended = await self.close(error)
        if ended is not None:
            raise ended

    async def _hold(self, ready: asyncio.Future[LiveAttempt]) -> None:
        try:
            async with open_attempt(self.spec, self._provider, self._proxy, outcome=self.outcome) as live:
                ready.set_result(live)
                await self._release.wait()
                if self._ending is not None:
                    raise self._ending
        except BaseException as exc:
            self.error = exc
            if not ready.done():
                # A close cancelled the opening: its opener (unless cancelled itself) is told why.
                told = self._ending if isinstance(exc, asyncio.CancelledError) else exc
                if isinstance(told, Exception):
                    ready.set_exception(told)
                elif isinstance(exc, asyncio.CancelledError):
                    ready.set_exception(
                        AttemptClosed(f"attempt {self.spec.attempt_id} was closed while it opened")
                    )
                else:
                    ready.cancel()
            if not isinstance(exc, Exception):
                raise

    # ---- losses ------------------------------------------------------------------------
    def recorded(self) -> int:
        """How many calls the proxy has recorded for the attempt (a mark for `check_call`)."""
        return len(self.live.calls())

    def check_alive(self) -> None:
        """SandboxLost when the attempt's loss is known already (raised before, or the proxy's
        watch reported the infrastructure's): cheap, before a call or a read."""
        if self._lost is not None:
            raise self._lost
        loss = self._proxy.loss(self.live.token)
        if loss is not None and not loss.agent_load:
            raise self.lose("the sandbox", loss.cause, loss.fault)

    async def check_call(self, tool: str, mark: int, *, sent: bool = True) -> list[ProxyCall]:
        """The proxy's records of one call made since `mark` (`sent`: it went to the proxy;
        False when its arguments could not be sent); SandboxLost when they say the
        infrastructure lost the sandbox (the one rule: see the module doc)."""
        live = self.live
        new = live.calls()[mark:]
        lost_server = [c for c in new if c.outcome == "upstream_error"]
        if live.gone() is None and not (sent and not new) and not any(_unclean(c) for c in new):
            return new
        # A call that lost its server means a loss is coming: give the watch time to tell.
        loss = await live.loss(wait=bool(lost_server))
        if loss is not None and not loss.agent_load:
            raise self.lose(f"tool call {tool}", loss.cause, loss.fault)
        if loss is None and lost_server:
            stopped = f"the sandbox's tool server stopped answering: {lost_server[-1].result[:300]}"
            raise self.lose(f"tool call {tool}", stopped)
        return new

    def lose(self, what: str, loss: str, fault: Fault = CONTAINER_FAULT) -> SandboxLost:
        """The SandboxLost `what` noticed (remembered: the attempt ends as it)."""
        lost = SandboxLost(f"{what}: {loss}", loss, fault=fault)
        if self._lost is None:
            self._lost = lost
        return lost
