"""The agent loop's one harness hook: what the model reads for a tool call's reply."""

from __future__ import annotations

from collections.abc import Sequence

from bench.harness_names import ERROR_HINTS
from bench.rollout.harness.error_hints import annotate
from bench.rollout.trajectory import ToolCall


def tool_message(harness: Sequence[str], call: ToolCall) -> str:
    """The tool message content the model reads for `call`. `call.result` (the
    recorded reply) is never changed; an intervention records what it added
    on the call (`call.hint`)."""
    if ERROR_HINTS in harness:
        return annotate(call)
    return call.result
