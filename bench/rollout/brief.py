"""What one attempt's conversation needs of its task, as data: the `TaskBrief`.

    brief = task_brief(bench, task, "llm", seed=3)   # where the dataset is (the driver)
    traj = await run_agent(brief, mcp_url, headers, ...)  # wherever the attempt runs

The brief is built from the Benchmark with the functions the prompts and agents
have always used (`prompt_setup`, `agent_prompt`, the chaos plan) and travels
inside the attempt spec (bench.run.attempt), so a local run and a Ray node feed
the agent loop from the same structure and a node never opens the dataset.

In it: the task's query, the system prompts (the agent definition's, then the
scenario's and the task's bot instructions), the built-in and end-turn tools,
the scenario's tool list with its description overrides, the simulated user's
private context and the turn limits. The tools' schemas come from the sandbox's
own MCP listing at run time, as they always did.

Not in it: golden end states, rubrics, golden calls. One marked exception:
`script`, the calls a replaying built-in agent plays (`oracle`: the golden calls;
`chaos`: them with its seeded mistakes), present only when the attempt's agent is
one of those two. They are the harness's self-tests, no model is scored, and
replaying the golden calls is what they exist for; any other agent's brief has
`script` None (tests/unit/bench/dataset/test_task_brief.py searches the briefs for golden values),
but for `scripted`, whose `script` is the task's entry of the user's own script file
(bench.rollout.agents.scripted), not golden data.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from bench.dataset import Benchmark, ScenarioTool, Task
from bench.rollout.agents import BUILTIN_AGENTS
from bench.rollout.agents.chaos import DEFAULT_RATE, chaos_plan
from bench.rollout.agents.scripted import AgentScript
from bench.rollout.prompts import agent_prompt, default_prompt, prompt_setup

__all__ = ["REPLAYING_AGENTS", "SCRIPTED_AGENT", "GoldenScript", "TaskBrief", "task_brief"]

# The built-in agents that play the task's golden calls.
REPLAYING_AGENTS = ("oracle", "chaos")
# The agent that plays the calls of the run's --script file (not golden data).
SCRIPTED_AGENT = "scripted"


class GoldenScript(BaseModel):
    """GOLDEN DATA for `oracle` and `chaos`: the calls a replaying built-in agent plays,
    derived from the task's golden calls. For `scripted`: the task's calls and final text
    from the run's script file. Only those three agents' briefs carry one (see the module doc)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    agent: Literal["oracle", "chaos", "scripted"]
    calls: list[tuple[str, dict[str, Any] | str]] = Field(default_factory=list)  # PlannedCall
    # chaos: its rate and perturbations, for the trajectory's metadata
    metadata: dict[str, Any] = Field(default_factory=dict)
    # The agent's closing text (scripted: the file's `final`); None: the replaying agents' own.
    final: str | None = None


class TaskBrief(BaseModel):
    """One task as one agent's attempt needs it (see the module doc)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    task_id: str
    agent: str  # the name it was built for: the prompt and the script depend on it
    query: str
    system_prompts: list[tuple[str, str]] = Field(default_factory=list)  # (source, text)
    builtin_tools: list[dict[str, Any]] = Field(default_factory=list)  # OpenAI form, answered locally
    end_turn_tools: list[str] = Field(default_factory=list)
    parallel_tool_calls: bool | None = None  # the agent definition's; None: the client's default
    scenario_tools: list[ScenarioTool] = Field(default_factory=list)
    user_context: str | None = None  # the simulated user's private context (it runs with the loop)
    max_agent_turns: int | None = None  # the task's own limits; None: the loop's defaults
    max_user_turns: int | None = None
    script: GoldenScript | None = None


def _chaos_rate(arg: str) -> float:
    try:
        return float(arg) if arg else DEFAULT_RATE
    except ValueError:
        raise ValueError(f"chaos rate must be a number, got {arg!r}") from None


def task_brief(
    bench: Benchmark, task: Task, agent: str, seed: int = 0, agent_script: AgentScript | None = None
) -> TaskBrief:
    """`task`'s brief for `agent` (`oracle`, `noop`, `chaos[:rate]`, `scripted`, `llm[:prompt]`
    or a prompt name of the dataset) in the attempt seeded `seed` (chaos draws its mistakes
    from it). `scripted` plays the task's entry of `agent_script` (required for it). An
    unknown agent or prompt raises ValueError."""
    name, _, arg = agent.partition(":")
    prompt = None
    script = None
    if name == "oracle":
        script = GoldenScript(agent="oracle", calls=list(bench.golden_calls(task)))
    elif name == "chaos":
        rate = _chaos_rate(arg)
        plan = chaos_plan(bench, task, seed, rate)
        perturbations = [p.model_dump() for p in plan.perturbations]
        script = GoldenScript(
            agent="chaos", calls=list(plan.calls), metadata={"rate": rate, "perturbations": perturbations}
        )
    elif name == SCRIPTED_AGENT:
        if agent_script is None:
            raise ValueError(f"agent {SCRIPTED_AGENT!r} needs a script file (--script FILE)")
        entry = agent_script.for_task(task.id, task.uid)
        played: list[tuple[str, dict[str, Any] | str]] = [(c.tool, dict(c.arguments)) for c in entry.calls]
        script = GoldenScript(agent="scripted", calls=played, final=entry.final)
    elif name not in BUILTIN_AGENTS:
        prompt = agent_prompt(bench, (arg or default_prompt(bench)) if name == "llm" else name)
    setup = prompt_setup(bench, task, prompt)
    return TaskBrief(
        task_id=task.id,
        agent=agent,
        query=task.query,
        system_prompts=setup.system_prompts,
        builtin_tools=setup.builtin_tools,
        end_turn_tools=sorted(setup.end_turn_tools),
        parallel_tool_calls=None if prompt is None else prompt.parallel_tool_calls,
        scenario_tools=list(bench.scenario_of(task).tools),
        user_context=task.user_context,
        max_agent_turns=task.max_agent_sim_turns,
        max_user_turns=task.max_user_sim_turns,
        script=script,
    )
