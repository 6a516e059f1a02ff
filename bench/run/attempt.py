"""One attempt as data: an `AttemptSpec` in, an `AttemptOutcome` out.

    spec = attempt_spec(bench, task, repeat, run_id=..., attempt_id=..., agent="oracle", images=...)
    outcome = await execute_attempt(spec, provider, proxy)   # bench.run.lifecycle

The spec is plain data (JSON round-trips, `AttemptSpec.model_validate_json`)
and holds everything the executing process needs, which therefore never opens
the dataset (a Ray node need not have it at all): task, repeat, agent, the
agent and user roles (API keys as environment variable NAMES only: a key given
literally in the config does not travel), image tags, bundle hash, the
sandbox's seed rows and policy documents, the tool policy, the limits, and the
task's `brief` (bench.rollout.brief: prompts, query, scenario tools, the
simulated user's context). Nothing golden is in it: no golden end state, no
rubric, no golden call, except the brief's marked `script` when the agent is
one that replays the golden calls (oracle, chaos); `scripted`'s `script` is the
task's entry of the run's script file.

How an attempt is opened, driven and closed is `bench.run.lifecycle`
(`open_attempt`, and `execute_attempt` = it + the agent loop). A system error
(container, endpoint, seeding) comes back as `outcome.system_error`, never
raised. The verdict is not computed here: the coordinator grades the outcome
where the golden end states live (`bench.run.grading`).
"""

from __future__ import annotations

from collections.abc import Sequence
from traceback import format_exception
from typing import Any, Literal

from pydantic import BaseModel, Field, PrivateAttr, computed_field, field_serializer, model_validator

from bench.dataset import Benchmark, Task
from bench.defaults import POLICY_SEARCH, WALL_CLOCK, PolicySearch
from bench.llm.config import ModelsConfig
from bench.prepare import TaskPreparation, checkout_servers, initial_state
from bench.rollout.agents import AgentScript
from bench.rollout.brief import TaskBrief, task_brief
from bench.rollout.trajectory import Trajectory
from bench.run.causes import fault_of
from bench.run.results import RoleUsage
from judge import State, ToolCallView
from sandbox import CheckoutServer, Fault, Limits, SandboxRequest, ToolPolicy
from servers.engine.seeding import initial_rows
from servers.registry import load_domain


def task_tool_policy(bench: Benchmark, task: Task) -> ToolPolicy:
    scenario = bench.scenario_of(task)
    return ToolPolicy(
        # A scenario that names no tools restricts none (an empty allow-list would hide all).
        allowed_tools=list(scenario.tool_names) or None,
        overrides={
            t.name: t.override_description for t in scenario.tools if t.override_description is not None
        },
        arg_overrides={
            t.name: dict(t.override_arg_description) for t in scenario.tools if t.override_arg_description
        },
    )


class AttemptSpec(BaseModel):
    """Everything one attempt needs, as data (see the module doc)."""

    run_id: str
    attempt_id: str
    task_id: str
    domain: str
    repeat: int = Field(ge=0)
    agent: str
    # The agent and user roles (no judge: rubrics are graded where the golden lives).
    models: ModelsConfig | None = None
    images: dict[str, str] = Field(default_factory=dict)
    bundle_hash: str | None = None
    wall_clock: float = WALL_CLOCK
    limits: Limits = Field(default_factory=Limits)
    typesense: bool = True
    # The sandbox's initial data: table -> rows of the task's domain, policy documents.
    seed: dict[str, list[dict[str, Any]]] = Field(default_factory=dict)
    policy_sources: list[dict[str, Any]] = Field(default_factory=list)
    tool_policy: ToolPolicy = Field(default_factory=ToolPolicy)
    # What the policy-search tool runs: vector + keyword hybrid, or the keyword fallback.
    policy_search: PolicySearch = POLICY_SEARCH
    # Harness interventions on (bench.rollout.harness.parse_harness order); empty: none.
    harness: list[str] = Field(default_factory=list)
    # What the agent loop needs of the task (None: the attempt is not driven by tbx's
    # loop, e.g. a session API's, whose agent is the client).
    brief: TaskBrief | None = None
    # The checkout's own servers the task runs on (servers.yaml, no tbx domain; their world
    # state inside): then there are no seed rows, documents or canonical states.
    checkout_servers: list[CheckoutServer] = Field(default_factory=list)

    @model_validator(mode="after")
    def _brief_is_the_agents(self) -> AttemptSpec:
        # The brief's prompt and script depend on the agent: one built for another is a bug.
        if self.brief is not None and (self.brief.agent, self.brief.task_id) != (self.agent, self.task_id):
            raise ValueError(
                f"the brief is {self.brief.task_id} for {self.brief.agent!r}, the spec {self.task_id} for {self.agent!r}"
            )
        return self

    @field_serializer("models")
    def _no_keys(self, models: ModelsConfig | None) -> dict[str, Any] | None:
        return None if models is None else models.public_dict()

    # (what it was built from, the preparation): see `preparation`
    _preparation: tuple[tuple[Any, ...], TaskPreparation] | None = PrivateAttr(default=None)

    def preparation(self) -> TaskPreparation:
        """The sandbox's preparation: the seed rows typed through the tables' models again
        (a spec read from JSON carries timestamps as ISO text, which the bulk load would
        not take) and the documents. Built once per seed: copies of a spec for other
        attempts of its task (`model_copy`) share it, one with other rows builds its own."""
        made_of = (self.domain, id(self.seed), id(self.policy_sources), self.typesense, self.policy_search)
        if self._preparation is None or self._preparation[0] != made_of:
            seed = initial_rows(load_domain(self.domain).tables, self.seed, None)
            prep = TaskPreparation(
                rows={self.domain: seed},
                sources=self.policy_sources if self.typesense else [],
                policy_search=self.policy_search,
            )
            self._preparation = (made_of, prep)
        return self._preparation[1]

    def sandbox_request(self) -> SandboxRequest:
        if self.checkout_servers:
            return SandboxRequest(
                checkout_servers=self.checkout_servers,
                typesense=False,
                run_id=self.run_id,
                attempt_id=self.attempt_id,
                limits=self.limits,
                images=self.images or None,
            )
        return SandboxRequest(
            domains=[self.domain],
            prepare=self.preparation(),
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
    wall_clock: float = WALL_CLOCK,
    limits: Limits | None = None,
    policy_search: PolicySearch = POLICY_SEARCH,
    harness: Sequence[str] = (),
    brief: bool = True,
    agent_script: AgentScript | None = None,
) -> AttemptSpec:
    """The spec of (task, repeat) in a run: seed rows, documents and the brief resolved
    here, where the dataset is. `brief` False: the attempt is not driven by tbx's agent
    loop (the OpenEnv episode's remote agent, which converses where the dataset is).
    `agent_script`: the run's script file, what the `scripted` agent plays."""
    checkout = bench.on_checkout_servers(task)
    init = None if checkout else bench.effective_init(task)
    return AttemptSpec(
        run_id=run_id,
        attempt_id=attempt_id,
        task_id=task.id,
        domain=task.domain,
        repeat=repeat,
        agent=agent,
        models=None if models is None else models.model_copy(update={"judge": None}),
        images=dict(images or {}),
        bundle_hash=bundle_hash,
        wall_clock=wall_clock,
        limits=limits or Limits(),
        seed={} if init is None else initial_state(bench, task),
        policy_sources=[] if init is None else [s.model_dump() for s in init.sources],
        typesense=not checkout,
        checkout_servers=checkout_servers(bench, task) if checkout else [],
        tool_policy=task_tool_policy(bench, task),
        policy_search=policy_search,
        harness=list(harness),
        brief=task_brief(bench, task, agent, seed=repeat, agent_script=agent_script) if brief else None,
    )


# Where a try stood when it failed (errors.jsonl's `phase`): its task's golden replay,
# the checkout of its sandbox (a boot, a warm spare, the initial state, the proxy's
# registration), the agent's conversation, the terminal dump, the grading.
TryPhase = Literal["golden", "checkout", "agent", "terminal_dump", "grading"]


class AttemptFailure(BaseModel):
    """Why an attempt produced no judgeable state (a system error: never a score), as data
    (it comes back from a Ray node as JSON): the exception's class name and text, and the
    fault its type said (bench.run.causes.fault_of), which the recorders write down."""

    kind: str  # the exception's class name
    message: str
    traceback: str = ""
    fault: Fault

    def __str__(self) -> str:
        return f"{self.kind}: {self.message}"

    @classmethod
    def of(cls, exc: BaseException) -> AttemptFailure:
        """The failure `exc` is: its class, text, traceback (the last 4000 characters)
        and fault."""
        return cls(
            kind=exc.__class__.__name__,
            message=str(exc),
            traceback="".join(format_exception(exc))[-4000:],
            fault=fault_of(exc),
        )


class AttemptOutcome(BaseModel):
    """What an attempt returns: records, states, usage and timings as data."""

    run_id: str
    attempt_id: str
    task_id: str
    domain: str
    repeat: int
    calls: list[ToolCallView] = Field(
        default_factory=list
    )  # the driver's own, as the tool proxy recorded them
    # Calls replayed through the proxy before the driver had the attempt (bench.run.prefix:
    # a reset's or a create's prefix, a fork's calls so far), as recorded; kept out of `calls`.
    prefix: list[ToolCallView] = Field(default_factory=list)
    trajectory: Trajectory | None = None
    initial_state: State | None = None
    terminal_state: State | None = None
    usage: dict[str, RoleUsage] = Field(default_factory=dict)
    timings: dict[str, float] = Field(default_factory=dict)
    system_error: AttemptFailure | None = None
    # The attempt's own calls drove its sandbox over a limit (sandbox.proxy.loss), why in
    # words: graded a failure with the signature `resource_limit`, never a system error;
    # `terminal_state` is None when the state could not be read after it.
    resource_limit: str | None = None
    node: str | None = None  # the cluster node it ran on (`tbx run --ray`), else None
    # How far the attempt got (bench.run.lifecycle): where a system error struck (None: not told).
    phase: TryPhase | None = None
    # A task on its checkout's own servers (sandbox.checkout_server): each server's
    # __reserved__geteffects object (server name -> object, {} for anything else) and its
    # __reserved__init answer minus `status`, in server_config order, key order kept (what
    # the test functions read as x.effects and x.init_result). Empty for tbx's domains.
    server_effects: dict[str, Any] = Field(default_factory=dict)
    init_results: dict[str, dict[str, Any]] = Field(default_factory=dict)

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


def usage_of(traj: Trajectory) -> dict[str, RoleUsage]:
    out: dict[str, RoleUsage] = {}
    for role, u in traj.usage.items():
        data = u.model_dump() if hasattr(u, "model_dump") else dict(u)
        data["cost_usd"] = traj.cost_usd.get(role)
        out[role] = RoleUsage.model_validate(data)
    return out
