"""The Zendesk toolset (7 tools) with its per-domain variants."""

from __future__ import annotations

import functools

from servers.engine.tools import Tool

VARIANTS = ("generic", "auto_insurance", "consulting", "neobank", "travel")


@functools.cache
def zendesk_tools(variant: str) -> tuple[Tool, ...]:
    """The seven `zendesk_*` tools of one variant, in listing order."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown Zendesk variant {variant!r}")
    from servers.zendesk.tools import build_tools
    from servers.zendesk.variants import variant_config

    return build_tools(variant_config(variant))
