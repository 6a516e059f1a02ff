"""`oracle`: plays the task's golden tool calls through the MCP endpoint, in
order, then signals done. Every task must pass with it: it checks the harness
(sandbox, proxy, seeding, judge), not a model."""

from __future__ import annotations

from bench.dataset import Benchmark, Task
from bench.rollout.agents.base import PlanAgent, PlannedCall


def golden_calls(bench: Benchmark, task: Task) -> list[PlannedCall]:
    init = bench.effective_init(task)
    return [(c.tool, dict(c.parameters)) for c in init.golden_tool_interactions if c.tool]


def oracle_agent(bench: Benchmark, task: Task) -> PlanAgent:
    return PlanAgent(golden_calls(bench, task), final="I have completed your request.")
