"""The seven Zendesk tools, shared by every variant (`Variant` carries the
differences)."""

from __future__ import annotations

import functools
from typing import Any

from pydantic import BaseModel, ValidationError, create_model

from servers.engine.helpers import count_id
from servers.engine.rows import row_model
from servers.engine.schema import TableSpec
from servers.engine.tools import Tool, ToolContext, ToolError
from servers.toolsets.zendesk import odata
from servers.toolsets.zendesk.models import (
    DeleteItemInput,
    GetItemInput,
    GetItemsInput,
    GetTablesInput,
    SearchArticlesInput,
    TableName,
    create_input,
    shape_values,
    update_input,
)
from servers.toolsets.zendesk.search import search_articles
from servers.toolsets.zendesk.variants import TRAVEL_IGNORED_TAGS, Variant

CREATED_AT = "2025-10-01T13:00:05Z"
TICKET_UPDATED_AT = "2025-10-01T13:00:10Z"
OTHER_UPDATED_AT = "2025-10-01T13:00:05Z"
TICKET_COMMENT_ID_BASE = 23118465221916
DEFAULT_TOP = 512

# Agent-facing table name -> (state key, model name used in validation errors).
STORE_TABLES: dict[str, tuple[str, str]] = {
    "tickets": ("zendesk_tickets", "Ticket"),
    "users": ("zendesk_users", "User"),
    "organizations": ("zendesk_organizations", "Organization"),
    "comments": ("zendesk_comments", "Comment"),
    "ticket_comments": ("zendesk_ticket_comments", "TicketComment"),
}
VIOLATIONS = "zendesk_ticket_status_violations"
ARTICLES = "zendesk_articles"

TABLE_LIST = [
    ("activities", "Activities"),
    ("articles", "Articles"),
    ("groups", "Groups"),
    ("group_memberships", "Group Memberships"),
    ("organizations", "Organizations"),
    ("requests", "Requests"),
    ("satisfaction_ratings", "Satisfaction Ratings"),
    ("sessions", "Sessions"),
    ("tags", "Tags"),
    ("targets", "Targets"),
    ("tickets", "Tickets"),
    ("ticket_audits", "Ticket Audits"),
    ("ticket_comments", "Ticket Comments"),
    ("ticket_fields", "Ticket Fields"),
    ("ticket_metrics", "Ticket Metrics"),
    ("triggers", "Triggers"),
    ("users", "Users"),
    ("views", "Views"),
]

_UNSET: Any = object()


# ---- helpers -----------------------------------------------------------------
def _store_table(table: TableName) -> str:
    """The state key of a supported table (anything else is refused first)."""
    if table.value not in STORE_TABLES:
        raise ToolError(
            f"Unsupported table: '{table.value}'. Only tickets, users, organizations, comments, "
            "and ticket_comments are supported."
        )
    return STORE_TABLES[table.value][0]


def _not_found_enum(table: TableName, item_id: str) -> ToolError:
    # get/delete name the table by its enum member (`TableName.TICKETS`).
    return ToolError(f"Item with ID '{item_id}' not found in table 'TableName.{table.name}'")


@functools.cache
def _named_model(spec: TableSpec, name: str) -> type[BaseModel]:
    """The table's row model under the reference's class name (it shows in
    validation error texts)."""
    model: type[BaseModel] = create_model(name, __base__=row_model(spec))
    return model


def _validate(ctx: ToolContext, table: str, data: dict[str, Any], prefix: str) -> dict[str, Any]:
    """Validate a whole row of a supported table; failures become `<prefix>: <pydantic text>`."""
    store, name = STORE_TABLES[table]
    model = _named_model(ctx.db.spec(store), name)
    try:
        return model.model_validate(data).model_dump()
    except ValidationError as exc:
        raise ToolError(f"{prefix}: {exc}") from exc


def _split_csv(text: str) -> list[str]:
    if text == "":
        return []
    return [piece.strip() for piece in text.split(",")]


def _neobank_ticket_tags(tags: list[str]) -> list[str]:
    return sorted(t.strip().lower() for t in tags)


def _travel_tags(tags: Any) -> list[str]:
    kept = [t for t in (tags or []) if isinstance(t, str) and t.lower() not in TRAVEL_IGNORED_TAGS]
    return sorted(kept, key=lambda t: (t.lower(), t))


def _with_echo(row: dict[str, Any], echo_tags: Any) -> dict[str, Any]:
    if echo_tags is _UNSET:
        return row
    return {**row, "tags": echo_tags}


# ---- tools -------------------------------------------------------------------
def _create_item(v: Variant, ctx: ToolContext, args: Any) -> dict[str, Any]:
    table: str = args.table.value
    store = _store_table(args.table)
    n = ctx.db.count(store)
    new_id: Any = TICKET_COMMENT_ID_BASE + n if table == "ticket_comments" else str(n + 1)

    data = shape_values(args.item)
    data["id"] = new_id
    echo_tags: Any = _UNSET
    if v.travel_tags:
        if table == "tickets":
            if data.get("tags") is not None:
                echo_tags = data["tags"]
            refund = data.get("refund_amount")
            if refund is None or refund == 0:
                data["refund_amount"] = 0.0
            data["tags"] = _travel_tags(data.get("tags"))
        if table == "organizations" and "domain_names" in data and data["domain_names"] is None:
            data["domain_names"] = []
    elif v.csv_lists:
        if "tags" in data:
            data["tags"] = [] if data["tags"] is None else _split_csv(data["tags"])
        if table == "tickets":
            data["tags"] = _neobank_ticket_tags(data.get("tags", []))
        if "domain_names" in data:
            data["domain_names"] = [] if data["domain_names"] is None else _split_csv(data["domain_names"])
    else:
        if table == "tickets" and "tags" in data and data["tags"] is None:
            data["tags"] = []
        if table == "organizations" and "domain_names" in data and data["domain_names"] is None:
            data["domain_names"] = []

    data["created_at"] = CREATED_AT
    if table != "ticket_comments":
        data["updated_at"] = CREATED_AT
    else:
        data["key"] = str(new_id)
        if "html_body" not in data:
            data["html_body"] = (
                f'<div class="zd-comment" dir="auto"><p dir="auto">{data.get("body")}</p></div>'
            )

    row = _validate(ctx, table, data, "Failed to create item")
    row = ctx.db.insert(store, row)

    if v.status_violations and table == "tickets" and row["status"] != "open":
        ctx.db.insert(
            VIOLATIONS,
            {
                "id": count_id(ctx.db, VIOLATIONS, "VIOLATION-%d"),
                "ticket_id": row["id"],
                "created_status": row["status"],
                "created_at": CREATED_AT,
            },
        )
    return {"item": _with_echo(row, echo_tags)}


def _update_item(v: Variant, ctx: ToolContext, args: Any) -> dict[str, Any]:
    table: str = args.table.value
    store = _store_table(args.table)
    if table == "ticket_comments":
        raise ToolError("The value is not updatable. Ticket comments cannot be modified.")
    current = ctx.db.require(store, args.id, f"Item with ID '{args.id}' not found in table '{table}'")

    changes: dict[str, Any] = {}
    for name, value in shape_values(args.item).items():
        if value is not None:
            changes[name] = value
        elif v.null_clears_lists and (
            (table == "tickets" and name == "tags") or (table == "organizations" and name == "domain_names")
        ):
            changes[name] = []

    echo_tags: Any = _UNSET
    if v.csv_lists:
        if "tags" in changes and isinstance(changes["tags"], str):
            tags = _split_csv(changes["tags"])
            changes["tags"] = _neobank_ticket_tags(tags) if table == "tickets" else tags
        if "domain_names" in changes and isinstance(changes["domain_names"], str):
            changes["domain_names"] = _split_csv(changes["domain_names"])
    if v.travel_tags and table == "tickets" and "tags" in changes:
        echo_tags = changes["tags"]
        changes["tags"] = _travel_tags(changes["tags"])

    fields = ctx.db.spec(store).field_names
    merged = {**current, **{k: val for k, val in changes.items() if k in fields}}
    if table == "tickets":
        merged["updated_at"] = TICKET_UPDATED_AT
    elif "updated_at" in fields:
        merged["updated_at"] = OTHER_UPDATED_AT

    row = _validate(ctx, table, merged, "Failed to update item")
    row = ctx.db.replace(store, args.id, row)
    return {"item": _with_echo(row, echo_tags)}


def _delete_item(ctx: ToolContext, args: DeleteItemInput) -> dict[str, Any]:
    store = _store_table(args.table)
    if args.table.value == "ticket_comments":
        raise ToolError("The value is not updatable. Ticket comments cannot be deleted.")
    if not ctx.db.exists(store, args.id):
        raise _not_found_enum(args.table, args.id)
    ctx.db.delete(store, args.id)
    return {"success": True}


def _get_item(ctx: ToolContext, args: GetItemInput) -> dict[str, Any]:
    store = _store_table(args.table)
    row = ctx.db.get(store, args.id)
    if row is None:
        raise _not_found_enum(args.table, args.id)
    return {"item": row}


def _order(rows: list[dict[str, Any]], orderby: str) -> list[dict[str, Any]]:
    parts = orderby.split()
    if not parts:  # whitespace only: the reference fails indexing the first word
        raise ToolError("list index out of range")
    field = parts[0]
    descending = len(parts) > 1 and parts[1].lower() == "desc"
    try:
        return sorted(rows, key=lambda r: r.get(field, ""), reverse=descending)
    except TypeError:
        return rows  # incomparable values: keep the filtered order


def _get_items(v: Variant, ctx: ToolContext, args: GetItemsInput) -> dict[str, Any]:
    store = _store_table(args.table)
    rows = ctx.db.all(store)
    if args.filter:
        try:
            rows = odata.filter_rows(args.filter, rows, v.full_comparisons)
        except odata.ODataError as exc:
            raise ToolError(f"Failed to parse OData filter: {exc}") from exc
    if args.orderby:
        rows = _order(rows, args.orderby)
    skip = args.skip or 0
    top = args.top if args.top is not None else DEFAULT_TOP
    rows = rows[skip : skip + top]
    if args.select:
        wanted = {name.strip() for name in args.select.split(",")}
        rows = [{k: val for k, val in row.items() if k in wanted} for row in rows]
    return {"items": rows}


def _get_tables(ctx: ToolContext, args: GetTablesInput) -> dict[str, Any]:
    return {"value": [{"Name": n, "DisplayName": d} for n, d in TABLE_LIST]}


def _search_articles(ctx: ToolContext, args: SearchArticlesInput) -> dict[str, Any]:
    articles = ctx.db.all(ARTICLES)
    found = search_articles(
        articles,
        args.query,
        locale=args.locale,
        brand_id=args.brand_id,
        category=args.category,
        section=args.section,
        label_names=args.label_names,
        multibrand=args.multibrand,
    )
    return {"results": found}


def build_tools(v: Variant) -> tuple[Tool, ...]:
    """The seven tools of one variant, in the reference's listing order."""
    return (
        Tool(
            name="zendesk_create_item",
            description=(
                "Add a record to a Zendesk table (tickets, users, organizations, comments or "
                "ticket_comments). The record's id and timestamps are assigned automatically; "
                "returns the stored record."
            ),
            input_model=create_input(v),
            fn=functools.partial(_create_item, v),
        ),
        Tool(
            name="zendesk_delete_item",
            description="Remove one record, identified by table and id, from a Zendesk table.",
            input_model=DeleteItemInput,
            fn=_delete_item,
        ),
        Tool(
            name="zendesk_get_item",
            description="Fetch a single Zendesk record by table and id, with all of its fields.",
            input_model=GetItemInput,
            fn=_get_item,
        ),
        Tool(
            name="zendesk_get_items",
            description=(
                "List records of a Zendesk table. Supports an OData-style $filter, $orderby on one field, "
                "paging with $skip/$top and a $select field list."
            ),
            input_model=GetItemsInput,
            fn=functools.partial(_get_items, v),
        ),
        Tool(
            name="zendesk_get_tables",
            description="List the Zendesk entity types (table name and display name).",
            input_model=GetTablesInput,
            fn=_get_tables,
        ),
        Tool(
            name="zendesk_search_articles",
            description=(
                "Keyword search of the help-center articles, optionally narrowed by locale, brand, "
                "category, section or labels."
            ),
            input_model=SearchArticlesInput,
            fn=_search_articles,
        ),
        Tool(
            name="zendesk_update_item",
            description=(
                "Change some fields of an existing Zendesk record (ticket comments cannot be changed). "
                "Returns the updated record."
            ),
            input_model=update_input(v),
            fn=functools.partial(_update_item, v),
        ),
    )
