"""Okta: single sign-on application grants."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from servers.domains.consulting.common import SUCCESS, new_id
from servers.engine.tools import ToolContext, ToolInput, tool

AccessType = Literal["full_access", "read_only", "contributor", "admin"]


class ProvisionAccessInput(ToolInput):
    email: str = Field(description="Employee email address.")
    app_name: str = Field(description="Application to grant through SSO.")
    access_type: AccessType | None = Field(
        default=None, description="Access level; full_access when left out."
    )


@tool(
    "okta_provision_access",
    ProvisionAccessInput,
    "Grant an employee an application through single sign-on (records the grant).",
    catch_all="Failed to provision access",
)
def provision_access(ctx: ToolContext, args: ProvisionAccessInput) -> Any:
    table = "okta_application_access_logs"
    ctx.db.insert(
        table,
        {
            "id": new_id(ctx, table, "AAL"),
            "employee_email": args.email,
            "app_name": args.app_name,
            "access_type": args.access_type or "full_access",
        },
    )
    return SUCCESS


TOOLS = (provision_access,)
