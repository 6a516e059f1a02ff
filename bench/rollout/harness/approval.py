"""`approval`: a call to a tool marked destructive is held before it is sent,
and the simulated user is asked, with its private context, whether it
approves that very action. Approved: the call goes through unchanged.
Refused: the model reads a tool error carrying the user's reason, and the
sandbox never sees the call. Read-only calls and other writes pass with no
question.

The marking is the one the servers publish as MCP annotations
(servers/engine/marking.py: refunds, charges, cancellations, deletions,
access granted or withdrawn), computed per call so that a multi-action
tool's read actions pass too. The user is shown the call as the model wrote
it (tool, its description as listed to the model, the arguments) beside the
chat so far: what the agent already knows or did, never the golden end state.

The exchange is recorded on the call (`ToolCall.approval`); the question is
one more `user`-role model call (in the usage and cost like any other), none
for a scripted user. The loop's side is `bench.rollout.agent_loop.call_tool`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from servers.engine.marking import mark_call

MAX_DESCRIPTION = 400  # characters of the tool's description shown to the user


def needs_approval(name: str, schema: Mapping[str, Any] | None, arguments: Mapping[str, Any] | None) -> bool:
    """Whether this call is held for the user: the tool is listed (else the endpoint answers
    it as unknown) and what the call does is destructive."""
    return schema is not None and mark_call(name, schema, arguments).destructive


def question(name: str, description: str | None, arguments: Mapping[str, Any] | None) -> str:
    """The action as the user is asked about it."""
    lines = [f"tool: {name}"]
    text = " ".join((description or "").split())
    if text:
        lines.append(
            f"what it does: {text if len(text) <= MAX_DESCRIPTION else text[: MAX_DESCRIPTION - 1] + '…'}"
        )
    lines.append(f"details: {json.dumps(arguments or {}, ensure_ascii=False)}")
    return "\n".join(lines)


def refusal(name: str, reason: str) -> str:
    """The tool error the model reads for a refused call ("not authorized": error-hints
    reads it as not permitted)."""
    return f"Error: not authorized: the user declined this {name} call, so it was not carried out. The user said: {reason}"
