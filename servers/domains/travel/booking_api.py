"""booking_api: hotel bookings, group bookings and room inventory."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from servers.domains.travel.common import (
    BOOKINGS,
    GROUPS,
    HOTELS,
    INVENTORY,
    MODIFIED_AT,
    BoardType,
    BookingStatus,
    RoomType,
    cents,
    newest_first,
    parse_day,
    record,
    stay_value,
)
from servers.engine.helpers import LaxInput
from servers.engine.tools import Tool, ToolContext, ToolError, ToolInput, tool


def _stay_days(check_in: str, check_out: str) -> tuple[Any, Any]:
    try:
        start = parse_day(check_in)
        end = parse_day(check_out)
    except ValueError as exc:
        raise ToolError(f"Invalid date format: {exc}") from exc
    if start >= end:
        raise ToolError("Check-in date must be before check-out date")
    return start, end


def _inventory_day(row: dict[str, Any]) -> Any:
    try:
        return parse_day(row["date"])
    except ValueError as exc:
        raise ToolError(str(exc)) from exc


class GetBookingInput(LaxInput):
    booking_reference: str | None = Field(default=None, description="Booking reference, e.g. BKG-00012345.")
    customer_id: str | None = Field(
        default=None, description="Customer id; used only when no booking reference is given."
    )


@tool(
    "booking_api_get_booking",
    GetBookingInput,
    "Fetch one booking, by booking reference or else by the customer's id (their first booking).",
)
def get_booking(ctx: ToolContext, args: GetBookingInput) -> dict[str, Any]:
    if not args.booking_reference and not args.customer_id:
        raise ToolError("Either booking_reference or customer_id must be provided")
    if args.booking_reference:
        row = ctx.db.require_first(
            BOOKINGS,
            f"Booking not found with booking_reference '{args.booking_reference}'",
            booking_reference=args.booking_reference,
        )
    else:
        row = ctx.db.require_first(
            BOOKINGS, f"Booking not found with customer_id '{args.customer_id}'", customer_id=args.customer_id
        )
    return {"booking_data": record(ctx, BOOKINGS, row)}


class BookingHistoryInput(LaxInput):
    customer_id: str = Field(description="Customer id whose bookings to list.")


@tool(
    "booking_api_get_booking_history",
    BookingHistoryInput,
    "List every booking of a customer, most recently created first.",
)
def get_booking_history(ctx: ToolContext, args: BookingHistoryInput) -> dict[str, Any]:
    rows = newest_first(ctx.db.find(BOOKINGS, customer_id=args.customer_id))
    return {"bookings": [record(ctx, BOOKINGS, r) for r in rows]}


class GroupBookingInput(LaxInput):
    group_booking_id: str = Field(description="Group booking id, e.g. GRP-00012345.")


@tool(
    "booking_api_get_group_booking",
    GroupBookingInput,
    "Fetch a group booking: coordinator, dates, hotel and the member booking references.",
)
def get_group_booking(ctx: ToolContext, args: GroupBookingInput) -> dict[str, Any]:
    row = ctx.db.require_first(
        GROUPS,
        f"Group booking not found with group_booking_id '{args.group_booking_id}'",
        group_booking_id=args.group_booking_id,
    )
    return {"group_booking_data": record(ctx, GROUPS, row)}


class AvailabilityInput(LaxInput):
    hotel_id: str = Field(description="Hotel id, e.g. HTL-00012345.")
    check_in_date: str = Field(description="Arrival date/time, ISO 8601.")
    check_out_date: str = Field(description="Departure date/time, ISO 8601.")
    room_type: RoomType = Field(description="Room category.")
    board_type: BoardType = Field(description="Meal plan.")
    adults_count: int = Field(description="Number of adult guests.")
    children_count: int = Field(description="Number of child guests.")


@tool(
    "booking_api_check_hotel_availability",
    AvailabilityInput,
    "Check how many rooms of a type and meal plan a hotel has free for a stay, the nightly price, "
    "and which meal plans have rooms for those nights.",
)
def check_hotel_availability(ctx: ToolContext, args: AvailabilityInput) -> dict[str, Any]:
    ctx.db.require(HOTELS, args.hotel_id, f"Hotel not found with hotel_id '{args.hotel_id}'")
    start, end = _stay_days(args.check_in_date, args.check_out_date)
    rows = ctx.db.find(INVENTORY, hotel_id=args.hotel_id, room_type=args.room_type)
    if not rows:
        return {"available_count": 0, "available_board_types": [], "price_per_night": "0.00"}
    in_stay = [r for r in rows if start <= _inventory_day(r) < end]
    matching = [r for r in in_stay if r["board_type"] == args.board_type]
    boards = sorted({r["board_type"] for r in in_stay if r["available_count"] > 0})
    if not matching:
        return {"available_count": 0, "available_board_types": boards, "price_per_night": "0.00"}
    return {
        "available_count": min(r["available_count"] for r in matching),
        "available_board_types": boards,
        "price_per_night": str(cents(matching[0]["price_per_night"])),
    }


class LocationSearchInput(LaxInput):
    location: str = Field(description="City or area; matched case-insensitively as a substring.")
    check_in_date: str = Field(description="Arrival date/time, ISO 8601.")
    check_out_date: str = Field(description="Departure date/time, ISO 8601.")
    room_type: RoomType = Field(description="Room category.")
    board_type: BoardType = Field(description="Meal plan.")
    adults_count: int = Field(description="Number of adult guests.")
    children_count: int = Field(description="Number of child guests.")


@tool(
    "booking_api_search_hotels_by_location",
    LocationSearchInput,
    "Find hotels in a location that have the requested room type and meal plan free for the whole "
    "stay, with the fewest rooms left and the average nightly price.",
)
def search_hotels_by_location(ctx: ToolContext, args: LocationSearchInput) -> dict[str, Any]:
    start, end = _stay_days(args.check_in_date, args.check_out_date)
    wanted = args.location.lower()
    found = []
    for hotel in ctx.db.all(HOTELS):
        if wanted not in hotel["location"].lower():
            continue
        rows = [
            r
            for r in ctx.db.find(
                INVENTORY, hotel_id=hotel["hotel_id"], room_type=args.room_type, board_type=args.board_type
            )
            if start <= _inventory_day(r) < end
        ]
        if not rows:
            continue
        available = min(r["available_count"] for r in rows)
        if available <= 0:
            continue
        average = sum((r["price_per_night"] for r in rows), Decimal(0)) / Decimal(len(rows))
        found.append(
            {
                "hotel_id": hotel["hotel_id"],
                "hotel_name": hotel["hotel_name"],
                "location": hotel["location"],
                "partner_tier": hotel["partner_tier"],
                "available_count": available,
                "price_per_night": str(cents(average)),
            }
        )
    return {"hotels": found}


class ModifyBookingInput(ToolInput):
    booking_reference: str = Field(description="Reference of the booking to change.")
    check_in_date: str | None = Field(default=None, description="New arrival date/time, ISO 8601.")
    check_out_date: str | None = Field(default=None, description="New departure date/time, ISO 8601.")
    room_type: RoomType | None = Field(default=None, description="New room category.")
    board_type: BoardType | None = Field(default=None, description="New meal plan.")
    adults_count: int | None = Field(default=None, description="New number of adults.")
    children_count: int | None = Field(default=None, description="New number of children.")
    special_requests: list[str] | None = Field(
        default=None, description="Replacement list of special requests."
    )
    booking_status: BookingStatus | None = Field(
        default=None, description="New status; 'cancelled' cancels the booking."
    )


_MODIFIABLE = (
    "check_in_date",
    "check_out_date",
    "room_type",
    "board_type",
    "adults_count",
    "children_count",
    "special_requests",
    "booking_status",
)
_REPRICING = ("check_in_date", "check_out_date", "room_type", "board_type")


@tool(
    "booking_api_modify_booking",
    ModifyBookingInput,
    "Change a confirmed booking (dates, room, meal plan, guests, special requests or status, e.g. "
    "cancel it). Changing dates, room or meal plan re-prices the stay; returns the booking and the "
    "price difference.",
)
def modify_booking(ctx: ToolContext, args: ModifyBookingInput) -> dict[str, Any]:
    booking = ctx.db.require_first(
        BOOKINGS,
        f"Booking not found with booking_reference '{args.booking_reference}'",
        booking_reference=args.booking_reference,
    )
    if booking["booking_status"] != "confirmed":
        raise ToolError(
            f"Booking cannot be modified. Current status is '{booking['booking_status']}', must be 'confirmed'"
        )
    original_value: Decimal = booking["booking_value"]
    changes: list[str] = []
    for name in _MODIFIABLE:
        new = getattr(args, name)
        if new is None or new == booking[name]:
            continue
        if name == "special_requests":
            changes.append("special_requests updated")
        else:
            changes.append(f"{name}: {booking[name]} -> {new}")
        booking[name] = new

    difference = Decimal(0)
    value = None
    if any(getattr(args, name) is not None for name in _REPRICING):
        value = stay_value(
            ctx,
            booking["hotel_id"],
            booking["room_type"],
            booking["board_type"],
            booking["check_in_date"],
            booking["check_out_date"],
        )
    if value is not None:
        difference = value - original_value
        booking["booking_value"] = value

    key = ctx.db.spec(BOOKINGS).key_of(booking)
    if changes:
        booking["modification_history"] = [
            *booking["modification_history"],
            f"{MODIFIED_AT}: {'; '.join(changes)}",
        ]
        booking["updated_at"] = MODIFIED_AT
        booking = ctx.db.replace(BOOKINGS, key, booking)
    elif value is not None:
        # Nothing recorded, yet the re-priced value is kept (the reference's in-place write).
        booking = ctx.db.replace(BOOKINGS, key, booking)
    return {"updated_booking": record(ctx, BOOKINGS, booking), "price_difference": str(cents(difference))}


class GroupModificationDetails(BaseModel):
    model_config = ConfigDict(extra="ignore")

    check_in_date: str | None = Field(default=None, description="New arrival date/time, ISO 8601.")
    check_out_date: str | None = Field(default=None, description="New departure date/time, ISO 8601.")


class ModifyGroupBookingInput(ToolInput):
    group_booking_id: str = Field(description="Group booking id, e.g. GRP-00012345.")
    modification_details: GroupModificationDetails = Field(description="The new group dates.")
    cascade_to_individual_bookings: bool = Field(
        description="Also move the dates of every booking in the group (and re-price them)."
    )


@tool(
    "booking_api_modify_group_booking",
    ModifyGroupBookingInput,
    "Move the dates of a group booking, optionally applying the new dates to each member booking "
    "with re-pricing; returns the group, the bookings changed and the total price difference.",
)
def modify_group_booking(ctx: ToolContext, args: ModifyGroupBookingInput) -> dict[str, Any]:
    group = ctx.db.require_first(
        GROUPS,
        f"Group booking not found with group_booking_id '{args.group_booking_id}'",
        group_booking_id=args.group_booking_id,
    )
    details = args.modification_details
    new_dates = {
        name: value
        for name, value in (
            ("check_in_date", details.check_in_date),
            ("check_out_date", details.check_out_date),
        )
        if value
    }
    group_changed = False
    for name, value in new_dates.items():
        if value != group[name]:
            group[name] = value
            group_changed = True

    modified: list[str] = []
    total = Decimal(0)
    if args.cascade_to_individual_bookings:
        for ref in group["booking_references"]:
            booking = ctx.db.first(BOOKINGS, booking_reference=ref)
            if booking is None:
                continue
            notes = []
            for name, date in new_dates.items():
                if date != booking[name]:
                    booking[name] = date
                    notes.append(f"{name} updated via group booking {args.group_booking_id}")
            if not notes:
                continue
            repriced = stay_value(
                ctx,
                booking["hotel_id"],
                booking["room_type"],
                booking["board_type"],
                booking["check_in_date"],
                booking["check_out_date"],
            )
            if repriced is not None:
                diff = repriced - booking["booking_value"]
                total += diff
                if diff != 0:
                    booking["booking_value"] = repriced
            booking["modification_history"] = [
                *booking["modification_history"],
                f"{MODIFIED_AT}: {'; '.join(notes)}",
            ]
            booking["updated_at"] = MODIFIED_AT
            ctx.db.replace(BOOKINGS, ctx.db.spec(BOOKINGS).key_of(booking), booking)
            modified.append(ref)

    if group_changed or modified:
        group["updated_at"] = MODIFIED_AT
        group = ctx.db.replace(GROUPS, ctx.db.spec(GROUPS).key_of(group), group)
    return {
        "updated_group_booking": record(ctx, GROUPS, group),
        "modified_booking_references": modified,
        "total_price_difference": str(cents(total)),
    }


TOOLS: tuple[Tool, ...] = (
    check_hotel_availability,
    get_booking,
    get_booking_history,
    get_group_booking,
    modify_booking,
    modify_group_booking,
    search_hotels_by_location,
)
