"""Software catalog: search by name fragment and look up one entry."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from servers.domains.consulting.common import pick
from servers.engine.tools import ToolContext, ToolError, ToolInput, tool

TABLE = "software_catalog_software_catalog"
FIELDS = ("id", "name", "annual_cost", "pool_type")


class GetDetailsInput(ToolInput):
    catalog_id: str = Field(description="Catalog entry id, e.g. CAT-0012345.")


class SearchInput(ToolInput):
    software_name: str = Field(description="Part of the software's name (case-insensitive).")


@tool(
    "software_catalog_get_details",
    GetDetailsInput,
    "Show one software catalog entry: name, yearly cost per seat and license pool.",
    catch_all="Failed to retrieve software details",
)
def get_details(ctx: ToolContext, args: GetDetailsInput) -> Any:
    row = ctx.db.require(TABLE, args.catalog_id, f"Software not found in catalog: {args.catalog_id}")
    return pick(row, FIELDS)


@tool(
    "software_catalog_search",
    SearchInput,
    "Find catalog software whose name contains the given text.",
    catch_all="Failed to search software catalog",
)
def search(ctx: ToolContext, args: SearchInput) -> Any:
    needle = args.software_name.lower()
    results = [pick(r, FIELDS) for r in ctx.db.all(TABLE) if needle in r["name"].lower()]
    if not results:
        raise ToolError(f"No matching software found in catalog for: {args.software_name}")
    return {"results": results}


TOOLS = (get_details, search)
