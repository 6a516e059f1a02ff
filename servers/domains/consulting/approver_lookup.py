"""Approver look-up: availability and backup of an approver (from Workday)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from servers.domains.consulting.common import pick
from servers.engine.tools import ToolContext, ToolInput, tool


class GetContactInput(ToolInput):
    email: str = Field(description="Approver's email address.")


@tool(
    "approver_lookup_get_contact",
    GetContactInput,
    "Show an approver's name, whether they are available and who backs them up.",
    catch_all="Failed to retrieve approver contact",
)
def get_contact(ctx: ToolContext, args: GetContactInput) -> Any:
    row = ctx.db.require("workday_employees", args.email, f"Approver not found: {args.email}")
    return pick(row, ("email", "name", "availability_status", "backup_approver_email"))


TOOLS = (get_contact,)
