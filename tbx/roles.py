"""Inspect's models in the roles of tbx's conversation and judge.

`InspectAgent` is an `AgentPolicy` (bench.rollout.agents.base) that asks the evaluated
model; `InspectUser` a `UserPolicy` (bench.rollout.user_sim) that builds the simulated
customer's prompt as `LLMUser` does and asks the `user` role; `grader_completion` is
the rubric judge's `Complete` (judge.rubric) on the `grader` role. Messages and tools
cross in OpenAI form, which tbx's loop speaks, converted here and nowhere else.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

from inspect_ai.model import (
    ChatMessage,
    ChatMessageAssistant,
    ChatMessageSystem,
    ChatMessageTool,
    ChatMessageUser,
    GenerateConfig,
    Model,
)
from inspect_ai.tool import ToolCall, ToolInfo, ToolParams

from bench.llm.client import ToolCallRequest
from bench.rollout.agents.base import AgentStep
from bench.rollout.trajectory import UserTurn
from bench.rollout.user_sim import Transcript, build_prompt, clean_reply
from judge.rubric import MAX_TOKENS, Complete, Completion, JudgeUnavailable


def _arguments(text: str) -> tuple[dict[str, Any], str | None]:
    try:
        value = json.loads(text or "{}")
    except ValueError as exc:
        return {}, f"the arguments are not JSON: {exc}"
    return (value, None) if isinstance(value, dict) else ({}, "the arguments are not a JSON object")


def to_inspect(messages: Sequence[dict[str, Any]]) -> list[ChatMessage]:
    """OpenAI chat messages (tbx's conversation) as Inspect's."""
    out: list[ChatMessage] = []
    for m in messages:
        role, content = m.get("role"), m.get("content") or ""
        if role == "system":
            out.append(ChatMessageSystem(content=content))
        elif role == "user":
            out.append(ChatMessageUser(content=content))
        elif role == "assistant":
            calls = []
            for c in m.get("tool_calls") or []:
                args, problem = _arguments(c["function"]["arguments"])
                calls.append(
                    ToolCall(id=c["id"], function=c["function"]["name"], arguments=args, parse_error=problem)
                )
            out.append(ChatMessageAssistant(content=content, tool_calls=calls or None))
        elif role == "tool":
            out.append(
                ChatMessageTool(content=content, tool_call_id=m.get("tool_call_id"), function=m.get("name"))
            )
    return out


def tool_infos(tools: Sequence[dict[str, Any]]) -> list[ToolInfo]:
    """OpenAI function tools (the proxy's listing, the scenario's overrides applied) as Inspect's."""
    infos = []
    for t in tools:
        f = t["function"]
        params = ToolParams.model_validate(f.get("parameters") or {"type": "object", "properties": {}})
        for name, param in params.properties.items():
            param.description = param.description or name
        infos.append(
            ToolInfo(name=f["name"], description=f.get("description") or f["name"], parameters=params)
        )
    return infos


def _raw(call: ToolCall) -> str:
    return json.dumps(call.arguments)


class InspectAgent:
    """The evaluated model as tbx's loop's agent: one `generate` per step."""

    def __init__(self, model: Model):
        self.model = model
        self._tools: tuple[int, list[ToolInfo]] | None = None

    async def step(self, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]]) -> AgentStep:
        if self._tools is None or self._tools[0] != id(tools):
            self._tools = (id(tools), tool_infos(tools))
        output = await self.model.generate(to_inspect(messages), tools=self._tools[1])
        msg = output.message
        calls = [ToolCallRequest(id=c.id, name=c.function, arguments=_raw(c)) for c in msg.tool_calls or []]
        return AgentStep(content=msg.text or None, tool_calls=calls)


class InspectUser:
    """The simulated customer on Inspect's `user` role: tbx's prompt (build_prompt), its
    reply cleaned as `LLMUser`'s (clean_reply: labels, quotes, the stop token)."""

    def __init__(self, model: Model, user_context: str | None):
        self.model = model
        self.user_context = user_context

    async def reply(self, transcript: Transcript, *, index: int) -> UserTurn:
        prompt = build_prompt(transcript, self.user_context)
        t = time.perf_counter()
        output = await self.model.generate(to_inspect(prompt))
        raw = output.completion or ""
        text, done = clean_reply(raw)
        return UserTurn(
            index=index,
            source="llm",
            text=text,
            done=done,
            raw=raw,
            prompt=prompt,
            latency_ms=(time.perf_counter() - t) * 1000,
        )


def grader_completion(model: Model) -> Complete:
    """judge.RubricJudge's completion on the `grader` role; a model that fails after
    Inspect's own retries is `JudgeUnavailable` (a system error, never a verdict)."""

    async def complete(messages: list[dict[str, str]]) -> Completion:
        try:
            output = await model.generate(to_inspect(messages), config=GenerateConfig(max_tokens=MAX_TOKENS))
        except Exception as exc:
            raise JudgeUnavailable(f"grader model {model.name!r} unavailable: {exc!r}") from exc
        usage = output.usage
        return Completion(
            text=output.completion,
            input_tokens=usage.input_tokens if usage else 0,
            output_tokens=usage.output_tokens if usage else 0,
            cached_tokens=(usage.input_tokens_cache_read or 0) if usage else 0,
        )

    return complete
