"""Customer data platform: customer profiles, memberships and reward points."""

from __future__ import annotations

import datetime as dt
from typing import Any, Literal

from pydantic import Field

from servers.domains.retail.common import MEMBERSHIPS, PROFILES, WRITE_TS, drop_nulls, empty, first_by_either
from servers.engine.helpers import out_dt
from servers.engine.tools import ToolContext, ToolError, ToolInput, tool

# A new membership runs from the start of the write day for 365 days, to the
# last microsecond of the final day.
MEMBERSHIP_START = WRITE_TS.replace(hour=0, minute=0, second=0, microsecond=0)
MEMBERSHIP_END = (MEMBERSHIP_START + dt.timedelta(days=365)).replace(
    hour=23, minute=59, second=59, microsecond=999999
)


class AddPointsToBalanceInput(ToolInput):
    customer_id: str = Field(description="Customer whose points balance changes.")
    points_to_add: int = Field(description="Points to credit (a negative number debits).")
    points_reason: Literal["refund_return", "service_recovery", "manual_adjustment"] = Field(
        description="Why the points are credited."
    )


@tool(
    "add_points_to_balance",
    AddPointsToBalanceInput,
    "Credit reward points to a customer's membership balance. The customer needs a membership record.",
    catch_all="Failed to add points to balance",
)
def add_points_to_balance(ctx: ToolContext, args: AddPointsToBalanceInput) -> dict[str, Any]:
    membership = ctx.db.require_first(
        MEMBERSHIPS,
        f"No membership record found for customer {args.customer_id}. "
        "Customer must have a membership record to receive points.",
        customer_id=args.customer_id,
    )
    old = membership["points_balance"]
    new = old + args.points_to_add
    ctx.db.update(MEMBERSHIPS, membership["id"], {"points_balance": new})
    return {
        "customer_id": args.customer_id,
        "old_balance": old,
        "points_added": args.points_to_add,
        "new_balance": new,
    }


class GetCustomerProfileInput(ToolInput):
    customer_id: str | None = Field(
        default=None, description="Customer id, e.g. CUS-10000001 (takes precedence)."
    )
    email: str | None = Field(default=None, description="Customer email, used when no customer id is given.")


@tool(
    "get_customer_profile",
    GetCustomerProfileInput,
    "Look up a customer's profile by id or email: contact details, tier, order history, lifetime "
    "value, score and behaviour segment.",
    catch_all="Failed to retrieve customer profile",
)
def get_customer_profile(ctx: ToolContext, args: GetCustomerProfileInput) -> dict[str, Any]:
    profile = first_by_either(
        ctx,
        PROFILES,
        ("customer_id", "id", args.customer_id),
        ("email", "email", args.email),
        "Customer not found with provided identifier",
    )
    return drop_nulls(
        {
            "id": profile["id"],
            "email": profile["email"],
            "name": profile["name"],
            "phone": profile["phone"],
            "registration_date": out_dt(profile["registration_date"]),
            "customer_tier": profile["customer_tier"],
            "lifetime_value": profile["lifetime_value"],
            "total_orders": profile["total_orders"],
            "customer_score": profile["customer_score"],
            "behavioral_segment": profile["behavioral_segment"],
            "acquisition_source": profile["acquisition_source"],
            "discount_usage_rate": profile["discount_usage_rate"],
        }
    )


class GetMembershipDetailsInput(ToolInput):
    customer_id: str = Field(description="Customer id, e.g. CUS-10000001.")


@tool(
    "get_membership_details",
    GetMembershipDetailsInput,
    "Show a customer's active membership: type, start and end dates, status and points balance.",
    catch_all="Failed to retrieve membership details",
)
def get_membership_details(ctx: ToolContext, args: GetMembershipDetailsInput) -> dict[str, Any]:
    membership = ctx.db.require_first(
        MEMBERSHIPS,
        f"No active membership found for customer: {args.customer_id}",
        customer_id=args.customer_id,
        status="active",
    )
    return {
        "membership_id": membership["id"],
        "customer_id": membership["customer_id"],
        "membership_type": membership["membership_type"],
        "start_date": out_dt(membership["start_date"]),
        "end_date": out_dt(membership["end_date"]),
        "status": membership["status"],
        "points_balance": membership["points_balance"],
    }


class UpdateMembershipStatusInput(ToolInput):
    customer_id: str = Field(description="Customer whose membership changes.")
    action: Literal["upgrade", "cancel"] = Field(
        description="Start a paid membership, or cancel the current one."
    )
    membership_type: str | None = Field(
        default=None, description="Membership to start (needed to upgrade), e.g. plus."
    )


@tool(
    "update_membership_status",
    UpdateMembershipStatusInput,
    "Upgrade a customer to a paid one-year membership (new record, tier becomes plus member) or "
    "cancel their membership (tier returns to standard).",
    catch_all="Failed to update membership status",
)
def update_membership_status(ctx: ToolContext, args: UpdateMembershipStatusInput) -> dict[str, Any]:
    profile = ctx.db.require_first(PROFILES, f"Customer not found: {args.customer_id}", id=args.customer_id)
    if args.action == "upgrade":
        if empty(args.membership_type):
            raise ToolError("membership_type is required when action is upgrade")
        membership_id = ctx.db.first_free_id(MEMBERSHIPS, "MEM-2%07d", 1)
        ctx.db.insert(
            MEMBERSHIPS,
            {
                "id": membership_id,
                "customer_id": args.customer_id,
                "membership_type": args.membership_type,
                "start_date": MEMBERSHIP_START,
                "end_date": MEMBERSHIP_END,
                "status": "active",
                "points_balance": 0,
            },
        )
        ctx.db.update(PROFILES, profile["id"], {"customer_tier": "plus_member"})
        return {
            "customer_id": args.customer_id,
            "membership_id": membership_id,
            "new_tier": "plus_member",
            "action_completed": "upgraded",
            "start_date": out_dt(MEMBERSHIP_START),
            "end_date": out_dt(MEMBERSHIP_END),
        }
    membership = ctx.db.require_first(
        MEMBERSHIPS,
        f"No membership record found for customer: {args.customer_id}",
        customer_id=args.customer_id,
    )
    ctx.db.update(MEMBERSHIPS, membership["id"], {"status": "cancelled"})
    ctx.db.update(PROFILES, profile["id"], {"customer_tier": "standard"})
    return drop_nulls(
        {"customer_id": args.customer_id, "new_tier": "standard", "action_completed": "cancelled"}
    )


TOOLS = (add_points_to_balance, get_customer_profile, get_membership_details, update_membership_status)
