"""Shared pieces of the retail toolsets: table keys, the fixed write clock and
output rendering helpers."""

from __future__ import annotations

import datetime as dt
from typing import Any

from servers.engine.tools import ToolContext, ToolError

# ---- table keys (state keys) ------------------------------------------------
_P = "external_retail_toolset_"
ORDERS = _P + "oms_models_orders"
LINE_ITEMS = _P + "oms_models_order_line_items"
SHIPMENTS = _P + "oms_models_shipments"
TRACKING = _P + "oms_models_carrier_tracking"
PAYMENTS = _P + "stripe_models_payment_transactions"
REFUNDS = _P + "stripe_models_refunds"
CONTRACTS = _P + "extend_models_warranty_contracts"
CLAIMS = _P + "extend_models_warranty_claims"
JOBS = _P + "jobber_models_installation_jobs"
RMAS = _P + "loop_returns_models_rma_records"
INVENTORY = _P + "netsuite_models_inventory_records"
PROMOTIONS = _P + "promo_models_active_promotions"
DISCOUNTS = _P + "promo_models_discount_applications"
PROFILES = _P + "salesforce_models_customer_profiles"
MEMBERSHIPS = _P + "salesforce_models_membership_records"
PRODUCTS = _P + "shopify_pim_models_products"

# ---- clock ------------------------------------------------------------------
# Every state-changing retail tool stamps rows with this fixed instant (five
# seconds after the nominal "now"); none of them reads a clock.
WRITE_TS = dt.datetime(2025, 10, 1, 13, 0, 5, tzinfo=dt.UTC)


def as_utc(value: dt.datetime) -> dt.datetime:
    """A naive stored datetime counts as UTC for comparisons."""
    return value.replace(tzinfo=dt.UTC) if value.tzinfo is None else value


def drop_nulls(value: Any) -> Any:
    """Remove null-valued keys at every level (the reference's output models
    are serialised without None fields)."""
    if isinstance(value, dict):
        return {k: drop_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [drop_nulls(v) for v in value]
    return value


def empty(value: str | None) -> bool:
    """The "not provided" test used by tools with alternative identifiers."""
    return value is None or value == ""


Lookup = tuple[str, str, str | None]  # (parameter name, column, given value)


def first_by_either(
    ctx: ToolContext, table: str, primary: Lookup, fallback: Lookup, missing: str
) -> dict[str, Any]:
    """The first row matching the primary identifier when it is given, else the
    fallback one; neither given, or no row, fails the call."""
    (p_name, p_col, p_val), (f_name, f_col, f_val) = primary, fallback
    if empty(p_val) and empty(f_val):
        raise ToolError(f"Either {p_name} or {f_name} must be provided")
    column, wanted = (p_col, p_val) if not empty(p_val) else (f_col, f_val)
    row = ctx.db.require_first(table, f"{missing}: {wanted}", **{column: wanted})
    return row
