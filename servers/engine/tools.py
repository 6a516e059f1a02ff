"""Tool declarations and the call pipeline shared by every domain.

A tool is a plain function `fn(ctx, args)` with a pydantic input model. The
pipeline validates the raw arguments, runs the function inside one database
transaction and renders the reply text exactly as the reference does:
success -> the output as JSON (Python `json.dumps` defaults); any failure ->
`{"error": "Tool execution failed: <message>", "tool": "<name>"}`.
"""

from __future__ import annotations

import copy
import datetime as dt
import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import psycopg
from pydantic import BaseModel, ConfigDict, ValidationError

from servers.engine.errors import ToolError as ToolError  # the tools raise it from here
from servers.engine.rows import FINITE_NUMBERS, format_validation_error
from servers.engine.schema import TableSpec
from servers.engine.store import Store, StoreError

log = logging.getLogger(__name__)

ERROR_PREFIX = "Tool execution failed: "
NOMINAL_NOW = dt.datetime(2025, 10, 1, 13, 0, 0, tzinfo=dt.UTC)


class ToolInput(BaseModel):
    """Base of every tool's input model: unknown parameters and non-finite numbers are rejected."""

    model_config = FINITE_NUMBERS | ConfigDict(extra="forbid")


@dataclass
class ToolContext:
    db: Store
    now: dt.datetime = NOMINAL_NOW
    services: dict[str, Any] = field(default_factory=dict)


ToolFn = Callable[[ToolContext, Any], Any]


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    input_model: type[BaseModel]
    fn: ToolFn
    # Unexpected exceptions become "<catch_all>: <text>" (the reference's per-tool wrapper).
    catch_all: str | None = None

    @property
    def input_schema(self) -> dict[str, Any]:
        return inline_refs(self.input_model.model_json_schema(mode="serialization"))


def tool(
    name: str, input_model: type[BaseModel], description: str, *, catch_all: str | None = None
) -> Callable[[ToolFn], Tool]:
    """Declare a tool: `@tool("get_order", GetOrderInput, "...")`."""

    def wrap(fn: ToolFn) -> Tool:
        return Tool(name=name, description=description, input_model=input_model, fn=fn, catch_all=catch_all)

    return wrap


def inline_refs(schema: dict[str, Any]) -> dict[str, Any]:
    """Replace every `$ref` with the definition it points at (MCP clients vary
    in how well they follow `$defs`)."""
    defs = schema.get("$defs", {})

    def resolve(node: Any) -> Any:
        if isinstance(node, dict):
            if "$ref" in node:
                target = copy.deepcopy(defs[node["$ref"].rsplit("/", 1)[-1]])
                extra = {k: v for k, v in node.items() if k != "$ref"}
                return resolve({**target, **extra})
            return {k: resolve(v) for k, v in node.items() if k != "$defs"}
        if isinstance(node, list):
            return [resolve(v) for v in node]
        return node

    result: dict[str, Any] = resolve(schema)
    return result


def dumps(payload: Any) -> str:
    """The reference's reply serialisation: Python `json.dumps` defaults."""
    return json.dumps(payload)


def error_reply(tool_name: str, message: str) -> str:
    return dumps({"error": ERROR_PREFIX + message, "tool": tool_name})


def render_output(result: Any) -> Any:
    """Output models drop null-valued fields (at every model level); plain
    dicts are the tool's own exact rendering."""
    if isinstance(result, BaseModel):
        return result.model_dump(mode="json", exclude_none=True)
    return result


def run_tool(t: Tool, ctx: ToolContext, arguments: dict[str, Any] | None) -> str:
    """Validate, execute in one transaction and render one tool call."""
    try:
        args = t.input_model.model_validate(arguments or {})
    except ValidationError as exc:
        return error_reply(t.name, "Input validation failed: " + format_validation_error(exc))
    conn = ctx.db.conn
    try:
        with conn.transaction():
            # Failures other than database errors keep the writes made before
            # them (the reference never rolls a call back), so they commit.
            try:
                return dumps(render_output(t.fn(ctx, args)))
            except psycopg.Error:
                raise
            except ToolError as exc:
                return error_reply(t.name, exc.message)
            except Exception as exc:
                if not isinstance(exc, StoreError):
                    log.exception("tool %s failed", t.name)
                return error_reply(t.name, _caught(t, exc))
    except psycopg.Error as exc:
        # A database error aborted the transaction: nothing of this call persists.
        log.warning("tool %s: database error: %s", t.name, exc)
        return error_reply(t.name, _caught(t, exc))


def _caught(t: Tool, exc: Exception) -> str:
    return f"{t.catch_all}: {exc}" if t.catch_all else str(exc)


def export_module(server: str) -> str:
    """A server's module directory in a benchmark export (`servers/<module>/`):
    `mcp_<server>`, e.g. "mcp_sandbox_external_retail"."""
    return f"mcp_{server}"


@dataclass(frozen=True)
class Domain:
    """One benchmark server: its tables (registration order) and tools (listing order)."""

    name: str  # tbx's short name, e.g. "retail"
    server: str  # the reference server name (scenario/init key, trace `server`)
    tables: tuple[TableSpec, ...]
    tools: tuple[Tool, ...]
    policy_tool: str | None = None  # name of the policy-search tool, if any
    # Where a thinkingbox-data checkout keeps this server's base rows: (table-name prefix,
    # folder under the server package's `toolslib/`). A table `<prefix>_<stem>` is seeded
    # from `<folder>/initial_data/<stem>.json` (the longest matching prefix wins). Read off
    # the data: file stems, the model paths of the export's tables.json and its seed rows.
    seed_folders: tuple[tuple[str, str], ...] = ()

    @property
    def module(self) -> str:
        return export_module(self.server)

    def seed_file(self, table: str) -> str:
        """A table's seed file in a checkout, relative to the server package's `toolslib/`."""
        matches = [(p, d) for p, d in self.seed_folders if table.startswith(p + "_")]
        if not matches:
            raise KeyError(f"{self.name}: no seed folder declared for table {table!r}")
        prefix, folder = max(matches, key=lambda m: len(m[0]))
        return f"{folder}/initial_data/{table[len(prefix) + 1 :]}.json"

    def tool(self, name: str) -> Tool | None:
        return next((t for t in self.tools if t.name == name), None)

    def check(self) -> None:
        names = [t.name for t in self.tools]
        dupes = {n for n in names if names.count(n) > 1}
        if dupes:
            raise ValueError(f"{self.name}: duplicate tool names {sorted(dupes)}")


def collect(*groups: Sequence[Tool]) -> tuple[Tool, ...]:
    return tuple(t for g in groups for t in g)
