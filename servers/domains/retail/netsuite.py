"""Inventory levels."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from servers.domains.retail.common import INVENTORY, drop_nulls
from servers.engine.helpers import out_dt
from servers.engine.tools import ToolContext, ToolInput, tool


class CheckInventoryInput(ToolInput):
    sku: str = Field(description="Product SKU to check.")


@tool(
    "check_inventory",
    CheckInventoryInput,
    "Show stock for a SKU: units available and reserved, warehouse, and any expected restock.",
    catch_all="Failed to check inventory",
)
def check_inventory(ctx: ToolContext, args: CheckInventoryInput) -> dict[str, Any]:
    record = ctx.db.require_first(INVENTORY, f"SKU not found in inventory system: {args.sku}", sku=args.sku)
    return drop_nulls(
        {
            "sku": record["sku"],
            "available_quantity": record["available_quantity"],
            "reserved_quantity": record["reserved_quantity"],
            "warehouse_location": record["warehouse_location"],
            "restock_date": out_dt(record["restock_date"]),
            "expected_restock_quantity": record["expected_restock_quantity"],
        }
    )


TOOLS = (check_inventory,)
