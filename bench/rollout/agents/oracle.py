"""`oracle`: plays the task's golden tool calls through the MCP endpoint, in
order, then signals done. Every task must pass with it: it checks the harness
(sandbox, proxy, seeding, judge), not a model."""

from __future__ import annotations

from bench.dataset import Benchmark, Task
from bench.rollout.agents.base import REPLAY_FINAL, PlanAgent


def oracle_agent(bench: Benchmark, task: Task) -> PlanAgent:
    return PlanAgent(bench.golden_calls(task), final=REPLAY_FINAL)
