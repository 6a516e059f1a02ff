"""Product catalogue."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from servers.domains.retail.common import PRODUCTS
from servers.engine.tools import ToolContext, ToolInput, tool


class GetProductDetailsInput(ToolInput):
    sku: str = Field(description="Product SKU to look up.")


@tool(
    "get_product_details",
    GetProductDetailsInput,
    "Show catalogue data for a SKU: name, category, brand, list price, weight, refurbished flag, "
    "points eligibility and whether it needs installation.",
    catch_all="Failed to retrieve product details",
)
def get_product_details(ctx: ToolContext, args: GetProductDetailsInput) -> dict[str, Any]:
    product = ctx.db.require_first(PRODUCTS, f"Product SKU not found: {args.sku}", sku=args.sku)
    return {
        k: product[k]
        for k in (
            "sku",
            "name",
            "category",
            "brand",
            "base_price",
            "weight_lbs",
            "is_refurbished",
            "points_redemption_eligible",
            "requires_installation",
        )
    }


TOOLS = (get_product_details,)
