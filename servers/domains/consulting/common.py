"""Helpers shared by the consulting subsystems: required-parameter checks,
row picking for output, generated ids and the table-driven multi-action
(`*_api`) tool builder."""

from __future__ import annotations

import datetime as dt
import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, Field

from servers.engine.helpers import out_dt
from servers.engine.tools import Tool, ToolContext, ToolError, ToolInput


def opt(description: str) -> Any:
    """An optional (nullable, default null) parameter."""
    return Field(default=None, description=description)


def require(args: BaseModel, *names: str) -> None:
    """The first of `names` that is absent, null or empty fails the call."""
    for name in names:
        value = getattr(args, name)
        if value is None or value == "":
            raise ToolError(f"Missing required parameter: {name}")


def pick(row: Mapping[str, Any], fields: Sequence[str]) -> dict[str, Any]:
    """`fields` of `row` in that order, datetimes in output form, nulls omitted."""
    out: dict[str, Any] = {}
    for name in fields:
        value = row.get(name)
        if isinstance(value, dt.datetime):
            value = out_dt(value)
        if value is not None:
            out[name] = value
    return out


def new_id(ctx: ToolContext, table: str, prefix: str) -> str:
    """`<prefix>-2-NNNNNN`: the first free counter from 0, rescanned on every call."""
    return ctx.db.first_free_id(table, prefix + "-2-%06d", 0)


SUCCESS: dict[str, Any] = {"success": True}

ActionFn = Callable[[ToolContext, Any], Any]


@dataclass(frozen=True)
class Action:
    """One action of a multi-action tool: the parameters it needs (checked in
    this order) and its handler."""

    required: tuple[str, ...]
    fn: ActionFn


def action(*required: str) -> Callable[[ActionFn], Action]:
    def wrap(fn: ActionFn) -> Action:
        return Action(required=required, fn=fn)

    return wrap


def api_tool(
    name: str, input_model: type[ToolInput], description: str, system: str, actions: Mapping[str, Action]
) -> Tool:
    """A `*_api` tool: the `action` argument selects the handler."""
    table = dict(actions)

    def run(ctx: ToolContext, args: Any) -> Any:
        name = args.action.value if isinstance(args.action, enum.Enum) else args.action
        chosen = table[name]
        require(args, *chosen.required)
        return chosen.fn(ctx, args)

    return Tool(
        name=name,
        description=description,
        input_model=input_model,
        fn=run,
        catch_all=f"Failed to execute {system} API action",
    )
