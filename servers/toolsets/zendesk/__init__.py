"""The Zendesk toolset (7 tools) and its tables, with their per-domain variants."""

from __future__ import annotations

import functools

from servers.engine.schema import TableSpec
from servers.engine.tools import Tool

VARIANTS = ("generic", "auto_insurance", "consulting", "neobank", "travel")


def _check(variant: str) -> None:
    if variant not in VARIANTS:
        raise ValueError(f"unknown Zendesk variant {variant!r}")


@functools.cache
def zendesk_tools(variant: str) -> tuple[Tool, ...]:
    """The seven `zendesk_*` tools of one variant, in listing order."""
    _check(variant)
    from servers.toolsets.zendesk.tools import build_tools
    from servers.toolsets.zendesk.variants import VARIANT_CONFIGS

    return build_tools(VARIANT_CONFIGS[variant])


@functools.cache
def zendesk_tables(variant: str) -> tuple[TableSpec, ...]:
    """The `zendesk_*` tables of one variant, in registration order: the shared
    tables, `zendesk_tickets` with the variant's custom fields, and the
    status-violations log first for the variants that keep one."""
    _check(variant)
    from servers.toolsets.zendesk.tables import STATUS_VIOLATIONS, TABLES
    from servers.toolsets.zendesk.variants import VARIANT_CONFIGS

    config = VARIANT_CONFIGS[variant]
    tables = tuple(
        t.model_copy(update={"fields": t.fields + config.ticket_fields}) if t.name == "zendesk_tickets" else t
        for t in TABLES
    )
    return (STATUS_VIOLATIONS, *tables) if config.status_violations else tables
