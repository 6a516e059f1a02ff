"""lookup: find ids from partial information. These read the booking,
corporate and hotel tables; the `lookup_*` tables themselves stay untouched."""

from __future__ import annotations

import re
from typing import Any

from pydantic import Field

from servers.domains.travel.common import ACCOUNTS, BOOKINGS, GROUPS, HOTELS
from servers.engine.helpers import LaxInput
from servers.engine.tools import Tool, ToolContext, ToolError, tool

_BOOKING_REFERENCE = re.compile(r"BKG-\d{8}")


class CorporateLookupInput(LaxInput):
    company_name: str | None = Field(default=None, description="All or part of the company name.")
    customer_email: str | None = Field(
        default=None, description="An e-mail address at the company; its domain is matched."
    )


@tool(
    "lookup_lookup_corporate_account_id",
    CorporateLookupInput,
    "Find a corporate account id from the company name or from an e-mail address at the company.",
)
def lookup_corporate_account_id(ctx: ToolContext, args: CorporateLookupInput) -> dict[str, Any]:
    if not args.company_name and not args.customer_email:
        raise ToolError("Invalid parameters: provide company_name or customer_email.")
    accounts = ctx.db.all(ACCOUNTS)
    matches: list[dict[str, Any]] = []
    if args.company_name:
        wanted = args.company_name.lower()
        matches = [a for a in accounts if wanted in a["company_name"].lower()]
    if args.customer_email:
        if "@" not in args.customer_email:
            raise ToolError("Invalid email format.")
        domain = args.customer_email.split("@", 1)[1].lower()
        seen = {a["id"] for a in matches}
        for account in accounts:
            if account["contact_email"].rsplit("@", 1)[-1].lower() == domain and account["id"] not in seen:
                matches.append(account)
                seen.add(account["id"])
    if not matches:
        raise ToolError("No corporate account found matching criteria.")
    best = matches[0]
    return {
        "corporate_account_id": best["corporate_account_id"],
        "company_name": best["company_name"],
        "account_tier": best["account_tier"],
    }


class GroupLookupInput(LaxInput):
    booking_reference: str | None = Field(default=None, description="A booking that belongs to the group.")
    coordinator_email: str | None = Field(default=None, description="The group coordinator's e-mail address.")


@tool(
    "lookup_lookup_group_booking_id",
    GroupLookupInput,
    "Find the group booking a booking belongs to, or the group run by a coordinator's e-mail.",
)
def lookup_group_booking_id(ctx: ToolContext, args: GroupLookupInput) -> dict[str, Any]:
    if not args.booking_reference and not args.coordinator_email:
        raise ToolError("Invalid parameters: provide booking_reference or coordinator_email.")
    group = None
    if args.booking_reference:
        booking = ctx.db.first(BOOKINGS, booking_reference=args.booking_reference)
        if booking is not None and booking["group_booking_id"]:
            group = ctx.db.first(GROUPS, group_booking_id=booking["group_booking_id"])
    if group is None and args.coordinator_email:
        wanted = args.coordinator_email.lower()
        group = next((g for g in ctx.db.all(GROUPS) if g["coordinator_email"].lower() == wanted), None)
    if group is None:
        raise ToolError("No group booking found matching criteria or booking is not part of a group.")
    return {
        "group_booking_id": group["group_booking_id"],
        "total_rooms": group["total_rooms"],
        "coordinator_contact": f"{group['coordinator_name']} <{group['coordinator_email']}>",
    }


class HotelLookupInput(LaxInput):
    hotel_name: str | None = Field(default=None, description="All or part of the hotel name.")
    location: str | None = Field(default=None, description="All or part of the city.")


@tool(
    "lookup_lookup_hotel_id",
    HotelLookupInput,
    "Find hotel ids by (part of) the hotel name or the city; either match is enough.",
)
def lookup_hotel_id(ctx: ToolContext, args: HotelLookupInput) -> dict[str, Any]:
    if not args.hotel_name and not args.location:
        raise ToolError("Invalid parameters: provide hotel_name or location.")
    name = (args.hotel_name or "").lower()
    place = (args.location or "").lower()
    results = [
        {"hotel_id": h["hotel_id"], "hotel_name": h["hotel_name"], "location": h["location"]}
        for h in ctx.db.all(HOTELS)
        if (name and name in h["hotel_name"].lower()) or (place and place in h["location"].lower())
    ]
    if not results:
        raise ToolError("No hotels found matching criteria.")
    return {"results": results}


class ValidateReferenceInput(LaxInput):
    booking_reference: str = Field(description="Reference to check, format BKG- followed by 8 digits.")


@tool(
    "lookup_validate_booking_reference",
    ValidateReferenceInput,
    "Check that a booking reference is well formed and exists; returns the booking's record id.",
)
def validate_booking_reference(ctx: ToolContext, args: ValidateReferenceInput) -> dict[str, Any]:
    if _BOOKING_REFERENCE.fullmatch(args.booking_reference) is None:
        raise ToolError("Invalid booking reference format.")
    booking = ctx.db.first(BOOKINGS, booking_reference=args.booking_reference)
    if booking is None:
        return {"is_valid": False}
    return {"is_valid": True, "booking_id": booking["id"]}


TOOLS: tuple[Tool, ...] = (
    lookup_corporate_account_id,
    lookup_group_booking_id,
    lookup_hotel_id,
    validate_booking_reference,
)
