"""Salesforce CRM: engagement look-up and the staffing check (which reads
Mavenlink's assignment table)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from servers.domains.consulting.common import pick
from servers.engine.tools import ToolContext, ToolInput, tool


class CheckAssignmentInput(ToolInput):
    email: str = Field(description="Employee email address.")
    engagement_code: str = Field(description="Engagement code, e.g. ENG-0012345.")


class GetEngagementInput(ToolInput):
    engagement_code: str = Field(description="Engagement code, e.g. ENG-0012345.")


@tool(
    "salesforce_crm_check_employee_assignment",
    CheckAssignmentInput,
    "Tell whether an employee is staffed on an engagement, with the assignment's status and dates.",
    catch_all="Failed to check employee assignment",
)
def check_employee_assignment(ctx: ToolContext, args: CheckAssignmentInput) -> Any:
    row = ctx.db.first(
        "mavenlink_employee_assignments", employee_email=args.email, engagement_code=args.engagement_code
    )
    if row is None:
        return {"assigned": False}
    return {"assigned": True, **pick(row, ("assignment_status", "start_date", "end_date"))}


@tool(
    "salesforce_crm_get_engagement",
    GetEngagementInput,
    "Show a client engagement as recorded in the CRM: client, manager, status and dates.",
    catch_all="Failed to retrieve engagement details",
)
def get_engagement(ctx: ToolContext, args: GetEngagementInput) -> Any:
    row = ctx.db.require(
        "salesforce_crm_sf_engagements", args.engagement_code, f"Engagement not found: {args.engagement_code}"
    )
    return pick(
        row, ("engagement_code", "client_id", "engagement_manager_email", "status", "start_date", "end_date")
    )


TOOLS = (check_employee_assignment, get_engagement)
