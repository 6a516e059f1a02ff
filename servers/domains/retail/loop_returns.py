"""Return merchandise authorisations (RMAs)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from servers.domains.retail.common import RMAS, WRITE_TS
from servers.engine.helpers import out_dt
from servers.engine.tools import ToolContext, ToolInput, tool


class CreateRmaInput(ToolInput):
    order_id: str = Field(description="Order the returned item came from.")
    line_item_id: str = Field(description="Line item being returned.")
    customer_id: str = Field(description="Customer returning the item.")
    return_reason: Literal[
        "defective", "wrong_item_received", "changed_mind", "not_as_expected", "damaged_in_transit"
    ] = Field(description="Why the item is returned.")
    is_defective: bool = Field(default=False, description="Whether the item is faulty.")
    refund_amount: float = Field(description="Amount to refund once the return is processed.")
    restocking_fee: float = Field(description="Restocking fee withheld (0 if none).")
    return_shipping_cost: float = Field(description="Return shipping charged to the customer (0 if none).")
    removal_fee: float = Field(description="Fee for removing an installed item (0 if none).")


@tool(
    "create_rma",
    CreateRmaInput,
    "Authorise the return of one order line. The caller supplies the refund amount and every fee "
    "according to the return policy; the authorisation is created approved.",
    catch_all="Failed to create RMA",
)
def create_rma(ctx: ToolContext, args: CreateRmaInput) -> dict[str, Any]:
    rma_id = ctx.db.first_free_id(RMAS, "RMA-20%06d", ctx.db.count(RMAS))
    ctx.db.insert(
        RMAS,
        {
            "id": rma_id,
            "order_id": args.order_id,
            "line_item_id": args.line_item_id,
            "customer_id": args.customer_id,
            "return_reason": args.return_reason,
            "is_defective": args.is_defective,
            "status": "approved",
            "created_date": WRITE_TS,
            "refund_amount": float(args.refund_amount),
            "restocking_fee": float(args.restocking_fee),
            "return_shipping_cost": float(args.return_shipping_cost),
            "removal_fee": float(args.removal_fee),
        },
    )
    return {"rma_id": rma_id, "status": "approved", "created_date": out_dt(WRITE_TS)}


class GetRmaStatusInput(ToolInput):
    rma_id: str = Field(description="Return authorisation id, e.g. RMA-10000001.")


@tool(
    "get_rma_status",
    GetRmaStatusInput,
    "Show a return authorisation: the item, reason, status, refund amount and fees.",
    catch_all="Failed to retrieve RMA status",
)
def get_rma_status(ctx: ToolContext, args: GetRmaStatusInput) -> dict[str, Any]:
    rma = ctx.db.require_first(RMAS, f"RMA not found: {args.rma_id}", id=args.rma_id)
    return {
        "rma_id": rma["id"],
        "order_id": rma["order_id"],
        "line_item_id": rma["line_item_id"],
        "customer_id": rma["customer_id"],
        "return_reason": rma["return_reason"],
        "status": rma["status"],
        "refund_amount": rma["refund_amount"],
        "restocking_fee": rma["restocking_fee"],
        "return_shipping_cost": rma["return_shipping_cost"],
        "removal_fee": rma["removal_fee"],
        "created_date": out_dt(rma["created_date"]),
    }


TOOLS = (create_rma, get_rma_status)
