"""Promotions engine: promotion codes and the discounts applied to orders."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from servers.domains.retail.common import DISCOUNTS, PROMOTIONS, drop_nulls
from servers.engine.helpers import out_dt
from servers.engine.tools import ToolContext, ToolError, ToolInput, tool


class GetDiscountApplicationInput(ToolInput):
    order_id: str = Field(description="Order identifier, e.g. ORD-10000001.")


@tool(
    "get_discount_application",
    GetDiscountApplicationInput,
    "Show how discounts were applied to an order: promotion code, points redeemed, loyalty pricing, "
    "total discount and the stacking rule used. An order without discounts gives an empty record.",
    catch_all="Failed to retrieve discount application",
)
def get_discount_application(ctx: ToolContext, args: GetDiscountApplicationInput) -> dict[str, Any]:
    app = ctx.db.first(DISCOUNTS, order_id=args.order_id)
    if app is None:
        return {
            "discount_app_id": "",
            "order_id": args.order_id,
            "points_used": 0,
            "loyalty_discount_applied": False,
            "total_discount_amount": 0.0,
        }
    return drop_nulls(
        {
            "discount_app_id": app["id"],
            "order_id": app["order_id"],
            "promo_code_used": app["promo_code_used"],
            "points_used": app["points_used"],
            "loyalty_discount_applied": app["loyalty_discount_applied"],
            "total_discount_amount": app["total_discount_amount"],
            "stacking_rule_applied": app["stacking_rule_applied"],
        }
    )


class GetPromotionDetailsInput(ToolInput):
    promo_code: str = Field(description="Promotion code, exactly as issued (case-sensitive).")


@tool(
    "get_promotion_details",
    GetPromotionDetailsInput,
    "Show the terms of a promotion code that is valid today: discount type and value, whether it "
    "combines with points or loyalty pricing, excluded SKUs and validity dates.",
    catch_all="Failed to retrieve promotion details",
)
def get_promotion_details(ctx: ToolContext, args: GetPromotionDetailsInput) -> dict[str, Any]:
    now = ctx.now
    for promo in ctx.db.find(PROMOTIONS, promo_code=args.promo_code):
        # Naive stored dates cannot be compared with the aware clock: that fails the call.
        if promo["valid_from"] <= now <= promo["valid_until"]:
            return drop_nulls(
                {
                    "promo_id": promo["id"],
                    "promo_code": promo["promo_code"],
                    "discount_type": promo["discount_type"],
                    "discount_value": promo["discount_value"],
                    "stackable_with_points": promo["stackable_with_points"],
                    "stackable_with_loyalty": promo["stackable_with_loyalty"],
                    "excluded_skus": list(promo["excluded_skus"]) or None,
                    "valid_from": out_dt(promo["valid_from"]),
                    "valid_until": out_dt(promo["valid_until"]),
                }
            )
    raise ToolError(f"Promotion code not found or expired: {args.promo_code}")


TOOLS = (get_discount_application, get_promotion_details)
