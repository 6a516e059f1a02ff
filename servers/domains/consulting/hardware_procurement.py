"""Hardware procurement: place a vendor order (nothing is stored)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from servers.engine.tools import ToolContext, ToolInput, tool

ORDER_ID = "HWO-0056435"


class CreateOrderInput(ToolInput):
    device_model: str = Field(description="Model to buy.")
    quantity: int = Field(description="Number of units.")
    deliver_to: Literal["New York", "San Francisco", "Chicago", "Austin"] = Field(
        description="Office that receives the order."
    )


@tool(
    "hardware_procurement_create_order",
    CreateOrderInput,
    "Order devices from the vendor for delivery to an office; returns the order number.",
    catch_all="Failed to create hardware procurement order",
)
def create_order(ctx: ToolContext, args: CreateOrderInput) -> Any:
    return {"order_id": ORDER_ID}


TOOLS = (create_order,)
