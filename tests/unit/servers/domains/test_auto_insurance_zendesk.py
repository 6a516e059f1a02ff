"""The auto-insurance variant of the Zendesk tools, as this domain serves them
(spec/auto-insurance.md §3.7 and quirks 3, 4, 5 and 13 of §5.2), against a
throwaway database on the host PostgreSQL (TBX_TEST_PG_DSN)."""

from __future__ import annotations

import json
from typing import Any

import psycopg
from pg_support import DomainTools, reload

from servers.domains.auto_insurance.domain import DOMAIN
from servers.engine.store import Store

CREATED = "2025-10-01T13:00:05Z"
UPDATED = "2025-10-01T13:00:10Z"
T = DomainTools(DOMAIN)
rows = T.rows


def call(conn: psycopg.Connection[Any], tool: str, /, **params: Any) -> Any:
    return json.loads(T.call(conn, tool, **params))


def ticket(conn: psycopg.Connection[Any], key: str) -> dict[str, Any]:
    found = Store(conn, DOMAIN.tables).get("zendesk_tickets", key)
    assert found is not None
    return found


TICKET = {"id": "TKT-1", "subject": "s", "status": "pending", "tags": ["b", "a"], "outcome_summary": "Pending",
          "created_at": "2025-09-01T00:00:00Z", "updated_at": "2025-09-02T00:00:00Z"}  # fmt: skip


def test_ticket_update_ignores_every_null(db: psycopg.Connection[Any]) -> None:
    # Quirk 3: nulls (tags included) leave fields alone; updated_at is stamped on every update.
    reload(db, DOMAIN, {"zendesk_tickets": [TICKET]})
    item = {
        "status": "solved",
        "tags": None,
        "outcome_summary": None,
        "user_type": "Co-Insured",
        "due_at": None,
    }
    reply = call(db, "zendesk_update_item", table="tickets", id="TKT-1", item=item)
    assert reply["item"]["tags"] == ["b", "a"] and reply["item"]["outcome_summary"] == "Pending"
    t = ticket(db, "TKT-1")
    assert (t["status"], t["user_type"], t["created_at"], t["updated_at"]) == (
        "solved", "Co-Insured", "2025-09-01T00:00:00Z", UPDATED
    )  # fmt: skip
    call(db, "zendesk_update_item", table="tickets", id="TKT-1", item={"tags": []})
    assert ticket(db, "TKT-1")["tags"] == []


def test_invalid_ticket_update_only_stamps_updated_at(db: psycopg.Connection[Any]) -> None:
    # Quirk 3: an invalid value makes the ticket shape lose; the call succeeds but changes nothing else.
    reload(db, DOMAIN, {"zendesk_tickets": [TICKET]})
    before = ticket(db, "TKT-1")
    reply = call(
        db,
        "zendesk_update_item",
        table="tickets",
        id="TKT-1",
        item={"status": "Solved", "outcome_summary": "x"},
    )
    assert "error" not in reply
    assert ticket(db, "TKT-1") == {**before, "updated_at": UPDATED}
    assert call(db, "zendesk_update_item", table="tickets", id="nope", item={"status": "solved"}) == {
        "error": "Tool execution failed: Item with ID 'nope' not found in table 'tickets'",
        "tool": "zendesk_update_item",
    }


def test_ticket_create_logs_status_violations(db: psycopg.Connection[Any]) -> None:
    # Quirk 4: status omitted (-> new) or not open appends VIOLATION-<count+1>; open does not.
    reply = call(
        db, "zendesk_create_item", table="tickets", item={"subject": "s", "tags": None, "user_type": "x"}
    )
    assert reply["item"] == {
        "id": "6", "subject": "s", "description": None, "status": "new", "priority": None, "type": None,
        "requester_id": None, "assignee_id": None, "organization_id": None, "tags": [], "created_at": CREATED,
        "updated_at": CREATED, "due_at": None, "request_category": None, "claims_action_type": None,
        "effective_date_of_change": None, "internal_review_type": None, "outcome_summary": None,
        "escalation_level": None, "user_type": "x",
    }  # fmt: skip
    assert rows(db, "zendesk_ticket_status_violations")[-1] == {
        "id": "VIOLATION-6", "ticket_id": "6", "created_status": "new", "created_at": CREATED,
    }  # fmt: skip
    call(db, "zendesk_create_item", table="tickets", item={"subject": "s", "status": "open"})
    assert len(rows(db, "zendesk_ticket_status_violations")) == 6
    call(db, "zendesk_create_item", table="tickets", item={"subject": "s", "status": "pending"})
    assert rows(db, "zendesk_ticket_status_violations")[-1]["id"] == "VIOLATION-7"
    assert rows(db, "zendesk_ticket_status_violations")[-1]["ticket_id"] == "8"
    # Updates never log violations.
    call(db, "zendesk_update_item", table="tickets", id="7", item={"status": "new"})
    assert len(rows(db, "zendesk_ticket_status_violations")) == 7


def test_violation_id_collision_keeps_the_ticket(db: psycopg.Connection[Any]) -> None:
    reload(db, DOMAIN, {"zendesk_ticket_status_violations": [
        {"id": "VIOLATION-7", "ticket_id": "1", "created_status": "new", "created_at": "x"},
    ]})  # fmt: skip
    reply = call(db, "zendesk_create_item", table="tickets", item={"subject": "s"})
    assert "Object with ID VIOLATION-7 already exists" in reply["error"]
    assert ticket(db, "6")["status"] == "new"


def test_ticket_ids_count_rows(db: psycopg.Connection[Any]) -> None:
    # Quirk 5: str(row count + 1), not max + 1; a taken id fails and writes nothing.
    reload(db, DOMAIN, {"zendesk_tickets": [{**TICKET, "id": "12847"}]})
    assert (
        call(db, "zendesk_create_item", table="tickets", item={"subject": "s", "status": "open"})["item"][
            "id"
        ]
        == "7"
    )
    reload(db, DOMAIN, {"zendesk_tickets": [{**TICKET, "id": "7"}]})
    reply = call(db, "zendesk_create_item", table="tickets", item={"subject": "s", "status": "open"})
    assert "Object with ID 7 already exists" in reply["error"]
    assert len(rows(db, "zendesk_tickets")) == 6


def _ids(reply: Any) -> list[str]:
    assert "error" not in reply, reply
    return [r["id"] for r in reply["items"]]


def test_get_items_odata_variant(db: psycopg.Connection[Any]) -> None:
    # Quirk 13: ne/ge/le are evaluated in this variant.
    assert _ids(call(db, "zendesk_get_items", table="tickets", **{"$filter": "status ne 'solved'"})) == [
        "1",
        "2",
        "5",
    ]
    assert _ids(call(db, "zendesk_get_items", table="tickets", **{"$filter": "created_at ge '2025-09-28'"})) == [
        "1", "2", "5",
    ]  # fmt: skip
    assert _ids(call(db, "zendesk_get_items", table="tickets", **{"$filter": "created_at le '2025-09-27T09:00:00Z'"})) == [
        "3", "4",
    ]  # fmt: skip
    # `in` matches every row; boolean literals never equal a boolean field.
    assert (
        len(
            _ids(
                call(db, "zendesk_get_items", table="tickets", **{"$filter": "status in ('open','pending')"})
            )
        )
        == 5
    )
    assert _ids(call(db, "zendesk_get_items", table="users", **{"$filter": "verified eq true"})) == []
    # $orderby: only the first token is the field and only an exact second token `desc` reverses.
    assert _ids(call(db, "zendesk_get_items", table="tickets", **{"$orderby": "created_at desc"})) == [
        "1", "5", "2", "4", "3",
    ]  # fmt: skip
    assert _ids(call(db, "zendesk_get_items", table="tickets", **{"$orderby": "created_at desc, id"})) == [
        "3", "4", "2", "5", "1",
    ]  # fmt: skip
    # Ordering null against text fails the whole call.
    reload(db, DOMAIN, {"zendesk_tickets": [{**TICKET, "priority": None}]})
    assert call(db, "zendesk_get_items", table="tickets", **{"$filter": "priority ge 'low'"}) == {
        "error": "Tool execution failed: Failed to parse OData filter: '>=' not supported between instances of "
        "'NoneType' and 'str'",
        "tool": "zendesk_get_items",
    }
