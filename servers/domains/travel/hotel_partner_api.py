"""hotel_partner_api: partner hotels, their contacts, and escalations to them."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from servers.domains.travel.common import (
    BOOKINGS,
    ESCALATED_AT,
    HOTELS,
    INVENTORY,
    TICKETS,
    BoardType,
    EscalationReason,
    RoomType,
    compact,
)
from servers.engine.helpers import LaxInput, drop_nulls
from servers.engine.tools import Tool, ToolContext, ToolInput, tool


def _hotel(ctx: ToolContext, hotel_id: str) -> dict[str, Any]:
    row = ctx.db.require_first(HOTELS, f"Hotel not found: {hotel_id}", hotel_id=hotel_id)
    return row


class HotelInput(LaxInput):
    hotel_id: str = Field(description="Hotel id, e.g. HTL-00012345.")


class EscalateInput(ToolInput):
    hotel_id: str = Field(description="Hotel the issue is escalated to.")
    booking_reference: str = Field(description="Booking the issue is about.")
    issue_type: EscalationReason = Field(description="Why the hotel has to be involved.")
    description: str = Field(description="What the hotel needs to know or confirm.")


@tool(
    "hotel_partner_api_escalate_to_hotel",
    EscalateInput,
    "Escalate a booking issue to the partner hotel: opens a high-priority escalation ticket and "
    "returns it with the hotel's escalation contact.",
)
def escalate_to_hotel(ctx: ToolContext, args: EscalateInput) -> dict[str, Any]:
    hotel = ctx.db.require_first(HOTELS, f"Hotel '{args.hotel_id}' not found.", hotel_id=args.hotel_id)
    booking = ctx.db.require_first(
        BOOKINGS, f"Booking '{args.booking_reference}' not found.", booking_reference=args.booking_reference
    )
    ticket_id = ctx.db.first_free_id(TICKETS, "ZDSK-%08d", 1)
    ctx.db.insert(
        TICKETS,
        {
            "id": ticket_id,
            "subject": f"Hotel Escalation: {args.issue_type}",
            "description": args.description,
            "status": "open",
            "priority": "high",
            "type": "incident",
            "requester_id": booking["customer_id"],
            "created_at": ESCALATED_AT,
            "updated_at": ESCALATED_AT,
            "hotel_id": args.hotel_id,
            "booking_reference": args.booking_reference,
            "escalation_reason": args.issue_type,
        },
    )
    return {
        "escalation_ticket_id": ticket_id,
        "hotel_contact_email": hotel["escalation_contact"] or hotel["contact_email"],
        "hotel_contact_phone": hotel["contact_phone"],
    }


@tool(
    "hotel_partner_api_get_hotel_contact",
    HotelInput,
    "Return a partner hotel's contact person, e-mail, phone and escalation contact.",
)
def get_hotel_contact(ctx: ToolContext, args: HotelInput) -> dict[str, Any]:
    hotel = _hotel(ctx, args.hotel_id)
    out = {
        name: hotel[name] for name in ("contact_name", "contact_email", "contact_phone", "escalation_contact")
    }
    return drop_nulls(out)


@tool(
    "hotel_partner_api_get_hotel_info",
    HotelInput,
    "Fetch a partner hotel's details: name, location, tier, contacts, amenities and accessibility.",
)
def get_hotel_info(ctx: ToolContext, args: HotelInput) -> dict[str, Any]:
    return {"hotel_data": compact(ctx, HOTELS, _hotel(ctx, args.hotel_id))}


class VerifyAvailabilityInput(LaxInput):
    hotel_id: str = Field(description="Hotel id, e.g. HTL-00012345.")
    check_in_date: str = Field(description="Arrival date, ISO 8601.")
    check_out_date: str = Field(description="Departure date, ISO 8601.")
    room_type: RoomType = Field(description="Room category.")
    board_type: BoardType = Field(description="Meal plan.")
    adults_count: int = Field(description="Number of adult guests.")
    children_count: int = Field(description="Number of child guests.")


@tool(
    "hotel_partner_api_verify_availability",
    VerifyAvailabilityInput,
    "Ask the partner hotel to confirm that a room type and meal plan is available for every night of a stay.",
)
def verify_availability(ctx: ToolContext, args: VerifyAvailabilityInput) -> dict[str, Any]:
    _hotel(ctx, args.hotel_id)
    first_night = args.check_in_date.split("T")[0]
    departure = args.check_out_date.split("T")[0]
    rows = [
        r
        for r in ctx.db.find(
            INVENTORY, hotel_id=args.hotel_id, room_type=args.room_type, board_type=args.board_type
        )
        if first_night <= r["date"] < departure
    ]
    if not rows:
        return {
            "availability_confirmed": False,
            "confirmation_notes": "No inventory data available for this hotel/room combination.",
        }
    fewest = min(r["available_count"] for r in rows)
    if fewest <= 0:
        return {"availability_confirmed": False, "confirmation_notes": "No availability for requested dates."}
    return {
        "availability_confirmed": True,
        "confirmation_notes": f"Confirmed availability for {len(rows)} nights. Minimum {fewest} rooms available.",
    }


TOOLS: tuple[Tool, ...] = (
    escalate_to_hotel,
    get_hotel_contact,
    get_hotel_info,
    verify_availability,
)
