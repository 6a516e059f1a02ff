"""What an agent is told: the agent definition's system prompt, the scenario's and
the task's bot instructions, and the tools that end its turn."""

from __future__ import annotations

from typing import Any

from bench.dataset import AgentPrompt, Benchmark, Task
from bench.rollout.agents import BUILTIN_AGENTS
from bench.rollout.tools import mcp_tool_to_openai

__all__ = [
    "DEFAULT_AGENT_PROMPT",
    "PromptSetup",
    "agent_prompt",
    "bot_instructions",
    "default_prompt",
    "prompt_setup",
]

DEFAULT_AGENT_PROMPT = "think"


def default_prompt(bench: Benchmark) -> str:
    """The release's `think` prompt, or a dataset's only prompt (e.g. a demo pack's)."""
    if DEFAULT_AGENT_PROMPT in bench.agents or len(bench.agents) != 1:
        return DEFAULT_AGENT_PROMPT
    return next(iter(bench.agents))


def bot_instructions(bench: Benchmark, task: Task) -> str | None:
    parts = [bench.scenario_of(task).bot_instructions, task.bot_instructions]
    kept = [p for p in parts if p is not None]
    return "\n".join(kept) if kept else None


def agent_prompt(bench: Benchmark, name: str) -> AgentPrompt:
    try:
        return bench.agents[name]
    except KeyError:
        known = ", ".join(sorted(bench.agents)) or "none"
        raise ValueError(
            f"unknown agent {name!r}: use one of {', '.join(BUILTIN_AGENTS)}, 'llm[:<prompt>]' "
            f"or an agent prompt of the dataset ({known})"
        ) from None


class PromptSetup:
    """The system prompts (source, text), the built-in tools (OpenAI form, answered
    locally) and the end-turn tool names of one task under one agent prompt."""

    def __init__(
        self,
        system_prompts: list[tuple[str, str]],
        builtin_tools: list[dict[str, Any]],
        end_turn_tools: set[str],
    ):
        self.system_prompts = system_prompts
        self.builtin_tools = builtin_tools
        self.end_turn_tools = end_turn_tools


def prompt_setup(bench: Benchmark, task: Task, prompt: AgentPrompt | None) -> PromptSetup:
    """What the agent sees before the query: `prompt`'s system instructions (None: a
    built-in agent, no prompt), then the bot instructions; its built-in tools."""
    systems: list[tuple[str, str]] = []
    builtin_tools: list[dict[str, Any]] = []
    end_turn: set[str] = set()
    if prompt is not None:
        systems.append((f"agent:{prompt.name}", prompt.system_instructions))
        for bt in prompt.builtin_tools:
            builtin_tools.append(mcp_tool_to_openai(bt))
            if bt.get("is_end_turn"):
                end_turn.add(bt["name"])
    bot = bot_instructions(bench, task)
    if bot:
        systems.append(
            (f"scenario:{task.scenario}" if not task.bot_instructions else "bot_instructions", bot)
        )
    end_turn |= {t.name for t in bench.scenario_of(task).tools if t.is_end_turn}
    return PromptSetup(systems, builtin_tools, end_turn)
