"""The record of one attempt's conversation: what the agent saw and did.

`messages` are the OpenAI chat messages after the system prompt, in order
(user, assistant with optional `tool_calls`, tool). The system prompt itself
is not repeated in every trajectory: `system_prompts` names its parts and
their SHA-256 (they come from the pinned dataset). `tool_calls` holds every
call the agent made, with the exact reply it got; `user_turns` holds every
simulated-user turn, with the prompt and raw completion of LLM turns, so a
conversation can be replayed with `ScriptedUser.from_trajectory`.
"""

from __future__ import annotations

import hashlib
from typing import Any, Literal, get_args

from pydantic import BaseModel, Field

from bench.llm.client import Usage

# What ended an attempt. `system_error`: tbx's side failed (a model endpoint, the
# sandbox, ...; the row's `cause` says which), never the agent. `context_limit`: the
# model endpoint refused the conversation as longer than its context (the agent's own).
FinishReason = Literal[
    "done",
    "user_done",
    "agent_limit",
    "user_limit",
    "timeout",
    "agent_error",
    "system_error",
    "context_limit",
]
FINISH_REASONS: tuple[FinishReason, ...] = get_args(FinishReason)
SYSTEM_ERROR: FinishReason = "system_error"


class Message(BaseModel):
    """One chat message in OpenAI form (`to_openai()` gives the request dict)."""

    role: Literal["system", "user", "assistant", "tool"]
    content: str | None = None
    tool_calls: list[dict[str, Any]] | None = None  # OpenAI form: {id, type, function: {name, arguments}}
    tool_call_id: str | None = None
    name: str | None = None

    def to_openai(self) -> dict[str, Any]:
        content = self.content
        if content is None and self.role == "assistant":
            content = ""  # never null: some servers refuse it (llama-cpp-python answers 500)
        out: dict[str, Any] = {"role": self.role, "content": content}
        if self.tool_calls:
            out["tool_calls"] = self.tool_calls
        if self.tool_call_id is not None:
            out["tool_call_id"] = self.tool_call_id
        if self.name is not None and self.role == "tool":
            out["name"] = self.name
        return out


class Approval(BaseModel):
    """`approval` (bench.rollout.harness): the simulated user's answer about one held call."""

    approved: bool
    reason: str  # the user's words; a refusal's reach the model in the tool error
    question: str  # the action as the user was asked about it
    source: Literal["llm", "scripted"]
    raw: str | None = None  # the LLM completion before parsing
    prompt: list[dict[str, Any]] | None = None  # the messages the user LLM saw
    latency_ms: float = 0.0


class ToolCall(BaseModel):
    """One tool call and what came back.

    `arguments` is the parsed object sent over MCP; when the model's argument
    text was not a JSON object the call is not sent (`via_mcp` False),
    `arguments` is None and `arguments_raw` keeps the text. Built-in end-turn
    tools of the agent definition are answered locally (`builtin`).
    """

    index: int
    call_id: str | None = None
    tool: str
    arguments: dict[str, Any] | None = None
    arguments_raw: str | None = None
    result: str = ""
    is_error: bool = False
    error_envelope: bool = False
    latency_ms: float = 0.0
    via_mcp: bool = True
    builtin: bool = False
    agent_turn: int = 0
    # error-hints (bench.rollout.harness): the category shown to the model after `result`,
    # which itself stays the reply as received
    hint: str | None = None
    # approval (bench.rollout.harness): the user's answer before the call was sent (approved)
    # or instead of sending it (refused: `via_mcp` False, `result` the tool error the model read)
    approval: Approval | None = None


class UserTurn(BaseModel):
    """One user message: the task's query, a scripted reply or a simulated (LLM) reply."""

    index: int
    source: Literal["query", "llm", "scripted", "harness"]  # harness: tbx's state-check message
    text: str
    done: bool = False
    # `text` is tbx's stand-in ("I don't know.") for an empty completion, not the user model's words
    stand_in: bool = False
    raw: str | None = None  # the LLM completion before cleaning
    prompt: list[dict[str, Any]] | None = None  # the messages the user LLM saw
    latency_ms: float = 0.0


class SystemPrompt(BaseModel):
    source: str  # "agent:<name>", "scenario:<name>", "task"
    sha256: str
    chars: int

    @staticmethod
    def of(source: str, text: str) -> SystemPrompt:
        return SystemPrompt(source=source, sha256=hashlib.sha256(text.encode()).hexdigest(), chars=len(text))


class Trajectory(BaseModel):
    task_id: str
    agent: str
    seed: int = 0
    finish_reason: FinishReason
    done_by: str | None = None  # "text" (<DONE>) or the end-turn tool's name, when finish_reason is "done"
    messages: list[Message] = Field(default_factory=list)
    tool_calls: list[ToolCall] = Field(default_factory=list)
    user_turns: list[UserTurn] = Field(default_factory=list)
    final_message: str = ""
    agent_turns: int = 0
    tools_offered: list[str] = Field(default_factory=list)
    system_prompts: list[SystemPrompt] = Field(default_factory=list)
    usage: dict[str, Usage] = Field(default_factory=dict)
    cost_usd: dict[str, float | None] = Field(default_factory=dict)
    timings: dict[str, float] = Field(default_factory=dict)
    error: str | None = None  # agent_error details, or the system error that cut the attempt short
    metadata: dict[str, Any] = Field(default_factory=dict)

    @property
    def mcp_calls(self) -> list[ToolCall]:
        return [c for c in self.tool_calls if c.via_mcp]
