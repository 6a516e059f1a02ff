"""Shared pieces of the travel (hotel booking) server: table names, the fixed
timestamps its write tools stamp, enum literals, date parsing and the row
renderings every subsystem uses."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from decimal import ROUND_HALF_UP, Decimal
from typing import Any, Literal

from servers.engine.helpers import drop_nulls
from servers.engine.rows import to_state_row
from servers.engine.tools import ToolContext

BOOKINGS = "booking_api_bookings"
GROUPS = "booking_api_group_bookings"
INVENTORY = "booking_api_hotel_inventory"
ACCOUNTS = "corporate_api_corporate_accounts"
PROFILES = "crm_api_customer_profiles"
HOTELS = "hotel_partner_api_hotels"
TRANSACTIONS = "payment_api_transactions"
TICKETS = "zendesk_tickets"

# Fixed clocks of the write tools (they disagree with one another on purpose).
MODIFIED_AT = "2025-11-25T10:00:00Z"  # booking and group-booking changes
PAYMENT_AT = "2025-11-25T10:00:00+00:00"  # refunds and charges
DISPUTE_AT = "2025-11-30T10:00:00+00:00"  # charge disputes
ESCALATED_AT = "2025-11-30T10:00:00Z"  # hotel escalation tickets
INVOICE_STAMP = "20251125100000"  # payment invoices (nothing stored)
CRM_UPDATED_AT = dt.datetime(2025, 1, 1, tzinfo=dt.UTC)  # customer profile updates

RoomType = Literal[
    "standard_room",
    "deluxe_room",
    "suite",
    "executive_suite",
    "presidential_suite",
    "family_room",
    "accessible_room",
]
BoardType = Literal["without_breakfast", "with_breakfast", "half_board", "full_board", "all_inclusive"]
BookingStatus = Literal["confirmed", "cancelled", "checked_in", "checked_out"]
EscalationReason = Literal[
    "same-day-modification",
    "hotel-confirmation-required",
    "large-group-booking",
    "system-error",
    "high-value-dispute",
    "guest-complaint",
]

CENT = Decimal("0.01")


def cents(value: Decimal) -> Decimal:
    """Quantize to two places, rounding half up."""
    return value.quantize(CENT, rounding=ROUND_HALF_UP)


def parse_day(text: str) -> dt.date:
    """The calendar date as written (no UTC conversion); `Z` means `+00:00`.
    Raises ValueError with Python's own message when the text is not ISO."""
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).date()


def record(ctx: ToolContext, table: str, row: dict[str, Any]) -> dict[str, Any]:
    """A row as a plain JSON dict, every field present (nulls kept)."""
    return to_state_row(ctx.db.spec(table), row)


def compact(ctx: ToolContext, table: str, row: dict[str, Any]) -> dict[str, Any]:
    """A row as a typed output record: null-valued fields left out."""
    return drop_nulls(record(ctx, table, row))


def newest_first(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows by `created_at` text, descending; ties keep their store order."""
    return sorted(rows, key=lambda r: r["created_at"], reverse=True)


def stay_value(
    ctx: ToolContext, hotel_id: str, room_type: str, board_type: str, check_in: str, check_out: str
) -> Decimal | None:
    """Sum of the nightly prices of the inventory rows covering [check_in,
    check_out) for one hotel/room/board, to the cent; None when the stay dates
    cannot be parsed or no night matches (unparsable inventory dates are skipped)."""
    try:
        start, end = parse_day(check_in), parse_day(check_out)
    except ValueError:
        return None
    total = Decimal(0)
    nights = 0
    for inv in ctx.db.find(INVENTORY, hotel_id=hotel_id, room_type=room_type, board_type=board_type):
        try:
            day = parse_day(inv["date"])
        except ValueError:
            continue
        if start <= day < end:
            total += inv["price_per_night"]
            nights += 1
    return cents(total) if nights else None
