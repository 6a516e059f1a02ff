"""The Zendesk toolset in its five variants, against a throwaway database on
the host PostgreSQL (TBX_TEST_PG_DSN, default the local test server on
/tmp:55432): exact replies, state changes, error cases, the payload-shape
selection of spec §4.12 and the quirks of §5.2.

Each test loads only the Zendesk tables of a domain (seed rows from the
benchmark export) with the variant's tools, independent of the domain servers.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import Any

import psycopg
import pytest
from pg_support import domain_seed

from bench.replay.local import fresh_schema, reset_rows
from judge import dump_canonical
from servers.engine.seeding import initial_rows
from servers.engine.store import Store
from servers.engine.tools import Tool, ToolContext, run_tool
from servers.registry import load_domain
from servers.toolsets.zendesk import VARIANTS, zendesk_tables, zendesk_tools

# variant -> (domain package, reference module)
DOMAINS = {
    v: (d, load_domain(d).module) for v, d in ((v, "retail" if v == "generic" else v) for v in VARIANTS)
}
CREATED = "2025-10-01T13:00:05Z"
TICKET_UPDATED = "2025-10-01T13:00:10Z"


# ---- fixtures ----------------------------------------------------------------
@pytest.fixture(scope="module")
def conn(make_database: Callable[[str], psycopg.Connection[Any]]) -> psycopg.Connection[Any]:
    """A fresh database for this module, dropped afterwards."""
    return make_database("zendesk")


@functools.cache
def zendesk_seed(variant: str) -> dict[str, list[dict[str, Any]]]:
    _, module = DOMAINS[variant]
    return {k: v for k, v in domain_seed(module).items() if k.startswith("zendesk_")}


_SCHEMA: dict[int, str] = {}  # connection -> the variant whose tables it holds


class Env:
    """One variant's Zendesk tables, freshly seeded, and its tools."""

    def __init__(self, conn: psycopg.Connection[Any], variant: str, patch: dict[str, Any] | None = None):
        self.conn = conn
        self.variant = variant
        self.tables = zendesk_tables(variant)
        self.tools: dict[str, Tool] = {t.name: t for t in zendesk_tools(variant)}
        if _SCHEMA.get(id(conn)) != variant:  # the variants' tables differ: recreate them
            fresh_schema(conn, self.tables)
            _SCHEMA[id(conn)] = variant
        reset_rows(conn, self.tables, initial_rows(self.tables, zendesk_seed(variant), patch))

    def raw(self, tool: str, **params: Any) -> str:
        return run_tool(self.tools[tool], ToolContext(db=Store(self.conn, self.tables)), params)

    def call(self, tool: str, **params: Any) -> Any:
        return json.loads(self.raw(tool, **params))

    def error(self, tool: str, **params: Any) -> str:
        reply = self.call(tool, **params)
        assert set(reply) == {"error", "tool"}, reply
        assert reply["tool"] == tool
        message: str = reply["error"]
        assert message.startswith("Tool execution failed: ")
        return message.removeprefix("Tool execution failed: ")

    def rows(self, table: str) -> list[dict[str, Any]]:
        return Store(self.conn, self.tables).all(table)

    def row(self, table: str, key: str) -> dict[str, Any]:
        row = Store(self.conn, self.tables).get(table, key)
        assert row is not None
        return row

    def items(self, table: str = "tickets", **params: Any) -> list[Any]:
        reply = self.call("zendesk_get_items", table=table, **params)
        assert "items" in reply, reply
        return [r.get("id", r) for r in reply["items"]]


@pytest.fixture
def env(conn: psycopg.Connection[Any]) -> Any:
    def make(variant: str, patch: dict[str, Any] | None = None) -> Env:
        return Env(conn, variant, patch)

    return make


def ticket_item(**extra: Any) -> dict[str, Any]:
    return {"subject": "Printer jam", "status": "open", "priority": "normal", **extra}


# ---- tool listing --------------------------------------------------------------
def test_every_variant_lists_the_seven_tools_in_order() -> None:
    for variant in VARIANTS:
        assert [t.name for t in zendesk_tools(variant)] == [
            "zendesk_create_item",
            "zendesk_delete_item",
            "zendesk_get_item",
            "zendesk_get_items",
            "zendesk_get_tables",
            "zendesk_search_articles",
            "zendesk_update_item",
        ]
    with pytest.raises(ValueError):
        zendesk_tools("booking")


def test_input_schemas_equal_the_reference(dataset: Any) -> None:
    cosmetic = {"description", "title", "examples"}

    def structural(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: structural(v) for k, v in node.items() if k not in cosmetic}
        if isinstance(node, list):
            return [structural(v) for v in node]
        return node

    for variant, (_, module) in DOMAINS.items():
        ref = json.loads((dataset / "servers" / module / "tools.json").read_text())["agent_tools"]
        ref_schemas = {t["name"]: t for t in ref if t["name"].startswith("zendesk_")}
        for t in zendesk_tools(variant):
            assert structural(t.input_schema) == structural(ref_schemas[t.name]["input_schema"]), (
                variant,
                t.name,
            )
            assert t.description != ref_schemas[t.name]["description"]


def test_get_tables_lists_18_types_without_comments(env: Any) -> None:
    e = env("generic")
    reply = e.raw("zendesk_get_tables", anything="ignored")  # no parameters; extras ignored
    value = json.loads(reply)["value"]
    assert len(value) == 18
    assert value[0] == {"Name": "activities", "DisplayName": "Activities"}
    assert {"Name": "group_memberships", "DisplayName": "Group Memberships"} in value
    assert all(v["Name"] != "comments" for v in value)  # QUIRK Z-14
    assert reply.startswith('{"value": [{"Name": "activities", "DisplayName": "Activities"}, ')


def test_get_item_returns_the_whole_row(env: Any) -> None:
    e = env("auto_insurance")
    item = e.call("zendesk_get_item", table="tickets", id="2")["item"]
    assert item["id"] == "2" and item["status"] == "hold"
    assert item["claims_action_type"] == "FNOL \u2013 Collision"
    assert item["organization_id"] is None  # nulls are kept
    assert "\\u2013" in e.raw("zendesk_get_item", table="tickets", id="2")  # ASCII-escaped reply
    comment = e.call(
        "zendesk_get_item", table="ticket_comments", id=str(e.rows("zendesk_ticket_comments")[0]["id"])
    )
    assert isinstance(comment["item"]["id"], int)


def test_get_item_errors(env: Any) -> None:
    e = env("auto_insurance")
    # QUIRK Z-13: the table shows as its enum member.
    assert (
        e.error("zendesk_get_item", table="tickets", id="99")
        == "Item with ID '99' not found in table 'TableName.TICKETS'"
    )
    assert (
        e.error("zendesk_get_item", table="tickets", id=1)
        == "Input validation failed: id: Input should be a valid string"
    )
    assert e.error("zendesk_get_item", table="articles", id="1") == (
        "Unsupported table: 'articles'. Only tickets, users, organizations, comments, and ticket_comments are supported."
    )
    assert e.error("zendesk_get_item", table="ticket_status_violations", id="1").startswith(
        "Input validation failed: table: Input should be 'activities', 'articles', "
    )


def test_get_items_filter_order_page_select(env: Any) -> None:
    e = env("auto_insurance")
    assert e.items(**{"$filter": "requester_id eq '1'"}) == ["1", "4"]
    assert e.items(filter="requester_id eq '1'") == ["1", "4"]  # bare names work too
    assert e.items(**{"$filter": "requester_id eq '1'", "filter": "requester_id eq '3'"}) == [
        "1",
        "4",
    ]  # `$` wins
    assert e.items(**{"$orderby": "status"}) == ["2", "1", "5", "3", "4"]
    assert e.items(**{"$orderby": "status desc"}) == ["3", "4", "5", "1", "2"]  # stable descending
    assert e.items(**{"$skip": 1, "$top": 2}) == ["2", "3"]
    rows = e.call("zendesk_get_items", table="users", **{"$select": "email, id,bogus", "$top": 1})["items"]
    assert list(rows[0]) == ["id", "email"]  # model order, unknown names ignored
    assert e.items(**{"$select": " ", "$top": 2}) == [{}, {}]
    assert len(e.items(**{"$filter": "", "$select": ""})) == 5


def test_get_items_errors(env: Any) -> None:
    e = env("auto_insurance")
    assert e.error("zendesk_get_items", table="tickets", **{"$top": 0}) == (
        "Input validation failed: $top: Input should be greater than or equal to 1"
    )
    assert e.error("zendesk_get_items", table="tickets", **{"$top": 1001}) == (
        "Input validation failed: $top: Input should be less than or equal to 1000"
    )
    assert e.error("zendesk_get_items", table="tickets", **{"$skip": -1}) == (
        "Input validation failed: $skip: Input should be greater than or equal to 0"
    )
    assert e.error("zendesk_get_items", table="views").startswith("Unsupported table: 'views'.")
    assert e.error("zendesk_get_items", table="tickets", **{"$filter": "due_at gt '2025-01-01'"}) == (
        "Failed to parse OData filter: '>' not supported between instances of 'NoneType' and 'str'"
    )
    assert e.error("zendesk_get_items", table="tickets", **{"$filter": 'status eq "open"'}) == (
        "Failed to parse OData filter: Failed to tokenize at: Token(type='ERROR', value='\"open\"', lineno=1, index=10)"
    )


def test_get_items_generic_ignores_ne(env: Any) -> None:
    """QUIRK Z-5 end to end: the retail copy matches every row for `ne`."""
    generic = env("generic")
    assert generic.items(**{"$filter": "status ne 'open'"}) == ["1", "2", "3", "4", "5"]
    auto = env("auto_insurance")
    assert auto.items(**{"$filter": "status ne 'open'"}) == ["2", "3", "4", "5"]


def test_orderby_quirks(env: Any) -> None:
    """QUIRK Z-6: one field, literal `desc` only, incomparable values leave the order alone."""
    e = env("auto_insurance")
    assert e.items(**{"$orderby": "status desc, id asc"}) == ["2", "1", "5", "3", "4"]  # `desc,` -> ascending
    assert e.items(**{"$orderby": "status DESC"}) == ["3", "4", "5", "1", "2"]
    assert e.items(**{"$orderby": "created_at,id"}) == ["1", "2", "3", "4", "5"]  # unknown field
    assert e.items(**{"$orderby": "due_at desc"}) == ["1", "2", "3", "4", "5"]  # all null: incomparable
    assert e.items(**{"$orderby": "priority desc"}) == ["1", "2", "3", "5", "4"]


def test_create_ticket_generic(env: Any) -> None:
    e = env("generic")
    reply = e.raw("zendesk_create_item", table="tickets", item=ticket_item(tags=None, due_at=None, bogus=1))
    assert reply == (
        '{"item": {"id": "6", "subject": "Printer jam", "description": null, "status": "open", '
        '"priority": "normal", "type": null, "requester_id": null, "assignee_id": null, "organization_id": null, '
        '"tags": [], "created_at": "2025-10-01T13:00:05Z", "updated_at": "2025-10-01T13:00:05Z", "due_at": null}}'
    )
    assert e.row("zendesk_tickets", "6")["tags"] == []
    assert "zendesk_ticket_status_violations" not in {t.name for t in e.tables}


def test_create_other_tables(env: Any) -> None:
    e = env("consulting")
    user = e.call(
        "zendesk_create_item", table="users", item={"name": "Ann", "email": "ann@x.io", "role": "agent"}
    )
    assert user["item"] == {
        "id": "6",
        "name": "Ann",
        "email": "ann@x.io",
        "role": "agent",
        "organization_id": None,
        "phone": None,
        "verified": False,
        "active": True,
        "created_at": CREATED,
        "updated_at": CREATED,
    }
    org = e.call("zendesk_create_item", table="organizations", item={"name": "Acme", "domain_names": None})
    assert org["item"]["domain_names"] == [] and org["item"]["id"] == "6"
    comment = e.call(
        "zendesk_create_item", table="comments", item={"ticket_id": "1", "author_id": "2", "body": "hi"}
    )
    assert comment["item"] == {
        "id": "6",
        "ticket_id": "1",
        "author_id": "2",
        "body": "hi",
        "public": True,
        "created_at": CREATED,
    }
    tc = e.call(
        "zendesk_create_item", table="ticket_comments", item={"ticket_id": 1, "author_id": 2, "body": "a<b"}
    )
    assert tc["item"] == {
        "id": 23118465221921,
        "ticket_id": 1,
        "author_id": 2,
        "body": "a<b",
        "html_body": '<div class="zd-comment" dir="auto"><p dir="auto">a<b</p></div>',
        "public": True,
        "created_at": CREATED,
        "ItemInternalId": None,
        "key": "23118465221921",
    }
    explicit = e.call(
        "zendesk_create_item",
        table="ticket_comments",
        item={"ticket_id": 1, "author_id": 2, "body": "b", "html_body": None},
    )
    assert explicit["item"]["html_body"] is None and explicit["item"]["id"] == 23118465221922


def test_create_errors(env: Any) -> None:
    e = env("auto_insurance")
    assert e.error("zendesk_create_item", table="groups", item=ticket_item()).startswith(
        "Unsupported table: 'groups'."
    )
    # A user-shaped payload sent to tickets: the row misses its subject.
    msg = e.error("zendesk_create_item", table="tickets", item={"name": "N", "email": "e"})
    assert msg.startswith(
        "Failed to create item: 1 validation error for Ticket\nsubject\n  Field required [type=missing"
    )
    # Explicit null for a non-nullable field.
    msg = e.error("zendesk_create_item", table="users", item={"name": "N", "email": "e", "active": None})
    assert msg.startswith(
        "Failed to create item: 1 validation error for User\nactive\n  Input should be a valid boolean"
    )
    # No shape fits at all.
    msg = e.error("zendesk_create_item", table="tickets", item={"subject": "x", "status": "closed_x"})
    assert msg.startswith(
        "Input validation failed: item.TicketCreateInput.status: Input should be 'new', 'open', 'pending', "
        "'hold', 'solved' or 'closed'; item.UserCreateInput.name: Field required; "
    )
    assert msg.endswith("item.TicketCommentCreateInput.body: Field required")
    assert len(e.rows("zendesk_tickets")) == 5


def test_count_based_ids_collide_after_delete(env: Any) -> None:
    """QUIRK Z-4: ids are count+1, so a delete makes the next create collide."""
    e = env("generic")
    assert e.call("zendesk_delete_item", table="comments", id="2") == {"success": True}
    assert (
        e.error(
            "zendesk_create_item", table="comments", item={"ticket_id": "1", "author_id": "2", "body": "x"}
        )
        == "Object with ID 5 already exists"
    )
    assert len(e.rows("zendesk_comments")) == 4


def test_count_based_ids_collide_with_patched_ids(env: Any) -> None:
    patched = {
        "id": "7",
        "subject": "Patched",
        "created_at": "2025-01-01T00:00:00Z",
        "updated_at": "2025-01-01T00:00:00Z",
    }
    e = env("auto_insurance", {"zendesk_tickets": [patched]})
    assert (
        e.error("zendesk_create_item", table="tickets", item=ticket_item())
        == "Object with ID 7 already exists"
    )


# ---- violations (QUIRK Z-8) ------------------------------------------------------
@pytest.mark.parametrize("variant", ["auto_insurance", "consulting", "neobank"])
def test_violation_for_tickets_not_created_open(env: Any, variant: str) -> None:
    e = env(variant)
    e.call("zendesk_create_item", table="tickets", item=ticket_item())  # open: nothing logged
    assert len(e.rows("zendesk_ticket_status_violations")) == 5
    created = e.call("zendesk_create_item", table="tickets", item={"subject": "No status"})["item"]
    assert created["status"] == "new" and created["id"] == "7"
    e.call("zendesk_create_item", table="tickets", item=ticket_item(status="solved"))
    e.call("zendesk_update_item", table="tickets", id="6", item={"status": "pending"})  # updates never log
    assert e.rows("zendesk_ticket_status_violations")[5:] == [
        {"id": "VIOLATION-6", "ticket_id": "7", "created_status": "new", "created_at": CREATED},
        {"id": "VIOLATION-7", "ticket_id": "8", "created_status": "solved", "created_at": CREATED},
    ]


def test_violation_collision_keeps_the_ticket(env: Any) -> None:
    clash = {
        "id": "VIOLATION-7",
        "ticket_id": "x",
        "created_status": "new",
        "created_at": "2025-01-01T00:00:00Z",
    }
    e = env("auto_insurance", {"zendesk_ticket_status_violations": [clash]})  # 6 rows -> next id VIOLATION-7
    msg = e.error("zendesk_create_item", table="tickets", item={"subject": "S", "status": "hold"})
    assert msg == "Object with ID VIOLATION-7 already exists"
    assert e.row("zendesk_tickets", "6")["status"] == "hold"


@pytest.mark.parametrize("variant", ["generic", "travel"])
def test_no_violations_table_in_generic_and_travel(env: Any, variant: str) -> None:
    e = env(variant)
    reply = e.call("zendesk_create_item", table="tickets", item={"subject": "S", "status": "new"})
    assert reply["item"]["status"] == "new"
    assert all(t.name != "zendesk_ticket_status_violations" for t in e.tables)


def test_update_ticket_skips_nulls_and_bumps_updated_at(env: Any) -> None:
    e = env("auto_insurance")
    before = e.row("zendesk_tickets", "1")
    item = e.call(
        "zendesk_update_item",
        table="tickets",
        id="1",
        item={"status": "solved", "priority": None, "outcome_summary": "Done", "tags": None},
    )["item"]
    assert item["status"] == "solved" and item["outcome_summary"] == "Done"
    assert item["priority"] == before["priority"]
    assert item["updated_at"] == TICKET_UPDATED and item["created_at"] == before["created_at"]
    assert e.row("zendesk_tickets", "1") == item
    order = [r["id"] for r in e.rows("zendesk_tickets")]
    assert order == ["1", "2", "3", "4", "5"]  # updated in place


def test_update_other_tables_timestamps(env: Any) -> None:
    e = env("consulting")
    user = e.call("zendesk_update_item", table="users", id="1", item={"phone": "+1 555"})["item"]
    assert user["phone"] == "+1 555" and user["updated_at"] == CREATED
    comment = e.call(
        "zendesk_update_item", table="comments", id="1", item={"body": "edited", "public": False}
    )["item"]
    assert comment["body"] == "edited" and comment["public"] is False and "updated_at" not in comment


def test_update_errors(env: Any) -> None:
    e = env("auto_insurance")
    assert e.error("zendesk_update_item", table="tickets", id="99", item={"status": "open"}) == (
        "Item with ID '99' not found in table 'tickets'"
    )
    assert e.error("zendesk_update_item", table="ticket_comments", id="1", item={"body": "x"}) == (
        "The value is not updatable. Ticket comments cannot be modified."
    )
    assert e.error("zendesk_update_item", table="triggers", id="1", item={}).startswith(
        "Unsupported table: 'triggers'."
    )
    assert e.error("zendesk_update_item", table="tickets", id="1", item="solved").startswith(
        "Input validation failed: item.TicketUpdateInput: Input should be a valid dictionary or instance of "
        "TicketUpdateInput; item.UserUpdateInput: "
    )


def test_update_with_unusable_values_only_bumps_the_timestamp(env: Any) -> None:
    """QUIRK Z-2: a rejected Ticket shape falls back to an empty shape, still a success."""
    e = env("auto_insurance")
    before = e.row("zendesk_tickets", "1")
    for item in ({"status": "closed_x"}, {"requester_id": 5}, {"status": "solved", "public": True}):
        reply = e.call("zendesk_update_item", table="tickets", id="1", item=item)["item"]
        assert reply == {**before, "updated_at": TICKET_UPDATED}
    neobank = env("neobank")
    before = neobank.row("zendesk_tickets", "1")
    reply = neobank.call(
        "zendesk_update_item", table="tickets", id="1", item={"tags": ["x"], "status": "solved"}
    )
    assert reply["item"] == {**before, "updated_at": TICKET_UPDATED}


# ---- payload-shape selection (§4.12) --------------------------------------------
def test_shape_selection_examples(env: Any) -> None:
    e = env("auto_insurance")
    # Tie 1-1, the Ticket shape needed an enum coercion -> the User shape wins, status unchanged.
    item = e.call("zendesk_update_item", table="tickets", id="1", item={"status": "solved", "name": "x"})[
        "item"
    ]
    assert item["status"] == "open" and item["updated_at"] == TICKET_UPDATED
    # Tie without coercion -> the Ticket shape (declared first) wins.
    assert (
        e.call("zendesk_update_item", table="tickets", id="1", item={"subject": "s", "name": "n"})["item"][
            "subject"
        ]
        == "s"
    )
    # Two recognised keys beat one: a user is created.
    user = e.call("zendesk_create_item", table="users", item={"subject": "Hi", "name": "N", "email": "e"})[
        "item"
    ]
    assert (user["id"], user["name"], user["email"]) == ("6", "N", "e")
    # The User shape wins (2 keys, no coercion) and the ticket row misses its subject.
    msg = e.error(
        "zendesk_create_item",
        table="tickets",
        item={"subject": "x", "status": "open", "name": "n", "email": "e"},
    )
    assert msg.startswith("Failed to create item: 1 validation error for Ticket\nsubject\n  Field required")
    # String ids pick the Comment shape; the ticket_comments row converts them.
    tc = e.call(
        "zendesk_create_item", table="ticket_comments", item={"ticket_id": "1", "author_id": "2", "body": "b"}
    )
    assert (tc["item"]["ticket_id"], tc["item"]["author_id"]) == (1, 2)
    # Integer ids only fit the TicketComment shape; a comments row needs text.
    msg = e.error("zendesk_create_item", table="comments", item={"ticket_id": 1, "author_id": 2, "body": "b"})
    assert msg.startswith(
        "Failed to create item: 2 validation errors for Comment\nticket_id\n  Input should be a valid string"
    )
    # A ticket update mixing in a comment body loses its status change.
    item = e.call("zendesk_update_item", table="tickets", id="2", item={"status": "solved", "body": "done"})[
        "item"
    ]
    assert item["status"] == "hold"


# ---- tags and lists per variant ----------------------------------------------------
def test_generic_update_null_clears_lists(env: Any) -> None:
    """QUIRK Z-7: the retail copy turns `tags: null` / `domain_names: null` into []."""
    e = env("generic")
    assert e.row("zendesk_tickets", "1")["tags"] != []
    item = e.call("zendesk_update_item", table="tickets", id="1", item={"tags": None, "status": None})["item"]
    assert item["tags"] == [] and item["status"] == "open"
    org = e.call(
        "zendesk_update_item", table="organizations", id="1", item={"domain_names": None, "notes": None}
    )
    assert org["item"]["domain_names"] == [] and org["item"]["notes"] == "Premium customer"
    assert org["item"]["updated_at"] == CREATED


@pytest.mark.parametrize("variant", ["auto_insurance", "consulting", "neobank", "travel"])
def test_domain_variants_skip_null_lists_on_update(env: Any, variant: str) -> None:
    e = env(variant)
    ticket_id = e.rows("zendesk_tickets")[0]["id"]
    e.call(
        "zendesk_update_item",
        table="tickets",
        id=ticket_id,
        item={"tags": "keep" if variant == "neobank" else ["keep"]},
    )
    after = e.call("zendesk_update_item", table="tickets", id=ticket_id, item={"tags": None})["item"]
    assert after["tags"] == ["keep"]
    org_id = e.rows("zendesk_organizations")[0]["id"]
    org = e.call("zendesk_update_item", table="organizations", id=org_id, item={"domain_names": None})["item"]
    assert org["domain_names"] == e.row("zendesk_organizations", org_id)["domain_names"] != []


def test_neobank_comma_separated_lists(env: Any) -> None:
    """QUIRK Z-9 (neobank): split on commas, strip, lower-case and sort ticket tags; keep empty pieces."""
    e = env("neobank")
    item = e.call("zendesk_create_item", table="tickets", item=ticket_item(tags=" VPN, access,,Urgent "))[
        "item"
    ]
    assert item["tags"] == ["", "access", "urgent", "vpn"]
    assert e.call("zendesk_create_item", table="tickets", item=ticket_item(tags=""))["item"]["tags"] == []
    assert e.call("zendesk_create_item", table="tickets", item=ticket_item())["item"]["tags"] == []
    updated = e.call("zendesk_update_item", table="tickets", id="6", item={"tags": "Zeta,alpha"})["item"]
    assert updated["tags"] == ["alpha", "zeta"]
    org = e.call(
        "zendesk_create_item", table="organizations", item={"name": "Bank", "domain_names": " B.com ,a.com"}
    )
    assert org["item"]["domain_names"] == ["B.com", "a.com"]  # stripped only
    org2 = e.call("zendesk_update_item", table="organizations", id="6", item={"domain_names": ""})
    assert org2["item"]["domain_names"] == []
    # A JSON list is not a valid neobank tags value: no shape accepts it on create.
    assert e.error("zendesk_create_item", table="tickets", item=ticket_item(tags=["a"])).startswith(
        "Input validation failed: item.TicketCreateInput.tags: Input should be a valid string"
    )


def test_travel_tags_refund_and_echo(env: Any) -> None:
    """QUIRKS Z-9, Z-10, Z-15 (travel)."""
    e = env("travel")
    sent = ["repeat-issue", "b", "VIP-Customer", "a", "A", "b"]
    item = e.call("zendesk_create_item", table="tickets", item=ticket_item(tags=sent, refund_amount=-0.0))[
        "item"
    ]
    assert item["id"] == "13"  # 12 seed tickets
    assert item["tags"] == sent  # the reply echoes the caller's list
    assert item["refund_amount"] == 0.0
    stored = e.row("zendesk_tickets", "13")
    assert stored["tags"] == ["A", "a", "b", "b"]  # filtered, case-insensitive sort, duplicates kept
    assert stored["refund_amount"] == 0.0
    assert '"refund_amount": 0.0' in e.raw("zendesk_get_item", table="tickets", id="13")
    plain = e.call("zendesk_create_item", table="tickets", item=ticket_item(refund_amount=12))["item"]
    assert plain["refund_amount"] == 12.0 and plain["tags"] == []
    upd = e.call(
        "zendesk_update_item",
        table="tickets",
        id="14",
        item={"tags": ["Hotel-Partner-Escalation", "z", "Y"], "refund_amount": None, "booking_value": 5},
    )
    assert upd["item"]["tags"] == ["Hotel-Partner-Escalation", "z", "Y"]
    assert upd["item"]["refund_amount"] == 12.0 and upd["item"]["booking_value"] == 5.0
    assert e.row("zendesk_tickets", "14")["tags"] == ["Y", "z"]


def test_create_tags_null_becomes_empty_list(env: Any) -> None:
    for variant in ("generic", "auto_insurance", "consulting"):
        e = env(variant)
        assert (
            e.call("zendesk_create_item", table="tickets", item=ticket_item(tags=None))["item"]["tags"] == []
        )
        kept = e.call("zendesk_create_item", table="tickets", item=ticket_item(tags=["z", "a"]))["item"]
        assert kept["tags"] == ["z", "a"]  # stored as given


def test_variant_ticket_fields(env: Any) -> None:
    base = [
        "id",
        "subject",
        "description",
        "status",
        "priority",
        "type",
        "requester_id",
        "assignee_id",
        "organization_id",
        "tags",
        "created_at",
        "updated_at",
        "due_at",
    ]
    extra = {
        "generic": [],
        "auto_insurance": [
            "request_category",
            "claims_action_type",
            "effective_date_of_change",
            "internal_review_type",
            "outcome_summary",
            "escalation_level",
            "user_type",
        ],
        "consulting": [
            "engagement_code",
            "approval_required",
            "approver_id",
            "asset_id",
            "catalog_id",
            "client_id",
            "expense_report_id",
            "course_id",
            "folder_id",
            "device_type",
            "hardware_order_id",
            "access_type",
            "license_pool",
        ],
        "neobank": [
            "resolution_category",
            "owner",
            "access_expiry_date",
            "approval_required",
            "approval_status",
            "approver_id",
            "approval_request_ids",
            "business_justification",
            "incident_severity",
            "customer_impact",
            "asset_id",
        ],
        "travel": [
            "booking_reference",
            "hotel_id",
            "check_in_date",
            "booking_value",
            "request_type_detail",
            "corporate_account_id",
            "group_booking_id",
            "resolution_action",
            "refund_amount",
            "escalation_reason",
        ],
    }
    for variant, fields in extra.items():
        e = env(variant)
        item = e.call("zendesk_create_item", table="tickets", item={"subject": "S", "status": "open"})["item"]
        assert list(item) == base + fields, variant
    consulting = env("consulting")
    item = consulting.call(
        "zendesk_create_item",
        table="tickets",
        item={"subject": "S", "status": "open", "device_type": "laptop", "license_pool": "enterprise"},
    )
    assert (item["item"]["device_type"], item["item"]["license_pool"]) == ("laptop", "enterprise")
    msg = consulting.error(
        "zendesk_create_item", table="tickets", item={"subject": "S", "device_type": "tablet"}
    )
    assert msg.startswith(
        "Input validation failed: item.TicketCreateInput.device_type: Input should be 'laptop', "
    )


def test_delete_item(env: Any) -> None:
    e = env("auto_insurance")
    assert e.raw("zendesk_delete_item", table="tickets", id="3") == '{"success": true}'
    assert [r["id"] for r in e.rows("zendesk_tickets")] == ["1", "2", "4", "5"]
    assert len(e.rows("zendesk_ticket_status_violations")) == 5  # no cascade
    assert (
        e.error("zendesk_delete_item", table="tickets", id="3")
        == "Item with ID '3' not found in table 'TableName.TICKETS'"
    )
    assert e.error("zendesk_delete_item", table="ticket_comments", id="1") == (
        "The value is not updatable. Ticket comments cannot be deleted."
    )
    assert e.error("zendesk_delete_item", table="tags", id="1").startswith("Unsupported table: 'tags'.")


def test_search_articles(env: Any) -> None:
    e = env("generic")
    everything = e.call("zendesk_search_articles", query="", max_results=2)["results"]  # extra params ignored
    assert [a["id"] for a in everything] == [a["id"] for a in e.rows("zendesk_articles")]
    first = everything[0]
    words = [w for w in first["title"].lower().split() if len(w) > 3][:2]
    hits = e.call("zendesk_search_articles", query=" ".join(words))["results"]
    assert first in hits
    assert e.call("zendesk_search_articles", query="zzqx-unfindable")["results"] == []
    assert (
        e.error("zendesk_search_articles", locale="en-us") == "Input validation failed: query: Field required"
    )


@pytest.mark.parametrize("variant", ["neobank", "travel"])
def test_search_articles_empty_tables(env: Any, variant: str) -> None:
    """QUIRK Z-1: neobank ships no articles, travel's article file is not a list."""
    e = env(variant)
    assert e.raw("zendesk_search_articles", query="") == '{"results": []}'


# ---- canonical view -------------------------------------------------------------
def test_canonical_view_sorts_tags_but_storage_keeps_order(env: Any) -> None:
    """QUIRK Z-12: tags are hashed sorted; stored and returned as written; unstable fields dropped."""
    e = env("auto_insurance")
    e.call("zendesk_create_item", table="tickets", item=ticket_item(tags=["printer", "hardware"]))
    assert e.row("zendesk_tickets", "6")["tags"] == ["printer", "hardware"]
    state = dump_canonical(e.conn, e.tables)
    row = next(r for r in state["zendesk_tickets"] if r["id"] == "6")
    assert row["tags"] == ["hardware", "printer"]
    assert "subject" not in row and "description" not in row
    assert row["created_at"] == row["updated_at"] == CREATED


def test_data_patch_upserts_and_empty_lists_keep_rows(env: Any) -> None:
    """QUIRK Z-11: a patched row replaces the seed row whole; `[]` clears nothing."""
    patch = {
        "zendesk_tickets": [{"id": "2", "subject": "Patched", "created_at": "x", "updated_at": "y"}],
        "zendesk_users": [],
    }
    e = env("auto_insurance", patch)
    assert len(e.rows("zendesk_users")) == 5
    row = e.row("zendesk_tickets", "2")
    assert (row["subject"], row["status"], row["request_category"]) == ("Patched", "new", None)
    assert [r["id"] for r in e.rows("zendesk_tickets")] == ["1", "2", "3", "4", "5"]
