"""Agents the loop can drive: model-backed (`LLMAgent`) and built-in ones that
need no model (`oracle`, `noop`, `chaos`, `scripted`), plus the scripted user they pair with."""

from bench.rollout.agents.base import DONE_TAG, AgentPolicy, AgentStep, PlanAgent
from bench.rollout.agents.chaos import KINDS as CHAOS_KINDS
from bench.rollout.agents.chaos import ChaosPlan, Perturbation, chaos_agent, chaos_plan, perturb
from bench.rollout.agents.llm_agent import LLMAgent
from bench.rollout.agents.noop import noop_agent
from bench.rollout.agents.oracle import oracle_agent
from bench.rollout.agents.scripted import (
    AgentScript,
    AgentScriptError,
    ScriptedCall,
    ScriptedTask,
    load_agent_script,
    parse_agent_script,
)
from bench.rollout.agents.scripted_user import ScriptedUser

BUILTIN_AGENTS = ("oracle", "noop", "chaos", "scripted")

__all__ = [
    "BUILTIN_AGENTS",
    "CHAOS_KINDS",
    "DONE_TAG",
    "AgentPolicy",
    "AgentScript",
    "AgentScriptError",
    "AgentStep",
    "ChaosPlan",
    "LLMAgent",
    "Perturbation",
    "PlanAgent",
    "ScriptedCall",
    "ScriptedTask",
    "ScriptedUser",
    "chaos_agent",
    "chaos_plan",
    "load_agent_script",
    "noop_agent",
    "oracle_agent",
    "parse_agent_script",
    "perturb",
]
