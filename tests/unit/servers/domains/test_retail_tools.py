"""Retail tools (servers/domains/retail): exact reply texts and state changes for every
tool, its error paths, the call pipeline's coercion and messages, and each
quirk of spec/retail.md §5.2 (the numbers in the test names refer to it).

Runs against the host PostgreSQL ($TBX_TEST_PG_DSN, default the throwaway
server on /tmp:55432) in a fresh database created and dropped by this module.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from typing import Any

import psycopg
import pytest
from pg_support import err, ok, reload

from judge import dump_canonical
from servers.domains.retail.common import (
    CLAIMS,
    CONTRACTS,
    INVENTORY,
    JOBS,
    LINE_ITEMS,
    MEMBERSHIPS,
    ORDERS,
    PAYMENTS,
    PROFILES,
    PROMOTIONS,
    REFUNDS,
    RMAS,
    SHIPMENTS,
    TRACKING,
)
from servers.domains.retail.domain import DOMAIN
from servers.engine.rows import to_state_row
from servers.engine.store import Store
from servers.engine.tools import ToolContext, run_tool

TABLES = DOMAIN.tables


# ---- database fixtures ----------------------------------------------------------
@pytest.fixture(scope="module")
def pg(seeded_database: Callable[..., psycopg.Connection[Any]]) -> psycopg.Connection[Any]:
    """A fresh database with the retail schema, dropped afterwards."""
    return seeded_database(DOMAIN)


class Retail:
    """One seeded retail database plus call helpers."""

    def __init__(self, conn: psycopg.Connection[Any]):
        self.conn = conn
        self.load()

    def load(self, patch: dict[str, Any] | None = None) -> None:
        """Reset every table to seed + `patch` (new rows get fresh, increasing `_seq`)."""
        reload(self.conn, DOMAIN, patch)

    def call(self, tool: str, args: dict[str, Any] | None = None, now: dt.datetime | None = None) -> str:
        t = DOMAIN.tool(tool)
        assert t is not None, tool
        ctx = ToolContext(db=Store(self.conn, TABLES))
        if now is not None:
            ctx.now = now
        return run_tool(t, ctx, args)

    def rows(self, table: str) -> list[dict[str, Any]]:
        """Raw state form, storage order."""
        spec = next(t for t in TABLES if t.name == table)
        return [to_state_row(spec, r) for r in Store(self.conn, TABLES).all(table)]

    def row(self, table: str, key: str) -> dict[str, Any] | None:
        spec = next(t for t in TABLES if t.name == table)
        r = Store(self.conn, TABLES).get(table, key)
        return None if r is None else to_state_row(spec, r)


@pytest.fixture
def db(pg: psycopg.Connection[Any]) -> Retail:
    return Retail(pg)


UTC = dt.UTC
WRITE_OUT = "2025-10-01T13:00:05+00:00"
WRITE_STATE = "2025-10-01T13:00:05Z"

RETAIL_TOOL_ORDER = [
    "cancel_order", "create_replacement_order", "get_order", "get_shipment_tracking", "reship_order",
    "update_order_address", "update_shipping_speed", "charge_customer", "create_refund", "get_payment_status",
    "check_warranty_coverage", "file_warranty_claim", "cancel_installation", "get_installation_job",
    "reschedule_installation", "create_rma", "get_rma_status", "check_inventory", "get_discount_application",
    "get_promotion_details", "add_points_to_balance", "get_customer_profile", "get_membership_details",
    "update_membership_status", "get_product_details", "search_policy",
]  # fmt: skip


# ---- listing ------------------------------------------------------------------------
def test_listing_order_zendesk_first_then_retail_then_policy() -> None:
    names = [t.name for t in DOMAIN.tools]
    zendesk = [n for n in names if n.startswith("zendesk_")]
    assert names[: len(zendesk)] == zendesk
    assert names[len(zendesk) :] == RETAIL_TOOL_ORDER
    assert DOMAIN.policy_tool == "search_policy"
    assert DOMAIN.server == "sandbox_external_retail"


# ---- OMS ----------------------------------------------------------------------------
ORDER_1 = {
    "id": "ORD-10000001", "customer_id": "CUS-10000001", "order_date": "2024-10-15T14:23:00+00:00",
    "status": "shipped", "subtotal_amount": 899.99, "discount_amount": 90.0, "points_used": 500,
    "points_value": 25.0, "shipping_cost": 0.0, "total_amount": 784.99, "shipping_address_line1": "123 Main St",
    "shipping_address_city": "Memphis", "shipping_address_state": "TN", "shipping_address_zip": "38103",
    "shipping_speed": "standard", "fulfillment_type": "warehouse", "installation_service_id": "JOB-10000001",
    "line_items": [
        {"id": "LIN-10000001", "sku": "SKU-10000001", "product_name": "Samsung 28 cu ft French Door Refrigerator",
         "quantity": 1, "base_price": 899.99, "discount_amount": 90.0, "final_price": 809.99},
    ],
}  # fmt: skip


def test_get_order_omits_null_keys_15(db: Retail) -> None:
    assert db.call("get_order", {"order_id": "ORD-10000001"}) == ok(ORDER_1)
    # null installation_service_id is omitted (15); the key order is otherwise unchanged
    reply = json.loads(db.call("get_order", {"order_id": "ORD-10000002"}))
    assert "installation_service_id" not in reply
    assert list(reply)[-2:] == ["fulfillment_type", "line_items"]


def test_get_order_errors_envelope_16(db: Retail) -> None:
    assert db.call("get_order", {"order_id": "ord-10000001"}) == err(
        "get_order", "Order not found: ord-10000001"
    )
    assert db.call("get_order", {}) == err("get_order", "Input validation failed: order_id: Field required")
    assert db.call("get_order", {"order_id": 10000001}) == err(
        "get_order", "Input validation failed: order_id: Input should be a valid string"
    )
    assert db.call("get_order", {"order_id": "ORD-10000001", "verbose": True}) == err(
        "get_order", "Input validation failed: verbose: Extra inputs are not permitted"
    )


def test_get_order_line_items_in_storage_order(db: Retail) -> None:
    base = {"order_id": "ORD-10000001", "sku": "SKU-1", "product_name": "P", "quantity": 1,
            "base_price": 1, "final_price": 1}  # fmt: skip
    db.load({LINE_ITEMS: [{**base, "id": "LIN-9"}, {**base, "id": "LIN-10"}]})
    items = json.loads(db.call("get_order", {"order_id": "ORD-10000001"}))["line_items"]
    assert [i["id"] for i in items] == ["LIN-10000001", "LIN-9", "LIN-10"]
    assert items[1]["base_price"] == 1.0 and items[1]["discount_amount"] == 0.0


def test_get_shipment_tracking(db: Retail) -> None:
    # actual_delivery_date is null, so omitted; carrier and dates come from the shipment row
    assert db.call("get_shipment_tracking", {"order_id": "ORD-10000001"}) == ok(
        {"shipment_id": "SHP-10000001", "order_id": "ORD-10000001", "carrier": "FedEx",
         "tracking_number": "TRK-100000000001", "ship_date": "2024-10-16T08:15:00+00:00",
         "estimated_delivery_date": "2024-10-22T17:00:00+00:00", "tracking_status": "in_transit",
         "current_location": "Memphis, TN"}
    )  # fmt: skip
    assert db.call("get_shipment_tracking", {"order_id": "ORD-10000002"}) == ok(
        {"shipment_id": "SHP-10000002", "order_id": "ORD-10000002", "carrier": "UPS",
         "tracking_number": "TRK-100000000002", "ship_date": "2024-10-10T10:30:00+00:00",
         "estimated_delivery_date": "2024-10-15T17:00:00+00:00",
         "actual_delivery_date": "2024-10-14T14:32:00+00:00", "tracking_status": "delivered",
         "current_location": "Customer Address"}
    )  # fmt: skip


def test_get_shipment_tracking_without_tracking_row_is_pending(db: Retail) -> None:
    db.load({SHIPMENTS: [{"id": "SHP-9", "order_id": "ORD-9", "carrier": "UPS", "tracking_number": "TRK-NONE",
                          "ship_date": "2025-09-01T00:00:00Z", "estimated_delivery_date": "2025-09-05T00:00:00Z"}]})  # fmt: skip
    assert db.call("get_shipment_tracking", {"order_id": "ORD-9"}) == ok(
        {"shipment_id": "SHP-9", "order_id": "ORD-9", "carrier": "UPS", "tracking_number": "TRK-NONE",
         "ship_date": "2025-09-01T00:00:00+00:00", "estimated_delivery_date": "2025-09-05T00:00:00+00:00",
         "tracking_status": "pending"}
    )  # fmt: skip


def test_get_shipment_tracking_error(db: Retail) -> None:
    assert db.call("get_shipment_tracking", {"order_id": "ORD-404"}) == err(
        "get_shipment_tracking", "No shipment found for order: ORD-404 (may not be shipped yet)"
    )


def test_cancel_order_refund_flag_from_prior_status(db: Retail) -> None:
    before = db.row(ORDERS, "ORD-10000002")
    assert db.call(
        "cancel_order", {"order_id": "ORD-10000002", "cancellation_reason": "customer_request"}
    ) == ok({"order_id": "ORD-10000002", "status": "cancelled", "refund_initiated": True})
    assert db.row(ORDERS, "ORD-10000002") == {**before, "status": "cancelled"}  # type: ignore[dict-item]
    assert db.rows(REFUNDS) == [r for r in db.rows(REFUNDS) if r["id"] == "RFD-10000001"]  # no refund row


def test_cancel_order_has_no_status_guard_10(db: Retail) -> None:
    args = {"order_id": "ORD-10000003", "cancellation_reason": "out_of_stock"}  # delivered
    want = ok({"order_id": "ORD-10000003", "status": "cancelled", "refund_initiated": False})
    assert db.call("cancel_order", args) == want
    assert db.call("cancel_order", args) == want  # already cancelled: cancelled again
    assert db.row(ORDERS, "ORD-10000003")["status"] == "cancelled"  # type: ignore[index]


def test_cancel_order_errors(db: Retail) -> None:
    assert db.call("cancel_order", {"order_id": "X", "cancellation_reason": "payment_failed"}) == err(
        "cancel_order", "Order not found: X"
    )
    assert db.call("cancel_order", {}) == err(
        "cancel_order",
        "Input validation failed: order_id: Field required; cancellation_reason: Field required",
    )
    assert db.call(
        "cancel_order", {"order_id": "ORD-10000001", "cancellation_reason": "Customer_Request"}
    ) == err(
        "cancel_order",
        "Input validation failed: cancellation_reason: Input should be 'customer_request', 'payment_failed', "
        "'address_undeliverable' or 'out_of_stock'",
    )


def test_update_order_address(db: Retail) -> None:
    args = {"order_id": "ORD-10000003", "new_address_line1": "1 New Rd", "new_address_city": "Knoxville",
            "new_address_state": "TN", "new_address_zip": "37902"}  # fmt: skip
    before = db.row(ORDERS, "ORD-10000003")
    assert db.call("update_order_address", args) == ok(
        {"order_id": "ORD-10000003", "address_updated": True, "new_shipping_address_line1": "1 New Rd",
         "new_shipping_address_city": "Knoxville", "new_shipping_address_state": "TN",
         "new_shipping_address_zip": "37902"}
    )  # fmt: skip
    assert db.row(ORDERS, "ORD-10000003") == {
        **before,  # type: ignore[dict-item]
        "shipping_address_line1": "1 New Rd", "shipping_address_city": "Knoxville",
        "shipping_address_state": "TN", "shipping_address_zip": "37902",
    }  # fmt: skip
    assert db.call("update_order_address", {**args, "order_id": "NOPE"}) == err(
        "update_order_address", "Order not found: NOPE"
    )
    assert db.call("update_order_address", {**args, "new_address_zip": 37902}) == err(
        "update_order_address", "Input validation failed: new_address_zip: Input should be a valid string"
    )


def test_update_shipping_speed_double_arithmetic_5(db: Retail) -> None:
    assert db.call("update_shipping_speed", {"order_id": "ORD-10000001", "new_shipping_speed": "next_day"}) == ok(
        {"order_id": "ORD-10000001", "old_shipping_speed": "standard", "new_shipping_speed": "next_day",
         "cost_difference": 29.99, "updated": True}
    )  # fmt: skip
    row = db.row(ORDERS, "ORD-10000001")
    assert (row["shipping_speed"], row["shipping_cost"], row["total_amount"]) == ("next_day", 29.99, 814.98)  # type: ignore[index]
    assert db.call("update_shipping_speed", {"order_id": "ORD-10000001", "new_shipping_speed": "expedited"}) == ok(
        {"order_id": "ORD-10000001", "old_shipping_speed": "next_day", "new_shipping_speed": "expedited",
         "cost_difference": -14.989999999999998, "updated": True}
    )  # fmt: skip
    row = db.row(ORDERS, "ORD-10000001")
    assert (row["shipping_cost"], row["total_amount"]) == (15.0, 799.99)  # type: ignore[index]


def test_update_shipping_speed_old_cost_from_speed_not_stored_cost_13(db: Retail) -> None:
    order = {**{k: v for k, v in ORDER_1.items() if k != "line_items"}, "id": "ORD-7", "order_date": "2025-09-01T00:00:00Z",
             "shipping_speed": "next_day", "shipping_cost": 0.0, "total_amount": 1.0}  # fmt: skip
    db.load({ORDERS: [order]})
    assert db.call("update_shipping_speed", {"order_id": "ORD-7", "new_shipping_speed": "standard"}) == ok(
        {"order_id": "ORD-7", "old_shipping_speed": "next_day", "new_shipping_speed": "standard",
         "cost_difference": -29.99, "updated": True}
    )  # fmt: skip
    # the stored total (1.0) is discarded and recomputed from its components
    assert db.row(ORDERS, "ORD-7")["total_amount"] == 784.99  # type: ignore[index]
    # same speed is accepted; difference 0.0
    assert (
        json.loads(db.call("update_shipping_speed", {"order_id": "ORD-7", "new_shipping_speed": "standard"}))[
            "cost_difference"
        ]
        == 0.0
    )


def test_update_shipping_speed_errors(db: Retail) -> None:
    assert db.call("update_shipping_speed", {"order_id": "NOPE", "new_shipping_speed": "standard"}) == err(
        "update_shipping_speed", "Order not found: NOPE"
    )
    assert db.call(
        "update_shipping_speed", {"order_id": "ORD-10000001", "new_shipping_speed": "overnight"}
    ) == err(
        "update_shipping_speed",
        "Input validation failed: new_shipping_speed: Input should be 'standard', 'expedited' or 'next_day'",
    )


REPLACEMENT = {"original_order_id": "ORD-10000001", "customer_id": "CUS-10000001", "sku": "SKU-10000001",
               "quantity": 1, "shipping_speed": "expedited", "shipping_address_line1": "123 Main St",
               "shipping_address_city": "Memphis", "shipping_address_state": "TN",
               "shipping_address_zip": "38103"}  # fmt: skip


def test_create_replacement_order(db: Retail) -> None:
    assert db.call("create_replacement_order", REPLACEMENT) == ok(
        {"replacement_order_id": "ORD-20000001", "status": "processing", "total_amount": 0.0}
    )
    assert db.row(ORDERS, "ORD-20000001") == {
        "id": "ORD-20000001", "customer_id": "CUS-10000001", "order_date": WRITE_STATE, "status": "processing",
        "subtotal_amount": 0.0, "discount_amount": 0.0, "points_used": 0, "points_value": 0.0,
        "shipping_cost": 0.0, "total_amount": 0.0, "shipping_address_line1": "123 Main St",
        "shipping_address_city": "Memphis", "shipping_address_state": "TN", "shipping_address_zip": "38103",
        "shipping_speed": "expedited", "fulfillment_type": "warehouse", "installation_service_id": None,
    }  # fmt: skip
    assert db.row(LINE_ITEMS, "LIN-20000001") == {
        "id": "LIN-20000001", "order_id": "ORD-20000001", "sku": "SKU-10000001",
        "product_name": "Samsung 28 cu ft French Door Refrigerator", "quantity": 1, "base_price": 0.0,
        "discount_amount": 0.0, "final_price": 0.0,
    }  # fmt: skip
    assert db.row(INVENTORY, "SKU-10000001") == {
        "sku": "SKU-10000001", "available_quantity": 14, "reserved_quantity": 3,
        "warehouse_location": "Memphis-A12", "restock_date": None, "expected_restock_quantity": None,
    }  # fmt: skip
    # ids take the first free counter value (8): a second call yields ...02
    assert (
        json.loads(db.call("create_replacement_order", REPLACEMENT))["replacement_order_id"] == "ORD-20000002"
    )
    assert db.row(LINE_ITEMS, "LIN-20000002")["order_id"] == "ORD-20000002"  # type: ignore[index]


def test_create_replacement_order_skips_ids_taken_by_patch(db: Retail) -> None:
    order = {k: v for k, v in ORDER_1.items() if k != "line_items"} | {"id": "ORD-20000001",
             "order_date": "2025-09-01T00:00:00Z"}  # fmt: skip
    line = {"id": "LIN-20000001", "order_id": "ORD-20000001", "sku": "X", "product_name": "X", "quantity": 1,
            "base_price": 1.0, "final_price": 1.0}  # fmt: skip
    db.load({ORDERS: [order], LINE_ITEMS: [line]})
    assert (
        json.loads(db.call("create_replacement_order", REPLACEMENT))["replacement_order_id"] == "ORD-20000002"
    )
    assert db.row(LINE_ITEMS, "LIN-20000002")["order_id"] == "ORD-20000002"  # type: ignore[index]


def test_create_replacement_order_out_of_stock(db: Retail) -> None:
    for sku in ("SKU-10000002", "SKU-UNKNOWN"):  # stock exactly 0, no inventory record
        assert db.call("create_replacement_order", {**REPLACEMENT, "sku": sku}) == err(
            "create_replacement_order",
            f"Product out of stock - cannot create replacement order for SKU {sku}. Available quantity is 0.",
        )
    assert len(db.rows(ORDERS)) == 3


def test_create_replacement_order_partial_effect_and_unbounded_stock_1(db: Retail) -> None:
    inv = {"sku": "SKU-NOPRODUCT", "available_quantity": 3, "reserved_quantity": 0}
    neg = {"sku": "SKU-10000007", "available_quantity": -1, "reserved_quantity": 0}
    db.load({INVENTORY: [inv, neg]})
    # no product row: fails, but the decrement made before the product look-up stays
    assert db.call("create_replacement_order", {**REPLACEMENT, "sku": "SKU-NOPRODUCT", "quantity": 2}) == err(
        "create_replacement_order", "Product SKU not found: SKU-NOPRODUCT"
    )
    assert db.row(INVENTORY, "SKU-NOPRODUCT")["available_quantity"] == 1  # type: ignore[index]
    assert len(db.rows(ORDERS)) == 3
    # negative stock passes the check and goes further down; a negative quantity adds stock
    assert "replacement_order_id" in db.call(
        "create_replacement_order", {**REPLACEMENT, "sku": "SKU-10000007"}
    )
    assert db.row(INVENTORY, "SKU-10000007")["available_quantity"] == -2  # type: ignore[index]
    db.call("create_replacement_order", {**REPLACEMENT, "quantity": -5})
    assert db.row(INVENTORY, "SKU-10000001")["available_quantity"] == 20  # type: ignore[index]


def test_create_replacement_order_validation(db: Retail) -> None:
    assert db.call("create_replacement_order", {**REPLACEMENT, "quantity": 1.5}) == err(
        "create_replacement_order",
        "Input validation failed: quantity: Input should be a valid integer, got a number with a fractional part",
    )
    # lax coercion: "2" and 2.0 are integers
    db.call("create_replacement_order", {**REPLACEMENT, "quantity": "2"})
    db.call("create_replacement_order", {**REPLACEMENT, "quantity": 2.0})
    assert db.row(INVENTORY, "SKU-10000001")["available_quantity"] == 11  # type: ignore[index]


RESHIP = {"order_id": "ORD-10000001", "corrected_address_line1": "125 Main St", "corrected_address_city": "Memphis",
          "corrected_address_state": "TN", "corrected_address_zip": "38103", "customer_fault": True}  # fmt: skip


def test_reship_order(db: Retail) -> None:
    assert db.call("reship_order", RESHIP) == ok(
        {"order_id": "ORD-10000001", "new_shipment_id": "SHP-20000001", "new_tracking_number": "TRK-200000000001",
         "reship_cost": 15.0, "reship_initiated": True}
    )  # fmt: skip
    assert db.row(ORDERS, "ORD-10000001")["shipping_address_line1"] == "125 Main St"  # type: ignore[index]
    assert db.rows(SHIPMENTS)[-1] == {
        "id": "SHP-20000001", "order_id": "ORD-10000001", "carrier": "FedEx", "tracking_number": "TRK-200000000001",
        "ship_date": WRITE_STATE, "estimated_delivery_date": "2025-10-06T13:00:05Z", "actual_delivery_date": None,
    }  # fmt: skip
    assert db.rows(TRACKING)[-1] == {
        "tracking_number": "TRK-200000000001", "shipment_id": "SHP-20000001", "carrier": "FedEx",
        "status": "pending", "current_location": None, "estimated_delivery": "2025-10-06T13:00:05Z",
        "last_update": WRITE_STATE,
    }  # fmt: skip
    assert db.row(TRACKING, "TRK-100000000001")["status"] == "in_transit"  # type: ignore[index]  # untouched
    reply = json.loads(db.call("reship_order", {**RESHIP, "customer_fault": "no"}))
    assert (reply["new_shipment_id"], reply["new_tracking_number"], reply["reship_cost"]) == (
        "SHP-20000002",
        "TRK-200000000002",
        0.0,
    )


def test_shipment_tracking_keeps_first_shipment_after_reship_12(db: Retail) -> None:
    before = db.call("get_shipment_tracking", {"order_id": "ORD-10000001"})
    db.call("reship_order", RESHIP)
    assert db.call("get_shipment_tracking", {"order_id": "ORD-10000001"}) == before


def test_reship_order_errors(db: Retail) -> None:
    order = {k: v for k, v in ORDER_1.items() if k != "line_items"} | {
        "id": "ORD-8",
        "order_date": "2025-09-01T00:00:00Z",
    }
    ship = {"id": "SHP-8", "order_id": "ORD-8", "carrier": "UPS", "tracking_number": "TRK-GONE",
            "ship_date": "2025-09-02T00:00:00Z", "estimated_delivery_date": "2025-09-05T00:00:00Z"}  # fmt: skip
    db.load({ORDERS: [order, {**order, "id": "ORD-9"}], SHIPMENTS: [ship]})
    assert db.call("reship_order", {**RESHIP, "order_id": "NOPE"}) == err(
        "reship_order", "Order not found: NOPE"
    )
    assert db.call("reship_order", {**RESHIP, "order_id": "ORD-9"}) == err(
        "reship_order", "No shipment found for order: ORD-9"
    )
    assert db.call("reship_order", {**RESHIP, "order_id": "ORD-8"}) == err(
        "reship_order", "No tracking found for shipment: SHP-8"
    )
    # the checks run before any write
    assert db.row(ORDERS, "ORD-8")["shipping_address_line1"] == "123 Main St"  # type: ignore[index]
    assert len(db.rows(SHIPMENTS)) == 4
    assert db.call("reship_order", {**RESHIP, "customer_fault": "maybe"}) == err(
        "reship_order",
        "Input validation failed: customer_fault: Input should be a valid boolean, unable to interpret input",
    )


# ---- Stripe -------------------------------------------------------------------------
def test_get_payment_status(db: Retail) -> None:
    assert db.call("get_payment_status", {"order_id": "ORD-10000003"}) == ok(
        {"transaction_id": "TXN-10000003", "order_id": "ORD-10000003", "customer_id": "CUS-10000003",
         "amount": 2499.99, "status": "declined", "payment_method": "Visa ending in 5678",
         "transaction_date": "2024-10-18T16:45:00+00:00"}
    )  # fmt: skip
    assert db.call("get_payment_status", {"order_id": "ORD-1"}) == err(
        "get_payment_status", "No payment transaction found for order: ORD-1"
    )


def test_charge_customer(db: Retail) -> None:
    args = {
        "order_id": "ORD-10000001",
        "customer_id": "CUS-10000001",
        "amount": 15,
        "charge_reason": "reship_fee",
    }
    assert db.call("charge_customer", args) == ok(
        {"transaction_id": "TXN-20000003", "order_id": "ORD-10000001", "amount": 15.0, "status": "authorized",
         "transaction_date": WRITE_OUT}
    )  # fmt: skip
    assert db.row(PAYMENTS, "TXN-20000003") == {
        "id": "TXN-20000003", "order_id": "ORD-10000001", "customer_id": "CUS-10000001", "amount": 15.0,
        "status": "authorized", "payment_method": "Card on file", "transaction_date": WRITE_STATE,
        "charge_reason": "reship_fee",
    }  # fmt: skip
    # get_payment_status keeps returning the original payment (storage order)
    assert (
        json.loads(db.call("get_payment_status", {"order_id": "ORD-10000001"}))["transaction_id"]
        == "TXN-10000001"
    )
    # nothing is checked about the order or customer (8); numeric strings are numbers
    reply = json.loads(db.call("charge_customer", {**args, "order_id": "ORD-NONE", "amount": "12.5"}))
    assert (reply["transaction_id"], reply["amount"]) == ("TXN-20000004", 12.5)


def test_charge_customer_count_based_id_without_retry_2(db: Retail) -> None:
    txn = {"id": "TXN-20000004", "order_id": "ORD-5", "customer_id": "CUS-5", "amount": 1, "status": "failed",
           "payment_method": "Visa", "transaction_date": "2025-09-01T00:00:00Z"}  # fmt: skip
    db.load({PAYMENTS: [txn]})  # 4 rows: the next id is TXN-20000004, already taken
    args = {
        "order_id": "ORD-5",
        "customer_id": "CUS-5",
        "amount": 55,
        "charge_reason": "installation_cancelled_shipping",
    }
    assert db.call("charge_customer", args) == err(
        "charge_customer", "Failed to charge customer: Object with ID TXN-20000004 already exists"
    )
    assert len(db.rows(PAYMENTS)) == 4
    assert db.call("charge_customer", {**args, "charge_reason": "refund"}) == err(
        "charge_customer",
        "Input validation failed: charge_reason: Input should be 'shipping_upgrade', 'reship_fee' or "
        "'installation_cancelled_shipping'",
    )


def test_create_refund(db: Retail) -> None:
    args = {"order_id": "ORD-10000001", "customer_id": "CUS-IGNORED", "amount": 124.5,
            "refund_reason": "late_delivery_compensation"}  # fmt: skip
    assert db.call("create_refund", args) == ok(
        {"refund_id": "RFD-20000001", "transaction_id": "TXN-10000001", "amount": 124.5, "status": "pending",
         "refund_date": WRITE_OUT}
    )  # fmt: skip
    assert db.row(REFUNDS, "RFD-20000001") == {
        "id": "RFD-20000001", "transaction_id": "TXN-10000001", "order_id": "ORD-10000001", "amount": 124.5,
        "refund_reason": "late_delivery_compensation", "status": "pending", "refund_date": WRITE_STATE,
    }  # fmt: skip
    # a negative integer amount is accepted and stored as a float
    reply = json.loads(db.call("create_refund", {**args, "amount": -3}))
    assert (reply["refund_id"], reply["amount"]) == ("RFD-20000002", -3.0)


@pytest.mark.parametrize("amount", ["NaN", "nan", "inf", "-Infinity", "1e999", float("nan"), float("inf")])
def test_create_refund_refuses_non_finite_amounts(db: Retail, amount: Any) -> None:
    # The schema says "number": a non-finite one is the ordinary input error, and nothing is stored.
    before = db.rows(REFUNDS)
    args = {"order_id": "ORD-10000001", "customer_id": "CUS-1", "amount": amount,
            "refund_reason": "late_delivery_compensation"}  # fmt: skip
    assert db.call("create_refund", args) == err(
        "create_refund", "Input validation failed: amount: Input should be a finite number"
    )
    assert db.rows(REFUNDS) == before


def test_create_refund_links_to_a_charge_when_it_is_the_only_payment(db: Retail) -> None:
    db.call(
        "charge_customer",
        {"order_id": "ORD-NEW", "customer_id": "C", "amount": 5, "charge_reason": "reship_fee"},
    )
    reply = db.call("create_refund", {"order_id": "ORD-NEW", "customer_id": "C", "amount": 5,
                                      "refund_reason": "order_cancelled"})  # fmt: skip
    assert json.loads(reply)["transaction_id"] == "TXN-20000003"


def test_create_refund_errors_2(db: Retail) -> None:
    args = {"order_id": "ORD-404", "customer_id": "C", "amount": 1, "refund_reason": "rma_processed"}
    assert db.call("create_refund", args) == err(
        "create_refund", "Original payment transaction not found for order: ORD-404"
    )
    refund = {"id": "RFD-20000002", "transaction_id": "TXN-1", "order_id": "ORD-1", "amount": 1,
              "refund_reason": "rma_processed", "refund_date": "2025-09-01T00:00:00Z"}  # fmt: skip
    db.load({REFUNDS: [refund]})  # 2 rows: the next id RFD-20000002 is taken, no retry
    assert db.call("create_refund", {**args, "order_id": "ORD-10000002"}) == err(
        "create_refund", "Failed to create refund: Object with ID RFD-20000002 already exists"
    )
    assert len(db.rows(REFUNDS)) == 2
    assert db.call("create_refund", {**args, "amount": "lots"}) == err(
        "create_refund",
        "Input validation failed: amount: Input should be a valid number, unable to parse string as a number",
    )


# ---- Extend -------------------------------------------------------------------------
def test_check_warranty_coverage_at_nominal_now_7(db: Retail) -> None:
    assert db.call("check_warranty_coverage", {"order_id": "ORD-10000001", "sku": "SKU-10000001"}) == ok(
        {"has_coverage": True, "contract_id": "WCT-10000001", "warranty_type": "manufacturer",
         "start_date": "2024-10-15T00:00:00+00:00", "end_date": "2027-10-15T00:00:00+00:00",
         "coverage_details": "Covers defects in materials and workmanship"}
    )  # fmt: skip
    # WCT-10000004 ended 2025-01-20: not an error, just no coverage (14)
    args = {"order_id": "ORD-10000004", "sku": "SKU-10000004"}
    assert db.call("check_warranty_coverage", args) == ok({"has_coverage": False})
    # the comparison uses the context's clock, inclusive at the end
    assert (
        json.loads(db.call("check_warranty_coverage", args, now=dt.datetime(2025, 1, 20, tzinfo=UTC)))[
            "contract_id"
        ]
        == "WCT-10000004"
    )
    assert db.call("check_warranty_coverage", {"order_id": "ORD-10000001", "sku": "SKU-10000002"}) == ok(
        {"has_coverage": False}
    )


def test_check_warranty_coverage_naive_dates_count_as_utc(db: Retail) -> None:
    contract = {"id": "WCT-9", "order_id": "ORD-9", "sku": "S9", "customer_id": "C9", "warranty_type": "protection_plan",
                "start_date": "2025-01-01T00:00:00", "end_date": "2025-10-01T13:00:00", "coverage_details": "All"}  # fmt: skip
    db.load({CONTRACTS: [contract]})
    assert db.call("check_warranty_coverage", {"order_id": "ORD-9", "sku": "S9"}) == ok(
        {"has_coverage": True, "contract_id": "WCT-9", "warranty_type": "protection_plan",
         "start_date": "2025-01-01T00:00:00", "end_date": "2025-10-01T13:00:00", "coverage_details": "All"}
    )  # fmt: skip
    assert db.call("check_warranty_coverage", {"order_id": "ORD-9"}) == err(
        "check_warranty_coverage", "Input validation failed: sku: Field required"
    )


def test_file_warranty_claim(db: Retail) -> None:
    args = {
        "contract_id": "WCT-10000001",
        "customer_id": "CUS-99",
        "warranty_issue_type": "product_not_functioning",
    }
    assert db.call("file_warranty_claim", args) == ok(
        {"claim_id": "WCL-20000003", "status": "pending", "claim_date": WRITE_OUT}
    )
    assert db.row(CLAIMS, "WCL-20000003") == {
        "id": "WCL-20000003", "contract_id": "WCT-10000001", "customer_id": "CUS-99", "claim_date": WRITE_STATE,
        "issue_description": "Product not functioning properly", "status": "pending", "resolution": None,
    }  # fmt: skip
    expected = {"component_failed": "Component failed", "performance_degradation": "Performance degradation",
                "accidental_damage": "Accidental damage"}  # fmt: skip
    for n, (issue, text) in enumerate(expected.items(), start=4):
        assert json.loads(db.call("file_warranty_claim", {**args, "warranty_issue_type": issue}))[
            "claim_id"
        ] == (f"WCL-2000000{n}")
        assert db.row(CLAIMS, f"WCL-2000000{n}")["issue_description"] == text  # type: ignore[index]


def test_file_warranty_claim_counter_retries_upward_2(db: Retail) -> None:
    claim = {"id": "WCL-20000004", "contract_id": "X", "customer_id": "C", "claim_date": "2025-09-01T00:00:00Z",
             "issue_description": "x", "status": "denied"}  # fmt: skip
    db.load({CLAIMS: [claim]})  # 4 rows: WCL-20000004 is taken, so WCL-20000005
    args = {"contract_id": "WCT-10000002", "customer_id": "C", "warranty_issue_type": "component_failed"}
    assert json.loads(db.call("file_warranty_claim", args))["claim_id"] == "WCL-20000005"


def test_file_warranty_claim_errors(db: Retail) -> None:
    args = {"contract_id": "WCT-404", "customer_id": "C", "warranty_issue_type": "accidental_damage"}
    assert db.call("file_warranty_claim", args) == err(
        "file_warranty_claim", "Warranty contract not found: WCT-404"
    )
    assert len(db.rows(CLAIMS)) == 3


# ---- Jobber -------------------------------------------------------------------------
def test_get_installation_job(db: Retail) -> None:
    # technician_id and completion_date null -> omitted; workmanship_warranty_end never shown
    assert db.call("get_installation_job", {"job_id": "JOB-10000003", "order_id": None}) == ok(
        {"job_id": "JOB-10000003", "order_id": "ORD-10000003", "customer_id": "CUS-10000003",
         "service_type": "appliance_advanced", "scheduled_date": "2024-11-05T09:00:00+00:00", "status": "scheduled",
         "service_cost": 249.0}
    )  # fmt: skip
    assert db.call("get_installation_job", {"order_id": "ORD-10000002"}) == ok(
        {"job_id": "JOB-10000002", "order_id": "ORD-10000002", "customer_id": "CUS-10000002",
         "service_type": "tv_mounting", "scheduled_date": "2024-10-20T14:00:00+00:00", "technician_id": "TECH-0023",
         "status": "completed", "completion_date": "2024-10-20T16:30:00+00:00", "service_cost": 99.0}
    )  # fmt: skip


def test_get_installation_job_id_wins_over_order_18(db: Retail) -> None:
    reply = json.loads(
        db.call("get_installation_job", {"job_id": "JOB-10000001", "order_id": "ORD-10000002"})
    )
    assert reply["job_id"] == "JOB-10000001"
    # an unknown id does not fall back to the order
    assert db.call("get_installation_job", {"job_id": "JOB-404", "order_id": "ORD-10000002"}) == err(
        "get_installation_job", "Installation job not found: JOB-404"
    )
    # an empty id does
    assert json.loads(db.call("get_installation_job", {"job_id": "", "order_id": "ORD-10000002"}))[
        "job_id"
    ] == ("JOB-10000002")


def test_get_installation_job_errors(db: Retail) -> None:
    for args in ({}, {"job_id": None, "order_id": None}, {"job_id": "", "order_id": ""}):
        assert db.call("get_installation_job", args) == err(
            "get_installation_job", "Either job_id or order_id must be provided"
        )
    assert db.call("get_installation_job", {"order_id": "ORD-404"}) == err(
        "get_installation_job", "Installation job not found: ORD-404"
    )


def test_cancel_installation_leaves_order_untouched_9(db: Retail) -> None:
    order_before = db.row(ORDERS, "ORD-10000001")
    args = {
        "job_id": "JOB-10000001",
        "order_id": "ORD-UNUSED",
        "cancellation_reason": "customer_cancelled_order",
    }
    assert db.call("cancel_installation", args) == ok(
        {"job_id": "JOB-10000001", "status": "cancelled", "service_cost_refunded": 129.0}
    )
    assert db.row(JOBS, "JOB-10000001")["status"] == "cancelled"  # type: ignore[index]
    assert db.row(ORDERS, "ORD-10000001") == order_before  # installation_service_id kept
    assert len(db.rows(REFUNDS)) == 1
    # no status guard: a completed job is cancelled too (10)
    assert db.call("cancel_installation", {**args, "job_id": "JOB-10000002"}) == ok(
        {"job_id": "JOB-10000002", "status": "cancelled", "service_cost_refunded": 99.0}
    )


def test_cancel_installation_errors(db: Retail) -> None:
    args = {"job_id": "JOB-404", "order_id": "ORD-10000001", "cancellation_reason": "product_incompatible"}
    assert db.call("cancel_installation", args) == err(
        "cancel_installation", "Installation job not found: JOB-404"
    )
    assert db.call(
        "cancel_installation", {"job_id": "JOB-10000001", "cancellation_reason": "address_inaccessible"}
    ) == (err("cancel_installation", "Input validation failed: order_id: Field required"))


def test_reschedule_installation_workmanship_reopens_completed_job(db: Retail) -> None:
    args = {"job_id": "JOB-10000002", "reschedule_reason": "workmanship_issue",
            "new_scheduled_date": "2025-10-12T10:00:00.000Z"}  # fmt: skip
    assert db.call("reschedule_installation", args) == ok(
        {"job_id": "JOB-10000002", "old_scheduled_date": "2024-10-20T14:00:00+00:00",
         "new_scheduled_date": "2025-10-12T10:00:00+00:00", "status": "scheduled"}
    )  # fmt: skip
    assert db.row(JOBS, "JOB-10000002") == {
        "id": "JOB-10000002", "order_id": "ORD-10000002", "customer_id": "CUS-10000002", "service_type": "tv_mounting",
        "scheduled_date": "2025-10-12T10:00:00Z", "technician_id": "TECH-0023", "status": "scheduled",
        "completion_date": "2024-10-20T16:30:00Z", "workmanship_warranty_end": "2025-01-18T23:59:59Z",
        "service_cost": 99.0,
    }  # fmt: skip


def test_reschedule_installation_keeps_status_and_input_timezone_6(db: Retail) -> None:
    db.call(
        "cancel_installation",
        {"job_id": "JOB-10000001", "order_id": "x", "cancellation_reason": "product_incompatible"},
    )
    cases = [
        ("2025-10-12T10:00:00-05:00", "2025-10-12T10:00:00-05:00", "2025-10-12T10:00:00-05:00"),
        ("2025-10-12 10:00", "2025-10-12T10:00:00", "2025-10-12T10:00:00"),  # naive stays naive
        ("2025-10-12", "2025-10-12T00:00:00", "2025-10-12T00:00:00"),
        (1760263200, "2025-10-12T10:00:00+00:00", "2025-10-12T10:00:00Z"),  # Unix seconds
        ("2025-10-12T10:00:00.5Z", "2025-10-12T10:00:00.500000+00:00", "2025-10-12T10:00:00.500000Z"),
    ]
    for given, out, state in cases:
        reply = json.loads(db.call("reschedule_installation", {"job_id": "JOB-10000001", "new_scheduled_date": given,
                                                               "reschedule_reason": "workmanship_issue"}))  # fmt: skip
        # the cancelled job stays cancelled: only completed jobs reopen
        assert (reply["new_scheduled_date"], reply["status"]) == (out, "cancelled")
        assert db.row(JOBS, "JOB-10000001")["scheduled_date"] == state  # type: ignore[index]
    reply = json.loads(db.call("reschedule_installation", {"job_id": "JOB-10000002", "new_scheduled_date": "2025-11-01T09:00:00Z",
                                                           "reschedule_reason": "customer_request"}))  # fmt: skip
    assert reply["status"] == "completed"


def test_reschedule_installation_errors(db: Retail) -> None:
    args = {
        "job_id": "JOB-404",
        "new_scheduled_date": "2025-10-12T10:00:00Z",
        "reschedule_reason": "weather_delay",
    }
    assert db.call("reschedule_installation", args) == err(
        "reschedule_installation", "Installation job not found: JOB-404"
    )
    assert db.call("reschedule_installation", {**args, "new_scheduled_date": "2025-13-01T10:00:00Z"}) == err(
        "reschedule_installation",
        "Input validation failed: new_scheduled_date: Input should be a valid datetime or date, "
        "month value is outside expected range of 1-12",
    )
    assert db.call("reschedule_installation", {**args, "new_scheduled_date": None}) == err(
        "reschedule_installation",
        "Input validation failed: new_scheduled_date: Input should be a valid datetime",
    )


# ---- Loop Returns -------------------------------------------------------------------
RMA_ARGS = {"order_id": "ORD-10000015", "customer_id": "CUS-10000015", "removal_fee": 0, "is_defective": False,
            "line_item_id": "LIN-10000015", "refund_amount": 144, "return_reason": "wrong_item_received",
            "restocking_fee": 27, "return_shipping_cost": 8.99}  # fmt: skip


def test_create_rma(db: Retail) -> None:
    assert db.call("create_rma", RMA_ARGS) == ok(
        {"rma_id": "RMA-20000004", "status": "approved", "created_date": WRITE_OUT}
    )
    assert db.row(RMAS, "RMA-20000004") == {
        "id": "RMA-20000004", "order_id": "ORD-10000015", "line_item_id": "LIN-10000015",
        "customer_id": "CUS-10000015", "return_reason": "wrong_item_received", "is_defective": False,
        "status": "approved", "created_date": WRITE_STATE, "refund_amount": 144.0, "restocking_fee": 27.0,
        "return_shipping_cost": 8.99, "removal_fee": 0.0,
    }  # fmt: skip
    # is_defective defaults to false and is never derived from the reason
    args = {k: v for k, v in RMA_ARGS.items() if k != "is_defective"} | {"return_reason": "defective"}
    assert json.loads(db.call("create_rma", args))["rma_id"] == "RMA-20000005"
    assert db.row(RMAS, "RMA-20000005")["is_defective"] is False  # type: ignore[index]


def test_create_rma_counter_retries_upward(db: Retail) -> None:
    rma = {
        **{k: v for k, v in RMA_ARGS.items()},
        "id": "RMA-20000005",
        "created_date": "2025-09-01T00:00:00Z",
    }
    db.load({RMAS: [rma]})  # 5 rows: RMA-20000005 taken
    assert json.loads(db.call("create_rma", RMA_ARGS))["rma_id"] == "RMA-20000006"


def test_create_rma_errors(db: Retail) -> None:
    args = {k: v for k, v in RMA_ARGS.items() if k not in ("refund_amount", "removal_fee")}
    assert db.call("create_rma", {**args, "is_defective": 2}) == err(
        "create_rma",
        "Input validation failed: is_defective: Input should be a valid boolean, unable to interpret input; "
        "refund_amount: Field required; "
        "removal_fee: Field required",
    )
    assert len(db.rows(RMAS)) == 4


def test_get_rma_status(db: Retail) -> None:
    assert db.call("get_rma_status", {"rma_id": "RMA-10000002"}) == ok(
        {"rma_id": "RMA-10000002", "order_id": "ORD-10012346", "line_item_id": "LIN-10012346",
         "customer_id": "CUS-10000002", "return_reason": "changed_mind", "status": "refunded", "refund_amount": 416.01,
         "restocking_fee": 75.0, "return_shipping_cost": 8.99, "removal_fee": 0.0,
         "created_date": "2024-10-18T14:30:00+00:00"}
    )  # fmt: skip
    assert db.call("get_rma_status", {"rma_id": "RMA-404"}) == err("get_rma_status", "RMA not found: RMA-404")


# ---- NetSuite -------------------------------------------------------------------
def test_check_inventory(db: Retail) -> None:
    assert db.call("check_inventory", {"sku": "SKU-10000001"}) == ok(
        {
            "sku": "SKU-10000001",
            "available_quantity": 15,
            "reserved_quantity": 3,
            "warehouse_location": "Memphis-A12",
        }
    )
    assert db.call("check_inventory", {"sku": "SKU-10000002"}) == ok(
        {"sku": "SKU-10000002", "available_quantity": 0, "reserved_quantity": 0, "warehouse_location": "Memphis-B05",
         "restock_date": "2024-11-05T00:00:00+00:00", "expected_restock_quantity": 50}
    )  # fmt: skip
    assert db.call("check_inventory", {"sku": "SKU-10000007"}) == err(
        "check_inventory", "SKU not found in inventory system: SKU-10000007"
    )


# ---- Promotions -------------------------------------------------------------------
def test_get_discount_application_never_fails_14(db: Retail) -> None:
    assert db.call("get_discount_application", {"order_id": "ORD-10012346"}) == ok(
        {"discount_app_id": "DSC-10000002", "order_id": "ORD-10012346", "points_used": 500,
         "loyalty_discount_applied": False, "total_discount_amount": 25.0,
         "stacking_rule_applied": "points_redemption_only"}
    )  # fmt: skip
    # never an error: an unknown order gives an empty record (14)
    assert db.call("get_discount_application", {"order_id": "ORD-404"}) == ok(
        {"discount_app_id": "", "order_id": "ORD-404", "points_used": 0, "loyalty_discount_applied": False,
         "total_discount_amount": 0.0}
    )  # fmt: skip
    assert db.call("get_discount_application", {"order_id": None}) == err(
        "get_discount_application", "Input validation failed: order_id: Input should be a valid string"
    )


def test_get_promotion_details(db: Retail) -> None:
    assert db.call("get_promotion_details", {"promo_code": "WELCOME10"}) == ok(
        {"promo_id": "PRM-10000004", "promo_code": "WELCOME10", "discount_type": "percentage", "discount_value": 10.0,
         "stackable_with_points": True, "stackable_with_loyalty": True, "valid_from": "2024-01-01T00:00:00+00:00",
         "valid_until": "2025-12-31T23:59:59+00:00"}
    )  # fmt: skip
    for code in ("SAVE20", "welcome10"):  # expired at the nominal now; case-sensitive
        assert db.call("get_promotion_details", {"promo_code": code}) == err(
            "get_promotion_details", f"Promotion code not found or expired: {code}"
        )
    # at another "now" SAVE20 is valid; excluded SKUs in stored order
    assert db.call("get_promotion_details", {"promo_code": "SAVE20"}, now=dt.datetime(2024, 10, 10, tzinfo=UTC)) == ok(
        {"promo_id": "PRM-10000001", "promo_code": "SAVE20", "discount_type": "percentage", "discount_value": 20.0,
         "stackable_with_points": False, "stackable_with_loyalty": True,
         "excluded_skus": ["SKU-10099999", "SKU-10099998"], "valid_from": "2024-10-01T00:00:00+00:00",
         "valid_until": "2024-10-31T23:59:59+00:00"}
    )  # fmt: skip


def test_get_promotion_details_skips_expired_and_fails_on_naive_dates(db: Retail) -> None:
    promo = {"promo_code": "SAVE20", "discount_type": "fixed_amount", "discount_value": 5,
             "valid_from": "2025-09-01T00:00:00Z", "valid_until": "2025-11-01T00:00:00Z"}  # fmt: skip
    naive = {**promo, "id": "PRM-N", "promo_code": "NAIVE", "valid_from": "2025-09-01T00:00:00"}
    db.load({PROMOTIONS: [{**promo, "id": "PRM-9"}, naive]})
    assert json.loads(db.call("get_promotion_details", {"promo_code": "SAVE20"}))["promo_id"] == "PRM-9"
    assert db.call("get_promotion_details", {"promo_code": "NAIVE"}) == err(
        "get_promotion_details",
        "Failed to retrieve promotion details: can't compare offset-naive and offset-aware datetimes",
    )


def test_excluded_skus_sorted_only_in_canonical_state_4(db: Retail) -> None:
    assert db.rows(PROMOTIONS)[0]["excluded_skus"] == ["SKU-10099999", "SKU-10099998"]
    canonical = dump_canonical(db.conn, TABLES)
    assert canonical[PROMOTIONS][0]["excluded_skus"] == ["SKU-10099998", "SKU-10099999"]


# ---- Salesforce -------------------------------------------------------------------
PROFILE_1 = {
    "id": "CUS-10000001", "email": "john.smith@example.com", "name": "John Smith", "phone": "+1-555-0123",
    "registration_date": "2023-01-15T10:30:00+00:00", "customer_tier": "plus_member", "lifetime_value": 1250.5,
    "total_orders": 8, "customer_score": 75, "behavioral_segment": "regular", "acquisition_source": "organic_search",
    "discount_usage_rate": 0.65,
}  # fmt: skip


def test_get_customer_profile(db: Retail) -> None:
    assert db.call("get_customer_profile", {"email": None, "customer_id": "CUS-10000001"}) == ok(PROFILE_1)
    assert db.call("get_customer_profile", {"email": "john.smith@example.com", "customer_id": None}) == ok(
        PROFILE_1
    )
    assert db.call("get_customer_profile", {"email": "john.smith@example.com", "customer_id": ""}) == ok(
        PROFILE_1
    )
    sparse = {
        "id": "CUS-7",
        "email": "x@example.com",
        "name": "X",
        "registration_date": "2025-01-01T00:00:00Z",
    }
    db.load({PROFILES: [sparse]})
    assert db.call("get_customer_profile", {"customer_id": "CUS-7"}) == ok(
        {"id": "CUS-7", "email": "x@example.com", "name": "X", "registration_date": "2025-01-01T00:00:00+00:00",
         "customer_tier": "standard", "lifetime_value": 0.0, "total_orders": 0, "customer_score": 50,
         "behavioral_segment": "opportunist", "discount_usage_rate": 0.0}
    )  # fmt: skip


def test_get_customer_profile_errors_18(db: Retail) -> None:
    for args in ({}, {"customer_id": "", "email": None}):
        assert db.call("get_customer_profile", args) == err(
            "get_customer_profile", "Either customer_id or email must be provided"
        )
    # the id wins even when unknown; email match is case-sensitive
    assert db.call(
        "get_customer_profile", {"customer_id": "CUS-404", "email": "john.smith@example.com"}
    ) == err("get_customer_profile", "Customer not found with provided identifier: CUS-404")
    assert db.call("get_customer_profile", {"email": "John.Smith@example.com"}) == err(
        "get_customer_profile", "Customer not found with provided identifier: John.Smith@example.com"
    )


MEM_BASE = {
    "membership_type": "plus",
    "start_date": "2024-01-01T00:00:00Z",
    "end_date": "2024-12-31T23:59:59Z",
}


def test_get_membership_details(db: Retail) -> None:
    assert db.call("get_membership_details", {"customer_id": "CUS-10000001"}) == ok(
        {"membership_id": "MEM-10000001", "customer_id": "CUS-10000001", "membership_type": "plus",
         "start_date": "2024-01-01T00:00:00+00:00", "end_date": "2024-12-31T23:59:59+00:00", "status": "active",
         "points_balance": 2500}
    )  # fmt: skip
    assert db.call("get_membership_details", {"customer_id": "CUS-10000002"}) == err(
        "get_membership_details", "No active membership found for customer: CUS-10000002"
    )


def test_membership_first_row_rules_11(db: Retail) -> None:
    db.load({MEMBERSHIPS: [{**MEM_BASE, "id": "MEM-A", "customer_id": "CUS-10000002", "status": "cancelled",
                            "points_balance": 10},
                           {**MEM_BASE, "id": "MEM-B", "customer_id": "CUS-10000002", "points_balance": 20}]})  # fmt: skip
    # details: first *active* row
    assert (
        json.loads(db.call("get_membership_details", {"customer_id": "CUS-10000002"}))["membership_id"]
        == "MEM-B"
    )
    # points: first row whatever its status; no floor
    assert db.call("add_points_to_balance", {"customer_id": "CUS-10000002", "points_to_add": -15,
                                             "points_reason": "manual_adjustment"}) == ok(
        {"customer_id": "CUS-10000002", "old_balance": 10, "points_added": -15, "new_balance": -5}
    )  # fmt: skip
    assert db.row(MEMBERSHIPS, "MEM-A")["points_balance"] == -5  # type: ignore[index]
    # cancel: the first row again; the later active one stays active
    assert db.call("update_membership_status", {"customer_id": "CUS-10000002", "action": "cancel"}) == ok(
        {"customer_id": "CUS-10000002", "new_tier": "standard", "action_completed": "cancelled"}
    )
    assert db.row(MEMBERSHIPS, "MEM-B")["status"] == "active"  # type: ignore[index]


def test_add_points_to_balance(db: Retail) -> None:
    args = {"customer_id": "CUS-10000001", "points_to_add": 100, "points_reason": "service_recovery"}
    assert db.call("add_points_to_balance", args) == ok(
        {"customer_id": "CUS-10000001", "old_balance": 2500, "points_added": 100, "new_balance": 2600}
    )
    assert db.row(MEMBERSHIPS, "MEM-10000001")["points_balance"] == 2600  # type: ignore[index]
    assert db.call("add_points_to_balance", {**args, "customer_id": "CUS-10000002"}) == err(
        "add_points_to_balance",
        "No membership record found for customer CUS-10000002. Customer must have a membership record to receive "
        "points.",
    )
    assert db.call("add_points_to_balance", {**args, "points_to_add": 2.5}) == err(
        "add_points_to_balance",
        "Input validation failed: points_to_add: Input should be a valid integer, got a number with a fractional part",
    )
    assert db.call("add_points_to_balance", {**args, "points_to_add": "ten"}) == err(
        "add_points_to_balance",
        "Input validation failed: points_to_add: Input should be a valid integer, unable to parse string as an integer",
    )


def test_update_membership_status_upgrade(db: Retail) -> None:
    assert db.call("update_membership_status", {"action": "upgrade", "customer_id": "CUS-10000002",
                                                "membership_type": "plus"}) == ok(
        {"customer_id": "CUS-10000002", "membership_id": "MEM-20000001", "new_tier": "plus_member",
         "action_completed": "upgraded", "start_date": "2025-10-01T00:00:00+00:00",
         "end_date": "2026-10-01T23:59:59.999999+00:00"}
    )  # fmt: skip
    assert db.row(MEMBERSHIPS, "MEM-20000001") == {
        "id": "MEM-20000001", "customer_id": "CUS-10000002", "membership_type": "plus",
        "start_date": "2025-10-01T00:00:00Z", "end_date": "2026-10-01T23:59:59.999999Z", "status": "active",
        "points_balance": 0,
    }  # fmt: skip
    assert db.row(PROFILES, "CUS-10000002")["customer_tier"] == "plus_member"  # type: ignore[index]


def test_update_membership_status_upgrade_quirks_11_18(db: Retail) -> None:
    # a VIP with an active membership: another row is created and the tier drops to plus_member;
    # any non-empty membership_type is accepted
    reply = json.loads(db.call("update_membership_status", {"action": "upgrade", "customer_id": "CUS-10000003",
                                                            "membership_type": "vip"}))  # fmt: skip
    assert (reply["membership_id"], reply["new_tier"]) == ("MEM-20000001", "plus_member")
    assert [m["id"] for m in db.rows(MEMBERSHIPS) if m["customer_id"] == "CUS-10000003"] == [
        "MEM-10000002",
        "MEM-20000001",
    ]
    assert db.row(MEMBERSHIPS, "MEM-20000001")["membership_type"] == "vip"  # type: ignore[index]
    assert db.row(PROFILES, "CUS-10000003")["customer_tier"] == "plus_member"  # type: ignore[index]


def test_update_membership_status_cancel(db: Retail) -> None:
    # cancel ignores membership_type and sets the tier to standard even for a VIP
    assert db.call("update_membership_status", {"action": "cancel", "customer_id": "CUS-10000003",
                                                "membership_type": "gold"}) == ok(
        {"customer_id": "CUS-10000003", "new_tier": "standard", "action_completed": "cancelled"}
    )  # fmt: skip
    assert db.row(MEMBERSHIPS, "MEM-10000002")["status"] == "cancelled"  # type: ignore[index]
    assert db.row(PROFILES, "CUS-10000003")["customer_tier"] == "standard"  # type: ignore[index]


def test_update_membership_status_errors(db: Retail) -> None:
    assert db.call("update_membership_status", {"action": "upgrade", "customer_id": "CUS-404"}) == err(
        "update_membership_status", "Customer not found: CUS-404"
    )
    for mtype in (None, ""):
        assert db.call("update_membership_status", {"action": "upgrade", "customer_id": "CUS-10000002",
                                                    "membership_type": mtype}) == err(
            "update_membership_status", "membership_type is required when action is upgrade"
        )  # fmt: skip
    before = db.row(PROFILES, "CUS-10000002")
    assert db.call("update_membership_status", {"action": "cancel", "customer_id": "CUS-10000002"}) == err(
        "update_membership_status", "No membership record found for customer: CUS-10000002"
    )
    assert db.row(PROFILES, "CUS-10000002") == before
    assert len(db.rows(MEMBERSHIPS)) == 2
    assert db.call("update_membership_status", {"action": "downgrade", "customer_id": "CUS-10000002"}) == err(
        "update_membership_status", "Input validation failed: action: Input should be 'upgrade' or 'cancel'"
    )


# ---- Shopify PIM ------------------------------------------------------------------
def test_get_product_details(db: Retail) -> None:
    assert db.call("get_product_details", {"sku": "SKU-10000005"}) == ok(
        {"sku": "SKU-10000005", "name": "Dell XPS 15 Laptop (Certified Refurbished)", "category": "computing",
         "brand": "Dell", "base_price": 1199.99, "weight_lbs": 4.5, "is_refurbished": True,
         "points_redemption_eligible": True, "requires_installation": False}
    )  # fmt: skip
    assert db.call("get_product_details", {"sku": "sku-10000005"}) == err(
        "get_product_details", "Product SKU not found: sku-10000005"
    )


# ---- policy search ----------------------------------------------------------------
def test_search_policy_without_index(db: Retail) -> None:
    assert db.call("search_policy", {"query": "return window"}) == err(
        "search_policy", "Search service is not available"
    )
    assert db.call("search_policy", {"max_results": 3}) == err(
        "search_policy", "Input validation failed: query: Field required"
    )


# ---- storage, patches and canonical order -----------------------------------------
def test_empty_patch_lists_keep_seeds_and_count_towards_ids_17(db: Retail) -> None:
    db.load({REFUNDS: [], CLAIMS: [], RMAS: []})
    assert [r["id"] for r in db.rows(REFUNDS)] == ["RFD-10000001"]
    args = {"order_id": "ORD-10000002", "customer_id": "C", "amount": 1, "refund_reason": "rma_processed"}
    assert json.loads(db.call("create_refund", args))["refund_id"] == "RFD-20000001"


def test_idless_tables_keep_storage_order_in_canonical_state_3(db: Retail) -> None:
    db.load({INVENTORY: [{"sku": "AAA-1", "available_quantity": 1, "reserved_quantity": 0},
                         {"sku": "SKU-10000003", "available_quantity": 99, "reserved_quantity": 0}]})  # fmt: skip
    db.call("reship_order", RESHIP)
    canonical = dump_canonical(db.conn, TABLES)
    skus = [r["sku"] for r in canonical[INVENTORY]]
    # the appended row stays last; the replaced seed row keeps its position (whole-row replace)
    assert skus == ["SKU-10000001", "SKU-10000002", "SKU-10000003", "SKU-10000004", "SKU-10000005", "AAA-1"]
    assert canonical[INVENTORY][2] == {"sku": "SKU-10000003", "available_quantity": 99, "reserved_quantity": 0,
                                       "warehouse_location": None, "restock_date": None,
                                       "expected_restock_quantity": None}  # fmt: skip
    assert canonical[TRACKING][-1]["tracking_number"] == "TRK-200000000001"
    # id tables sort by code point: "LI-..." before "LIN-..."
    db.load({LINE_ITEMS: [{"id": "LI-60010-001", "order_id": "O", "sku": "S", "product_name": "P", "quantity": 1,
                           "base_price": 1, "final_price": 1}]})  # fmt: skip
    assert dump_canonical(db.conn, TABLES)[LINE_ITEMS][0]["id"] == "LI-60010-001"


def test_ignored_parameters_write_nothing_8(db: Retail) -> None:
    db.call("create_replacement_order", {**REPLACEMENT, "original_order_id": "ORD-DOES-NOT-EXIST"})
    assert db.row(ORDERS, "ORD-20000001")["customer_id"] == "CUS-10000001"  # type: ignore[index]
    assert "original_order_id" not in db.row(ORDERS, "ORD-20000001")  # type: ignore[operator]
    db.call("create_refund", {"order_id": "ORD-10000001", "customer_id": "CUS-X", "amount": 1,
                              "refund_reason": "discount_correction"})  # fmt: skip
    assert "customer_id" not in db.row(REFUNDS, "RFD-20000001")  # type: ignore[operator]
    # create_rma checks nothing against orders or line items
    assert "rma_id" in db.call("create_rma", {**RMA_ARGS, "order_id": "NOPE", "line_item_id": "NOPE"})
