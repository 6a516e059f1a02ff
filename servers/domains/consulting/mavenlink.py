"""Mavenlink: engagements and staffing assignments."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from servers.domains.consulting.common import action, api_tool, opt, pick
from servers.engine.tools import ToolContext, ToolInput


class MavenlinkInput(ToolInput):
    action: Literal["get_engagement", "get_employee_assignments", "validate_engagement_code"] = Field(
        description="What to do."
    )
    engagement_code: str | None = opt("Engagement code (get_engagement, validate_engagement_code).")
    email: str | None = opt("Employee email address (get_employee_assignments).")


@action("engagement_code")
def get_engagement(ctx: ToolContext, args: Any) -> Any:
    row = ctx.db.require(
        "mavenlink_mv_engagements", args.engagement_code, f"Engagement not found: {args.engagement_code}"
    )
    fields = ("engagement_code", "status", "start_date", "end_date", "senior_manager_email")
    return {"engagement_data": pick(row, fields)}


@action("email")
def get_employee_assignments(ctx: ToolContext, args: Any) -> Any:
    fields = ("engagement_code", "assignment_status", "start_date", "end_date", "senior_manager_email")
    rows = ctx.db.find("mavenlink_employee_assignments", employee_email=args.email)
    return {"assignments": [pick(r, fields) for r in rows if r["assignment_status"] in ("active", "booked")]}


@action("engagement_code")
def validate_engagement_code(ctx: ToolContext, args: Any) -> Any:
    return {"valid": ctx.db.exists("mavenlink_mv_engagements", args.engagement_code)}


TOOLS = (
    api_tool(
        "mavenlink_api",
        MavenlinkInput,
        "Project staffing system. get_engagement: an engagement's status, dates and senior manager; "
        "get_employee_assignments: an employee's current and booked assignments; "
        "validate_engagement_code: whether an engagement code exists.",
        "Mavenlink",
        {
            "get_engagement": get_engagement,
            "get_employee_assignments": get_employee_assignments,
            "validate_engagement_code": validate_engagement_code,
        },
    ),
)
