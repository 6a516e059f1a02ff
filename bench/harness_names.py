"""The names of the harness interventions (bench.rollout.harness) and their
parsing. In bench's lowest layer and importing nothing, so the models config
(bench.llm.config) can validate its `harness:` with it."""

from __future__ import annotations

from collections.abc import Iterable

ERROR_HINTS = "error-hints"
STATE_CHECK = "state-check"
APPROVAL = "approval"
# every intervention tbx implements, in the order their names are recorded
HARNESS_NAMES: tuple[str, ...] = (ERROR_HINTS, STATE_CHECK, APPROVAL)
# described in docs/harness.md, not implemented yet: named so the error says so
PLANNED: tuple[str, ...] = ()


class HarnessError(ValueError):
    """An unknown or unavailable intervention name."""


def parse_harness(value: str | Iterable[str] | None) -> tuple[str, ...]:
    """Names from "a,b", a list, or None; deduplicated, in HARNESS_NAMES order."""
    if value is None:
        return ()
    items = value.split(",") if isinstance(value, str) else list(value)
    names = []
    for raw in items:
        if not isinstance(raw, str):
            raise HarnessError(f"harness names are strings, got {raw!r}")
        name = raw.strip()
        if not name:
            continue
        if name in PLANNED:
            raise HarnessError(
                f"harness {name!r} is not implemented yet (available: {', '.join(HARNESS_NAMES)})"
            )
        if name not in HARNESS_NAMES:
            raise HarnessError(f"unknown harness {name!r}: use one of {', '.join(HARNESS_NAMES)}")
        names.append(name)
    return tuple(n for n in HARNESS_NAMES if n in names)
