"""Per-domain differences of the Zendesk toolset, as one small config object
per variant (the tools themselves are shared, see `servers.zendesk.tools`)."""

from __future__ import annotations

import functools
import importlib
from dataclasses import dataclass

# A custom ticket field of a variant: (name, kind) where kind is "str",
# "float" or a tuple (enum class name, allowed values).
EnumKind = tuple[str, tuple[str, ...]]
FieldDef = tuple[str, "str | EnumKind"]


def custom_ticket_fields(domain: str) -> tuple[FieldDef, ...]:
    """The domain's custom ticket fields, read from its generated table metadata:
    the `zendesk_tickets` fields after `due_at`, in order (one source for the
    table, the seed validation and the create/update tool inputs)."""
    tables = importlib.import_module(f"servers.{domain}.tables").TABLES
    spec = next(t for t in tables if t.name == "zendesk_tickets")
    names = [fs.name for fs in spec.fields]
    custom = spec.fields[names.index("due_at") + 1 :]
    return tuple(
        (fs.name, (fs.enum_name or fs.name, fs.enum_values) if fs.kind == "enum" else fs.kind)
        for fs in custom
    )


# Tags the travel desk never stores on a ticket (compared case-insensitively).
TRAVEL_IGNORED_TAGS = frozenset({"vip-customer", "repeat-issue", "hotel-partner-escalation"})


@dataclass(frozen=True)
class Variant:
    name: str
    # Custom ticket fields appended after `due_at`, in model order.
    ticket_fields: tuple[FieldDef, ...] = ()
    # Ticket `tags` / organization `domain_names` arrive as comma-separated text.
    csv_lists: bool = False
    # Update: an explicit null for a list field empties the list (else nulls are skipped).
    null_clears_lists: bool = False
    # Create: a ticket whose status is not `open` is logged in the violations table.
    status_violations: bool = False
    # Travel: ignored tags dropped + case-insensitive tag sort, refund default,
    # replies echo the caller's tags.
    travel_tags: bool = False
    # `ne`, `ge`, `le` are understood by $filter (the generic copy only knows eq/gt/lt).
    full_comparisons: bool = True


GENERIC = Variant(name="generic", null_clears_lists=True, full_comparisons=False)

# Built on first use: a variant reads its domain's table metadata, and a server
# container of one domain should not import the other four domains' tables.
_DOMAIN_VARIANTS: dict[str, dict[str, bool]] = {
    "auto_insurance": {"status_violations": True},
    "consulting": {"status_violations": True},
    "neobank": {"csv_lists": True, "status_violations": True},
    "travel": {"travel_tags": True},
}


@functools.cache
def variant_config(name: str) -> Variant:
    if name == GENERIC.name:
        return GENERIC
    return Variant(name=name, ticket_fields=custom_ticket_fields(name), **_DOMAIN_VARIANTS[name])
