"""What the agent loop drives: a policy that, given the conversation and the
offered tools, returns its next step (text and/or tool calls)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Protocol

from pydantic import BaseModel, Field

from bench.llm.client import ToolCallRequest

DONE_TAG = "<DONE>"
# What a built-in agent that replays the golden calls (oracle, chaos) says at the end.
REPLAY_FINAL = "I have completed your request."


class AgentStep(BaseModel):
    content: str | None = None
    tool_calls: list[ToolCallRequest] = Field(default_factory=list)


class AgentPolicy(Protocol):
    async def step(self, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]]) -> AgentStep:
        """`messages` are the full OpenAI conversation (system prompt first)."""
        ...


PlannedCall = tuple[str, "dict[str, Any] | str"]
"""(tool, arguments): a dict is sent as JSON; a str is sent as the raw argument text."""


class PlanAgent:
    """Plays a fixed list of tool calls, one per step, then ends with `<DONE>`.

    Ignores what the tools answer: the built-in agents (`oracle`, `noop`,
    `chaos`) are references for the harness, not problem solvers.
    """

    def __init__(self, calls: Sequence[PlannedCall], final: str = "All requested actions are complete."):
        self.calls = list(calls)
        self.final = final
        self._next = 0

    async def step(self, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]]) -> AgentStep:
        if self._next < len(self.calls):
            tool, args = self.calls[self._next]
            self._next += 1
            raw = args if isinstance(args, str) else json.dumps(args)
            return AgentStep(tool_calls=[ToolCallRequest(id=f"call_{self._next}", name=tool, arguments=raw)])
        return AgentStep(content=f"{self.final} {DONE_TAG}")
