"""An agent played by the `agent` model role (OpenAI-compatible chat completions)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bench.llm.client import LLMClient, UsageLedger
from bench.rollout.agents.base import AgentStep


class LLMAgent:
    def __init__(
        self,
        client: LLMClient,
        *,
        parallel_tool_calls: bool | None = None,
        attempt_seed: int = 0,
        ledger: UsageLedger | None = None,
    ):
        self.client = client
        self.parallel_tool_calls = parallel_tool_calls
        self.attempt_seed = attempt_seed
        self.ledger = ledger

    async def step(self, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]]) -> AgentStep:
        result = await self.client.chat(
            messages,
            tools=tools,
            parallel_tool_calls=self.parallel_tool_calls,
            attempt_seed=self.attempt_seed,
            ledger=self.ledger,
        )
        return AgentStep(content=result.content, tool_calls=result.tool_calls)
