"""`state-check`: when the agent ends, tbx shows it what its calls changed in
the records so far and lets it continue for a bounded number of turns, or
confirm by ending again.

The changes are the attempt's effects against its **initial** state only
(judge's effect extractor, `judge.compute_effects`, over a fresh host-side
dump of the attempt's database): what the agent did, never what it should
have done. The golden end state is not in this process's reach here: the
probe is built from the attempt's own dump (`LiveAttempt.dump_state`, once
the attempt is open) and its initial state.

One check per attempt; after it the agent has at most `EXTRA_TURNS` more
steps (then the attempt ends with `agent_limit`, as any other turn limit).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from bench.rollout.trajectory import UserTurn
from judge import Effects, State, compute_effects

EXTRA_TURNS = 5
MAX_ROWS = 40  # changed rows listed; the rest are counted
MAX_VALUE = 160  # characters of one value shown

EffectsProbe = Callable[[], Awaitable[Effects]]


def effects_probe(dump: Callable[[], Awaitable[State]], domain: str, initial: State) -> EffectsProbe:
    """The attempt's effects so far: `dump` (the attempt's canonical state now, e.g.
    `LiveAttempt.dump_state`) against `initial`."""
    from servers.registry import load_domain

    tables = load_domain(domain).tables

    async def probe() -> Effects:
        return compute_effects(tables, initial, await dump())

    return probe


def _value(v: Any) -> str:
    text = json.dumps(v, ensure_ascii=False, default=str)
    return text if len(text) <= MAX_VALUE else text[: MAX_VALUE - 1] + "…"


def _fields(row: dict[str, Any] | None) -> str:
    return ", ".join(f"{k}={_value(v)}" for k, v in (row or {}).items())


def render_effects(effects: Effects) -> list[str]:
    """One line per changed row: updated (before -> after), deleted, inserted (all its fields)."""
    lines: list[str] = []
    # changes to existing records first: they are the ones the size bound must not hide
    for table, t in sorted(effects.tables.items()):
        for r in t.updated:
            before, after = r.before or {}, r.after or {}
            changes = ", ".join(f"{k}: {_value(before.get(k))} -> {_value(after.get(k))}" for k in after)
            lines.append(f"updated {table}[{r.key}]: {changes}")
        lines += [f"deleted {table}[{r.key}]" for r in t.deleted]
    for table, t in sorted(effects.tables.items()):
        lines += [f"inserted {table}[{r.key}]: {_fields(r.after)}" for r in t.inserted]
    return lines


def check_text(effects: Effects) -> str:
    lines = render_effects(effects)
    shown = lines[:MAX_ROWS]
    more = [f"... and {len(lines) - MAX_ROWS} more changed rows"] if len(lines) > MAX_ROWS else []
    listing = "\n".join(f"- {x}" for x in [*shown, *more]) if lines else "(no record was changed)"
    return (
        "[tbx state check] Before this conversation ends, here is what your actions changed in the "
        f"records (against the state at the start):\n{listing}\n"
        "If this is everything the request needs, end again the same way to confirm. Otherwise "
        f"continue: you have up to {EXTRA_TURNS} more steps."
    )


async def check_turn(probe: EffectsProbe, index: int) -> tuple[UserTurn, dict[str, Any]]:
    """The state-check message as a user turn (source "harness") and what to record of it."""
    effects = await probe()
    return (
        UserTurn(index=index, source="harness", text=check_text(effects)),
        {"effects": effects.counts(), "rows": len(render_effects(effects))},
    )
