"""`noop`: makes no tool call and ends the conversation at once. Its attempts
leave the initial state, so they pass only the read-only tasks."""

from __future__ import annotations

from bench.rollout.agents.base import PlanAgent


def noop_agent() -> PlanAgent:
    return PlanAgent([], final="I am not able to take any action on this request.")
