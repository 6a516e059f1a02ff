"""Workday: the employee directory."""

from __future__ import annotations

import enum
from typing import Any

from pydantic import Field

from servers.domains.consulting.common import action, api_tool, opt, pick
from servers.engine.tools import ToolContext, ToolInput

EMPLOYEE_FIELDS = (
    "email",
    "name",
    "level",
    "office_location",
    "start_date",
    "manager_email",
    "partner_email",
    "onboarding_phase",
    "availability_status",
    "backup_approver_email",
)


class WorkdayAction(enum.StrEnum):
    # A one-member enum (a one-value Literal would advertise `const`, not `enum`).
    GET_EMPLOYEE = "get_employee"


class WorkdayInput(ToolInput):
    action: WorkdayAction = Field(description="What to do.")
    email: str | None = opt("Employee email address (needed by get_employee).")


@action("email")
def get_employee(ctx: ToolContext, args: Any) -> Any:
    row = ctx.db.require("workday_employees", args.email, f"Employee not found: {args.email}")
    return {"employee_data": pick(row, EMPLOYEE_FIELDS)}


TOOLS = (
    api_tool(
        "workday_api",
        WorkdayInput,
        "HR directory. get_employee: an employee's level, office, start date, manager, partner, "
        "onboarding phase and availability.",
        "Workday",
        {"get_employee": get_employee},
    ),
)
