"""How far each tool reaches: reads, writes, and writes not cheaply reversed.

One marking, read by both sides: the servers publish it as the MCP tool
annotations (`readOnlyHint`, `destructiveHint`, `idempotentHint`; app.py),
and the `approval` harness (bench/rollout/harness/approval.py) holds the
calls it marks destructive until the simulated user agrees. Here, in
`servers.engine`, because bench may import servers' metadata but servers
import nothing of tbx.

The marking is derived by rule from the verb phrase that names what a call
does, which is how the specs of the benchmark's servers describe each tool
(its name says whether it reads or writes and what; "never mutates" /
"read-only" / "writes" there agree with the rules below, which
tests/unit/servers/engine/test_marking.py checks against the export's own `writes_state`):

- the phrase is the tool's name; a multi-action tool (an `action` or
  `operation` argument with an enum: the consulting `*_api` tools, the
  neobank security tool, retail's membership update) has one phrase per
  action, and the tool's marking is the union of its actions' (read-only
  only if every action reads, destructive if any action is);
- a phrase with a read verb (get, check, search, ...) reads;
- any other phrase writes (also an unknown verb: a write is the cautious
  guess, and MCP's own default);
- a write is destructive when it moves money (refund, charge, pay), ends or
  removes something (cancel, delete, remove, retire, revoke, invalidate,
  close, terminate), transfers, or grants or withdraws access (access,
  provision, unlock, bypass, group membership, MFA factors, passwords);
  other writes are additive or plain field updates;
- reads are idempotent, and so are writes that set fields to given values
  (update, reschedule, reinstate); creates, charges and the like are not.

A few tools are named like writes but the specs say they store nothing:
READ_BY_SPEC lists them (each with where the spec says so).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from servers.engine.tools import Tool

READ_VERBS = frozenset({"get", "check", "search", "list", "lookup", "verify", "validate", "find", "fetch"})
# writes that set fields to the values given: the same call twice leaves what the first left
# (a false "not idempotent" is the safe side: it is MCP's default)
IDEMPOTENT_WRITE_VERBS = frozenset({"update", "reschedule", "reinstate"})
# a word of the phrase starting with one of these marks a write as not cheaply reversed
_DESTRUCTIVE = re.compile(
    r"(?:^|_)(?:"
    r"refund|charge|pay|transfer"  # money moves (refund, charge_customer, payment, ...)
    r"|cancel|delete|remove|retire|revoke|invalidate|close|terminate"  # something ends or goes
    r"|access|provision|unlock|bypass|mfa|password|to_group"  # access granted or withdrawn
    r")"
)
# the argument whose enum picks what a multi-action tool does
SELECTORS = ("action", "operation")

# Tools whose names read like writes but that store nothing, per the specs.
READ_BY_SPEC = frozenset(
    {
        "hardware_procurement_create_order",  # consulting.md §3.19: read-only, touches no state
        "payment_api_update_payment_method",  # travel-booking.md §3.5.7: nothing is stored
        "payment_api_generate_invoice",  # travel-booking.md §3.5.6: read-only (a link, not stored)
        "corporate_api_generate_corporate_invoice",  # travel-booking.md §3.2.4: nothing is stored
    }
)


@dataclass(frozen=True)
class Marking:
    read_only: bool
    destructive: bool  # only a write can be
    idempotent: bool


READ = Marking(read_only=True, destructive=False, idempotent=True)


def mark_phrase(phrase: str) -> Marking:
    """The marking of one verb phrase: a tool name or one of its actions."""
    words = phrase.lower().split("_")
    if READ_VERBS.intersection(words):
        return READ
    return Marking(
        read_only=False,
        destructive=bool(_DESTRUCTIVE.search(phrase.lower())),
        idempotent=bool(IDEMPOTENT_WRITE_VERBS.intersection(words)),
    )


def combine(markings: list[Marking]) -> Marking:
    """One marking for a tool whose calls may do any of `markings`."""
    return Marking(
        read_only=all(m.read_only for m in markings),
        destructive=any(m.destructive for m in markings),
        idempotent=all(m.idempotent for m in markings),
    )


def selector(schema: Mapping[str, Any]) -> tuple[str, tuple[str, ...]] | None:
    """(argument, its values) when the input schema has an action-picking enum."""
    props = schema.get("properties") or {}
    for name in SELECTORS:
        values = (props.get(name) or {}).get("enum")
        if isinstance(values, list) and values and all(isinstance(v, str) for v in values):
            return name, tuple(values)
    return None


def mark(name: str, schema: Mapping[str, Any]) -> Marking:
    """A tool's marking, from its name and input schema (what MCP publishes)."""
    if name in READ_BY_SPEC:
        return READ
    picked = selector(schema)
    if picked is None:
        return mark_phrase(name)
    return combine([mark_phrase(v) for v in picked[1]])


def mark_call(name: str, schema: Mapping[str, Any], arguments: Mapping[str, Any] | None) -> Marking:
    """What one call does: the chosen action's marking for a multi-action tool,
    else the tool's (also when the action is missing or not one of the enum's)."""
    picked = selector(schema)
    if name not in READ_BY_SPEC and picked is not None and arguments is not None:
        chosen = arguments.get(picked[0])
        if isinstance(chosen, str) and chosen in picked[1]:
            return mark_phrase(chosen)
    return mark(name, schema)


def mark_tool(tool: Tool) -> Marking:
    return mark(tool.name, tool.input_schema)
