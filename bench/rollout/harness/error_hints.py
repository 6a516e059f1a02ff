"""`error-hints`: each tool error the model sees gets a short category,
derived from the error's own text (nothing else: no golden state, no task
data), appended after the unchanged reply. The category is recorded on the
call (`ToolCall.hint`); `ToolCall.result` stays the server's reply byte for
byte.

Categories, checked in this order (the first whose pattern matches wins; the
order puts the most actionable reading first, e.g. "timed out" before any
"invalid" in the same text):

transient              the same call may succeed later (timeouts, unavailable, rate limits)
not_permitted          the action is refused as such (permissions, immutable records)
not_found              the named record does not exist
invalid_arguments      the arguments are malformed, missing or of the wrong type/format
precondition_not_met   the record exists but its state does not allow the action
unclassified           none of the above: no hint is added
"""

from __future__ import annotations

import re

from bench.rollout.trajectory import ToolCall

UNCLASSIFIED = "unclassified"

RULES: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (category, re.compile(pattern, re.I))
    for category, pattern in (
        (
            "transient",
            r"timed? ?out|temporar|unavailable|try again|rate.?limit|too many requests|\b50[234]\b"
            r"|connection (?:reset|refused|error)|no reply|interrupted",
        ),
        (
            "not_permitted",
            r"not (?:permitted|allowed|authori[sz]ed)|permission|unauthori[sz]ed|forbidden|access denied"
            r"|not updatable|cannot be (?:modified|deleted|changed)",
        ),
        (
            "not_found",
            r"not found|\bno (?:[\w-]+ ){0,4}(?:found|exists?)\b|does not exist|doesn't exist|no matching"
            r"|no such|unknown (?:id|record|customer|order|booking|ticket|user)",
        ),
        (
            "invalid_arguments",
            r"validation (?:error|failed)|field required|invalid|missing required|is required|required (?:field|parameter|argument)"
            r"|must (?:be|provide|contain|have|include)|either \S+ or \S+|unknown tool|not (?:a )?json"
            r"|failed to parse|malformed|wrong type|unexpected (?:keyword|argument|field)|format",
        ),
        (
            "precondition_not_met",
            r"already|not associated|not eligible|cannot|can't|exceed|insufficient|no available"
            r"|not available|expired|not in (?:a |the )?\w+ (?:state|status)|only (?:be|allowed)|before",
        ),
    )
)

HINTS = {
    "transient": "a temporary failure: the same call may succeed if retried.",
    "not_permitted": "this action is refused as such: do not retry it; take another route or tell the user.",
    "not_found": "the record does not exist as named: look it up (search or list) instead of "
    "retrying the same identifier.",
    "invalid_arguments": "the arguments were rejected: fix their names, types, required fields or "
    "formats before calling again.",
    "precondition_not_met": "the record exists but its current state does not allow this: check its "
    "state or do the prerequisite step first.",
}


def categorize(error_text: str) -> str:
    """The category of an error reply, from its text alone."""
    for category, pattern in RULES:
        if pattern.search(error_text):
            return category
    return UNCLASSIFIED


def is_error_reply(call: ToolCall) -> bool:
    """An error the model sees: an MCP error result or the servers' error envelope."""
    return call.is_error or call.error_envelope


def annotate(call: ToolCall) -> str:
    """The model's view of `call`'s reply: unchanged, plus a category line for an
    error; sets `call.hint` to the category (None for a non-error)."""
    if not is_error_reply(call):
        return call.result
    call.hint = categorize(call.result)
    if call.hint == UNCLASSIFIED:
        return call.result
    label = call.hint.replace("_", " ")
    return f"{call.result}\n\n[tbx error hint] {label}: {HINTS[call.hint]}"
