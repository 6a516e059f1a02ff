"""The one attempt lifecycle: every entry point opens and closes an attempt here.

    async with open_attempt(spec, provider, proxy) as live:
        ...  # drive the conversation against live.url / live.headers
    outcome = live.outcome  # states, tool calls, timings (filled as it goes)

Opening checks a sandbox out of the provider (`spec.sandbox_request()`) through
the one sandbox path (`sandbox.checkout.open_sandbox`), takes
the canonical initial state and registers the attempt with the tool proxy
under the spec's tool policy (no allow-list: every tool; an empty one: none).
What does not depend on the attempt was done when the sandbox was prepared (in a
warm pool, ahead of the checkout): the initial state was read right after
seeding and is used when the database has seen no write since (else it is
dumped now), and the servers' tool listings go to the proxy with the
registration, which then makes no request of them. Closing, always
(also on an error or a cancellation): the proxy's record of the calls is
collected as it unregisters, the proxy's watch is asked whether a container or
the network of the set vanished (then that is the error, whatever the body
saw), the terminal state is dumped (only when the body ended without an
exception) and the lease is closed. A failure while a container of the set
is dead is re-raised as `SandboxGoneError` naming it (`open_sandbox`'s translation).

Who drives it: `execute_attempt` below (`tbx run`, through the coordinator's
executor, locally or on a Ray node) runs the agent loop inside it; the OpenEnv
episode (`bench.env.episode`, `tbx env serve`) runs its remote agent's steps
inside it; the Session API does the same for an agent it does not run.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from bench.harness_names import STATE_CHECK
from bench.rollout.agent_loop import run_agent
from bench.rollout.clients import AgentClients
from bench.rollout.harness.state_check import effects_probe
from bench.rollout.trajectory import Trajectory
from bench.run.attempt import AttemptFailure, AttemptOutcome, AttemptSpec, usage_of
from judge import State, ToolCallView, dump_dsn
from sandbox import (
    DEFAULT_CALL_TIMEOUT,
    Loss,
    ProxyCall,
    ProxyServer,
    Registration,
    ResourceLimitHit,
    SandboxGoneError,
    SandboxLease,
    SandboxProvider,
    SandboxRequest,
    agent_load,
    lost_container,
    lost_fate_of,
    open_sandbox,
    register_request,
    server_effects,
)

__all__ = ["LiveAttempt", "call_views", "execute_attempt", "open_attempt"]

LOSS_WAIT = 5.0  # seconds a call that lost its server waits for the proxy's word on whose loss it was


def call_views(calls: list[ProxyCall]) -> list[ToolCallView]:
    """The proxy's records as the judge reads them."""
    return [ToolCallView.from_reply(c.tool, c.arguments, c.result, c.is_error, c.latency_ms) for c in calls]


class LiveAttempt:
    """An open attempt: its sandbox lease, its proxy registration and its outcome so far."""

    def __init__(
        self,
        spec: AttemptSpec,
        outcome: AttemptOutcome,
        lease: SandboxLease,
        proxy: ProxyServer,
        registration: Registration,
    ):
        self.spec = spec
        self.outcome = outcome
        self.lease = lease
        self.registration = registration
        self._proxy = proxy

    @property
    def url(self) -> str:
        """The tool proxy's MCP endpoint of this attempt (what an agent connects to)."""
        return self.registration.url

    @property
    def headers(self) -> dict[str, str]:
        """The headers an agent sends to `url` (the attempt's bearer token)."""
        return self.registration.headers

    @property
    def token(self) -> str:
        return self.registration.token

    def calls(self) -> list[ProxyCall]:
        """The tool calls the proxy recorded so far."""
        return self._proxy.calls(self.token)

    def gone(self) -> str | None:
        """What the proxy's watch saw vanish of the sandbox (a container, the network), or None."""
        return self._proxy.gone(self.token)

    async def lost_container(self) -> str | None:
        return await lost_container(self.lease)

    async def loss(self, *, wait: bool = False) -> Loss | None:
        """The sandbox's loss and whose doing it was: the proxy's word when its watch told
        it, else a container found dead now, judged by the calls recorded so far. `wait`:
        a call just lost its server, so a loss is coming: give the watch up to LOSS_WAIT
        seconds to report it (it names an OOM kill only once the kernel's records are read)."""
        deadline = time.monotonic() + (LOSS_WAIT if wait else 0.0)
        while True:
            told = self._proxy.loss(self.token)
            if told is not None:
                return told
            if time.monotonic() >= deadline:
                break
            await asyncio.sleep(0.1)
        return await _judged_loss(self.lease, self.calls())

    async def dump_state(self) -> State:
        """The sandbox's canonical state now, read host side."""
        return await _dump(self.lease, self.spec.domain)


async def _judged_loss(lease: SandboxLease, calls: list[ProxyCall]) -> Loss | None:
    """A container of `lease` found dead now, and whether the attempt's `calls` drove it
    there (sandbox.proxy.loss, as the proxy judges the losses its watch reports)."""
    fate = await lost_fate_of(lease)
    if fate is None:
        return None
    spans: list[tuple[float, float | None]] = [
        (c.started_at.timestamp(), c.started_at.timestamp() + c.latency_ms / 1000) for c in calls
    ]
    return Loss(
        f"sandbox gone: {fate.text}",
        agent_load(fate, spans, DEFAULT_CALL_TIMEOUT, time.time()),
        unknown=fate.unknown,
    )


async def _dump_if_readable(lease: SandboxLease, domain: str) -> State | None:
    """The terminal state after the attempt's own load hit a limit: None when it cannot be
    read (the database was what went down)."""
    try:
        return await _dump(lease, domain)
    except Exception:
        return None


async def _dump(lease: SandboxLease, domain: str) -> State:
    return await asyncio.to_thread(dump_dsn, lease.admin_dsn(domain), domain)


async def _server_effects(lease: SandboxLease) -> dict[str, Any]:
    """The checkout servers' own effects (__reserved__geteffects), in server_config order."""
    handle = lease.handle
    if handle is None or not handle.checkout_servers:
        return {}
    return await asyncio.to_thread(
        server_effects, handle.checkout_servers, handle.servers, handle.upstream_secret, lease.interface
    )


async def _initial_state(lease: SandboxLease, domain: str, request: SandboxRequest) -> State:
    """The state read when the sandbox was prepared for this request's preparer, if nothing
    has written since (`SandboxLease.prepared_states`), else a dump now."""
    if request.prepare is not None:
        prepared = await lease.prepared_states(request.prepare.fingerprint())
        if prepared is not None and domain in prepared:
            return prepared[domain]
    return await _dump(lease, domain)


@asynccontextmanager
async def open_attempt(
    spec: AttemptSpec,
    provider: SandboxProvider,
    proxy: ProxyServer,
    *,
    outcome: AttemptOutcome | None = None,
) -> AsyncIterator[LiveAttempt]:
    """Open `spec`'s attempt, yield it, close it (see the module doc). `outcome`: the
    record to fill (default a new one): a caller that keeps its own still has the
    timings and the initial state when the opening fails half way."""
    outcome = outcome if outcome is not None else AttemptOutcome.of(spec)
    timings = outcome.timings
    request = spec.sandbox_request()
    outcome.phase = "checkout"
    async with open_sandbox(provider, request, label=f"attempt {spec.attempt_id}", timings=timings) as lease:
        t = time.monotonic()
        if spec.checkout_servers:  # their state is theirs: init answers now, effects at the end
            outcome.init_results = dict(lease.handle.init_results) if lease.handle is not None else {}
        else:
            outcome.initial_state = await _initial_state(lease, spec.domain, request)
        timings["initial_dump"] = time.monotonic() - t
        reg = await proxy.aregister(register_request(lease, spec.attempt_id, spec.tool_policy))
        live = LiveAttempt(spec, outcome, lease, proxy, reg)
        outcome.phase = "agent"  # a loss from here on (also one found as the body ends) is the try's
        t = time.monotonic()
        failed: Exception | None = None
        try:
            yield live
        except Exception as exc:  # raised again below, unless the attempt's own load was the cause
            failed = exc
        finally:
            recorded = proxy.calls(reg.token)
            # A call that lost its server means a loss is coming: wait for the watch's word.
            lost_server = any(c.outcome == "upstream_error" for c in recorded)
            loss = await live.loss(wait=True) if lost_server else proxy.loss(reg.token)
            # The first calls were a replayed prefix (bench.run.prefix), kept as outcome.prefix.
            outcome.calls = call_views(await proxy.aunregister(reg.token))[len(outcome.prefix) :]
            if loss is not None and not loss.agent_load:  # whatever the body saw, this is the cause
                raise SandboxGoneError(
                    f"attempt {spec.attempt_id}: {loss.cause}", fault=loss.fault
                ) from failed
        timings["agent"] = time.monotonic() - t
        t = time.monotonic()
        if loss is not None:  # the attempt's own doing: its outcome, whatever the body saw
            outcome.phase = "terminal_dump"
            outcome.resource_limit = loss.cause
            if spec.checkout_servers:
                with contextlib.suppress(Exception):
                    outcome.server_effects = await _server_effects(lease)
            else:
                outcome.terminal_state = await _dump_if_readable(lease, spec.domain)
            timings["final_dump"] = time.monotonic() - t
            if failed is not None:
                raise ResourceLimitHit(loss.cause) from failed
        else:
            if failed is not None:
                raise failed
            outcome.phase = "terminal_dump"
            if spec.checkout_servers:
                outcome.server_effects = await _server_effects(lease)
            else:
                outcome.terminal_state = await _dump(lease, spec.domain)
            timings["final_dump"] = time.monotonic() - t


async def execute_attempt(
    spec: AttemptSpec,
    provider: SandboxProvider,
    proxy: ProxyServer,
    *,
    clients: AgentClients | None = None,
) -> AttemptOutcome:
    """One attempt with tbx's own agent loop inside `open_attempt`; never raises: a
    system error comes back as `outcome.system_error`. The loop is fed from the spec's
    brief alone (no dataset is read here: on a Ray node there may be none);
    `clients`: model clients shared between attempts."""
    outcome = AttemptOutcome.of(spec)
    try:
        if spec.brief is None:
            raise ValueError(f"attempt {spec.attempt_id}: the spec has no task brief for the agent loop")
        brief = spec.brief
        async with open_attempt(spec, provider, proxy, outcome=outcome) as live:
            probe = None
            if STATE_CHECK in spec.harness and outcome.initial_state is not None:
                # after the initial dump: the effects so far are the sandbox now against it
                probe = effects_probe(live.dump_state, spec.domain, outcome.initial_state)
            outcome.trajectory = await run_agent(
                brief,
                live.url,
                live.headers,
                spec.models,
                seed=spec.repeat,
                wall_clock=spec.wall_clock,
                clients=clients,
                harness=spec.harness,
                effects_probe=probe,
            )
        _model_wait(outcome, outcome.trajectory)
        outcome.usage = usage_of(outcome.trajectory)
    except ResourceLimitHit as exc:
        # The agent's own load, on which its loop failed: graded a failure with what it left.
        partial = getattr(exc.__cause__, "trajectory", None)
        if outcome.trajectory is None and isinstance(partial, Trajectory):
            outcome.trajectory = partial
            outcome.usage = usage_of(partial)
    except Exception as exc:
        partial = getattr(exc, "trajectory", None)
        if outcome.trajectory is None and isinstance(partial, Trajectory):
            outcome.trajectory = partial
            _model_wait(outcome, partial)
        outcome.system_error = AttemptFailure.of(exc)
    return outcome


def _model_wait(outcome: AttemptOutcome, traj: Trajectory) -> None:
    """The part of `agent` spent waiting on model endpoints (not on the wall clock), for
    an attempt that waited on one."""
    if traj.timings.get("model_wait"):
        outcome.timings["model_wait"] = traj.timings["model_wait"]
