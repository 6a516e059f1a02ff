"""crm_api: customer profiles."""

from __future__ import annotations

import datetime as dt
from typing import Any

from pydantic import Field

from servers.domains.travel.common import CRM_UPDATED_AT, PROFILES, compact
from servers.engine.helpers import LaxInput
from servers.engine.tools import Tool, ToolContext, ToolError, ToolInput, tool


def _profile_by_id(ctx: ToolContext, customer_id: str) -> dict[str, Any]:
    if not customer_id.strip():
        raise ToolError("Invalid customer_id parameter.")
    row = ctx.db.require_first(PROFILES, "Customer not found.", customer_id=customer_id)
    return row


class CustomerIdInput(LaxInput):
    customer_id: str = Field(description="Customer id, e.g. CUS-00012345.")


@tool(
    "crm_api_check_vip_status",
    CustomerIdInput,
    "Return a customer's VIP tier and loyalty programme status.",
)
def check_vip_status(ctx: ToolContext, args: CustomerIdInput) -> dict[str, Any]:
    row = _profile_by_id(ctx, args.customer_id)
    out: dict[str, Any] = {"vip_tier": row["vip_tier"]}
    if row["loyalty_program_status"] is not None:
        out["loyalty_program_status"] = row["loyalty_program_status"]
    return out


@tool(
    "crm_api_get_customer_preferences",
    CustomerIdInput,
    "Return a customer's stored stay preferences and service notes.",
)
def get_customer_preferences(ctx: ToolContext, args: CustomerIdInput) -> dict[str, Any]:
    row = _profile_by_id(ctx, args.customer_id)
    return {"preferences": list(row["preferences"]), "special_notes": list(row["special_notes"])}


class CustomerProfileInput(LaxInput):
    customer_id: str | None = Field(default=None, description="Customer id; takes precedence over email.")
    email: str | None = Field(default=None, description="Customer e-mail address (any letter case).")


@tool(
    "crm_api_get_customer_profile",
    CustomerProfileInput,
    "Fetch a customer's CRM profile by customer id or by e-mail address.",
)
def get_customer_profile(ctx: ToolContext, args: CustomerProfileInput) -> dict[str, Any]:
    if not args.customer_id and not args.email:
        raise ToolError("Invalid parameters: provide customer_id or email.")
    if args.customer_id:
        row = ctx.db.first(PROFILES, customer_id=args.customer_id)
    else:
        wanted = (args.email or "").lower()
        row = next((r for r in ctx.db.all(PROFILES) if r["email"].lower() == wanted), None)
    if row is None:
        raise ToolError("Customer not found.")
    return {"customer_data": compact(ctx, PROFILES, row)}


class UpdateCustomerInput(ToolInput):
    customer_id: str = Field(description="Customer id of the profile to update.")
    email: str | None = Field(default=None, description="New e-mail address.")
    full_name: str | None = Field(default=None, description="New full name.")
    preferences: list[str] | None = Field(default=None, description="Replacement list of preferences.")
    special_notes: list[str] | None = Field(default=None, description="Replacement list of service notes.")
    complaint_count: int | None = Field(default=None, description="New complaint count.")
    loyalty_program_status: str | None = Field(default=None, description="New loyalty programme status.")
    last_booking_date: dt.datetime | None = Field(
        default=None, description="Date/time of the latest booking."
    )


_UPDATABLE = (
    "email",
    "full_name",
    "preferences",
    "special_notes",
    "complaint_count",
    "loyalty_program_status",
    "last_booking_date",
)


@tool(
    "crm_api_update_customer_info",
    UpdateCustomerInput,
    "Update fields of a customer's CRM profile; only the fields given are changed.",
)
def update_customer_info(ctx: ToolContext, args: UpdateCustomerInput) -> dict[str, Any]:
    if not args.customer_id.strip():
        raise ToolError("Invalid customer_id parameter.")
    changes = {name: getattr(args, name) for name in _UPDATABLE if getattr(args, name) is not None}
    if not changes:
        raise ToolError("Invalid update_fields parameter.")
    row = ctx.db.require_first(PROFILES, "Customer not found.", customer_id=args.customer_id)
    ctx.db.replace(
        PROFILES, ctx.db.spec(PROFILES).key_of(row), {**row, **changes, "updated_at": CRM_UPDATED_AT}
    )
    return {"success": True, "updated_fields": list(changes)}


TOOLS: tuple[Tool, ...] = (
    check_vip_status,
    get_customer_preferences,
    get_customer_profile,
    update_customer_info,
)
