"""`Store.require` / `require_first`: the row, or the tool fails with the given
text verbatim (a ToolError: no catch-all prefix), against the host PostgreSQL."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import psycopg
import pytest

from bench.replay.local import fresh_schema
from servers.engine.schema import f, table
from servers.engine.store import Store
from servers.engine.tools import ToolContext, ToolInput, run_tool, tool

ITEMS = table("items", "id", [f("id", "str"), f("colour", "str")])


class Lookup(ToolInput):
    id: str


@tool("get_item", Lookup, "An item by id.", catch_all="Failed to get item")
def get_item(ctx: ToolContext, args: Lookup) -> dict[str, Any]:
    return ctx.db.require("items", args.id, f"Item not found: {args.id}")


@tool("first_by_colour", Lookup, "The first item of a colour.", catch_all="Failed")
def first_by_colour(ctx: ToolContext, args: Lookup) -> dict[str, Any]:
    return ctx.db.require_first("items", f"No {args.id} item", colour=args.id)


@pytest.fixture(scope="module")
def ctx(make_database: Callable[[str], psycopg.Connection[Any]]) -> ToolContext:
    conn = make_database("require")
    fresh_schema(conn, (ITEMS,))
    store = Store(conn, (ITEMS,))
    for row in ({"id": "a", "colour": "red"}, {"id": "b", "colour": "blue"}, {"id": "c", "colour": "red"}):
        store.insert("items", row)
    return ToolContext(db=store)


def test_found_rows_are_returned(ctx: ToolContext) -> None:
    assert json.loads(run_tool(get_item, ctx, {"id": "b"})) == {"id": "b", "colour": "blue"}
    assert json.loads(run_tool(first_by_colour, ctx, {"id": "red"}))["id"] == "a"  # first in storage order


def test_missing_rows_fail_with_the_text_verbatim(ctx: ToolContext) -> None:
    assert run_tool(get_item, ctx, {"id": "zz"}) == (
        '{"error": "Tool execution failed: Item not found: zz", "tool": "get_item"}'
    )
    assert run_tool(first_by_colour, ctx, {"id": "green"}) == (
        '{"error": "Tool execution failed: No green item", "tool": "first_by_colour"}'
    )
