"""payment_api: charges, refunds, disputes, invoices and payment methods."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from pydantic import Field

from servers.domains.travel.common import (
    BOOKINGS,
    DISPUTE_AT,
    INVOICE_STAMP,
    PAYMENT_AT,
    TRANSACTIONS,
    cents,
    compact,
    newest_first,
)
from servers.engine.helpers import LaxInput, count_id, drop_nulls
from servers.engine.tools import Tool, ToolContext, ToolError, ToolInput, tool


def _booking(ctx: ToolContext, ref: str) -> dict[str, Any]:
    row = ctx.db.require_first(BOOKINGS, f"Booking not found: {ref}", booking_reference=ref)
    return row


def _next_txn_id(ctx: ToolContext) -> str:
    return count_id(ctx.db, TRANSACTIONS, "TXN-%08d")


def _record_transaction(
    ctx: ToolContext,
    txn_id: str,
    booking_reference: str,
    customer_id: str,
    amount: Decimal,
    kind: str,
    status: str,
    reason: str,
    at: str,
    estimate: str | None = None,
) -> None:
    """Store one USD transaction row (charge, dispute or refund), to the cent."""
    ctx.db.insert(
        TRANSACTIONS,
        {
            "id": txn_id,
            "transaction_id": txn_id,
            "booking_reference": booking_reference,
            "customer_id": customer_id,
            "amount": cents(amount),
            "currency": "USD",
            "transaction_type": kind,
            "payment_status": status,
            "payment_method": None,
            "reason": reason,
            "processing_time_estimate": estimate,
            "created_at": at,
            "updated_at": at,
        },
    )


class PaymentStatusInput(LaxInput):
    booking_reference: str = Field(description="Booking whose latest payment to look at.")


@tool(
    "payment_api_check_payment_status",
    PaymentStatusInput,
    "Return the status, transaction id and payment method of a booking's most recent transaction.",
)
def check_payment_status(ctx: ToolContext, args: PaymentStatusInput) -> dict[str, Any]:
    rows = ctx.db.find(TRANSACTIONS, booking_reference=args.booking_reference)
    if not rows:
        raise ToolError(f"No transactions found for booking: {args.booking_reference}")
    latest = rows[0]
    for row in rows[1:]:
        if row["created_at"] > latest["created_at"]:
            latest = row
    out = {
        "payment_status": latest["payment_status"],
        "transaction_id": latest["transaction_id"],
        "payment_method": latest["payment_method"],
    }
    return drop_nulls(out)


class InvoiceInput(LaxInput):
    booking_reference: str = Field(description="Booking to invoice.")
    invoice_type: str = Field(description="Kind of document wanted, e.g. receipt.")


@tool(
    "payment_api_generate_invoice",
    InvoiceInput,
    "Produce the invoice (or receipt) link for a booking.",
)
def generate_invoice(ctx: ToolContext, args: InvoiceInput) -> dict[str, Any]:
    ref = args.booking_reference
    _booking(ctx, ref)
    return {
        "invoice_url": f"https://staybridge.com/invoices/{ref}-{INVOICE_STAMP}.pdf",
        "invoice_id": f"INV-{ref}-{INVOICE_STAMP}",
    }


class TransactionHistoryInput(LaxInput):
    customer_id: str | None = Field(default=None, description="Only transactions of this customer.")
    booking_reference: str | None = Field(default=None, description="Only transactions of this booking.")


@tool(
    "payment_api_get_transaction_history",
    TransactionHistoryInput,
    "List the payment transactions of a customer and/or a booking, newest first.",
)
def get_transaction_history(ctx: ToolContext, args: TransactionHistoryInput) -> dict[str, Any]:
    if not args.customer_id and not args.booking_reference:
        raise ToolError("Either customer_id or booking_reference must be provided")
    filters = {}
    if args.customer_id:
        filters["customer_id"] = args.customer_id
    if args.booking_reference:
        filters["booking_reference"] = args.booking_reference
    rows = newest_first(ctx.db.find(TRANSACTIONS, **filters))
    return {"transactions": [compact(ctx, TRANSACTIONS, r) for r in rows]}


class ChargeInput(LaxInput):
    booking_reference: str = Field(description="Booking to charge.")
    charge_amount: Decimal = Field(description='Amount to charge in USD, e.g. "120.00".')
    reason: str = Field(description="Why the customer is charged.")


@tool(
    "payment_api_process_charge",
    ChargeInput,
    "Charge the customer of a booking an additional amount (e.g. a price difference or a fee).",
)
def process_charge(ctx: ToolContext, args: ChargeInput) -> dict[str, Any]:
    booking = _booking(ctx, args.booking_reference)
    if args.charge_amount <= 0:
        raise ToolError("Invalid charge amount - must be greater than 0")
    txn_id = _next_txn_id(ctx)
    _record_transaction(
        ctx,
        txn_id,
        args.booking_reference,
        booking["customer_id"],
        args.charge_amount,
        "charge",
        "successful",
        args.reason,
        PAYMENT_AT,
    )
    return {"transaction_id": txn_id, "payment_status": "successful"}


class DisputeInput(ToolInput):
    transaction_id: str = Field(description="Transaction being disputed.")
    dispute_reason: str = Field(description="Why the charge is disputed.")
    dispute_amount: Decimal = Field(description='Disputed amount in USD, e.g. "75.00".')


@tool(
    "payment_api_process_charge_dispute",
    DisputeInput,
    "Open a dispute case against a transaction; the case starts under review.",
)
def process_charge_dispute(ctx: ToolContext, args: DisputeInput) -> dict[str, Any]:
    original = ctx.db.require_first(
        TRANSACTIONS, f"Transaction not found: {args.transaction_id}", transaction_id=args.transaction_id
    )
    case_id = f"DSP-{len(ctx.db.find(TRANSACTIONS, transaction_type='dispute')) + 1:08d}"
    _record_transaction(
        ctx,
        case_id,
        original["booking_reference"],
        original["customer_id"],
        args.dispute_amount,
        "dispute",
        "pending",
        args.dispute_reason,
        DISPUTE_AT,
    )
    return {"dispute_case_id": case_id, "dispute_status": "under_review"}


class RefundInput(LaxInput):
    booking_reference: str = Field(description="Booking to refund.")
    refund_amount: Decimal = Field(description='Amount to refund in USD, e.g. "250.00".')
    reason: str = Field(description="Why the refund is made.")


@tool(
    "payment_api_process_refund",
    RefundInput,
    "Refund an amount to the customer of a booking (3-5 business days to arrive).",
)
def process_refund(ctx: ToolContext, args: RefundInput) -> dict[str, Any]:
    booking = _booking(ctx, args.booking_reference)
    txn_id = _next_txn_id(ctx)
    estimate = "3-5 business days"
    _record_transaction(
        ctx,
        txn_id,
        args.booking_reference,
        booking["customer_id"],
        args.refund_amount,
        "refund",
        "successful",
        args.reason,
        PAYMENT_AT,
        estimate=estimate,
    )
    return {"transaction_id": txn_id, "refund_status": "successful", "processing_time_estimate": estimate}


class PaymentMethodInput(LaxInput):
    customer_id: str = Field(description="Customer whose payment method changes.")
    new_payment_method: str = Field(description="Token of the new card or payment method.")


@tool(
    "payment_api_update_payment_method",
    PaymentMethodInput,
    "Replace a customer's payment method; returns the last four characters of the new one.",
)
def update_payment_method(ctx: ToolContext, args: PaymentMethodInput) -> dict[str, Any]:
    ctx.db.require_first(BOOKINGS, f"Customer not found: {args.customer_id}", customer_id=args.customer_id)
    token = args.new_payment_method
    return {"success": True, "payment_method_last4": token[-4:] if len(token) >= 4 else "****"}


TOOLS: tuple[Tool, ...] = (
    check_payment_status,
    generate_invoice,
    get_transaction_history,
    process_charge,
    process_charge_dispute,
    process_refund,
    update_payment_method,
)
