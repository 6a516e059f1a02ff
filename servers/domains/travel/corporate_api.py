"""corporate_api: corporate client accounts (all read-only)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from servers.domains.travel.common import ACCOUNTS, BOOKINGS, compact, newest_first
from servers.engine.helpers import LaxInput
from servers.engine.tools import Tool, ToolContext, ToolError, tool


def _check_account_id(account_id: str) -> None:
    if not account_id.startswith("CRP-"):
        raise ToolError("Invalid corporate_account_id parameter.")


def _account(ctx: ToolContext, account_id: str) -> dict[str, Any]:
    row = ctx.db.require_first(ACCOUNTS, "Corporate account not found.", corporate_account_id=account_id)
    return row


class AccountInput(LaxInput):
    corporate_account_id: str = Field(description="Corporate account id, e.g. CRP-00012345.")


class CorporateInvoiceInput(LaxInput):
    booking_reference: str = Field(description="Reference of the booking to invoice, e.g. BKG-00012345.")
    corporate_account_id: str = Field(description="Corporate account the booking is billed to.")


@tool(
    "corporate_api_generate_corporate_invoice",
    CorporateInvoiceInput,
    "Produce the invoice link for a booking billed to a corporate account, with the account's payment terms.",
)
def generate_corporate_invoice(ctx: ToolContext, args: CorporateInvoiceInput) -> dict[str, Any]:
    _check_account_id(args.corporate_account_id)
    if not args.booking_reference.startswith("BKG-"):
        raise ToolError("Invalid booking_reference parameter.")
    account = _account(ctx, args.corporate_account_id)
    booking = ctx.db.require_first(BOOKINGS, "Booking not found.", booking_reference=args.booking_reference)
    if booking["corporate_account_id"] != account["corporate_account_id"]:
        raise ToolError("Booking is not associated with this corporate account.")
    ref, acct = args.booking_reference, args.corporate_account_id
    return {
        "invoice_url": f"https://staybridge.com/corporate-invoices/{acct}-{ref}.pdf",
        "invoice_id": f"INV-{ref.replace('BKG-', '')}-{acct.replace('CRP-', '')}",
        "payment_terms": account["payment_terms"],
    }


@tool(
    "corporate_api_get_account_details",
    AccountInput,
    "Fetch a corporate account: company, tier, status, contact, booking and credit limits, terms.",
)
def get_account_details(ctx: ToolContext, args: AccountInput) -> dict[str, Any]:
    _check_account_id(args.corporate_account_id)
    return {"account_data": compact(ctx, ACCOUNTS, _account(ctx, args.corporate_account_id))}


@tool(
    "corporate_api_get_corporate_booking_history",
    AccountInput,
    "List the bookings made under a corporate account, most recently created first.",
)
def get_corporate_booking_history(ctx: ToolContext, args: AccountInput) -> dict[str, Any]:
    _check_account_id(args.corporate_account_id)
    _account(ctx, args.corporate_account_id)
    rows = newest_first(ctx.db.find(BOOKINGS, corporate_account_id=args.corporate_account_id))
    return {"corporate_bookings": [compact(ctx, BOOKINGS, r) for r in rows]}


@tool(
    "corporate_api_verify_account_status",
    AccountInput,
    "Tell whether a corporate account is active, when it expires, and how many more confirmed "
    "bookings its limit allows.",
)
def verify_account_status(ctx: ToolContext, args: AccountInput) -> dict[str, Any]:
    _check_account_id(args.corporate_account_id)
    account = _account(ctx, args.corporate_account_id)
    active = len(
        ctx.db.find(BOOKINGS, corporate_account_id=args.corporate_account_id, booking_status="confirmed")
    )
    out: dict[str, Any] = {"is_active": account["account_status"] == "active"}
    view = compact(ctx, ACCOUNTS, account)
    if "expiration_date" in view:
        out["expiration_date"] = view["expiration_date"]
    out["booking_limit_remaining"] = max(0, account["booking_limit"] - active)
    return out


TOOLS: tuple[Tool, ...] = (
    generate_corporate_invoice,
    get_account_details,
    get_corporate_booking_history,
    verify_account_status,
)
