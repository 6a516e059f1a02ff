"""Approver look-ups (read-only): a team's designated approver and an
approver's availability."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from servers.domains.neobank.common import EMPLOYEES, employee_by_id, require_employee
from servers.engine.helpers import drop_nulls
from servers.engine.tools import ToolContext, ToolError, ToolInput, tool

# Specialised teams whose most senior member is their designated approver.
APPROVER_TEAMS = ("it_security", "finance_accounting", "compliance_risk")

AVAILABILITY = {
    "active": "available",
    "on_leave": "on_leave",
    "departing": "available",
    "terminated": "unavailable",
}


class GetContactDetailsInput(ToolInput):
    email: str = Field(description="Corporate email of the approver.")


class GetApproverContactInput(ToolInput):
    required_approver: str = Field(
        description="Team whose approver is wanted: it_security, finance_accounting or compliance_risk."
    )


@tool(
    "approver_lookup_api_get_contact_details",
    GetContactDetailsInput,
    "Check whether an approver is available; for an approver on leave, also give a backup approver's email.",
)
def get_contact_details(ctx: ToolContext, args: GetContactDetailsInput) -> dict[str, Any]:
    emp = require_employee(ctx, args.email, "Approver not found")
    status = emp["employment_status"]
    backup = None
    if status == "on_leave" and emp["manager_id"]:
        manager = employee_by_id(ctx, emp["manager_id"])
        backup = manager["email"] if manager is not None else None
    return drop_nulls(
        {
            "name": emp["full_name"],
            "availability_status": AVAILABILITY[status],
            "backup_approver_email": backup,
        }
    )


@tool(
    "approver_lookup_api_get_approver_contact",
    GetApproverContactInput,
    "Find the designated approver (the most senior member) of a specialised team: "
    "it_security, finance_accounting or compliance_risk.",
)
def get_approver_contact(ctx: ToolContext, args: GetApproverContactInput) -> dict[str, Any]:
    department = args.required_approver.lower()
    if department not in APPROVER_TEAMS:
        raise ToolError(
            f"Invalid required_approver: {args.required_approver}. Must be one of: {', '.join(APPROVER_TEAMS)}"
        )
    members = ctx.db.find(EMPLOYEES, department=department)
    if not members:
        raise ToolError(f"No {department} team members found")
    top = max(m["level"] for m in members)
    approver = next(m for m in members if m["level"] == top)
    return {
        "employee_id": approver["id"],
        "contact_email": approver["email"],
        "contact_name": approver["full_name"],
    }


TOOLS = (get_contact_details, get_approver_contact)
