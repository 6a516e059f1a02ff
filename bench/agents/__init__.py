"""Agents the loop can drive: model-backed (`LLMAgent`) and built-in ones that
need no model (`oracle`, `noop`, `chaos`), plus the scripted user they pair with."""

from bench.agents.base import DONE_TAG, AgentPolicy, AgentStep, PlanAgent
from bench.agents.chaos import KINDS as CHAOS_KINDS
from bench.agents.chaos import ChaosPlan, Perturbation, chaos_agent, chaos_plan, perturb
from bench.agents.llm_agent import LLMAgent
from bench.agents.noop import noop_agent
from bench.agents.oracle import golden_calls, oracle_agent
from bench.agents.scripted_user import ScriptedUser

BUILTIN_AGENTS = ("oracle", "noop", "chaos")

__all__ = [
    "BUILTIN_AGENTS",
    "CHAOS_KINDS",
    "DONE_TAG",
    "AgentPolicy",
    "AgentStep",
    "ChaosPlan",
    "LLMAgent",
    "Perturbation",
    "PlanAgent",
    "ScriptedUser",
    "chaos_agent",
    "chaos_plan",
    "golden_calls",
    "noop_agent",
    "oracle_agent",
    "perturb",
]
