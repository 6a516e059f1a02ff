"""Per-domain differences of the Zendesk toolset, as one small config object
per variant (the tools themselves are shared, see `servers.toolsets.zendesk.tools`)."""

from __future__ import annotations

from dataclasses import dataclass

from servers.engine.schema import FieldSpec
from servers.toolsets.zendesk.tables import TICKET_FIELDS

# Tags the travel desk never stores on a ticket (compared case-insensitively).
TRAVEL_IGNORED_TAGS = frozenset({"vip-customer", "repeat-issue", "hotel-partner-escalation"})


@dataclass(frozen=True)
class Variant:
    name: str
    # Custom ticket fields appended after `due_at`, in model order (the
    # `zendesk_tickets` table, seed validation and the create/update inputs).
    ticket_fields: tuple[FieldSpec, ...] = ()
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

AUTO_INSURANCE = Variant(
    name="auto_insurance",
    ticket_fields=TICKET_FIELDS["auto_insurance"],
    status_violations=True,
)

CONSULTING = Variant(
    name="consulting",
    ticket_fields=TICKET_FIELDS["consulting"],
    status_violations=True,
)

NEOBANK = Variant(
    name="neobank",
    ticket_fields=TICKET_FIELDS["neobank"],
    csv_lists=True,
    status_violations=True,
)

TRAVEL = Variant(
    name="travel",
    ticket_fields=TICKET_FIELDS["travel"],
    travel_tags=True,
)

VARIANT_CONFIGS: dict[str, Variant] = {
    v.name: v for v in (GENERIC, AUTO_INSURANCE, CONSULTING, NEOBANK, TRAVEL)
}
