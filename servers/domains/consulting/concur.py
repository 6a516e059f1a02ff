"""Concur: expense reports (with rejection overrides) and travel bookings."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from servers.domains.consulting.common import SUCCESS, action, api_tool, opt, pick
from servers.engine.tools import ToolContext, ToolInput

EXPENSES = "concur_expense_reports"
EXPENSE_FIELDS = (
    "id",
    "employee_email",
    "amount",
    "category",
    "trip_location_city",
    "trip_location_state",
    "expense_date",
    "receipt_status",
    "rejection_reason",
    "override_approved",
    "override_approved_by",
    "override_reason",
)
BOOKING_FIELDS = (
    "id",
    "employee_email",
    "destination",
    "departure_date",
    "return_date",
    "flight_class",
    "hotel_rate_per_night",
)


class ConcurInput(ToolInput):
    action: Literal["get_expense_report", "override_expense_rejection", "get_travel_booking"] = Field(
        description="What to do."
    )
    expense_report_id: str | None = opt("Expense report id (get_expense_report, override_expense_rejection).")
    override_reason: Literal["justified_exception", "system_error", "receipt_exception"] | None = opt(
        "Why the rejection is overridden (override_expense_rejection)."
    )
    approver_email: str | None = opt("Who approved the override (override_expense_rejection).")
    booking_id: str | None = opt("Travel booking id (get_travel_booking).")


def _report(ctx: ToolContext, report_id: str) -> dict[str, Any]:
    row = ctx.db.require(EXPENSES, report_id, f"Expense report not found: {report_id}")
    return row


@action("expense_report_id")
def get_expense_report(ctx: ToolContext, args: Any) -> Any:
    return {"expense_report": pick(_report(ctx, args.expense_report_id), EXPENSE_FIELDS)}


@action("expense_report_id", "override_reason", "approver_email")
def override_expense_rejection(ctx: ToolContext, args: Any) -> Any:
    row = _report(ctx, args.expense_report_id)
    ctx.db.update(
        EXPENSES,
        row["id"],
        {
            "override_approved": True,
            "override_approved_by": args.approver_email,
            "override_reason": args.override_reason,
        },
    )
    return SUCCESS


@action("booking_id")
def get_travel_booking(ctx: ToolContext, args: Any) -> Any:
    row = ctx.db.require(
        "concur_travel_requests", args.booking_id, f"Travel booking not found: {args.booking_id}"
    )
    return {"travel_booking": pick(row, BOOKING_FIELDS)}


TOOLS = (
    api_tool(
        "concur_api",
        ConcurInput,
        "Expense and travel system. get_expense_report: one expense report; override_expense_rejection: "
        "mark a rejected expense as approved by override; get_travel_booking: one travel booking.",
        "Concur",
        {
            "get_expense_report": get_expense_report,
            "override_expense_rejection": override_expense_rejection,
            "get_travel_booking": get_travel_booking,
        },
    ),
)
