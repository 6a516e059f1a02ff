"""License management: pool availability, allocation and cost."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from servers.domains.consulting.common import SUCCESS, action, api_tool, new_id, opt
from servers.engine.tools import ToolContext, ToolInput

POOLS = "license_management_license_pool_record"
ALLOCATIONS = "license_management_license_allocation"
UNLIMITED = 99999


class LicenseInput(ToolInput):
    action: Literal["check_availability", "allocate", "get_cost"] = Field(description="What to do.")
    catalog_id: str | None = opt("Software catalog id (all actions).")
    pool_type: Literal["standard", "enterprise"] | None = opt("License pool (check_availability, allocate).")
    email: str | None = opt("Employee email address (allocate).")
    engagement_code: str | None = opt("Engagement to charge the license to (allocate, optional).")


@action("catalog_id", "pool_type")
def check_availability(ctx: ToolContext, args: Any) -> Any:
    pool = ctx.db.require_first(
        POOLS,
        f"License pool not found for catalog_id={args.catalog_id}, pool_type={args.pool_type}",
        catalog_id=args.catalog_id,
        pool_type=args.pool_type,
    )
    if pool["total_licenses"] is None:
        return {"available_count": UNLIMITED}
    in_use = [
        r
        for r in ctx.db.find(ALLOCATIONS, catalog_id=args.catalog_id, pool_type=args.pool_type)
        if r["deallocated_at"] is None
    ]
    return {"available_count": pool["total_licenses"] - len(in_use)}


@action("catalog_id", "email", "pool_type")
def allocate(ctx: ToolContext, args: Any) -> Any:
    ctx.db.insert(
        ALLOCATIONS,
        {
            "id": new_id(ctx, ALLOCATIONS, "LIC"),
            "catalog_id": args.catalog_id,
            "employee_email": args.email,
            "engagement_code": args.engagement_code,
            "pool_type": args.pool_type,
        },
    )
    return SUCCESS


@action("catalog_id")
def get_cost(ctx: ToolContext, args: Any) -> Any:
    row = ctx.db.require(
        "software_catalog_software_catalog",
        args.catalog_id,
        f"Software catalog entry not found: {args.catalog_id}",
    )
    return {"annual_cost": row["annual_cost"]}


TOOLS = (
    api_tool(
        "license_management_api",
        LicenseInput,
        "Software licenses. check_availability: free seats in a pool; allocate: give an employee a "
        "seat; get_cost: yearly cost of a catalog item.",
        "License Management",
        {"check_availability": check_availability, "allocate": allocate, "get_cost": get_cost},
    ),
)
