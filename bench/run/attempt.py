"""One attempt as a self-contained unit: an `AttemptSpec` in, an `AttemptOutcome` out.

    spec = attempt_spec(bench, task, repeat, run_id=..., attempt_id=..., agent="oracle", images=...)
    outcome = await execute_attempt(spec, provider, proxy)

The spec is plain data (JSON round-trips, `AttemptSpec.model_validate_json`):
task, repeat, agent, the agent and user roles (API keys as environment
variable NAMES only: a key given literally in the config does not travel),
image tags, bundle hash, the sandbox's seed rows and policy documents, the
tool policy and the limits. Nothing golden is in it: no golden end state and
no rubric (the oracle agent's golden *calls* are what it plays, read from the
dataset like any agent's prompt).

`execute_attempt` checks a sandbox out of a `sandbox.provider.SandboxProvider`,
dumps the canonical initial state, registers the attempt with the session
proxy, runs the conversation, records every tool call, dumps the terminal
state and closes the sandbox. It writes no file and prints nothing; a system
error (container, endpoint, seeding) comes back as `outcome.system_error`,
never raised. The verdict is not computed here: the coordinator grades the
outcome where the golden end states live (`bench.run.grading`).
"""

from __future__ import annotations

import asyncio
import functools
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, computed_field, field_serializer

from bench.dataset import Benchmark, Task, load_benchmark
from bench.llm.config import ModelsConfig
from bench.replay.sandboxed import dump_dsn
from bench.rollout.agent_loop import DEFAULT_WALL_CLOCK, AgentClients, run_attempt_agent
from bench.rollout.harness.names import STATE_CHECK
from bench.rollout.harness.state_check import effects_probe
from bench.rollout.trajectory import Trajectory
from bench.run.errors import DatasetMismatch
from bench.run.request import TaskPreparation, initial_state
from bench.run.results import RoleUsage
from judge import State, ToolCallView
from sandbox import (
    Limits,
    ProxyCall,
    ProxyServer,
    SandboxGoneError,
    SandboxProvider,
    SandboxRequest,
    ToolPolicy,
)
from sandbox.container_fate import lost_container
from sandbox.provider import SandboxSession
from servers.engine.seeding import initial_rows
from servers.registry import load_domain


def task_tool_policy(bench: Benchmark, task: Task) -> ToolPolicy:
    scenario = bench.scenario_of(task)
    return ToolPolicy(
        allowed_tools=list(scenario.tool_names),
        overrides={
            t.name: t.override_description for t in scenario.tools if t.override_description is not None
        },
        arg_overrides={
            t.name: dict(t.override_arg_description) for t in scenario.tools if t.override_arg_description
        },
    )


class DatasetRef(BaseModel):
    """Where the executing process reads the task from, and what it must hash to."""

    path: str
    release: str | None = None
    hash: str | None = None  # bench.run.output.dataset_hash; checked when the dataset is loaded here


class AttemptSpec(BaseModel):
    """Everything one attempt needs, as data (see the module doc)."""

    run_id: str
    attempt_id: str
    task_id: str
    domain: str
    repeat: int = Field(ge=0)
    agent: str
    dataset: DatasetRef
    # The agent and user roles (no judge: rubrics are graded where the golden lives).
    models: ModelsConfig | None = None
    images: dict[str, str] = Field(default_factory=dict)
    bundle_hash: str | None = None
    wall_clock: float = DEFAULT_WALL_CLOCK
    limits: Limits = Field(default_factory=Limits)
    typesense: bool = True
    # The sandbox's initial data: table -> rows of the task's domain, policy documents.
    seed: dict[str, list[dict[str, Any]]] = Field(default_factory=dict)
    policy_sources: list[dict[str, Any]] = Field(default_factory=list)
    tool_policy: ToolPolicy = Field(default_factory=ToolPolicy)
    # What the policy-search tool runs: vector + keyword hybrid, or the keyword fallback.
    policy_search: Literal["hybrid", "keyword"] = "hybrid"
    # Harness interventions on (bench.rollout.harness.parse_harness order); empty: none.
    harness: list[str] = Field(default_factory=list)

    @field_serializer("models")
    def _no_keys(self, models: ModelsConfig | None) -> dict[str, Any] | None:
        return None if models is None else models.public_dict()

    def sandbox_request(self) -> SandboxRequest:
        # Typed through the tables' models again: a spec read from JSON carries
        # timestamps as ISO text, which the bulk load would not take.
        seed = initial_rows(load_domain(self.domain).tables, self.seed, None)
        return SandboxRequest(
            domains=[self.domain],
            prepare=TaskPreparation(
                rows={self.domain: seed},
                sources=self.policy_sources if self.typesense else [],
                policy_search=self.policy_search,
            ),
            typesense=self.typesense,
            run_id=self.run_id,
            attempt_id=self.attempt_id,
            limits=self.limits,
            images=self.images or None,
        )


def attempt_spec(
    bench: Benchmark,
    task: Task,
    repeat: int,
    *,
    run_id: str,
    attempt_id: str,
    agent: str,
    models: ModelsConfig | None = None,
    images: dict[str, str] | None = None,
    bundle_hash: str | None = None,
    data_hash: str | None = None,
    wall_clock: float = DEFAULT_WALL_CLOCK,
    limits: Limits | None = None,
    policy_search: Literal["hybrid", "keyword"] = "hybrid",
    harness: Sequence[str] = (),
) -> AttemptSpec:
    """The spec of (task, repeat) in a run: seed rows and documents resolved here."""
    init = bench.effective_init(task)
    return AttemptSpec(
        run_id=run_id,
        attempt_id=attempt_id,
        task_id=task.id,
        domain=task.domain,
        repeat=repeat,
        agent=agent,
        dataset=DatasetRef(path=str(bench.root), release=bench.release, hash=data_hash),
        models=None if models is None else models.model_copy(update={"judge": None}),
        images=dict(images or {}),
        bundle_hash=bundle_hash,
        wall_clock=wall_clock,
        limits=limits or Limits(),
        seed=initial_state(bench, task),
        policy_sources=[s.model_dump() for s in init.sources],
        tool_policy=task_tool_policy(bench, task),
        policy_search=policy_search,
        harness=list(harness),
    )


class AttemptFailure(BaseModel):
    """Why an attempt produced no judgeable state (a system error: never a score)."""

    kind: str  # the exception's class name
    message: str
    traceback: str = ""

    def __str__(self) -> str:
        return f"{self.kind}: {self.message}"


class AttemptOutcome(BaseModel):
    """What an attempt returns: records, states, usage and timings as data."""

    run_id: str
    attempt_id: str
    task_id: str
    domain: str
    repeat: int
    calls: list[ToolCallView] = Field(default_factory=list)  # as the session proxy recorded them
    trajectory: Trajectory | None = None
    initial_state: State | None = None
    terminal_state: State | None = None
    usage: dict[str, RoleUsage] = Field(default_factory=dict)
    timings: dict[str, float] = Field(default_factory=dict)
    system_error: AttemptFailure | None = None
    node: str | None = None  # the cluster node it ran on (`tbx run --ray`), else None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def finish_reason(self) -> str | None:
        return self.trajectory.finish_reason if self.trajectory is not None else None

    @property
    def final_message(self) -> str:
        return self.trajectory.final_message if self.trajectory is not None else ""

    @classmethod
    def of(cls, spec: AttemptSpec, **fields: Any) -> AttemptOutcome:
        """The outcome of `spec`'s attempt (its ids), with `fields` filled in."""
        ids = {k: getattr(spec, k) for k in ("run_id", "attempt_id", "task_id", "domain", "repeat")}
        return cls(**ids, **fields)


def _views(calls: list[ProxyCall]) -> list[ToolCallView]:
    return [ToolCallView.from_reply(c.tool, c.arguments, c.result, c.is_error, c.latency_ms) for c in calls]


def usage_of(traj: Trajectory) -> dict[str, RoleUsage]:
    out: dict[str, RoleUsage] = {}
    for role, u in traj.usage.items():
        data = u.model_dump() if hasattr(u, "model_dump") else dict(u)
        data["cost_usd"] = traj.cost_usd.get(role)
        out[role] = RoleUsage.model_validate(data)
    return out


@functools.lru_cache(maxsize=4)
def _dataset(path: str, release: str | None, expected: str | None) -> Benchmark:
    from bench.run.output import dataset_hash

    if expected is not None and dataset_hash(path) != expected:
        raise DatasetMismatch(f"dataset {path} does not hash to {expected[:12]}… (another version of it)")
    return load_benchmark(Path(path), release=release, strict=False)


def _lost_container(session: SandboxSession) -> str | None:
    """A container of `session` that died, described (sandbox.container_fate); None when all run."""
    containers = session.register_request(ToolPolicy()).containers
    return lost_container(containers) if containers else None


async def execute_attempt(
    spec: AttemptSpec,
    provider: SandboxProvider,
    proxy: ProxyServer,
    *,
    bench: Benchmark | None = None,
    clients: AgentClients | None = None,
) -> AttemptOutcome:
    """Run one attempt (see the module doc). `bench`: the dataset already loaded
    in this process (else read from `spec.dataset` and checked against its hash);
    `clients`: model clients shared between attempts."""
    outcome = AttemptOutcome.of(spec)
    timings = outcome.timings
    try:
        if bench is None:
            bench = await asyncio.to_thread(
                _dataset, spec.dataset.path, spec.dataset.release, spec.dataset.hash
            )
        task = bench.task(spec.task_id)
        t = time.monotonic()
        session = await provider.checkout(spec.sandbox_request())
        try:
            timings["sandbox_start"] = time.monotonic() - t
            t = time.monotonic()
            dsn = session.admin_dsn(spec.domain)
            outcome.initial_state = await asyncio.to_thread(dump_dsn, dsn, spec.domain)
            timings["initial_dump"] = time.monotonic() - t
            policy = spec.tool_policy
            policy = policy.model_copy(update={"allowed_tools": policy.allowed_tools or None})
            reg = await proxy.aregister(session.register_request(policy))
            t = time.monotonic()
            try:
                outcome.trajectory = await run_attempt_agent(
                    spec.agent,
                    task,
                    bench,
                    reg.url,
                    reg.headers,
                    spec.models,
                    seed=spec.repeat,
                    wall_clock=spec.wall_clock,
                    clients=clients,
                    harness=spec.harness,
                    effects_probe=(
                        effects_probe(dsn, spec.domain, outcome.initial_state)
                        if STATE_CHECK in spec.harness
                        else None
                    ),
                )
            finally:
                gone = proxy.gone(reg.token)
                outcome.calls = _views(await proxy.aunregister(reg.token))
                if gone is not None:  # whatever the agent saw, this is the cause
                    raise SandboxGoneError(f"attempt {spec.attempt_id}: {gone}")
            timings["agent"] = time.monotonic() - t
            t = time.monotonic()
            outcome.terminal_state = await asyncio.to_thread(dump_dsn, dsn, spec.domain)
            timings["final_dump"] = time.monotonic() - t
            t = time.monotonic()
        except Exception as exc:
            # Whatever failed (a dump, a tool call), a dead container is the cause to report.
            if not isinstance(exc, SandboxGoneError):
                lost = await asyncio.to_thread(_lost_container, session)
                if lost is not None:
                    raise SandboxGoneError(f"attempt {spec.attempt_id}: sandbox gone: {lost}") from exc
            raise
        finally:
            await session.close()
        timings["teardown"] = time.monotonic() - t
        outcome.usage = usage_of(outcome.trajectory)
    except Exception as exc:
        partial = getattr(exc, "trajectory", None)
        if outcome.trajectory is None and isinstance(partial, Trajectory):
            outcome.trajectory = partial
        outcome.system_error = AttemptFailure(
            kind=exc.__class__.__name__,
            message=str(exc),
            traceback="".join(traceback.format_exception(exc))[-4000:],
        )
    return outcome
