"""Hardware purchase orders."""

from __future__ import annotations

import datetime as dt
from typing import Any

from pydantic import Field

from servers.domains.neobank.common import PROCUREMENT_ORDERS, DeviceType, require_employee
from servers.engine.helpers import count_id
from servers.engine.tools import ToolContext, ToolError, ToolInput, tool


class HardwareProcurementCreateOrderInput(ToolInput):
    device_type: DeviceType = Field(description="Kind of device to order.")
    device_model: str = Field(description="Make and model to order.")
    quantity: int = Field(description="Number of units.")
    expected_delivery_date: str = Field(description="Expected delivery date, YYYY-MM-DD.")
    ship_to_location: str = Field(description="Delivery address.")
    requester_email: str = Field(description="Corporate email of the employee the order is for.")
    ticket_id: str | None = Field(default=None, description="Help-desk ticket the order belongs to.")


@tool(
    "hardware_procurement_api_create_order",
    HardwareProcurementCreateOrderInput,
    "Place a pending purchase order for new hardware, shipped to the given address.",
)
def create_order(ctx: ToolContext, args: HardwareProcurementCreateOrderInput) -> dict[str, Any]:
    requester = require_employee(ctx, args.requester_email, "Requester not found")
    try:
        delivery = dt.date.fromisoformat(args.expected_delivery_date[:10])
    except ValueError:
        raise ToolError(
            f"Invalid expected_delivery_date format: {args.expected_delivery_date}. Expected YYYY-MM-DD format."
        ) from None
    order_id = count_id(ctx.db, PROCUREMENT_ORDERS, "HW-ORDER-%07d")
    ctx.db.insert(
        PROCUREMENT_ORDERS,
        {
            "id": order_id,
            "device_type": args.device_type.value,
            "device_model": args.device_model,
            "quantity": args.quantity,
            "ship_to_location": args.ship_to_location,
            "requester_id": requester["id"],
            "ticket_id": args.ticket_id,
            "status": "pending",
            "created_at": None,
            "expected_delivery_date": delivery,
            "delivered_at": None,
        },
    )
    return {"order_id": order_id, "status": "pending"}


TOOLS = (create_order,)
