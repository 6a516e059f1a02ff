"""Travel (external_booking_v1) tools against the host PostgreSQL: exact reply
texts, state changes, every error path and each quirk the spec names.

Every test starts from the domain's seed (plus a small data_patch of its own)
in a fresh schema of a database created for this module."""

from __future__ import annotations

import copy
import datetime as dt
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest
from pg_support import DomainTools, domain_seed, err, ok, reload

from servers.engine.rows import to_state_row
from servers.engine.seeding import initial_rows
from servers.engine.store import Store
from servers.engine.tools import NOMINAL_NOW
from servers.registry import load_domain

DOMAIN = load_domain("travel")
T = DomainTools(DOMAIN)
MODIFIED_AT = "2025-11-25T10:00:00Z"


# ---- fixtures ----------------------------------------------------------------
class Env:
    def __init__(self, conn: psycopg.Connection[Any]):
        self.conn = conn
        self.seed = domain_seed(DOMAIN.module)

    @property
    def db(self) -> Store:
        return T.store(self.conn)

    def call(self, tool: str, **args: Any) -> str:
        return T.call(self.conn, tool, **args)

    def row(self, table: str, key: str) -> dict[str, Any] | None:
        row = self.db.get(table, key)
        return None if row is None else to_state_row(self.db.spec(table), row)

    def count(self, table: str) -> int:
        return self.db.count(table)

    def seed_row(self, table: str, key: str) -> dict[str, Any]:
        return copy.deepcopy(next(r for r in self.seed[table] if str(r["id"]) == key))


@pytest.fixture
def env(db: psycopg.Connection[Any]) -> Callable[..., Env]:
    """`env(patch)` gives the seed state plus `patch` (built by the real seeding
    code, so patch rows are validated, upserted and ordered as at task init).
    Each test runs in one transaction that is rolled back (conftest's `db`);
    calling `env` again in the same test starts over from the seed."""
    started = False

    def make(patch: dict[str, list[dict[str, Any]]] | None = None) -> Env:
        nonlocal started
        db.execute("ROLLBACK TO SAVEPOINT travel_seed" if started else "SAVEPOINT travel_seed")
        started = True
        reload(db, DOMAIN, patch, only_patched=True)
        return Env(db)

    return make


def hotel(hid: str, name: str, location: str, **extra: Any) -> dict[str, Any]:
    return {
        "id": hid,
        "hotel_id": hid,
        "hotel_name": name,
        "location": location,
        "partner_tier": "standard",
        "contact_name": "Desk",
        "contact_email": f"desk@{hid.lower()}.example",
        "contact_phone": "+1-555-0100",
        "created_at": "2025-01-01T10:00:00Z",
        "updated_at": "2025-01-01T10:00:00Z",
        **extra,
    }


def inv(iid: str, hotel_id: str, room: str, board: str, date: str, count: int, price: str) -> dict[str, Any]:
    return {
        "id": iid,
        "hotel_id": hotel_id,
        "room_type": room,
        "board_type": board,
        "date": date,
        "available_count": count,
        "price_per_night": price,
        "created_at": "2025-01-01T10:00:00Z",
        "updated_at": "2025-01-01T10:00:00Z",
    }


LISBON_PATCH = {
    "hotel_partner_api_hotels": [
        hotel("HTL-T0000001", "Harbour View", "Lisbon"),
        hotel("HTL-T0000002", "Cliff House", "Lisbon Coast", partner_tier="premium"),
        hotel("HTL-T0000003", "Alfama Rooms", "lisbon", partner_tier="budget"),
    ],
    "booking_api_hotel_inventory": [
        inv("INV-T1", "HTL-T0000001", "deluxe_room", "with_breakfast", "2025-12-01T00:00:00Z", 4, "100.005"),
        inv("INV-T2", "HTL-T0000001", "deluxe_room", "with_breakfast", "2025-12-02T00:00:00Z", 2, "90"),
        inv("INV-T3", "HTL-T0000001", "deluxe_room", "half_board", "2025-12-01T00:00:00Z", 0, "120"),
        inv("INV-T4", "HTL-T0000001", "deluxe_room", "full_board", "2025-12-02T00:00:00Z", 1, "130"),
        inv("INV-T5", "HTL-T0000001", "deluxe_room", "with_breakfast", "2025-12-03T00:00:00Z", 1, "95"),
        inv("INV-T6", "HTL-T0000002", "deluxe_room", "with_breakfast", "2025-12-01T00:00:00Z", 3, "200.10"),
        inv("INV-T7", "HTL-T0000002", "deluxe_room", "with_breakfast", "2025-12-02T00:00:00Z", 5, "199.95"),
        inv("INV-T8", "HTL-T0000003", "deluxe_room", "with_breakfast", "2025-12-01T00:00:00Z", 0, "80"),
    ],
}

STAY = {
    "check_in_date": "2025-12-01T15:00:00Z",
    "check_out_date": "2025-12-03T11:00:00Z",
    "room_type": "deluxe_room",
    "board_type": "with_breakfast",
    "adults_count": 2,
    "children_count": 0,
}

ROOM_TYPES_MSG = (
    "Input should be 'standard_room', 'deluxe_room', 'suite', 'executive_suite', "
    "'presidential_suite', 'family_room' or 'accessible_room'"
)


# ---- domain wiring -----------------------------------------------------------
def test_tool_listing_order_puts_knowledge_base_between_payment_and_lookup(dataset: Path) -> None:
    ref = json.loads((dataset / "servers" / DOMAIN.module / "tools.json").read_text())["agent_tools"]
    names = [t.name for t in DOMAIN.tools]
    assert names == [t["name"] for t in ref]
    kb = names.index("knowledge_base_search_policy")
    assert names[kb - 1] == "payment_api_update_payment_method"
    assert names[kb + 1] == "lookup_lookup_corporate_account_id"
    assert DOMAIN.policy_tool == "knowledge_base_search_policy"


def test_lax_tools_ignore_unknown_arguments_but_strict_ones_reject_them(env: Callable[..., Env]) -> None:
    e = env()
    reply = e.call("booking_api_get_group_booking", group_booking_id="GRP-00033333", extra="x")
    assert json.loads(reply)["group_booking_data"]["id"] == "GRP-00000003"
    assert e.call("booking_api_modify_booking", booking_reference="BKG-00012345", extra="x") == err(
        "booking_api_modify_booking", "Input validation failed: extra: Extra inputs are not permitted"
    )


def test_corporate_account_without_timestamps_gets_the_configured_clock() -> None:
    seed = domain_seed(DOMAIN.module)
    account = {
        k: v
        for k, v in seed["corporate_api_corporate_accounts"][0].items()
        if k not in ("created_at", "updated_at")
    }
    account["id"] = "INT-00000099"
    rows = initial_rows(DOMAIN.tables, seed, {"corporate_api_corporate_accounts": [account]}, NOMINAL_NOW)
    added = rows["corporate_api_corporate_accounts"][-1]
    assert added["created_at"] == NOMINAL_NOW and added["updated_at"] == NOMINAL_NOW


# ---- booking_api: reads --------------------------------------------------------
def test_get_booking_by_reference_returns_the_raw_record(env: Callable[..., Env]) -> None:
    e = env()
    assert e.call("booking_api_get_booking", booking_reference="BKG-00012345") == ok(
        {"booking_data": e.seed_row("booking_api_bookings", "BKG-00000001")}
    )


def test_get_booking_by_customer_takes_the_first_booking_and_keeps_nulls(env: Callable[..., Env]) -> None:
    e = env()
    reply = e.call("booking_api_get_booking", customer_id="CUS-00000001")
    assert reply == ok({"booking_data": e.seed_row("booking_api_bookings", "BKG-00000001")})
    assert '"corporate_account_id": null' in reply


def test_get_booking_errors(env: Callable[..., Env]) -> None:
    e = env()
    tool = "booking_api_get_booking"
    assert e.call(tool) == err(tool, "Either booking_reference or customer_id must be provided")
    assert e.call(tool, booking_reference="", customer_id="") == err(
        tool, "Either booking_reference or customer_id must be provided"
    )
    # No fallback to the customer id once a reference is given.
    assert e.call(tool, booking_reference="BKG-99999999", customer_id="CUS-00000001") == err(
        tool, "Booking not found with booking_reference 'BKG-99999999'"
    )
    assert e.call(tool, customer_id="CUS-X") == err(tool, "Booking not found with customer_id 'CUS-X'")


def test_get_booking_history_newest_first(env: Callable[..., Env]) -> None:
    e = env()
    tool = "booking_api_get_booking_history"
    rows = [e.seed_row("booking_api_bookings", k) for k in ("BKG-00000001", "BKG-00000002", "BKG-00000003")]
    assert e.call(tool, customer_id="CUS-00000001") == ok({"bookings": rows})
    assert e.call(tool, customer_id="CUS-NOBODY") == ok({"bookings": []})
    assert e.call(tool) == err(tool, "Input validation failed: customer_id: Field required")


def test_get_group_booking(env: Callable[..., Env]) -> None:
    e = env()
    tool = "booking_api_get_group_booking"
    assert e.call(tool, group_booking_id="GRP-00067890") == ok(
        {"group_booking_data": e.seed_row("booking_api_group_bookings", "GRP-00000002")}
    )
    assert e.call(tool, group_booking_id="GRP-00000002") == err(
        tool, "Group booking not found with group_booking_id 'GRP-00000002'"
    )


def test_check_availability_min_count_first_price_and_board_types(env: Callable[..., Env]) -> None:
    e = env(LISBON_PATCH)
    tool = "booking_api_check_hotel_availability"
    # min over the two nights; price of the first matching row, half-up to the cent;
    # board types with rooms on those nights whatever the requested board (half_board has 0).
    assert e.call(tool, hotel_id="HTL-T0000001", **STAY) == ok(
        {
            "available_count": 2,
            "available_board_types": ["full_board", "with_breakfast"],
            "price_per_night": "100.01",
        }
    )
    assert e.call(tool, hotel_id="HTL-T0000001", **{**STAY, "board_type": "all_inclusive"}) == ok(
        {
            "available_count": 0,
            "available_board_types": ["full_board", "with_breakfast"],
            "price_per_night": "0.00",
        }
    )
    assert e.call(tool, hotel_id="HTL-T0000001", **{**STAY, "room_type": "suite"}) == ok(
        {"available_count": 0, "available_board_types": [], "price_per_night": "0.00"}
    )
    # Date-only text is accepted.
    assert e.call(
        tool,
        hotel_id="HTL-T0000001",
        **{**STAY, "check_in_date": "2025-12-02", "check_out_date": "2025-12-03"},
    ) == ok(
        {
            "available_count": 2,
            "available_board_types": ["full_board", "with_breakfast"],
            "price_per_night": "90.00",
        }
    )


def test_check_availability_uses_the_calendar_date_as_written(env: Callable[..., Env]) -> None:
    e = env(LISBON_PATCH)
    # 23:30 at -05:00 is already 12-02 in UTC, but the written date 12-01 counts.
    stay = {
        **STAY,
        "check_in_date": "2025-12-01T23:30:00-05:00",
        "check_out_date": "2025-12-02T08:00:00-05:00",
    }
    assert e.call("booking_api_check_hotel_availability", hotel_id="HTL-T0000001", **stay) == ok(
        {"available_count": 4, "available_board_types": ["with_breakfast"], "price_per_night": "100.01"}
    )


def test_check_availability_finds_the_hotel_by_row_id_not_public_id(env: Callable[..., Env]) -> None:
    e = env()
    tool = "booking_api_check_hotel_availability"
    stay = {**STAY, "check_in_date": "2025-12-15T15:00:00Z", "check_out_date": "2025-12-18T11:00:00Z"}
    assert e.call(tool, hotel_id="HTL-00012345", **stay) == err(
        tool, "Hotel not found with hotel_id 'HTL-00012345'"
    )
    # The row id finds the hotel, but inventory is keyed by the public id: nothing matches.
    assert e.call(tool, hotel_id="HTL-00000001", **stay) == ok(
        {"available_count": 0, "available_board_types": [], "price_per_night": "0.00"}
    )


def test_check_availability_errors(env: Callable[..., Env]) -> None:
    e = env(LISBON_PATCH)
    tool = "booking_api_check_hotel_availability"
    assert e.call(tool, hotel_id="HTL-T0000001", **{**STAY, "check_in_date": "xx"}) == err(
        tool, "Invalid date format: Invalid isoformat string: 'xx'"
    )
    assert e.call(tool, hotel_id="HTL-T0000001", **{**STAY, "check_out_date": "2025-12-01T20:00:00Z"}) == err(
        tool, "Check-in date must be before check-out date"
    )
    assert e.call(tool, hotel_id="HTL-T0000001", **{**STAY, "room_type": "penthouse"}) == err(
        tool, f"Input validation failed: room_type: {ROOM_TYPES_MSG}"
    )
    assert e.call(tool, hotel_id="HTL-T0000001", **{**STAY, "adults_count": 1.5}) == err(
        tool,
        "Input validation failed: adults_count: Input should be a valid integer, got a number with a fractional part",
    )


def test_check_availability_aborts_on_an_unparsable_inventory_date(env: Callable[..., Env]) -> None:
    patch = copy.deepcopy(LISBON_PATCH)
    patch["booking_api_hotel_inventory"].append(
        inv("INV-T9", "HTL-T0000001", "deluxe_room", "all_inclusive", "someday", 1, "1")
    )
    e = env(patch)
    tool = "booking_api_check_hotel_availability"
    assert e.call(tool, hotel_id="HTL-T0000001", **STAY) == err(tool, "Invalid isoformat string: 'someday'")


def test_search_by_location_average_price_and_skips(env: Callable[..., Env]) -> None:
    e = env(LISBON_PATCH)
    tool = "booking_api_search_hotels_by_location"
    # Alfama Rooms (location "lisbon") matches case-insensitively but has 0 rooms: skipped.
    # Cliff House: (200.10 + 199.95) / 2 = 200.025 -> half-up 200.03.
    assert e.call(tool, location="LISBON", **STAY) == ok(
        {
            "hotels": [
                {
                    "hotel_id": "HTL-T0000001",
                    "hotel_name": "Harbour View",
                    "location": "Lisbon",
                    "partner_tier": "standard",
                    "available_count": 2,
                    "price_per_night": "95.00",
                },
                {
                    "hotel_id": "HTL-T0000002",
                    "hotel_name": "Cliff House",
                    "location": "Lisbon Coast",
                    "partner_tier": "premium",
                    "available_count": 3,
                    "price_per_night": "200.03",
                },
            ]
        }
    )
    assert e.call(tool, location="Oslo", **STAY) == ok({"hotels": []})


def test_search_by_location_uses_public_hotel_ids(env: Callable[..., Env]) -> None:
    e = env()
    stay = {**STAY, "check_in_date": "2025-12-15T15:00:00Z", "check_out_date": "2025-12-18T11:00:00Z"}
    hotels = json.loads(e.call("booking_api_search_hotels_by_location", location="new york", **stay))[
        "hotels"
    ]
    assert [(h["hotel_id"], h["available_count"], h["price_per_night"]) for h in hotels] == [
        ("HTL-00012345", 5, "152.50"),
        ("HTL-00012346", 3, "119.75"),
    ]


def test_search_by_location_checks_dates_before_matching(env: Callable[..., Env]) -> None:
    e = env()
    tool = "booking_api_search_hotels_by_location"
    stay = {**STAY, "check_in_date": "2025-12-05", "check_out_date": "2025-12-05"}
    assert e.call(tool, location="Nowhere", **stay) == err(
        tool, "Check-in date must be before check-out date"
    )
    assert e.call(tool, location="Nowhere", **{**STAY, "check_out_date": "later"}) == err(
        tool, "Invalid date format: Invalid isoformat string: 'later'"
    )


def test_modify_booking_unchanged_date_still_rewrites_the_value(env: Callable[..., Env]) -> None:
    e = env()
    before = e.seed_row("booking_api_bookings", "BKG-00000001")
    reply = e.call(
        "booking_api_modify_booking", booking_reference="BKG-00012345", check_in_date="2025-12-15T15:00:00Z"
    )
    expected = {**before, "booking_value": "457.50"}
    assert reply == ok({"updated_booking": expected, "price_difference": "0.00"})
    # Stored too, with no history entry and no updated_at change.
    assert e.row("booking_api_bookings", "BKG-00000001") == expected


def test_modify_booking_several_fields_history_and_reprice(env: Callable[..., Env]) -> None:
    e = env()
    reply = e.call(
        "booking_api_modify_booking",
        booking_reference="BKG-00012345",
        check_out_date="2025-12-17T11:00:00Z",
        adults_count=3,
        children_count=1,  # unchanged: no fragment
        special_requests=["crib"],
        booking_status="cancelled",
    )
    expected = {
        **e.seed_row("booking_api_bookings", "BKG-00000001"),
        "check_out_date": "2025-12-17T11:00:00Z",
        "booking_value": "305.00",
        "adults_count": 3,
        "booking_status": "cancelled",
        "modification_history": [
            f"{MODIFIED_AT}: check_out_date: 2025-12-18T11:00:00Z -> 2025-12-17T11:00:00Z; adults_count: 2 -> 3; "
            "special_requests updated; booking_status: confirmed -> cancelled"
        ],
        "special_requests": ["crib"],
        "updated_at": MODIFIED_AT,
    }
    assert reply == ok({"updated_booking": expected, "price_difference": "-152.50"})
    assert e.row("booking_api_bookings", "BKG-00000001") == expected


def test_modify_booking_compares_raw_date_text(env: Callable[..., Env]) -> None:
    e = env()
    updated = json.loads(
        e.call(
            "booking_api_modify_booking",
            booking_reference="BKG-00012345",
            check_in_date="2025-12-15T15:00:00+00:00",
        )
    )
    assert updated["updated_booking"]["modification_history"] == [
        f"{MODIFIED_AT}: check_in_date: 2025-12-15T15:00:00Z -> 2025-12-15T15:00:00+00:00"
    ]
    assert updated["updated_booking"]["booking_value"] == "457.50"
    assert updated["price_difference"] == "0.00"


def test_modify_booking_without_inventory_or_with_bad_dates_keeps_the_value(env: Callable[..., Env]) -> None:
    e = env()
    tool = "booking_api_modify_booking"
    suite = json.loads(e.call(tool, booking_reference="BKG-00012345", room_type="suite"))
    assert suite["price_difference"] == "0.00"
    assert suite["updated_booking"]["booking_value"] == "457.5"
    assert suite["updated_booking"]["modification_history"] == [
        f"{MODIFIED_AT}: room_type: deluxe_room -> suite"
    ]

    e = env()
    soon = json.loads(e.call(tool, booking_reference="BKG-00012345", check_out_date="soon"))
    assert soon["price_difference"] == "0.00"
    assert e.row("booking_api_bookings", "BKG-00000001")["check_out_date"] == "soon"  # type: ignore[index]
    assert soon["updated_booking"]["booking_value"] == "457.5"


def test_modify_booking_with_nothing_to_change_writes_nothing(env: Callable[..., Env]) -> None:
    e = env()
    before = e.seed_row("booking_api_bookings", "BKG-00000001")
    reply = e.call(
        "booking_api_modify_booking", booking_reference="BKG-00012345", adults_count=2, room_type=None
    )
    assert reply == ok({"updated_booking": before, "price_difference": "0.00"})
    assert e.row("booking_api_bookings", "BKG-00000001") == before


def test_modify_booking_errors(env: Callable[..., Env]) -> None:
    e = env()
    tool = "booking_api_modify_booking"
    assert e.call(tool, booking_reference="BKG-00000000", adults_count=1) == err(
        tool, "Booking not found with booking_reference 'BKG-00000000'"
    )
    assert e.call(tool, booking_reference="BKG-00012346", booking_status="cancelled") == err(
        tool, "Booking cannot be modified. Current status is 'checked_out', must be 'confirmed'"
    )
    assert e.call(tool, booking_reference="BKG-00012345", children_count=1.5) == err(
        tool,
        "Input validation failed: children_count: Input should be a valid integer, got a number with a fractional part",
    )
    assert e.call(tool, adults_count=1) == err(
        tool, "Input validation failed: booking_reference: Field required"
    )
    assert e.row("booking_api_bookings", "BKG-00000002") == e.seed_row("booking_api_bookings", "BKG-00000002")


GROUP_PATCH = {
    "booking_api_hotel_inventory": [
        inv(
            f"INV-G{i}",
            "HTL-00012345",
            "standard_room",
            "with_breakfast",
            f"2025-12-{day}T00:00:00Z",
            4,
            "88.10",
        )
        for i, day in enumerate((15, 16, 17), start=1)
    ]
    + [
        inv(
            f"INV-G{i}",
            "HTL-00012347",
            "executive_suite",
            "all_inclusive",
            f"2025-12-{day}T00:00:00Z",
            2,
            "300",
        )
        for i, day in enumerate((15, 16, 17), start=4)
    ]
}


def test_modify_group_booking_cascades_and_rewrites_value_only_on_difference(env: Callable[..., Env]) -> None:
    e = env(GROUP_PATCH)
    dates = {"check_in_date": "2025-12-15T15:00:00Z", "check_out_date": "2025-12-18T11:00:00Z"}
    reply = e.call(
        "booking_api_modify_group_booking",
        group_booking_id="GRP-00033333",
        modification_details={**dates, "room_type": "suite"},  # unknown nested keys are ignored
        cascade_to_individual_bookings=True,
    )
    group = {**e.seed_row("booking_api_group_bookings", "GRP-00000003"), **dates, "updated_at": MODIFIED_AT}
    assert reply == ok(
        {
            "updated_group_booking": group,
            "modified_booking_references": ["BKG-00012348", "BKG-00012349"],
            "total_price_difference": "-27.60",
        }
    )
    assert e.row("booking_api_group_bookings", "GRP-00000003") == group
    note = (
        f"{MODIFIED_AT}: check_in_date updated via group booking GRP-00033333; "
        "check_out_date updated via group booking GRP-00033333"
    )
    # 3 x 88.10 = 264.30 equals 264.3: the original text stays.
    assert e.row("booking_api_bookings", "BKG-00000004") == {
        **e.seed_row("booking_api_bookings", "BKG-00000004"),
        **dates,
        "booking_value": "264.3",
        "modification_history": [note],
        "updated_at": MODIFIED_AT,
    }
    assert e.row("booking_api_bookings", "BKG-00000005") == {
        **e.seed_row("booking_api_bookings", "BKG-00000005"),
        **dates,
        "booking_value": "900.00",
        "modification_history": [note],
        "updated_at": MODIFIED_AT,
    }


def test_modify_group_booking_cascade_ignores_booking_status(env: Callable[..., Env]) -> None:
    e = env()
    reply = json.loads(
        e.call(
            "booking_api_modify_group_booking",
            group_booking_id="GRP-00067890",
            modification_details={
                "check_in_date": "2026-03-01T15:00:00Z",
                "check_out_date": "2026-03-03T11:00:00Z",
            },
            cascade_to_individual_bookings=True,
        )
    )
    assert reply["modified_booking_references"] == ["BKG-00012345", "BKG-00012346", "BKG-00012347"]
    assert reply["total_price_difference"] == "0.00"
    cancelled = e.row("booking_api_bookings", "BKG-00000003")
    assert cancelled is not None and cancelled["booking_status"] == "cancelled"
    assert cancelled["check_in_date"] == "2026-03-01T15:00:00Z" and cancelled["booking_value"] == "618.4"


def test_modify_group_booking_without_cascade_or_changes(env: Callable[..., Env]) -> None:
    e = env()
    tool = "booking_api_modify_group_booking"
    reply = json.loads(
        e.call(
            tool,
            group_booking_id="GRP-00067890",
            modification_details={"check_in_date": "2026-03-01T15:00:00Z"},
            cascade_to_individual_bookings=False,
        )
    )
    assert reply["modified_booking_references"] == []
    assert reply["updated_group_booking"]["updated_at"] == MODIFIED_AT
    assert e.row("booking_api_bookings", "BKG-00000001") == e.seed_row("booking_api_bookings", "BKG-00000001")

    e = env()
    same = e.seed_row("booking_api_group_bookings", "GRP-00000003")
    assert e.call(
        tool,
        group_booking_id="GRP-00033333",
        modification_details={"check_in_date": same["check_in_date"], "check_out_date": ""},
        cascade_to_individual_bookings=False,
    ) == ok(
        {"updated_group_booking": same, "modified_booking_references": [], "total_price_difference": "0.00"}
    )
    assert e.row("booking_api_group_bookings", "GRP-00000003") == same


def test_modify_group_booking_errors(env: Callable[..., Env]) -> None:
    e = env()
    tool = "booking_api_modify_group_booking"
    assert e.call(
        tool, group_booking_id="GRP-404", modification_details={}, cascade_to_individual_bookings=True
    ) == err(tool, "Group booking not found with group_booking_id 'GRP-404'")
    assert e.call(
        tool,
        group_booking_id="GRP-00033333",
        modification_details={},
        cascade_to_individual_bookings=True,
        note="x",
    ) == err(tool, "Input validation failed: note: Extra inputs are not permitted")
    assert e.call(tool, group_booking_id="GRP-00033333", modification_details={}) == err(
        tool, "Input validation failed: cascade_to_individual_bookings: Field required"
    )


def test_get_account_details_omits_nulls(env: Callable[..., Env]) -> None:
    e = env()
    tool = "corporate_api_get_account_details"
    account = e.seed_row("corporate_api_corporate_accounts", "INT-00000004")
    del account["expiration_date"]
    assert e.call(tool, corporate_account_id="CRP-00054321") == ok({"account_data": account})
    assert (
        json.loads(e.call(tool, corporate_account_id="CRP-00030000"))["account_data"]["credit_limit"]
        == "5000"
    )


def test_corporate_account_errors(env: Callable[..., Env]) -> None:
    e = env()
    for tool in (
        "corporate_api_get_account_details",
        "corporate_api_verify_account_status",
        "corporate_api_get_corporate_booking_history",
    ):
        assert e.call(tool, corporate_account_id="crp-00012345") == err(
            tool, "Invalid corporate_account_id parameter."
        )
        assert e.call(tool, corporate_account_id="CRP-00000000") == err(tool, "Corporate account not found.")


def test_verify_account_status(env: Callable[..., Env]) -> None:
    e = env()
    tool = "corporate_api_verify_account_status"
    assert e.call(tool, corporate_account_id="CRP-00012345") == ok(
        {"is_active": True, "expiration_date": "2026-12-31T00:00:00Z", "booking_limit_remaining": 49}
    )
    assert e.call(tool, corporate_account_id="CRP-00054321") == ok(
        {"is_active": False, "booking_limit_remaining": 10}
    )


def test_corporate_booking_history_newest_first_without_nulls(env: Callable[..., Env]) -> None:
    extra = {
        "id": "BKG-C0000001",
        "booking_reference": "BKG-70000001",
        "customer_id": "CUS-00000003",
        "hotel_id": "HTL-00012348",
        "check_in_date": "2026-01-10T15:00:00Z",
        "check_out_date": "2026-01-12T11:00:00Z",
        "booking_value": 300.0,
        "room_type": "suite",
        "board_type": "full_board",
        "adults_count": 1,
        "corporate_account_id": "CRP-00012345",
        "created_at": "2025-11-10T10:00:00Z",
        "updated_at": "2025-11-10T10:00:00Z",
    }
    e = env({"booking_api_bookings": [extra]})
    newest = {
        "id": "BKG-C0000001",
        "booking_reference": "BKG-70000001",
        "customer_id": "CUS-00000003",
        "hotel_id": "HTL-00012348",
        "check_in_date": "2026-01-10T15:00:00Z",
        "check_out_date": "2026-01-12T11:00:00Z",
        "booking_value": "300.0",  # a float in the patch keeps its shortest text
        "room_type": "suite",
        "board_type": "full_board",
        "adults_count": 1,
        "children_count": 0,
        "booking_status": "confirmed",
        "corporate_account_id": "CRP-00012345",
        # group_booking_id is null: left out
        "modification_history": [],
        "special_requests": [],
        "created_at": "2025-11-10T10:00:00Z",
        "updated_at": "2025-11-10T10:00:00Z",
    }
    assert e.call("corporate_api_get_corporate_booking_history", corporate_account_id="CRP-00012345") == ok(
        {"corporate_bookings": [newest, e.seed_row("booking_api_bookings", "BKG-00000005")]}
    )


def test_generate_corporate_invoice(env: Callable[..., Env]) -> None:
    e = env()
    tool = "corporate_api_generate_corporate_invoice"
    assert e.call(tool, booking_reference="BKG-00012349", corporate_account_id="CRP-00012345") == ok(
        {
            "invoice_url": "https://staybridge.com/corporate-invoices/CRP-00012345-BKG-00012349.pdf",
            "invoice_id": "INV-00012349-00012345",
            "payment_terms": "Net 60",
        }
    )
    assert e.call(tool, booking_reference="BKG-00012349", corporate_account_id="X") == err(
        tool, "Invalid corporate_account_id parameter."
    )
    assert e.call(tool, booking_reference="00012349", corporate_account_id="CRP-00012345") == err(
        tool, "Invalid booking_reference parameter."
    )
    assert e.call(tool, booking_reference="BKG-00012349", corporate_account_id="CRP-00000000") == err(
        tool, "Corporate account not found."
    )
    assert e.call(tool, booking_reference="BKG-00000000", corporate_account_id="CRP-00012345") == err(
        tool, "Booking not found."
    )
    assert e.call(tool, booking_reference="BKG-00012345", corporate_account_id="CRP-00012345") == err(
        tool, "Booking is not associated with this corporate account."
    )


def test_get_customer_profile_by_email_case_insensitive(env: Callable[..., Env]) -> None:
    e = env()
    tool = "crm_api_get_customer_profile"
    assert e.call(tool, email="BOB.CARTER@OUTLOOK.COM") == ok(
        {"customer_data": e.seed_row("crm_api_customer_profiles", "CUS-00000002")}
    )
    # customer_id wins over email; null fields are left out.
    profile = e.seed_row("crm_api_customer_profiles", "CUS-00000004")
    del profile["loyalty_program_status"], profile["last_booking_date"]
    assert e.call(tool, customer_id="CUS-00000004", email="bob.carter@outlook.com") == ok(
        {"customer_data": profile}
    )


def test_get_customer_profile_errors(env: Callable[..., Env]) -> None:
    e = env()
    tool = "crm_api_get_customer_profile"
    assert e.call(tool, customer_id="", email=None) == err(
        tool, "Invalid parameters: provide customer_id or email."
    )
    assert e.call(tool, customer_id="CUS-404", email="bob.carter@outlook.com") == err(
        tool, "Customer not found."
    )


def test_customer_preferences_and_vip_status(env: Callable[..., Env]) -> None:
    e = env()
    reply = e.call("crm_api_get_customer_preferences", customer_id="CUS-00000003")
    assert reply == ok(
        {
            "preferences": ["sea view", "all inclusive"],
            "special_notes": ["sensitive to noise \u2014 prefers quiet-side rooms"],
        }
    )
    assert "\\u2014" in reply  # ASCII-escaped like json.dumps
    assert e.call("crm_api_check_vip_status", customer_id="CUS-00000003") == ok(
        {"vip_tier": "platinum", "loyalty_program_status": "platinum-elite"}
    )
    assert e.call("crm_api_check_vip_status", customer_id="CUS-00000004") == ok({"vip_tier": "standard"})
    for tool in ("crm_api_get_customer_preferences", "crm_api_check_vip_status"):
        assert e.call(tool, customer_id="   ") == err(tool, "Invalid customer_id parameter.")
        assert e.call(tool, customer_id="CUS-404") == err(tool, "Customer not found.")


def test_update_customer_info(env: Callable[..., Env]) -> None:
    e = env()
    reply = e.call(
        "crm_api_update_customer_info",
        customer_id="CUS-00000004",
        complaint_count=2,
        preferences=[],
        last_booking_date="2025-02-15",
        email=None,
    )
    assert reply == ok(
        {"success": True, "updated_fields": ["preferences", "complaint_count", "last_booking_date"]}
    )
    assert e.row("crm_api_customer_profiles", "CUS-00000004") == {
        **e.seed_row("crm_api_customer_profiles", "CUS-00000004"),
        "preferences": [],
        "complaint_count": 2,
        "last_booking_date": "2025-02-15T00:00:00",
        "updated_at": "2025-01-01T00:00:00Z",
    }


def test_update_customer_info_errors(env: Callable[..., Env]) -> None:
    e = env()
    tool = "crm_api_update_customer_info"
    assert e.call(tool, customer_id=" ") == err(tool, "Invalid customer_id parameter.")
    assert e.call(tool, customer_id="CUS-00000004", email=None) == err(
        tool, "Invalid update_fields parameter."
    )
    assert e.call(tool, customer_id="CUS-404", complaint_count=1) == err(tool, "Customer not found.")
    assert e.call(tool, customer_id="CUS-00000004", vip_tier="vip") == err(
        tool, "Input validation failed: vip_tier: Extra inputs are not permitted"
    )
    assert json.loads(e.call(tool, customer_id="CUS-00000004", last_booking_date="someday"))[
        "error"
    ].startswith(
        "Tool execution failed: Input validation failed: last_booking_date: Input should be a valid datetime"
    )
    assert e.row("crm_api_customer_profiles", "CUS-00000004") == e.seed_row(
        "crm_api_customer_profiles", "CUS-00000004"
    )


def test_hotel_info_and_contact_by_public_id(env: Callable[..., Env]) -> None:
    e = env()
    info = e.seed_row("hotel_partner_api_hotels", "HTL-00000002")
    del info["escalation_contact"]
    assert e.call("hotel_partner_api_get_hotel_info", hotel_id="HTL-00012346") == ok({"hotel_data": info})
    assert e.call("hotel_partner_api_get_hotel_contact", hotel_id="HTL-00012345") == ok(
        {
            "contact_name": "Marcus Whitfield",
            "contact_email": "manager@grandplaza.com",
            "contact_phone": "+1-212-738-4501",
            "escalation_contact": "director@grandplaza.com",
        }
    )
    for tool in ("hotel_partner_api_get_hotel_info", "hotel_partner_api_get_hotel_contact"):
        assert e.call(tool, hotel_id="HTL-00000001") == err(tool, "Hotel not found: HTL-00000001")


def test_verify_availability_compares_dates_as_text(env: Callable[..., Env]) -> None:
    e = env(
        {
            "booking_api_hotel_inventory": [
                inv("INV-Z", "HTL-00012346", "deluxe_room", "with_breakfast", "2025-12-17T00:00:00Z", 0, "1")
            ]
        }
    )
    tool = "hotel_partner_api_verify_availability"
    base = {
        "room_type": "deluxe_room",
        "board_type": "with_breakfast",
        "adults_count": 2,
        "children_count": 0,
    }
    assert e.call(
        tool,
        hotel_id="HTL-00012345",
        check_in_date="2025-12-15T15:00:00Z",
        check_out_date="2025-12-18T11:00:00Z",
        **base,
    ) == ok(
        {
            "availability_confirmed": True,
            "confirmation_notes": "Confirmed availability for 3 nights. Minimum 5 rooms available.",
        }
    )
    # "2025-12-16T00:00:00Z" < "2025-12-16" is false: the departure night is excluded textually.
    assert e.call(
        tool,
        hotel_id="HTL-00012345",
        check_in_date="2025-12-15",
        check_out_date="2025-12-16T23:00:00Z",
        **base,
    ) == ok(
        {
            "availability_confirmed": True,
            "confirmation_notes": "Confirmed availability for 1 nights. Minimum 5 rooms available.",
        }
    )
    assert e.call(
        tool, hotel_id="HTL-00012346", check_in_date="2025-12-15", check_out_date="2025-12-18", **base
    ) == ok({"availability_confirmed": False, "confirmation_notes": "No availability for requested dates."})
    # Reversed dates are not rejected; they just match nothing.
    assert e.call(
        tool, hotel_id="HTL-00012345", check_in_date="2025-12-18", check_out_date="2025-12-15", **base
    ) == ok(
        {
            "availability_confirmed": False,
            "confirmation_notes": "No inventory data available for this hotel/room combination.",
        }
    )
    assert e.call(tool, hotel_id="HTL-00000001", check_in_date="a", check_out_date="b", **base) == err(
        tool, "Hotel not found: HTL-00000001"
    )


def test_escalate_to_hotel_writes_a_zendesk_ticket(env: Callable[..., Env]) -> None:
    e = env()
    tool = "hotel_partner_api_escalate_to_hotel"
    reply = e.call(
        tool,
        hotel_id="HTL-00012346",
        booking_reference="BKG-00012349",
        issue_type="guest-complaint",
        description="Noise.",
    )
    # No escalation contact: the plain contact e-mail is returned.
    assert reply == ok(
        {
            "escalation_ticket_id": "ZDSK-00000001",
            "hotel_contact_email": "contact@citycenter.com",
            "hotel_contact_phone": "+1-212-493-2817",
        }
    )
    assert e.row("zendesk_tickets", "ZDSK-00000001") == {
        "id": "ZDSK-00000001",
        "subject": "Hotel Escalation: guest-complaint",
        "description": "Noise.",
        "status": "open",
        "priority": "high",
        "type": "incident",
        "requester_id": "CUS-00000003",  # the booking's customer, not a Zendesk user
        "assignee_id": None,
        "organization_id": None,
        "tags": [],
        "created_at": "2025-11-30T10:00:00Z",
        "updated_at": "2025-11-30T10:00:00Z",
        "due_at": None,
        "booking_reference": "BKG-00012349",
        "hotel_id": "HTL-00012346",
        "check_in_date": None,
        "booking_value": None,
        "request_type_detail": None,
        "corporate_account_id": None,
        "group_booking_id": None,
        "resolution_action": None,
        "refund_amount": None,  # no create_item normalisation on this path
        "escalation_reason": "guest-complaint",
    }
    second = json.loads(
        e.call(
            tool,
            hotel_id="HTL-00012345",
            booking_reference="BKG-00012345",
            issue_type="system-error",
            description="x",
        )
    )
    assert second == {
        "escalation_ticket_id": "ZDSK-00000002",
        "hotel_contact_email": "director@grandplaza.com",
        "hotel_contact_phone": "+1-212-738-4501",
    }


def test_escalate_to_hotel_takes_the_first_free_id(env: Callable[..., Env]) -> None:
    taken = {
        "id": "ZDSK-00000001",
        "subject": "old",
        "created_at": "2025-01-01T00:00:00Z",
        "updated_at": "2025-01-01T00:00:00Z",
    }
    e = env({"zendesk_tickets": [taken]})
    reply = json.loads(
        e.call(
            "hotel_partner_api_escalate_to_hotel",
            hotel_id="HTL-00012345",
            booking_reference="BKG-00012345",
            issue_type="same-day-modification",
            description="d",
        )
    )
    assert reply["escalation_ticket_id"] == "ZDSK-00000002"


def test_escalate_to_hotel_errors(env: Callable[..., Env]) -> None:
    e = env()
    tool = "hotel_partner_api_escalate_to_hotel"
    args = {
        "hotel_id": "HTL-00012345",
        "booking_reference": "BKG-00012345",
        "issue_type": "system-error",
        "description": "d",
    }
    assert e.call(tool, **{**args, "hotel_id": "HTL-00000002"}) == err(
        tool, "Hotel 'HTL-00000002' not found."
    )
    assert e.call(tool, **{**args, "booking_reference": "BKG-00000000"}) == err(
        tool, "Booking 'BKG-00000000' not found."
    )
    assert e.call(tool, **{**args, "issue_type": "other"}) == err(
        tool,
        "Input validation failed: issue_type: Input should be 'same-day-modification', 'hotel-confirmation-required', "
        "'large-group-booking', 'system-error', 'high-value-dispute' or 'guest-complaint'",
    )
    assert e.call(tool, **{k: v for k, v in args.items() if k != "description"}) == err(
        tool, "Input validation failed: description: Field required"
    )
    assert e.call(tool, **args, priority="low") == err(
        tool, "Input validation failed: priority: Extra inputs are not permitted"
    )
    assert e.count("zendesk_tickets") == 12


def test_process_refund_counts_rows_and_rounds_half_up(env: Callable[..., Env]) -> None:
    e = env()
    tool = "payment_api_process_refund"
    assert e.call(tool, booking_reference="BKG-00012345", refund_amount=33.335, reason="goodwill") == ok(
        {
            "transaction_id": "TXN-00000008",
            "refund_status": "successful",
            "processing_time_estimate": "3-5 business days",
        }
    )
    assert e.row("payment_api_transactions", "TXN-00000008") == {
        "id": "TXN-00000008",
        "transaction_id": "TXN-00000008",
        "booking_reference": "BKG-00012345",
        "customer_id": "CUS-00000001",
        "amount": "33.34",
        "currency": "USD",
        "transaction_type": "refund",
        "payment_status": "successful",
        "payment_method": None,
        "reason": "goodwill",
        "processing_time_estimate": "3-5 business days",
        "created_at": "2025-11-25T10:00:00+00:00",
        "updated_at": "2025-11-25T10:00:00+00:00",
    }
    # No amount check: a negative refund goes through.
    assert (
        json.loads(e.call(tool, booking_reference="BKG-00012345", refund_amount="-5", reason="x"))[
            "transaction_id"
        ]
        == "TXN-00000009"
    )
    assert e.row("payment_api_transactions", "TXN-00000009")["amount"] == "-5.00"  # type: ignore[index]


def test_process_refund_errors_and_id_collision(env: Callable[..., Env]) -> None:
    clash = {
        "id": "TXN-00000009",
        "transaction_id": "TXN-00000009",
        "booking_reference": "BKG-00012345",
        "customer_id": "CUS-00000001",
        "amount": "1.00",
        "transaction_type": "charge",
        "payment_status": "successful",
        "created_at": "2025-01-01T00:00:00Z",
        "updated_at": "2025-01-01T00:00:00Z",
    }
    e = env({"payment_api_transactions": [clash]})
    tool = "payment_api_process_refund"
    assert e.call(tool, booking_reference="BKG-00012345", refund_amount="10", reason="r") == err(
        tool, "Object with ID TXN-00000009 already exists"
    )
    assert e.count("payment_api_transactions") == 8
    assert e.call(tool, booking_reference="BKG-00000000", refund_amount="10", reason="r") == err(
        tool, "Booking not found: BKG-00000000"
    )
    assert e.call(tool, booking_reference="BKG-00012345", refund_amount="ten", reason="r") == err(
        tool, "Input validation failed: refund_amount: Input should be a valid decimal"
    )


def test_process_charge(env: Callable[..., Env]) -> None:
    e = env()
    tool = "payment_api_process_charge"
    assert e.call(tool, booking_reference="BKG-00012348", charge_amount="120.5", reason="upgrade") == ok(
        {"transaction_id": "TXN-00000008", "payment_status": "successful"}
    )
    row = e.row("payment_api_transactions", "TXN-00000008")
    assert row is not None
    assert (row["amount"], row["transaction_type"], row["customer_id"], row["processing_time_estimate"]) == (
        "120.50",
        "charge",
        "CUS-00000002",
        None,
    )
    assert row["created_at"] == row["updated_at"] == "2025-11-25T10:00:00+00:00"
    assert e.call(tool, booking_reference="BKG-00012348", charge_amount=0, reason="x") == err(
        tool, "Invalid charge amount - must be greater than 0"
    )
    assert e.call(tool, booking_reference="BKG-00000000", charge_amount=0, reason="x") == err(
        tool, "Booking not found: BKG-00000000"
    )
    assert e.count("payment_api_transactions") == 8


def test_process_charge_dispute(env: Callable[..., Env]) -> None:
    e = env()
    tool = "payment_api_process_charge_dispute"
    assert e.call(
        tool, transaction_id="TXN-00000005", dispute_reason="double charge", dispute_amount=75
    ) == ok({"dispute_case_id": "DSP-00000001", "dispute_status": "under_review"})
    assert e.row("payment_api_transactions", "DSP-00000001") == {
        "id": "DSP-00000001",
        "transaction_id": "DSP-00000001",
        "booking_reference": "BKG-00012348",
        "customer_id": "CUS-00000002",
        "amount": "75.00",
        "currency": "USD",
        "transaction_type": "dispute",
        "payment_status": "pending",
        "payment_method": None,
        "reason": "double charge",
        "processing_time_estimate": None,
        "created_at": "2025-11-30T10:00:00+00:00",
        "updated_at": "2025-11-30T10:00:00+00:00",
    }
    second = json.loads(e.call(tool, transaction_id="TXN-00000001", dispute_reason="r", dispute_amount="1"))
    assert second["dispute_case_id"] == "DSP-00000002"
    assert e.call(tool, transaction_id="TXN-404", dispute_reason="r", dispute_amount="1") == err(
        tool, "Transaction not found: TXN-404"
    )
    assert e.call(tool, transaction_id="TXN-00000001", dispute_reason="r", dispute_amount="1", x=1) == err(
        tool, "Input validation failed: x: Extra inputs are not permitted"
    )


def test_check_payment_status_latest_by_text(env: Callable[..., Env]) -> None:
    twin = {
        "booking_reference": "BKG-55555555",
        "customer_id": "CUS-1",
        "amount": "1",
        "transaction_type": "charge",
        "payment_status": "failed",
        "created_at": "2025-05-05T00:00:00Z",
        "updated_at": "2025-05-05T00:00:00Z",
    }
    e = env(
        {
            "payment_api_transactions": [
                {**twin, "id": "TXN-A", "transaction_id": "TXN-A", "payment_method": "Card A"},
                {**twin, "id": "TXN-B", "transaction_id": "TXN-B", "payment_method": "Card B"},
            ]
        }
    )
    tool = "payment_api_check_payment_status"
    # TXN-00000007 is the newest; its null payment method is left out.
    assert e.call(tool, booking_reference="BKG-00012346") == ok(
        {"payment_status": "pending", "transaction_id": "TXN-00000007"}
    )
    # Ties go to the first row in store order.
    assert e.call(tool, booking_reference="BKG-55555555") == ok(
        {"payment_status": "failed", "transaction_id": "TXN-A", "payment_method": "Card A"}
    )
    # "2025-11-25T10:00:00+00:00" sorts after every Z-suffixed seed time.
    e.call("payment_api_process_charge", booking_reference="BKG-00012346", charge_amount="1", reason="x")
    assert e.call(tool, booking_reference="BKG-00012346") == ok(
        {"payment_status": "successful", "transaction_id": "TXN-00000010"}
    )
    assert e.call(tool, booking_reference="BKG-00000000") == err(
        tool, "No transactions found for booking: BKG-00000000"
    )


def test_get_transaction_history(env: Callable[..., Env]) -> None:
    e = env()
    tool = "payment_api_get_transaction_history"
    refund = e.seed_row("payment_api_transactions", "TXN-00000004")
    del refund["payment_method"]
    charge = {
        k: v for k, v in e.seed_row("payment_api_transactions", "TXN-00000003").items() if v is not None
    }
    assert e.call(tool, customer_id="CUS-00000001", booking_reference="BKG-00012347") == ok(
        {"transactions": [refund, charge]}
    )
    assert e.call(tool, customer_id="CUS-00000002", booking_reference="BKG-00012347") == ok(
        {"transactions": []}
    )
    ids = [t["id"] for t in json.loads(e.call(tool, customer_id="CUS-00000001"))["transactions"]]
    assert ids == ["TXN-00000001", "TXN-00000007", "TXN-00000002", "TXN-00000004", "TXN-00000003"]
    assert e.call(tool, customer_id="", booking_reference=None) == err(
        tool, "Either customer_id or booking_reference must be provided"
    )


def test_generate_invoice_and_update_payment_method(env: Callable[..., Env]) -> None:
    e = env()
    assert e.call(
        "payment_api_generate_invoice", booking_reference="BKG-00012345", invoice_type="receipt"
    ) == ok(
        {
            "invoice_url": "https://staybridge.com/invoices/BKG-00012345-20251125100000.pdf",
            "invoice_id": "INV-BKG-00012345-20251125100000",
        }
    )
    assert e.call("payment_api_generate_invoice", booking_reference="BKG-0", invoice_type="receipt") == err(
        "payment_api_generate_invoice", "Booking not found: BKG-0"
    )
    tool = "payment_api_update_payment_method"
    assert e.call(tool, customer_id="CUS-00000001", new_payment_method="tok_visa_4242") == ok(
        {"success": True, "payment_method_last4": "4242"}
    )
    assert e.call(tool, customer_id="CUS-00000001", new_payment_method="abc") == ok(
        {"success": True, "payment_method_last4": "****"}
    )
    # The customer must have a booking; a CRM profile alone is not enough.
    assert e.call(tool, customer_id="CUS-00000005", new_payment_method="tok_1234") == err(
        tool, "Customer not found: CUS-00000005"
    )
    assert e.count("payment_api_transactions") == 7


# ---- lookup --------------------------------------------------------------------
def test_validate_booking_reference(env: Callable[..., Env]) -> None:
    e = env()
    tool = "lookup_validate_booking_reference"
    assert e.call(tool, booking_reference="BKG-00012345") == ok(
        {"is_valid": True, "booking_id": "BKG-00000001"}
    )
    assert e.call(tool, booking_reference="BKG-99999999") == ok({"is_valid": False})
    assert e.call(tool, booking_reference="BKG-123") == err(tool, "Invalid booking reference format.")
    assert e.call(tool, booking_reference="BKG-000123456") == err(tool, "Invalid booking reference format.")


SEED_LIKE_BOOKING = {
    "customer_id": "CUS-00000004",
    "hotel_id": "HTL-00012349",
    "check_in_date": "2026-02-01T15:00:00Z",
    "check_out_date": "2026-02-03T11:00:00Z",
    "booking_value": "200.00",
    "room_type": "standard_room",
    "board_type": "without_breakfast",
    "adults_count": 1,
    "created_at": "2025-10-01T10:00:00Z",
    "updated_at": "2025-10-01T10:00:00Z",
}


def test_lookup_group_booking_id(env: Callable[..., Env]) -> None:
    nogroup = {**SEED_LIKE_BOOKING, "id": "BKG-N0000001", "booking_reference": "BKG-80000001"}
    e = env({"booking_api_bookings": [nogroup]})
    tool = "lookup_lookup_group_booking_id"
    assert e.call(tool, booking_reference="BKG-00012345") == ok(
        {
            "group_booking_id": "GRP-00012345",
            "total_rooms": 5,
            "coordinator_contact": "Alice Johnson <alice.johnson@company.com>",
        }
    )
    # Not in a group: falls back to the coordinator e-mail (case-insensitive).
    assert e.call(tool, booking_reference="BKG-80000001", coordinator_email="BOB.SMITH@event.com") == ok(
        {
            "group_booking_id": "GRP-00067890",
            "total_rooms": 10,
            "coordinator_contact": "Bob Smith <bob.smith@event.com>",
        }
    )
    assert e.call(tool, booking_reference="BKG-80000001") == err(
        tool, "No group booking found matching criteria or booking is not part of a group."
    )
    assert e.call(tool) == err(tool, "Invalid parameters: provide booking_reference or coordinator_email.")


def test_lookup_corporate_account_id(env: Callable[..., Env]) -> None:
    e = env()
    tool = "lookup_lookup_corporate_account_id"
    assert e.call(tool, company_name="quantum") == ok(
        {"corporate_account_id": "CRP-00077777", "company_name": "QuantumWorks", "account_tier": "enterprise"}
    )
    assert e.call(tool, customer_email="someone@BlueCore.com") == ok(
        {
            "corporate_account_id": "CRP-00024680",
            "company_name": "BlueCore Analytics",
            "account_tier": "mid_market",
        }
    )
    # Name matches come first, then domain matches.
    assert (
        json.loads(e.call(tool, company_name="orbitix", customer_email="x@bluecore.com"))[
            "corporate_account_id"
        ]
        == "CRP-00099999"
    )
    # A malformed e-mail fails even when the name already matched.
    assert e.call(tool, company_name="quantum", customer_email="no-at-sign") == err(
        tool, "Invalid email format."
    )
    assert e.call(tool, company_name="zzz") == err(tool, "No corporate account found matching criteria.")
    assert e.call(tool, company_name="", customer_email=None) == err(
        tool, "Invalid parameters: provide company_name or customer_email."
    )


def test_lookup_hotel_id(env: Callable[..., Env]) -> None:
    e = env()
    tool = "lookup_lookup_hotel_id"
    names = [h["hotel_name"] for h in json.loads(e.call(tool, location="NEW YORK"))["results"]]
    assert names == ["Grand Plaza Hotel", "City Center Inn", "Downtown Budget Hotel"]
    assert e.call(tool, hotel_name="lodge", location="miami") == ok(
        {
            "results": [
                {"hotel_id": "HTL-00012348", "hotel_name": "Beach Resort Hotel", "location": "Miami"},
                {"hotel_id": "HTL-00012349", "hotel_name": "Mountain Lodge Resort", "location": "Denver"},
            ]
        }
    )
    assert e.call(tool, hotel_name="Ritz") == err(tool, "No hotels found matching criteria.")
    assert e.call(tool) == err(tool, "Invalid parameters: provide hotel_name or location.")


def test_lookup_tables_stay_untouched(env: Callable[..., Env]) -> None:
    e = env()
    before = {
        t: e.count(t)
        for t in ("lookup_hotels", "lookup_bookings", "lookup_corporate_accounts", "lookup_group_bookings")
    }
    e.call("lookup_lookup_hotel_id", location="new york")
    e.call("booking_api_modify_booking", booking_reference="BKG-00012345", booking_status="cancelled")
    assert {t: e.count(t) for t in before} == before
    assert e.row("lookup_bookings", "BKG-00000001")["booking_status"] == "confirmed"  # type: ignore[index]


def test_crm_update_time_is_fixed(env: Callable[..., Env]) -> None:
    e = env()
    e.call("crm_api_update_customer_info", customer_id="CUS-00000001", full_name="Alice T.")
    row = e.db.get("crm_api_customer_profiles", "CUS-00000001")
    assert row is not None and row["updated_at"] == dt.datetime(2025, 1, 1, tzinfo=dt.UTC)
