"""Episodes that start part-way (issue 37): a prefix of tool calls replayed through a
held attempt's proxy after its sandbox is open and before its driver (an OpenEnv
episode's client, a Session API session's harness) has it.

    calls = parse_prefix(wire_value)              PrefixCall models, at most MAX_PREFIX_CALLS
    check_prefix(calls, policy)                   PrefixRefused: a tool the allow-list forbids
    replayed = await replay_prefix(held, calls)   through the attempt's proxy endpoint
    calls = fork_calls(live.calls())              a live attempt's calls so far, as a prefix

A prefix comes over the wire from the client itself, or, for a fork, from the proxy's
record of the client's own live attempt (`fork_calls`): never from a path, a recorded
run or golden calls, which stay on the operator's side. The calls go through the
attempt's proxy endpoint like the agent's (same allow-list, limits and recording); the
proxy's records of them become `AttemptOutcome.prefix` (the lifecycle keeps them out of
`outcome.calls`, the agent's own), written as `AttemptRecord.prefix`. A call that errors
is replayed as is (it may have changed state) and reported; a lost sandbox is the held
attempt's one loss rule's (`HeldAttempt.check_call`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from bench.replay.mcp_calls import replay_calls
from bench.run.held import HeldAttempt
from bench.run.lifecycle import call_views
from judge import ToolCallView
from sandbox import RESERVED_PREFIX, ProxyCall, ToolPolicy

__all__ = [
    "MAX_PREFIX_CALLS",
    "PrefixCall",
    "PrefixInvalid",
    "PrefixRefused",
    "check_prefix",
    "fork_calls",
    "parse_prefix",
    "replay_prefix",
    "replayed_results",
]

# Calls a prefix may hold (a fork's inherited calls included): far beyond any task's
# golden calls (the longest Bench v1 task has tens), short of a request that would hold
# a reset for minutes.
MAX_PREFIX_CALLS = 1000


class PrefixCall(BaseModel):
    """One call of a prefix, as a client types it: `{"tool": name, "arguments": {...}}`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tool: str = Field(min_length=1, max_length=256)
    arguments: dict[str, Any] = Field(default_factory=dict)


_PREFIX = TypeAdapter(list[PrefixCall])


class PrefixInvalid(ValueError):
    """The wire value is no prefix (not a list of calls, a call of another shape, too many)."""


class PrefixRefused(ValueError):
    """A prefix call names a tool the attempt's allow-list forbids (or a reserved one):
    refused before any sandbox boots. `refused`: (index, tool) of each such call."""

    def __init__(self, message: str, refused: list[tuple[int, str]]):
        super().__init__(message)
        self.refused = refused


def parse_prefix(value: Any) -> list[PrefixCall]:
    """The prefix a client sent (None: none), or PrefixInvalid saying what is wrong."""
    if value is None:
        return []
    if isinstance(value, list) and len(value) > MAX_PREFIX_CALLS:
        raise PrefixInvalid(f"prefix holds {len(value)} calls; at most {MAX_PREFIX_CALLS}")
    try:
        return _PREFIX.validate_python(value)
    except ValidationError as exc:
        problems = "; ".join(
            f"prefix{''.join(f'[{p}]' if isinstance(p, int) else f'.{p}' for p in e['loc'])}: {e['msg']}"
            for e in exc.errors()[:5]
        )
        raise PrefixInvalid(problems) from None


def check_prefix(calls: Sequence[PrefixCall], policy: ToolPolicy) -> None:
    """PrefixRefused unless every call's tool may be called under `policy` (its
    allow-list; None allows every tool the servers list, which the proxy then checks),
    and PrefixInvalid past MAX_PREFIX_CALLS."""
    if len(calls) > MAX_PREFIX_CALLS:
        raise PrefixInvalid(f"the prefix holds {len(calls)} calls; at most {MAX_PREFIX_CALLS}")
    allowed = set(policy.allowed_tools) if policy.allowed_tools is not None else None
    refused = [
        (i, c.tool)
        for i, c in enumerate(calls)
        if c.tool.startswith(RESERVED_PREFIX) or (allowed is not None and c.tool not in allowed)
    ]
    if refused:
        names = ", ".join(f"[{i}] {tool[:80]!r}" for i, tool in refused[:5])
        more = f" and {len(refused) - 5} more" if len(refused) > 5 else ""
        raise PrefixRefused(
            f"the prefix calls tools this task's allow-list does not offer: {names}{more}", refused
        )


def fork_calls(recorded: Sequence[ProxyCall]) -> list[PrefixCall]:
    """A live attempt's calls so far (the proxy's records: its own prefix and its driver's
    calls, in order) as a fork's prefix. Calls the proxy refused never reached the server
    (they changed nothing) and are left out; every other call is replayed as it was sent."""
    return [PrefixCall(tool=c.tool, arguments=dict(c.arguments)) for c in recorded if c.outcome != "refused"]


async def replay_prefix(held: HeldAttempt, calls: Sequence[PrefixCall]) -> list[ProxyCall]:
    """Replay `calls` in order through the held attempt's proxy endpoint; the proxy's
    records of them (also kept as `held.outcome.prefix`). SandboxLost (the held attempt's
    loss rule) when the infrastructure lost the sandbox meanwhile."""
    if not calls:
        return []
    live = held.live
    mark = held.recorded()
    try:
        await replay_calls(live.url, [(c.tool, dict(c.arguments)) for c in calls], live.headers)
    finally:
        held.outcome.prefix = call_views(live.calls()[mark:])
    return await held.check_call(f"prefix ({len(calls)} calls)", mark)


def replayed_results(records: Sequence[ProxyCall]) -> list[dict[str, Any]]:
    """What a client is told of its replayed prefix, one entry per call: the tool, its
    arguments, the result text and whether it failed (`tool_error`: the OpenEnv
    observation's kinds), so the agent sees where it starts."""
    return [
        {"tool": c.tool, "arguments": c.arguments, "result": c.result, "tool_error": _error_kind(c)}
        for c in records
    ]


def _error_kind(call: ProxyCall) -> str | None:
    if call.outcome == "refused":
        return "tool_not_found"
    if call.outcome == "protocol_error":
        return "invalid_args"
    if (
        call.is_error
        or call.outcome != "ok"
        or ('"error"' in call.result and ToolCallView.envelope(call.result))
    ):
        return "execution_error"
    return None
