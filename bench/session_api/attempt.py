"""A session's attempt: checkout, initial dump, proxy registration; on close the
recorded calls, the gone check, the terminal dump and the teardown.

`open_session_attempt` has the shape of the one attempt lifecycle
(`bench.run.lifecycle.open_attempt`, being built alongside): when that lands,
this module's body becomes a call to it. Until then it uses the same pieces
`bench.run.attempt.execute_attempt` does.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator

from bench.replay.sandboxed import dump_dsn
from bench.run.attempt import AttemptOutcome, AttemptSpec, _lost_container, _views
from judge import State
from sandbox import ProxyCall, ProxyServer, SandboxGoneError, SandboxProvider, ToolPolicy
from sandbox.provider import SandboxSession


class LiveAttempt:
    """One open attempt (the fields of `bench.run.lifecycle.LiveAttempt`)."""

    def __init__(
        self, spec: AttemptSpec, outcome: AttemptOutcome, session: SandboxSession, proxy: ProxyServer
    ):
        self.spec, self.outcome, self.session, self._proxy = spec, outcome, session, proxy
        self.url = ""
        self.headers: dict[str, str] = {}
        self.token = ""

    def containers(self) -> dict[str, str]:
        """role -> container id of the attempt's sandbox."""
        return dict(self.session.register_request(ToolPolicy()).containers)

    def calls(self) -> list[ProxyCall]:
        return self._proxy.calls(self.token)

    def gone(self) -> str | None:
        return self._proxy.gone(self.token)

    async def lost_container(self) -> str | None:
        return await asyncio.to_thread(_lost_container, self.session)

    async def dump_state(self) -> State:
        return await asyncio.to_thread(dump_dsn, self.session.admin_dsn(self.spec.domain), self.spec.domain)


@contextlib.asynccontextmanager
async def open_session_attempt(
    spec: AttemptSpec, provider: SandboxProvider, proxy: ProxyServer
) -> AsyncIterator[LiveAttempt]:
    outcome = AttemptOutcome.of(spec)
    timings = outcome.timings
    t = time.monotonic()
    session = await provider.checkout(spec.sandbox_request())
    timings["sandbox_start"] = time.monotonic() - t
    live = LiveAttempt(spec, outcome, session, proxy)
    registered = False
    try:
        t = time.monotonic()
        outcome.initial_state = await live.dump_state()
        timings["initial_dump"] = time.monotonic() - t
        policy = spec.tool_policy
        policy = policy.model_copy(update={"allowed_tools": policy.allowed_tools or None})
        reg = await proxy.aregister(session.register_request(policy))
        registered = True
        live.url, live.headers, live.token = reg.url, reg.headers, reg.token
        failed = False
        try:
            yield live
        except BaseException:
            failed = True
            raise
        finally:
            gone = proxy.gone(reg.token)
            outcome.calls = _views(await proxy.aunregister(reg.token))
            registered = False
            if gone is not None:
                raise SandboxGoneError(f"attempt {spec.attempt_id}: {gone}")
        if not failed:
            t = time.monotonic()
            outcome.terminal_state = await live.dump_state()
            timings["final_dump"] = time.monotonic() - t
    except Exception as exc:
        if not isinstance(exc, SandboxGoneError):
            lost = await live.lost_container()
            if lost is not None:
                raise SandboxGoneError(f"attempt {spec.attempt_id}: sandbox gone: {lost}") from exc
        raise
    finally:
        if registered:
            with contextlib.suppress(Exception):
                await proxy.aunregister(live.token)
        t = time.monotonic()
        await asyncio.shield(session.close())
        timings["teardown"] = time.monotonic() - t
