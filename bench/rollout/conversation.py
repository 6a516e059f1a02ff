"""The conversation state of one attempt, as a public API of `bench.rollout`.

`Conversation` holds what a trajectory is made of (messages, tool calls, user
turns, counters, timings), records a tool call through MCP exactly one way and
keeps the turn rules: the agent's step limit, the ids of its calls and the
assistant message that carries them, `<DONE>`, the simulated user's reply and
its limit. `bench.rollout.agent_loop` drives it with tbx's own agent, the
OpenEnv episode (`bench.env.episode`) with a remote agent's steps; both call
these rules, neither writes its own. `LoopSpec` is what either needs to know of
the task: prompts, tools, limits (`LoopSpec.of`: from the task's brief).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from mcp import Client
from mcp.shared.exceptions import MCPError

from bench.dataset import ScenarioTool
from bench.defaults import MODEL_WAIT_FACTOR, TIMEOUTS, WALL_CLOCK
from bench.llm.client import UsageLedger
from bench.rollout.agents import DONE_TAG, AgentPolicy
from bench.rollout.brief import TaskBrief
from bench.rollout.harness.state_check import EffectsProbe
from bench.rollout.tools import parse_arguments
from bench.rollout.trajectory import (
    Approval,
    FinishReason,
    Message,
    SystemPrompt,
    ToolCall,
    Trajectory,
    UserTurn,
)
from bench.rollout.user_sim import UserPolicy
from sandbox import recorded_argument_text, sendable

__all__ = [
    "DEFAULT_MAX_AGENT_TURNS",
    "DEFAULT_MAX_USER_TURNS",
    "Conversation",
    "LoopSpec",
    "McpEndpointError",
    "is_done",
    "single_exception",
    "strip_done",
]

SYSTEM_JOINER = "\n\n"  # between the agent's system prompt and the instructions after it
DEFAULT_MAX_USER_TURNS = 10  # the reference harness's default
DEFAULT_MAX_AGENT_TURNS = 100  # the reference has none; the wall clock is the other bound


class McpEndpointError(RuntimeError):
    """The MCP endpoint could not be reached or broke mid-conversation (a system error)."""

    def __init__(self, message: str, trajectory: Trajectory | None = None):
        super().__init__(message)
        self.trajectory = trajectory


def is_done(text: str | None) -> bool:
    return text is not None and text.rstrip().endswith(DONE_TAG)


def strip_done(text: str) -> str:
    text = text.rstrip()
    return text[: -len(DONE_TAG)].rstrip() if text.endswith(DONE_TAG) else text


def single_exception(exc: BaseException) -> BaseException:
    """The one exception inside nested single-member exception groups (task groups wrap)."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


@dataclass
class LoopSpec:
    task_id: str
    agent: str
    query: str
    system_prompts: list[tuple[str, str]] = field(default_factory=list)  # (source, text)
    builtin_tools: list[dict[str, Any]] = field(default_factory=list)  # OpenAI form, answered locally
    end_turn_tools: set[str] = field(default_factory=set)
    scenario_tools: Sequence[ScenarioTool] = ()
    max_agent_turns: int = DEFAULT_MAX_AGENT_TURNS
    max_user_turns: int = DEFAULT_MAX_USER_TURNS
    wall_clock: float = WALL_CLOCK
    # the bound on the attempt's model wait, in wall clocks (bench.llm.client.ModelWait)
    model_wait_factor: float = MODEL_WAIT_FACTOR
    # the agent's wait for a tool call's reply: the proxy's bound answers first (and is
    # recorded), this one only catches a lost reply (sandbox.timeouts)
    call_timeout: float = TIMEOUTS.agent_call
    seed: int = 0
    metadata: dict[str, Any] = field(default_factory=dict)
    harness: tuple[str, ...] = ()  # interventions on (bench.rollout.harness); () = the plain loop
    effects_probe: EffectsProbe | None = None  # state-check: the attempt's effects so far (host side)

    @classmethod
    def of(
        cls,
        brief: TaskBrief,
        *,
        agent: str | None = None,
        max_agent_turns: int | None = None,
        max_user_turns: int | None = None,
        wall_clock: float = WALL_CLOCK,
        model_wait_factor: float | None = None,
        call_timeout: float = TIMEOUTS.agent_call,
        seed: int = 0,
        metadata: dict[str, Any] | None = None,
        harness: tuple[str, ...] = (),
        effects_probe: EffectsProbe | None = None,
    ) -> LoopSpec:
        """The loop's spec for `brief`'s task: a limit given here, else the task's own,
        else the default. `agent`: the trajectory's agent name (default the brief's)."""
        return cls(
            task_id=brief.task_id,
            agent=brief.agent if agent is None else agent,
            query=brief.query,
            system_prompts=list(brief.system_prompts),
            builtin_tools=list(brief.builtin_tools),
            end_turn_tools=set(brief.end_turn_tools),
            scenario_tools=brief.scenario_tools,
            max_agent_turns=_first(max_agent_turns, brief.max_agent_turns, DEFAULT_MAX_AGENT_TURNS),
            max_user_turns=_first(max_user_turns, brief.max_user_turns, DEFAULT_MAX_USER_TURNS),
            wall_clock=wall_clock,
            model_wait_factor=MODEL_WAIT_FACTOR if model_wait_factor is None else model_wait_factor,
            call_timeout=call_timeout,
            seed=seed,
            metadata={} if metadata is None else metadata,
            harness=harness,
            effects_probe=effects_probe,
        )


def _first(*values: int | None) -> int:
    return next(v for v in values if v is not None)


class Conversation:
    """One attempt's conversation state: messages, tool calls (recorded as sent), user
    turns, counters and timings, whoever drives it (tbx's agent loop, or a remote
    agent step by step through the OpenEnv episode). `agent` is None for a remote agent."""

    def __init__(self, spec: LoopSpec, agent: AgentPolicy | None, user: UserPolicy, ledger: UsageLedger):
        self.spec = spec
        self.agent = agent
        self.user = user
        self.ledger = ledger
        # One system message: the agent's prompt, then the scenario's (and task's) instructions,
        # their texts whole. The reference records two; some chat templates render the tool
        # list once per system message, so two would double the prompt (docs/agents.md).
        joined = SYSTEM_JOINER.join(text for _, text in spec.system_prompts if text)
        self.system = [{"role": "system", "content": joined}] if joined else []
        self.messages: list[Message] = []
        self.tool_calls: list[ToolCall] = []
        self.user_turns: list[UserTurn] = []
        self.tools_offered: list[str] = []
        self.metadata: dict[str, Any] = dict(spec.metadata)
        self.agent_turns = 0
        # tbx's loop stops at this many agent steps; a state check (bench.rollout.harness)
        # lowers it to a bounded number of extra steps
        self.turn_limit = spec.max_agent_turns
        self.state_checked = False
        self.approvals = 0  # questions the approval harness asked the user so far
        self.user_replies = 0  # the simulated user's answers to the agent so far (the query not counted)
        self.finish: FinishReason | None = None
        self.done_by: str | None = None
        self.error: str | None = None
        self.timings: dict[str, float] = {
            "connect": 0.0,
            "list_tools": 0.0,
            "agent": 0.0,
            "user": 0.0,
            "tools": 0.0,
        }

    # -- conversation pieces
    def transcript(self) -> list[tuple[str, str]]:
        out = []
        for m in self.messages:
            if m.role == "user" and m.content is not None:
                out.append(("user", m.content))
            elif m.role == "assistant" and m.content and m.content.strip():
                out.append(("assistant", m.content))
        return out

    def add_user(self, turn: UserTurn) -> None:
        self.user_turns.append(turn)
        self.messages.append(Message(role="user", content=turn.text))

    # -- the turn rules
    def out_of_turns(self) -> bool:
        """The agent has taken its last step (`agent_limit`)."""
        return self.agent_turns >= self.turn_limit

    def add_assistant(
        self, content: str | None, calls: Sequence[tuple[str | None, str, str]] = ()
    ) -> list[str]:
        """The agent's step as one assistant message: its text and its tool calls (the id the
        agent gave, name, argument text); a call without an id gets `call_<step>_<i>`.
        The calls' ids, in order."""
        ids = [given or f"call_{self.agent_turns}_{i}" for i, (given, _, _) in enumerate(calls)]
        tool_calls = [
            {
                "id": i,
                "type": "function",
                "function": {"name": name, "arguments": recorded_argument_text(raw)},
            }
            for i, (_, name, raw) in zip(ids, calls, strict=True)
        ]
        self.messages.append(Message(role="assistant", content=content, tool_calls=tool_calls or None))
        return ids

    def add_tool_reply(self, call_id: str, name: str, content: str) -> None:
        self.messages.append(Message(role="tool", tool_call_id=call_id, name=name, content=content))

    def said_done(self, text: str | None) -> bool:
        """Whether the agent's text ends the conversation (`<DONE>`: done, by text)."""
        if not is_done(text):
            return False
        self.done_by = "text"
        return True

    async def user_reply(self) -> FinishReason | None:
        """The simulated user answers the agent: None to go on (its turn is the last of
        `user_turns`), else the finish: `user_limit` (it would answer once too often) or
        `user_done` (it wrote its stop token)."""
        self.user_replies += 1
        if self.user_replies > self.spec.max_user_turns:
            return "user_limit"
        t = time.perf_counter()
        turn = await self.user.reply(self.transcript(), index=self.user_replies)
        self.timings["user"] += time.perf_counter() - t
        self.add_user(turn)
        return "user_done" if turn.done else None

    async def call_tool(
        self, client: Client, call_id: str, name: str, raw: str, *, approval: Approval | None = None
    ) -> ToolCall:
        """Send one call (`approval`: the user's yes it waited for, recorded on it)."""
        args, problem = parse_arguments(raw)
        rec = ToolCall(
            index=len(self.tool_calls),
            call_id=call_id,
            tool=name,
            arguments=args,
            arguments_raw=recorded_argument_text(raw) if problem else None,
            agent_turn=self.agent_turns,
            approval=approval,
        )
        if problem is None and not sendable(name):
            # the proxy would answer the same for a name it does not list; this one cannot even be sent
            problem = f"Unknown tool: {json.dumps(name)}"
        if problem is not None:
            rec.via_mcp, rec.is_error, rec.result = False, True, f"Error: {problem}"
            self.tool_calls.append(rec)
            return rec
        # recorded before it is sent: a call cut short by the wall clock may still have run
        self.tool_calls.append(rec)
        t = time.perf_counter()
        try:
            res = await client.call_tool(name, args, read_timeout_seconds=self.spec.call_timeout)
        except MCPError as exc:  # a JSON-RPC error reply (unknown tool at the proxy, timeout, ...)
            rec.result, rec.is_error = f"Error: {exc}", True
        except BaseException as exc:
            rec.result, rec.is_error = "Error: no reply (the call was interrupted)", True
            rec.latency_ms = (time.perf_counter() - t) * 1000
            if isinstance(exc, Exception):
                raise McpEndpointError(f"MCP call {name} failed: {single_exception(exc)!r}") from exc
            raise
        else:
            rec.result = "".join(getattr(c, "text", "") for c in res.content)
            rec.is_error = bool(res.is_error)
        rec.latency_ms = (time.perf_counter() - t) * 1000
        self.timings["tools"] += rec.latency_ms / 1000
        rec.error_envelope = rec.result.startswith('{"error": ')
        return rec

    def refuse_call(
        self, call_id: str, name: str, arguments: dict[str, Any], text: str, approval: Approval
    ) -> ToolCall:
        """Record a call the user refused: never sent, answered with the tool error `text`."""
        rec = ToolCall(
            index=len(self.tool_calls),
            call_id=call_id,
            tool=name,
            arguments=arguments,
            agent_turn=self.agent_turns,
            via_mcp=False,
            is_error=True,
            result=text,
            approval=approval,
        )
        self.tool_calls.append(rec)
        return rec

    def trajectory(self) -> Trajectory:
        final = next(
            (
                m.content
                for m in reversed(self.messages)
                if m.role == "assistant" and m.content and m.content.strip()
            ),
            "",
        )
        usage = self.ledger.by_role()
        return Trajectory(
            task_id=self.spec.task_id,
            agent=self.spec.agent,
            seed=self.spec.seed,
            finish_reason=self.finish or "agent_error",
            done_by=self.done_by,
            messages=self.messages,
            tool_calls=self.tool_calls,
            user_turns=self.user_turns,
            final_message=strip_done(final),
            agent_turns=self.agent_turns,
            tools_offered=self.tools_offered,
            system_prompts=[SystemPrompt.of(src, text) for src, text in self.spec.system_prompts if text],
            usage=usage,
            timings={k: round(v, 6) for k, v in self.timings.items()},
            error=self.error,
            metadata=self.metadata,
        )
