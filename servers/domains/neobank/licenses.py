"""Software licence pools and allocations."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from servers.domains.neobank.common import (
    LICENSE_ALLOCATIONS,
    SOFTWARE_LICENSES,
    SYSTEM_ACTOR,
    require_employee,
)
from servers.engine.helpers import LaxInput, count_id, drop_nulls
from servers.engine.tools import ToolContext, ToolError, tool

UNLIMITED = "unlimited"


class LicenseAllocateInput(LaxInput):
    software_name: str = Field(description="Name of the software (case-insensitive).")
    email: str = Field(description="Corporate email of the employee receiving the seat.")


class LicenseCheckAvailabilityInput(LaxInput):
    software_name: str = Field(description="Name of the software (case-insensitive).")


class LicenseCheckTypeInput(LaxInput):
    software_name: str = Field(description="Name of the software (case-insensitive).")


def find_software(ctx: ToolContext, name: str) -> dict[str, Any] | None:
    """First licence pool whose name equals `name` ignoring case."""
    wanted = name.lower()
    return next(
        (row for row in ctx.db.all(SOFTWARE_LICENSES) if row["software_name"].lower() == wanted), None
    )


def active_allocations(ctx: ToolContext, license_id: str) -> int:
    return len(ctx.db.find(LICENSE_ALLOCATIONS, license_id=license_id, is_active=True))


@tool(
    "license_management_api_allocate_license",
    LicenseAllocateInput,
    "Assign a seat of a software licence pool to an employee, if the pool has a free seat.",
)
def allocate_license(ctx: ToolContext, args: LicenseAllocateInput) -> dict[str, Any]:
    emp = require_employee(ctx, args.email)
    pool = find_software(ctx, args.software_name)
    if pool is None:
        raise ToolError(f"Software not found: {args.software_name}")
    if ctx.db.first(LICENSE_ALLOCATIONS, license_id=pool["id"], employee_id=emp["id"], is_active=True):
        raise ToolError(f"Employee already has a license for this software: {args.software_name}")
    if pool["license_type"] != UNLIMITED and active_allocations(ctx, pool["id"]) >= (
        pool["total_licenses"] or 0
    ):
        raise ToolError("No licenses available in pool")
    allocation_id = count_id(ctx.db, LICENSE_ALLOCATIONS, "LAL-%08d")
    ctx.db.insert(
        LICENSE_ALLOCATIONS,
        {
            "id": allocation_id,
            "license_id": pool["id"],
            "employee_id": emp["id"],
            "allocated_at": None,
            "allocated_by": SYSTEM_ACTOR,
            "is_active": True,
            "deallocated_at": None,
        },
    )
    return {"allocation_id": allocation_id}


@tool(
    "license_management_api_check_availability",
    LicenseCheckAvailabilityInput,
    "Report how many seats of a software licence pool are free out of its total.",
)
def check_availability(ctx: ToolContext, args: LicenseCheckAvailabilityInput) -> dict[str, Any]:
    pool = find_software(ctx, args.software_name)
    if pool is None:
        raise ToolError(f"Software not found in license inventory: {args.software_name}")
    if pool["license_type"] == UNLIMITED:
        return {"license_type": UNLIMITED}
    total = pool["total_licenses"] or 0
    available = max(0, total - active_allocations(ctx, pool["id"]))
    return {"available_licenses": available, "total_licenses": total, "license_type": pool["license_type"]}


@tool(
    "license_management_api_check_license_type",
    LicenseCheckTypeInput,
    "Tell which kind of licence a software uses (standard, enterprise, individual or unlimited) and its yearly cost.",
)
def check_license_type(ctx: ToolContext, args: LicenseCheckTypeInput) -> dict[str, Any]:
    pool = find_software(ctx, args.software_name)
    if pool is None:
        raise ToolError(f"Software not found in license inventory: {args.software_name}")
    return drop_nulls(
        {
            "license_type": pool["license_type"],
            "license_id": pool["id"],
            "annual_cost_per_license": pool["annual_cost_per_license"],
        }
    )


TOOLS = (allocate_license, check_availability, check_license_type)
