"""Order management: orders, line items, shipments and carrier tracking."""

from __future__ import annotations

import datetime as dt
from typing import Any, Literal

from pydantic import Field

from servers.domains.retail.common import (
    INVENTORY,
    LINE_ITEMS,
    ORDERS,
    PRODUCTS,
    SHIPMENTS,
    TRACKING,
    WRITE_TS,
    drop_nulls,
)
from servers.engine.helpers import out_dt
from servers.engine.tools import ToolContext, ToolError, ToolInput, tool

ShippingSpeed = Literal["standard", "expedited", "next_day"]

# Fixed price of each shipping speed.
SHIPPING_PRICES: dict[str, float] = {"standard": 0.0, "expedited": 15.0, "next_day": 29.99}
RESHIP_FEE = 15.0
RESHIP_TRANSIT = dt.timedelta(days=5)

_ORDER_ID = "Order identifier, e.g. ORD-10000001."


def _order(ctx: ToolContext, order_id: str) -> dict[str, Any]:
    order = ctx.db.require_first(ORDERS, f"Order not found: {order_id}", id=order_id)
    return order


class CancelOrderInput(ToolInput):
    order_id: str = Field(description=_ORDER_ID)
    cancellation_reason: Literal[
        "customer_request", "payment_failed", "address_undeliverable", "out_of_stock"
    ] = Field(description="Why the order is being cancelled.")


@tool(
    "cancel_order",
    CancelOrderInput,
    "Cancel an order. Reports whether a refund of the original payment will follow "
    "(only for orders that were still processing).",
    catch_all="Failed to cancel order",
)
def cancel_order(ctx: ToolContext, args: CancelOrderInput) -> dict[str, Any]:
    order = _order(ctx, args.order_id)
    was_processing = order["status"] == "processing"
    ctx.db.update(ORDERS, order["id"], {"status": "cancelled"})
    return {"order_id": order["id"], "status": "cancelled", "refund_initiated": was_processing}


class CreateReplacementOrderInput(ToolInput):
    original_order_id: str = Field(description="The order being replaced.")
    customer_id: str = Field(description="Customer who receives the replacement.")
    sku: str = Field(description="SKU of the item to send again.")
    quantity: int = Field(description="Number of units to send.")
    shipping_speed: ShippingSpeed = Field(description="Shipping speed for the replacement.")
    shipping_address_line1: str = Field(description="Street line of the delivery address.")
    shipping_address_city: str = Field(description="City of the delivery address.")
    shipping_address_state: str = Field(description="State of the delivery address.")
    shipping_address_zip: str = Field(description="Postal code of the delivery address.")


@tool(
    "create_replacement_order",
    CreateReplacementOrderInput,
    "Create a no-charge replacement order for one SKU, reserving the stock from inventory. "
    "Fails when the SKU has no stock left.",
    catch_all="Failed to create replacement order",
)
def create_replacement_order(ctx: ToolContext, args: CreateReplacementOrderInput) -> dict[str, Any]:
    stock = ctx.db.first(INVENTORY, sku=args.sku)
    if stock is None or stock["available_quantity"] == 0:
        raise ToolError(
            f"Product out of stock - cannot create replacement order for SKU {args.sku}. Available quantity is 0."
        )
    # The stock is taken before the product is looked up, and stays taken if that fails.
    ctx.db.update(
        INVENTORY, stock["sku"], {"available_quantity": stock["available_quantity"] - args.quantity}
    )
    product = ctx.db.require_first(PRODUCTS, f"Product SKU not found: {args.sku}", sku=args.sku)
    order_id = ctx.db.first_free_id(ORDERS, "ORD-2%07d", 1)
    line_id = ctx.db.first_free_id(LINE_ITEMS, "LIN-2%07d", 1)
    ctx.db.insert(
        ORDERS,
        {
            "id": order_id,
            "customer_id": args.customer_id,
            "order_date": WRITE_TS,
            "status": "processing",
            "subtotal_amount": 0.0,
            "discount_amount": 0.0,
            "points_used": 0,
            "points_value": 0.0,
            "shipping_cost": 0.0,
            "total_amount": 0.0,
            "shipping_address_line1": args.shipping_address_line1,
            "shipping_address_city": args.shipping_address_city,
            "shipping_address_state": args.shipping_address_state,
            "shipping_address_zip": args.shipping_address_zip,
            "shipping_speed": args.shipping_speed,
            "fulfillment_type": "warehouse",
            "installation_service_id": None,
        },
    )
    ctx.db.insert(
        LINE_ITEMS,
        {
            "id": line_id,
            "order_id": order_id,
            "sku": args.sku,
            "product_name": product["name"],
            "quantity": args.quantity,
            "base_price": 0.0,
            "discount_amount": 0.0,
            "final_price": 0.0,
        },
    )
    return {"replacement_order_id": order_id, "status": "processing", "total_amount": 0.0}


class GetOrderInput(ToolInput):
    order_id: str = Field(description=_ORDER_ID)


_ORDER_FIELDS = (
    "id",
    "customer_id",
    "order_date",
    "status",
    "subtotal_amount",
    "discount_amount",
    "points_used",
    "points_value",
    "shipping_cost",
    "total_amount",
    "shipping_address_line1",
    "shipping_address_city",
    "shipping_address_state",
    "shipping_address_zip",
    "shipping_speed",
    "fulfillment_type",
    "installation_service_id",
)
_LINE_FIELDS = ("id", "sku", "product_name", "quantity", "base_price", "discount_amount", "final_price")


@tool(
    "get_order",
    GetOrderInput,
    "Look up an order: status, pricing breakdown, shipping address and speed, linked installation "
    "and its line items.",
    catch_all="Failed to retrieve order",
)
def get_order(ctx: ToolContext, args: GetOrderInput) -> dict[str, Any]:
    order = _order(ctx, args.order_id)
    result: dict[str, Any] = {k: order[k] for k in _ORDER_FIELDS}
    result["order_date"] = out_dt(order["order_date"])
    result["line_items"] = [
        {k: li[k] for k in _LINE_FIELDS} for li in ctx.db.find(LINE_ITEMS, order_id=order["id"])
    ]
    return drop_nulls(result)


class GetShipmentTrackingInput(ToolInput):
    order_id: str = Field(description=_ORDER_ID)


@tool(
    "get_shipment_tracking",
    GetShipmentTrackingInput,
    "Show an order's shipment: carrier, tracking number, ship and delivery dates, and the carrier's "
    "current tracking status and location.",
    catch_all="Failed to retrieve shipment tracking",
)
def get_shipment_tracking(ctx: ToolContext, args: GetShipmentTrackingInput) -> dict[str, Any]:
    shipment = ctx.db.require_first(
        SHIPMENTS,
        f"No shipment found for order: {args.order_id} (may not be shipped yet)",
        order_id=args.order_id,
    )
    tracking = ctx.db.first(TRACKING, tracking_number=shipment["tracking_number"])
    return drop_nulls(
        {
            "shipment_id": shipment["id"],
            "order_id": shipment["order_id"],
            "carrier": shipment["carrier"],
            "tracking_number": shipment["tracking_number"],
            "ship_date": out_dt(shipment["ship_date"]),
            "estimated_delivery_date": out_dt(shipment["estimated_delivery_date"]),
            "actual_delivery_date": out_dt(shipment["actual_delivery_date"]),
            "tracking_status": tracking["status"] if tracking else "pending",
            "current_location": tracking["current_location"] if tracking else None,
        }
    )


class ReshipOrderInput(ToolInput):
    order_id: str = Field(description=_ORDER_ID)
    corrected_address_line1: str = Field(description="Corrected street line.")
    corrected_address_city: str = Field(description="Corrected city.")
    corrected_address_state: str = Field(description="Corrected state.")
    corrected_address_zip: str = Field(description="Corrected postal code.")
    customer_fault: bool = Field(
        description="True when the failed delivery was the customer's fault (a fee applies)."
    )


@tool(
    "reship_order",
    ReshipOrderInput,
    "Send a returned-to-sender order out again: fixes the shipping address and opens a new shipment "
    "with a new tracking number. Reports the reship fee (if the customer was at fault) without charging it.",
    catch_all="Failed to reship order",
)
def reship_order(ctx: ToolContext, args: ReshipOrderInput) -> dict[str, Any]:
    order = _order(ctx, args.order_id)
    shipment = ctx.db.require_first(
        SHIPMENTS, f"No shipment found for order: {args.order_id}", order_id=args.order_id
    )
    ctx.db.require_first(
        TRACKING,
        f"No tracking found for shipment: {shipment['id']}",
        tracking_number=shipment["tracking_number"],
    )
    ctx.db.update(
        ORDERS,
        order["id"],
        {
            "shipping_address_line1": args.corrected_address_line1,
            "shipping_address_city": args.corrected_address_city,
            "shipping_address_state": args.corrected_address_state,
            "shipping_address_zip": args.corrected_address_zip,
        },
    )
    shipment_id = ctx.db.first_free_id(SHIPMENTS, "SHP-2%07d", 1)
    tracking_number = ctx.db.first_free_id(TRACKING, "TRK-2%011d", 1)
    eta = WRITE_TS + RESHIP_TRANSIT
    ctx.db.insert(
        SHIPMENTS,
        {
            "id": shipment_id,
            "order_id": order["id"],
            "carrier": shipment["carrier"],
            "tracking_number": tracking_number,
            "ship_date": WRITE_TS,
            "estimated_delivery_date": eta,
            "actual_delivery_date": None,
        },
    )
    ctx.db.insert(
        TRACKING,
        {
            "tracking_number": tracking_number,
            "shipment_id": shipment_id,
            "carrier": shipment["carrier"],
            "status": "pending",
            "current_location": None,
            "estimated_delivery": eta,
            "last_update": WRITE_TS,
        },
    )
    return {
        "order_id": order["id"],
        "new_shipment_id": shipment_id,
        "new_tracking_number": tracking_number,
        "reship_cost": RESHIP_FEE if args.customer_fault else 0.0,
        "reship_initiated": True,
    }


class UpdateOrderAddressInput(ToolInput):
    order_id: str = Field(description=_ORDER_ID)
    new_address_line1: str = Field(description="New street line.")
    new_address_city: str = Field(description="New city.")
    new_address_state: str = Field(description="New state.")
    new_address_zip: str = Field(description="New postal code.")


@tool(
    "update_order_address",
    UpdateOrderAddressInput,
    "Change the shipping address of an order.",
    catch_all="Failed to update order address",
)
def update_order_address(ctx: ToolContext, args: UpdateOrderAddressInput) -> dict[str, Any]:
    order = _order(ctx, args.order_id)
    ctx.db.update(
        ORDERS,
        order["id"],
        {
            "shipping_address_line1": args.new_address_line1,
            "shipping_address_city": args.new_address_city,
            "shipping_address_state": args.new_address_state,
            "shipping_address_zip": args.new_address_zip,
        },
    )
    return {
        "order_id": order["id"],
        "address_updated": True,
        "new_shipping_address_line1": args.new_address_line1,
        "new_shipping_address_city": args.new_address_city,
        "new_shipping_address_state": args.new_address_state,
        "new_shipping_address_zip": args.new_address_zip,
    }


class UpdateShippingSpeedInput(ToolInput):
    order_id: str = Field(description=_ORDER_ID)
    new_shipping_speed: ShippingSpeed = Field(description="The shipping speed to switch to.")


@tool(
    "update_shipping_speed",
    UpdateShippingSpeedInput,
    "Switch an order to another shipping speed and recompute its shipping cost and total. Returns the "
    "price difference; charging or refunding it is a separate step.",
    catch_all="Failed to update shipping speed",
)
def update_shipping_speed(ctx: ToolContext, args: UpdateShippingSpeedInput) -> dict[str, Any]:
    order = _order(ctx, args.order_id)
    old_speed = order["shipping_speed"]
    old_cost = SHIPPING_PRICES[old_speed]
    new_cost = SHIPPING_PRICES[args.new_shipping_speed]
    total = ((order["subtotal_amount"] - order["discount_amount"]) - order["points_value"]) + new_cost
    ctx.db.update(
        ORDERS,
        order["id"],
        {"shipping_speed": args.new_shipping_speed, "shipping_cost": new_cost, "total_amount": total},
    )
    return {
        "order_id": order["id"],
        "old_shipping_speed": old_speed,
        "new_shipping_speed": args.new_shipping_speed,
        "cost_difference": new_cost - old_cost,
        "updated": True,
    }


TOOLS = (
    cancel_order,
    create_replacement_order,
    get_order,
    get_shipment_tracking,
    reship_order,
    update_order_address,
    update_shipping_speed,
)
