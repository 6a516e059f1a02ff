"""Payments: the original payment of an order, extra charges and refunds."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from servers.domains.retail.common import PAYMENTS, REFUNDS, WRITE_TS
from servers.engine.helpers import count_id, out_dt
from servers.engine.tools import ToolContext, ToolInput, tool

_ORDER_ID = "Order identifier, e.g. ORD-10000001."


class ChargeCustomerInput(ToolInput):
    order_id: str = Field(description="Order the charge belongs to.")
    customer_id: str = Field(description="Customer to charge.")
    amount: float = Field(description="Amount to charge, in dollars.")
    charge_reason: Literal["shipping_upgrade", "reship_fee", "installation_cancelled_shipping"] = Field(
        description="What the charge is for."
    )


@tool(
    "charge_customer",
    ChargeCustomerInput,
    "Charge the customer's card on file an additional amount for an order (e.g. a faster shipping "
    "upgrade or a reship fee).",
    catch_all="Failed to charge customer",
)
def charge_customer(ctx: ToolContext, args: ChargeCustomerInput) -> dict[str, Any]:
    # The id counter is the table's row count; an id already taken makes the insert fail.
    txn_id = count_id(ctx.db, PAYMENTS, "TXN-2%07d", 0)
    ctx.db.insert(
        PAYMENTS,
        {
            "id": txn_id,
            "order_id": args.order_id,
            "customer_id": args.customer_id,
            "amount": float(args.amount),
            "status": "authorized",
            "payment_method": "Card on file",
            "transaction_date": WRITE_TS,
            "charge_reason": args.charge_reason,
        },
    )
    return {
        "transaction_id": txn_id,
        "order_id": args.order_id,
        "amount": float(args.amount),
        "status": "authorized",
        "transaction_date": out_dt(WRITE_TS),
    }


class CreateRefundInput(ToolInput):
    order_id: str = Field(description="Order whose payment is refunded.")
    customer_id: str = Field(description="Customer receiving the refund.")
    amount: float = Field(description="Amount to refund, in dollars.")
    refund_reason: Literal[
        "rma_processed",
        "discount_correction",
        "late_delivery_compensation",
        "partial_refund_minor_defect",
        "shipping_downgrade",
        "order_cancelled",
    ] = Field(description="Why the money is returned.")


@tool(
    "create_refund",
    CreateRefundInput,
    "Issue a refund against the order's payment. The refund starts out pending.",
    catch_all="Failed to create refund",
)
def create_refund(ctx: ToolContext, args: CreateRefundInput) -> dict[str, Any]:
    txn = ctx.db.require_first(
        PAYMENTS, f"Original payment transaction not found for order: {args.order_id}", order_id=args.order_id
    )
    refund_id = count_id(ctx.db, REFUNDS, "RFD-2%07d", 0)
    ctx.db.insert(
        REFUNDS,
        {
            "id": refund_id,
            "transaction_id": txn["id"],
            "order_id": args.order_id,
            "amount": float(args.amount),
            "refund_reason": args.refund_reason,
            "status": "pending",
            "refund_date": WRITE_TS,
        },
    )
    return {
        "refund_id": refund_id,
        "transaction_id": txn["id"],
        "amount": float(args.amount),
        "status": "pending",
        "refund_date": out_dt(WRITE_TS),
    }


class GetPaymentStatusInput(ToolInput):
    order_id: str = Field(description=_ORDER_ID)


@tool(
    "get_payment_status",
    GetPaymentStatusInput,
    "Show the payment recorded for an order: amount, status, method and date.",
    catch_all="Failed to retrieve payment status",
)
def get_payment_status(ctx: ToolContext, args: GetPaymentStatusInput) -> dict[str, Any]:
    txn = ctx.db.require_first(
        PAYMENTS, f"No payment transaction found for order: {args.order_id}", order_id=args.order_id
    )
    return {
        "transaction_id": txn["id"],
        "order_id": txn["order_id"],
        "customer_id": txn["customer_id"],
        "amount": txn["amount"],
        "status": txn["status"],
        "payment_method": txn["payment_method"],
        "transaction_date": out_dt(txn["transaction_date"]),
    }


TOOLS = (charge_customer, create_refund, get_payment_status)
