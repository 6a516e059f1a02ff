"""Background checks, kept in the client-access clearance records."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from servers.domains.consulting.common import SUCCESS, action, api_tool, opt
from servers.engine.tools import ToolContext, ToolInput

TABLE = "client_access_clearance_record"
ESTIMATED_DAYS = {"standard": 14, "high_security": 28}


class BackgroundCheckInput(ToolInput):
    action: Literal["get_status", "initiate", "get_timeline"] = Field(description="What to do.")
    email: str | None = opt("Employee email address (get_status, initiate).")
    clearance_level: Literal["standard", "high_security"] | None = opt(
        "Clearance level (initiate, get_timeline)."
    )


@action("email")
def get_status(ctx: ToolContext, args: Any) -> Any:
    row = ctx.db.first(TABLE, employee_email=args.email)
    if row is None:
        return {"clearance_data": {"clearance_level": "standard", "status": "not_initiated"}}
    return {"clearance_data": {"clearance_level": row["clearance_level"], "status": row["status"]}}


@action("email", "clearance_level")
def initiate(ctx: ToolContext, args: Any) -> Any:
    ctx.db.upsert(
        TABLE,
        {"employee_email": args.email, "clearance_level": args.clearance_level, "status": "in_progress"},
    )
    return SUCCESS


@action("clearance_level")
def get_timeline(ctx: ToolContext, args: Any) -> Any:
    return {"estimated_days": ESTIMATED_DAYS[args.clearance_level]}


TOOLS = (
    api_tool(
        "background_check_api",
        BackgroundCheckInput,
        "Security clearance checks. get_status: an employee's clearance level and state; initiate: start "
        "(or restart) a check at a level; get_timeline: typical duration in days for a level.",
        "Background Check",
        {"get_status": get_status, "initiate": initiate, "get_timeline": get_timeline},
    ),
)
