"""The consulting copy of the Zendesk tools, where it differs from the generic
one (spec/consulting.md §3.21, §5.2 quirks 3-5 and 8, §4.7): custom ticket
fields, the ticket-status violation log, null-dropping updates with the
union-selection rule, row-count ids and the full filter comparators. Run
against a throwaway database on the host PostgreSQL (TBX_TEST_PG_DSN)."""

from __future__ import annotations

import json
from typing import Any

import psycopg
import pytest
from pg_support import DomainTools, domain_seed, err

from servers.domains.consulting.domain import DOMAIN
from servers.engine.seeding import initial_rows
from servers.engine.store import Store

TABLES = {t.name: t for t in DOMAIN.tables}
T = DomainTools(DOMAIN)
call, state, put = T.call, T.state, T.put
CREATED = "2025-10-01T13:00:05Z"
TICKET_UPDATED = "2025-10-01T13:00:10Z"


def ticket(conn: psycopg.Connection[Any], ticket_id: str) -> dict[str, Any]:
    return next(r for r in state(conn, "zendesk_tickets") if r["id"] == ticket_id)


def ids(reply: str) -> list[str]:
    return [r["id"] for r in json.loads(reply)["items"]]


# ---- create ----------------------------------------------------------------------
def test_create_open_ticket_with_custom_fields(db: psycopg.Connection[Any]) -> None:
    item = {
        "subject": "VPN",
        "status": "open",
        "engagement_code": "ENG-1",
        "device_type": None,
        "license_pool": "standard",
    }
    reply = json.loads(call(db, "zendesk_create_item", table="tickets", item=item))["item"]
    assert list(reply) == list(TABLES["zendesk_tickets"].field_names)
    assert (reply["id"], reply["created_at"], reply["updated_at"]) == ("6", CREATED, CREATED)
    assert (reply["engagement_code"], reply["license_pool"], reply["approval_required"]) == (
        "ENG-1",
        "standard",
        None,
    )
    assert len(state(db, "zendesk_ticket_status_violations")) == 5  # status open: nothing logged


def test_create_ticket_without_status_logs_violation(db: psycopg.Connection[Any]) -> None:
    reply = json.loads(call(db, "zendesk_create_item", table="tickets", item={"subject": "Printer"}))
    assert reply["item"]["status"] == "new"
    assert state(db, "zendesk_ticket_status_violations")[-1] == {
        "id": "VIOLATION-6",
        "ticket_id": "6",
        "created_status": "new",
        "created_at": CREATED,
    }


def test_create_ticket_with_null_status_fails(db: psycopg.Connection[Any]) -> None:
    reply = json.loads(
        call(db, "zendesk_create_item", table="tickets", item={"subject": "x", "status": None})
    )
    assert reply["error"].startswith(
        "Tool execution failed: Failed to create item: 1 validation error for Ticket\nstatus\n"
        "  Input should be 'new', 'open', 'pending', 'hold', 'solved' or 'closed' [type=enum"
    )
    assert len(state(db, "zendesk_tickets")) == 5
    assert len(state(db, "zendesk_ticket_status_violations")) == 5


def test_violation_id_collision_keeps_ticket(db: psycopg.Connection[Any]) -> None:
    put(
        db,
        "zendesk_ticket_status_violations",
        {"id": "VIOLATION-7", "ticket_id": "9", "created_status": "new", "created_at": "x"},
    )
    reply = call(db, "zendesk_create_item", table="tickets", item={"subject": "x", "status": "pending"})
    assert reply == err("zendesk_create_item", "Object with ID VIOLATION-7 already exists")
    assert ticket(db, "6")["status"] == "pending"


def test_ticket_id_is_row_count_plus_one(db: psycopg.Connection[Any]) -> None:
    base = {"subject": "s", "created_at": "c", "updated_at": "u"}
    put(db, "zendesk_tickets", {**base, "id": "12001"})
    reply = json.loads(
        call(db, "zendesk_create_item", table="tickets", item={"subject": "a", "status": "open"})
    )
    assert reply["item"]["id"] == "7"  # patched rows count, ids are not max + 1
    put(db, "zendesk_tickets", {**base, "id": "9"})
    before = len(state(db, "zendesk_tickets"))
    assert call(db, "zendesk_create_item", table="tickets", item={"subject": "b", "status": "open"}) == err(
        "zendesk_create_item", "Object with ID 9 already exists"
    )
    assert len(state(db, "zendesk_tickets")) == before


# ---- update ----------------------------------------------------------------------
def test_update_drops_null_keys_including_lists(db: psycopg.Connection[Any]) -> None:
    item = {
        "status": "solved",
        "tags": None,
        "priority": None,
        "engagement_code": "ENG-7",
        "subject": "New subject",
    }
    reply = json.loads(call(db, "zendesk_update_item", table="tickets", id="5", item=item))["item"]
    assert (reply["status"], reply["tags"], reply["priority"]) == ("solved", ["software_access"], "high")
    assert (reply["engagement_code"], reply["updated_at"]) == ("ENG-7", TICKET_UPDATED)
    call(db, "zendesk_update_item", table="tickets", id="5", item={"tags": [], "status": "solved"})
    assert ticket(db, "5")["tags"] == []


def test_update_union_can_select_user_input(db: psycopg.Connection[Any]) -> None:
    before = ticket(db, "5")
    for item in (
        {"status": "solved", "name": None},
        {"device_type": "tablet", "status": "hold"},
        {"subject": ""},
    ):
        call(db, "zendesk_update_item", table="tickets", id="5", item=item)
        assert ticket(db, "5") == {**before, "updated_at": TICKET_UPDATED}, item


def test_update_timestamps_per_table(db: psycopg.Connection[Any]) -> None:
    call(db, "zendesk_update_item", table="users", id="1", item={"phone": "+1"})
    user = Store(db, DOMAIN.tables).get("zendesk_users", "1")
    assert user is not None and (user["phone"], user["updated_at"]) == ("+1", CREATED)


# ---- get_items filters (consulting copy) -------------------------------------------
def test_filter_ne_ge_le_evaluated(db: psycopg.Connection[Any]) -> None:
    assert ids(call(db, "zendesk_get_items", table="tickets", **{"$filter": "status ne 'open'"})) == [
        r["id"] for r in domain_seed(DOMAIN.module)["zendesk_tickets"] if r["status"] != "open"
    ]
    assert ids(call(db, "zendesk_get_items", table="tickets", **{"$filter": "id le '2'"})) == ["1", "2"]
    assert ids(call(db, "zendesk_get_items", table="tickets", **{"$filter": "id ge '4'"})) == ["4", "5"]


def test_filter_literal_quirks(db: psycopg.Connection[Any]) -> None:
    users = {"table": "users"}
    assert ids(call(db, "zendesk_get_items", **users, **{"$filter": "verified eq true"})) == []
    assert len(ids(call(db, "zendesk_get_items", **users, **{"$filter": "phone ne null"}))) == 5
    assert ids(
        call(db, "zendesk_get_items", **users, **{"$filter": "requester.email eq 'lisa.martinez@msg.com'"})
    ) == ["2"]
    reply = call(db, "zendesk_get_items", table="tickets", **{"$filter": "due_at gt '2025'"})
    assert reply == err(
        "zendesk_get_items",
        "Failed to parse OData filter: '>' not supported between instances of 'NoneType' and 'str'",
    )


def test_filter_ignored_clauses_and_short_circuit(db: psycopg.Connection[Any]) -> None:
    everything = [r["id"] for r in domain_seed(DOMAIN.module)["zendesk_tickets"]]
    for text in ("contains(subject, 'zzz')", "tags/any(t: t eq 'zzz')", "not (status eq 'open')"):
        assert ids(call(db, "zendesk_get_items", table="tickets", **{"$filter": text})) == everything, text
    flt = "status eq 'zzz' and due_at gt 'a'"
    assert ids(call(db, "zendesk_get_items", table="tickets", **{"$filter": flt})) == []


def test_orderby_trailing_comma_is_ascending(db: psycopg.Connection[Any]) -> None:
    asc = ids(call(db, "zendesk_get_items", table="tickets", **{"$orderby": "created_at"}))
    assert ids(call(db, "zendesk_get_items", table="tickets", **{"$orderby": "created_at desc,"})) == asc
    assert ids(call(db, "zendesk_get_items", table="tickets", **{"$orderby": "created_at desc"})) == asc[::-1]


# ---- users: organization_id is stored as text -------------------------------------
def test_patch_user_organization_id_converted_to_text() -> None:
    from servers.engine.seeding import DataPatchError

    base = {"name": "A", "email": "a@msg.com", "created_at": "c", "updated_at": "u"}
    users = [{**base, "id": "9", "organization_id": 7}, {**base, "id": "10", "organization_id": True}]
    rows = initial_rows(DOMAIN.tables, domain_seed(DOMAIN.module), {"zendesk_users": users})
    assert [r["organization_id"] for r in rows["zendesk_users"][-2:]] == ["7", "True"]
    # Only the user model converts: a ticket's organization_id must still be text.
    ticket_row = {"id": "9", "subject": "s", "created_at": "c", "updated_at": "u", "organization_id": 7}
    with pytest.raises(DataPatchError, match="organization_id: Input should be a valid string"):
        initial_rows(DOMAIN.tables, domain_seed(DOMAIN.module), {"zendesk_tickets": [ticket_row]})
