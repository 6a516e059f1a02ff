"""The judge role as the evaluator sandbox's `ask(system, user)`: a test function's
`judge.text_yesno` & co, relayed out of its container by sandbox.evaluator, reach the
rubric model here, with the key that never leaves the host. The client is opened on
the first question (a run whose tests ask none never opens it)."""

from __future__ import annotations

from bench.llm.client import LLMClient
from bench.llm.config import RoleConfig
from judge import MAX_TOKENS


class JudgeRelay:
    def __init__(self, role: RoleConfig):
        self.role = role
        self._client: LLMClient | None = None

    async def __call__(self, system: str, user: str) -> str:
        if self._client is None:
            self._client = LLMClient(self.role, role="judge")
        messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        result = await self._client.chat(messages, max_tokens=self.role.max_tokens or MAX_TOKENS)
        return result.content or ""

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
