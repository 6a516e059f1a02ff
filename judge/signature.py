"""Failure signatures: one deterministic label per failed attempt, from its
labelled differences, its own effects and its trajectory.

Precedence (the first rule that matches wins; docs/judge.md has the table):

1. `tool_use`              an unrecovered tool error, and no wrong/extra change
2. `wrong_state_update`    a wrong value, an unexpected extra effect or a wrong row order
3. `no_state_change`       required effects missing and the attempt changed nothing
4. `incomplete_resolution` required effects missing though the attempt changed something
5. `rubric_failed`         the end state matched golden; a rubric was not answered yes

A failed call (MCP isError or the server's in-band error envelope) is
recovered when a later call to the same tool succeeded.
"""

from __future__ import annotations

from collections.abc import Sequence

from judge.records import Difference, Effects, Signature, ToolCallView

WRONG_KINDS = frozenset({"wrong_value", "extra_effect", "row_order"})


def unrecovered_errors(trajectory: Sequence[ToolCallView]) -> list[int]:
    """Indexes of failed calls not followed by a successful call to the same tool."""
    succeeded_after: set[str] = set()
    out: list[int] = []
    for i in range(len(trajectory) - 1, -1, -1):
        call = trajectory[i]
        if call.failed:
            if call.tool not in succeeded_after:
                out.append(i)
        else:
            succeeded_after.add(call.tool)
    return sorted(out)


def failure_signature(
    differences: Sequence[Difference], trajectory: Sequence[ToolCallView], effects: Effects
) -> Signature:
    """The signature of a failed attempt (call only for failures)."""
    wrong = any(d.kind in WRONG_KINDS for d in differences)
    missing = any(d.kind == "missing_effect" for d in differences)
    if unrecovered_errors(trajectory) and not wrong:
        return "tool_use"
    if wrong:
        return "wrong_state_update"
    if missing:
        return "no_state_change" if effects.empty else "incomplete_resolution"
    return "rubric_failed"
